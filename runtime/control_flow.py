"""Functional forms of `if`, `while` and `for`: a Python path and a staged path each.

Generated code turns each statement into a call that passes the statement's state (the variables
it modifies that are used later) in and out explicitly. With Python values the call does exactly
what the statement does; with a traced predicate or iterable it builds `lax.cond`,
`lax.while_loop` or `lax.scan`, after checking that the state can be staged.
"""

from __future__ import annotations

import logging
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import staging
from runtime.errors import Site, StagingError
from runtime.staging import describe, is_staged, is_traced
from runtime.variables import Undefined

logger = logging.getLogger("transpiler")

UNROLL_WARNING_THRESHOLD = 100
"""A `for` loop that cannot be staged warns when it unrolls more iterations than this."""


# -- if --------------------------------------------------------------------------------------------


def if_stmt(pred, if_true, if_false, state, *, symbol_names):
    """Functional form of an if statement.

    Same semantics as::

        if pred:
            state = if_true(*state)
        else:
            state = if_false(*state)

    A traced `pred` lowers to `jax.lax.cond`: both branches are traced, and each variable in the
    state must come out of both with the same structure, shape and dtype (Python scalars are
    promoted the way JAX promotes weakly typed values).
    """
    if is_staged(pred):
        labels = tuple(f"'{name}'" for name in symbol_names)
        return _staged_cond(pred, if_true, if_false, state, labels, Site("if statement"))
    return if_true(*state) if pred else if_false(*state)


def if_exp(pred, if_true, if_false):
    """Functional form of `if_true() if pred else if_false()`; a traced `pred` -> `lax.cond`."""
    if is_staged(pred):
        site = Site("conditional expression")
        (value,) = _staged_cond(
            pred, lambda: (if_true(),), lambda: (if_false(),), (), ("the value",), site
        )
        return value
    return if_true() if pred else if_false()


class _Promote(Exception):
    """Internal: the branches differ only in weakly typed dtypes; trace again with these."""

    def __init__(self, targets: dict[tuple[int, int], np.dtype]):
        self.targets = targets


def _staged_cond(pred, if_true, if_false, state, labels, site):
    pred = staging.scalar_predicate(pred, site, "condition")
    targets: dict[tuple[int, int], np.dtype] = {}
    for _ in range(2):
        try:
            return _cond_once(pred, if_true, if_false, state, labels, site, targets)
        except _Promote as promote:
            targets = promote.targets
    raise AssertionError("dtype promotion did not converge")  # casting makes dtypes equal


def _cond_once(pred, if_true, if_false, state, labels, site, targets):
    traced: list[tuple[str, tuple]] = []  # (branch, outputs) for each branch traced so far

    def branch(fn, which):
        def run():
            outs = list(_as_tuple(fn(*staging.fresh(state)), len(labels)))
            dynamic = []
            for index, value in enumerate(outs):
                if staging.is_array_tree(value):
                    leaves, treedef = jax.tree_util.tree_flatten(staging.as_arrays(value))
                    leaves = [
                        lax.convert_element_type(leaf, targets[index, j])
                        if (index, j) in targets
                        else leaf
                        for j, leaf in enumerate(leaves)
                    ]
                    outs[index] = jax.tree_util.tree_unflatten(treedef, leaves)
                    dynamic.append(outs[index])
            if traced:
                _compare_branches(traced[0], (which, outs), labels, site)
            traced.append((which, outs))
            return dynamic

        return run

    dynamic = iter(lax.cond(pred, branch(if_true, "true"), branch(if_false, "false")))
    _, outs = traced[0]
    return tuple(next(dynamic) if staging.is_array_tree(value) else value for value in outs)


def _compare_branches(first, second, labels, site):
    """Raises StagingError where the branches disagree on a variable; _Promote for weak dtypes."""
    promotions = {}
    for index, label in enumerate(labels):
        values = {first[0]: first[1][index], second[0]: second[1][index]}
        a, b = values["true"], values["false"]
        undefined = [w for w, v in values.items() if isinstance(v, Undefined)]
        if len(undefined) == 2:
            continue
        if undefined:
            (missing,) = undefined
            defined = "false" if missing == "true" else "true"
            raise StagingError(
                f"{label} is set in the {defined} branch but not in the {missing} branch "
                f"({site}), and it is used after the if. With a traced condition both branches "
                f"run in the graph, so {label} needs a value on both paths: give it one before "
                "the if, or in both branches."
            )
        array_a, array_b = staging.is_array_tree(a), staging.is_array_tree(b)
        if not (array_a or array_b) and a is b:
            continue  # the same Python object either way: nothing to stage
        if not (array_a and array_b):
            raise StagingError(
                f"{label} is {describe(a)} in the true branch and {describe(b)} in the false "
                f"branch ({site}). With a traced condition a variable set in a branch must be "
                "an array (or a tuple/list/dict of arrays) in both branches, or the very same "
                "Python object."
            )
        a, b = staging.as_arrays(a), staging.as_arrays(b)
        leaves_a, tree_a = jax.tree_util.tree_flatten(a)
        leaves_b, tree_b = jax.tree_util.tree_flatten(b)
        if tree_a != tree_b:
            raise StagingError(
                f"{label} has a different structure in each branch ({site}): {tree_a} in the "
                f"true branch, {tree_b} in the false branch. Both branches must build the same "
                "structure."
            )
        paths = [p for p, _ in staging.leaf_paths(a)]
        for j, (x, y, path) in enumerate(zip(leaves_a, leaves_b, paths)):
            where = f"{label}{path}" if path else label
            if x.shape != y.shape:
                raise StagingError(
                    f"{where} is {describe(x)} in the true branch but {describe(y)} in the "
                    f"false branch ({site}). With a traced condition both branches must give "
                    f"{where} the same shape and dtype."
                )
            if x.dtype != y.dtype:
                wx, wy = jax.typeof(x).weak_type, jax.typeof(y).weak_type
                if not (wx or wy):
                    raise StagingError(
                        f"{where} is {describe(x)} in the true branch but {describe(y)} in the "
                        f"false branch ({site}). With a traced condition both branches must "
                        f"give {where} the same dtype; cast one of them, e.g. with "
                        f".astype(jnp.{np.dtype(x.dtype).name})."
                    )
                promotions[index, j] = jnp.result_type(_dtype_like(x), _dtype_like(y))
    if promotions:
        raise _Promote(promotions)


