"""Functional forms of `while` and `for`: a Python path and a staged path each.

Python loops stay Python. As soon as a loop's test (or, for a `for` over a range or an array, its
state) is traced, the remaining iterations lower to one `lax.while_loop` or `lax.scan`, after
checking that the state keeps its structure, shapes and dtypes.
"""

from __future__ import annotations

import logging
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import sequences, staging
from runtime.control_flow import staged_cond
from runtime.errors import Site, StagingError
from runtime.staging import describe, is_staged, is_traced
from runtime.variables import Undefined, UndefinedReturnValue

logger = logging.getLogger("transpiler")

UNROLL_WARNING_THRESHOLD = 100
"""A `for` loop that cannot be staged warns when it unrolls more iterations than this."""


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
    carry = _Carry(state, names, site, probe=lambda s: body(*s))

    def cond_fun(dynamic):
        return staging.scalar_predicate(test(*carry.merge(dynamic)), site, "loop condition")

    def body_fun(dynamic):
        return carry.check(body(*carry.merge(staging.fresh(dynamic))), dynamic)

    return carry.merge(lax.while_loop(cond_fun, body_fun, carry.init))


class _Carry:
    """The state of a staged loop: array variables are carried, other Python objects stay put.

    A return value not set yet (`UndefinedReturnValue`) that the body may set starts as zeros
    shaped like what the body sets; `probe(state)` runs the body once, abstractly, to find out.
    """

    def __init__(self, state, names, site, probe):
        self.names, self.site = names, site
        state = self._fill_return_values(state, probe)
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

    @staticmethod
    def _fill_return_values(state, probe):
        unset = [i for i, v in enumerate(state) if isinstance(v, UndefinedReturnValue)]
        if not unset:
            return state
        found = []

        def run():
            outs = probe(staging.fresh(state))
            found.extend(i for i in unset if staging.is_array_tree(outs[i]))
            return [staging.as_arrays(outs[i]) for i in found]

        shapes = dict(zip(found, jax.eval_shape(run)))
        return tuple(
            staging.zeros_like(shapes[i]) if i in shapes else value for i, value in enumerate(state)
        )

    def merge(self, dynamic):
        dynamic = iter(dynamic)
        return tuple(
            self.static[i] if i in self.static else next(dynamic) for i in range(len(self.names))
        )

    def check(self, outs, before):
        """The loop body's outputs as the next carry; StagingError if they changed type."""
        assert len(outs) == len(self.names), "generated code returned the wrong number of values"
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
                f"'{name}' is {staging.describe_tree(prev)} before the {construct} but "
                f"{staging.describe_tree(value)} after one iteration ({site}). Loop variables "
                "must keep their structure."
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


def for_stmt(iterable, body, state, *, symbol_names, extra_test=None):
    """Functional form of a for statement.

    Same semantics as::

        for item in iterable:
            if extra_test is not None and not extra_test(*state):
                break
            state = body(item, *state)

    (`extra_test` comes from `break`.) Python containers (lists, tuples, dicts, generators) run as
    Python. A `range`, a NumPy or JAX array, or `enumerate`/`zip`/`reversed` over them, runs as
    Python until the state holds traced values (at once, for a traced array); the remaining
    iterations then lower to one `jax.lax.scan`, so compile time does not grow with the trip
    count. Once `extra_test` is traced, the remaining iterations still run, masked: the loop stays
    a `scan`, which reverse-mode differentiation supports. A range with a traced bound lowers to
    `jax.lax.while_loop`. A body that cannot be staged (it changes a variable's shape, or needs
    the index as a Python int) runs as unrolled Python instead.
    """
    site = Site("for loop")
    if isinstance(iterable, TracedRange):
        return _staged_range_while(iterable, body, state, symbol_names, site, extra_test)
    seq = sequences.as_sequence(iterable)
    if seq is None:
        return _python_for(iterable, body, state, symbol_names, site, extra_test)
    n, k = len(seq), 0
    while k < n:
        go = extra_test(*state) if extra_test is not None else True
        if not is_staged(go) and not go:
            return state
        if is_staged(go) or (n - k >= 2 and _should_scan(seq, state)):
            staged = _try_scan_rest(seq, k, body, state, symbol_names, site, extra_test)
            if staged is not None:
                return staged
            break
        state = body(seq[k], *state)
        k += 1
    rest = (seq[i] for i in range(k, n))
    return _python_for(rest, body, state, symbol_names, site, extra_test)


def _python_for(items, body, state, names, site, extra_test):
    """The Python loop; once `extra_test` is traced, each remaining iteration is a masked cond."""
    if extra_test is None:
        for item in items:
            state = body(item, *state)
        return state
    items = iter(items)
    while True:
        go = extra_test(*state)  # before fetching: a loop left by `break` fetches no more items
        if not is_staged(go) and not go:
            return state
        try:
            item = next(items)
        except StopIteration:
            return state
        if is_staged(go):
            state = _masked(go, body, item, state, names, site)
        else:
            state = body(item, *state)


def _masked(go, body, item, state, names, site):
    """One iteration that runs only if `go`: the staged form of `if go: state = body(...)`."""
    return staged_cond(go, lambda *s: body(item, *s), lambda *s: s, state, names, site)


def _should_scan(seq, state) -> bool:
    if any(isinstance(v, Undefined) for v in state):
        return False  # one more Python iteration gives these a value (and a shape)
    return seq.traced() or staging.has_traced(state)


def _try_scan_rest(seq, k, body, state, names, site, extra_test):
    """Iterations k.. as one `lax.scan`; None (after logging why) if the body cannot be staged."""
    n = len(seq)
    try:
        return _staged_scan(seq, k, body, state, names, site, extra_test)
    except Exception as e:  # noqa: BLE001 - the Python path re-runs these iterations
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        message = (
            f"the for loop ({site}) cannot be staged as one lax.scan ({type(e).__name__}: "
            f"{reason}); its {n - k} remaining iterations run as unrolled Python instead"
        )
        logger.info(message)
        if n - k > UNROLL_WARNING_THRESHOLD:
            warnings.warn(message + ", so compile time grows with the trip count.", stacklevel=3)
        return None


def _staged_scan(seq, k, body, state, names, site, extra_test):
    xs, to_item = seq.scan_inputs(k)

    def step(item, s):
        if extra_test is None:
            return body(item, *s)
        return _masked(extra_test(*s), body, item, s, names, site)

    first = jax.tree_util.tree_map(lambda x: x[0], xs)
    carry = _Carry(state, names, site, probe=lambda s: step(to_item(first, 0), s))

    def scan_body(scan_carry, x):
        j, dynamic = scan_carry
        outs = step(to_item(x, j), carry.merge(staging.fresh(dynamic)))
        return (j + 1, carry.check(outs, dynamic)), None

    final, _ = lax.scan(scan_body, (jnp.asarray(0), carry.init), xs, length=len(seq) - k)
    return carry.merge(final[1])


def _staged_range_while(r: TracedRange, body, state, names, site, extra_test):
    step_sign = jnp.sign(r.step)
    trip_count = jnp.maximum(0, (r.stop - r.start + r.step - step_sign) // r.step)

    def test(j, *s):
        more = j < trip_count
        if extra_test is None:
            return more
        return jnp.logical_and(more, staging.scalar_predicate(extra_test(*s), site, "loop test"))

    def counted_body(j, *s):
        return (j + 1, *body(r.start + j * r.step, *s))

    final = _staged_while(test, counted_body, (0, *state), ("<iteration>", *names), site)
    return final[1:]