def _dtype_like(x):
    """Something `jnp.result_type` promotes as it would promote `x`, weak type included."""
    if not jax.typeof(x).weak_type:
        return x.dtype
    kind = np.dtype(x.dtype).kind
    return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}[kind]


def _as_tuple(outs, n):
    outs = tuple(outs)
    if len(outs) != n:
        raise AssertionError(f"generated code returned {len(outs)} values for {n} state variables")
    return outs


# -- while -----------------------------------------------------------------------------------------


def while_stmt(test, body, state, *, symbol_names):
    """Functional form of a while statement.

    Same semantics as::

        while test(*state):
            state = body(*state)

    The test is evaluated in Python while it gives Python values. As soon as it gives a traced
    value, the rest of the loop lowers to `jax.lax.while_loop`, starting from the state as it is
    then; every state variable must keep its shape and dtype across iterations.
    """
    while True:
        pred = test(*state)
        if is_staged(pred):
            return _staged_while(test, body, state, symbol_names, Site("while loop"))
        if not pred:
            return state
        state = body(*state)


def _staged_while(test, body, state, names, site):
    carry = _Carry(state, names, site)

    def cond_fun(dynamic):
        return staging.scalar_predicate(test(*carry.merge(dynamic)), site, "loop condition")

    def body_fun(dynamic):
        return carry.check(body(*carry.merge(staging.fresh(dynamic))), dynamic)

    return carry.merge(lax.while_loop(cond_fun, body_fun, carry.init))


class _Carry:
    """The state of a staged loop: array variables are carried, other Python objects stay put."""

    def __init__(self, state, names, site):
        self.names, self.site = names, site
        self.static: dict[int, object] = {}
        init = []
        for index, (name, value) in enumerate(zip(names, state)):
            if isinstance(value, Undefined):
                raise StagingError(
                    f"'{name}' has no value before the {site.construct} ({site}), but the "
                    "staged loop carries it from one iteration to the next (it is read in the "
                    f"loop or after it). Give '{name}' a value before the loop."
                )
            if staging.is_array_tree(value):
                init.append(staging.as_arrays(value))
            else:
                self.static[index] = value
        self.init = tuple(init)

    def merge(self, dynamic):
        dynamic = iter(dynamic)
        return tuple(
            self.static[i] if i in self.static else next(dynamic) for i in range(len(self.names))
        )

    def check(self, outs, before):
        """The loop body's outputs as the next carry; StagingError if they changed type."""
        outs = _as_tuple(outs, len(self.names))
        before = iter(before)
        result = []
        for index, (name, value) in enumerate(zip(self.names, outs)):
            if index in self.static:
                if value is not self.static[index]:
                    raise StagingError(
                        f"'{name}' is {describe(self.static[index])} before the "
                        f"{self.site.construct} and {describe(value)} after one iteration "
                        f"({self.site}). A staged loop can only carry arrays (or tuples, lists "
                        "and dicts of arrays); other Python objects must stay the same object."
                    )
                continue
            prev = next(before)
            if not staging.is_array_tree(value):
                raise StagingError(
                    f"'{name}' is {describe(prev)} before the {self.site.construct} but "
                    f"{describe(value)} after one iteration ({self.site}). A staged loop can "
                    "only carry arrays (or tuples, lists and dicts of arrays)."
                )
            value = staging.as_arrays(value)
            self._check_leaves(name, prev, value)
            result.append(value)
        return tuple(result)

    def _check_leaves(self, name, prev, value):
        site, construct = self.site, self.site.construct
        tree_prev = jax.tree_util.tree_structure(prev)
        tree_value = jax.tree_util.tree_structure(value)
        if tree_prev != tree_value:
            raise StagingError(
                f"'{name}' is {tree_prev} before the {construct} but {tree_value} after one "
                f"iteration ({site}). Loop variables must keep their structure."
            )
        for (path, x), y in zip(staging.leaf_paths(prev), jax.tree_util.tree_leaves(value)):
            where = f"'{name}{path}'"
            if x.shape != y.shape:
                raise StagingError(
                    f"{where} is {describe(x)} before the {construct} but {describe(y)} after "
                    f"one iteration ({site}). Loop variables must keep their shape and dtype; "
                    f"pad {name} to a fixed size or carry its length separately."
                )
            if x.dtype != y.dtype and not jax.typeof(x).weak_type:
                raise StagingError(
                    f"{where} is {describe(x)} before the {construct} but {describe(y)} after "
                    f"one iteration ({site}). Loop variables must keep their dtype; give {name} "
                    f"its final dtype before the loop, or cast inside it with "
                    f".astype(jnp.{np.dtype(x.dtype).name})."
                )


# -- for -------------------------------------------------------------------------------------------


class TracedRange:
    """`range(start, stop, step)` where a bound is traced: the loop over it becomes a while loop."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def __repr__(self) -> str:
        return f"range({self.start}, {self.stop}, {self.step})"


def range_(*args):
    """`range(*args)`, or a `TracedRange` when a bound is traced."""
    if not any(is_staged(a) for a in args):
        return range(*args)
    if not 1 <= len(args) <= 3:
        raise TypeError(f"range expected at most 3 arguments, got {len(args)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    return TracedRange(start, stop, step)


def for_stmt(iterable, body, state, *, symbol_names):
    """Functional form of a for statement.

    Same semantics as::

        for item in iterable:
            state = body(item, *state)

    Python containers (lists, tuples, dicts, generators) run as Python. A `range`, a NumPy array
    or a JAX array runs as Python until the state holds traced values (or at once, for a traced
    array); the remaining iterations then lower to one `jax.lax.scan`, so compile time does not
    grow with the trip count. A range with a traced bound lowers to `jax.lax.while_loop`. A body
    that cannot be staged (it changes a variable's shape, or needs the index as a Python int) runs
    as unrolled Python instead.
    """
    if isinstance(iterable, TracedRange):
        return _staged_range_while(iterable, body, state, symbol_names, Site("for loop"))
    if not isinstance(iterable, range | np.ndarray | jax.Array):
        for item in iterable:
            state = body(item, *state)
        return state
    site = Site("for loop")
    n, k = len(iterable), 0
    while k < n:
        if n - k >= 2 and _should_scan(iterable, state):
            staged = _try_scan_rest(iterable, k, body, state, symbol_names, site)
            if staged is not None:
                return staged
            break
        state = body(iterable[k], *state)
        k += 1
    for rest in range(k, n):
        state = body(iterable[rest], *state)
    return state


def _should_scan(iterable, state) -> bool:
    if any(isinstance(v, Undefined) for v in state):
        return False  # one more Python iteration gives these a value (and a shape)
    return is_traced(iterable) or staging.has_traced(state)


def _try_scan_rest(iterable, k, body, state, names, site):
    """Iterations k.. as one `lax.scan`; None (after logging why) if the body cannot be staged."""
    n = len(iterable)
    try:
        if isinstance(iterable, range):
            start, step = iterable[k], iterable.step
            return _staged_scan(
                lambda j, *s: body(start + j * step, *s), state, names, site, length=n - k
            )
        rest = iterable[k:] if is_traced(iterable) else jnp.asarray(iterable[k:])
        return _staged_scan(body, state, names, site, xs=rest)
    except Exception as e:  # noqa: BLE001 - the Python path below re-raises real errors
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        message = (
            f"the for loop ({site}) cannot be staged as one lax.scan ({type(e).__name__}: "
            f"{reason}); its {n - k} iterations run as unrolled Python instead"
        )
        logger.info(message)
        if n - k > UNROLL_WARNING_THRESHOLD:
            warnings.warn(message + ", so compile time grows with the trip count.", stacklevel=3)
        return None


def _staged_scan(body, state, names, site, *, xs=None, length=None):
    carry = _Carry(state, names, site)

    def scan_body(scan_carry, x):
        if xs is None:
            j, dynamic = scan_carry
            item = j
        else:
            dynamic, item = scan_carry, x
        outs = carry.check(body(item, *carry.merge(staging.fresh(dynamic))), dynamic)
        return ((j + 1, outs) if xs is None else outs), None

    init = (jnp.asarray(0), carry.init) if xs is None else carry.init
    final, _ = lax.scan(scan_body, init, xs, length=length)
    return carry.merge(final[1] if xs is None else final)


def _staged_range_while(r: TracedRange, body, state, names, site):
    step_sign = jnp.sign(r.step)
    trip_count = jnp.maximum(0, (r.stop - r.start + r.step - step_sign) // r.step)

    def test(j, *s):
        return j < trip_count

    def counted_body(j, *s):
        return (j + 1, *body(r.start + j * r.step, *s))

    final = _staged_while(test, counted_body, (0, *state), ("<iteration>", *names), site)
    return final[1:]
