"""A loop whose first iteration, run as Python, makes its state traced is staged from before it.

A loop's state often starts as Python values and becomes traced in its first iteration::

    converged = False                  # Python
    while not converged:               # True: the first iteration runs as Python...
        x = 0.5 * (x + a / x)
        converged = abs(...) < tol     # ...and makes the test traced

The loop is Python until then, so that iteration runs as Python: whether the loop is staged at
all is known only after it. Staging the rest from the state after it would put a copy of the
body before the loop (XLA compiles both: about twice the compile time of a small loop), where a
hand-written `lax.while_loop` starts from `converged = False`. So when the iteration did nothing
that running it again would repeat (see `effects.Watch`: no Python state changed, no print or
check, no library code that may make one, no iterator advanced), and the state before it
promotes to the types it has after it, the staged loop starts from the state before it instead:
the Python run is dead code, which JAX drops when it lowers the program. The test Python
evaluated before the iteration (true) is the staged loop's first.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import effects, staging
from runtime import lists as lists_
from runtime.variables import MaybeUnbound, Undefined, UndefinedReturnValue


def first_iteration(iteration, state, names, functions, reads=(), sums=(), owned=()):
    """Runs `iteration(state)` -> (state after it, what decides the loop goes on) as Python.

    Returns (state after, decides, start): `start` is the state to stage the loop from instead
    of the state after (the state before, promoted to the types it has after), or None where
    the loop must go on from the state after: it stays Python, or staging it from before would
    compute that iteration differently (see `restartable`), or the iteration did something
    that staging it again would repeat, or the state's types do not promote. `functions` are
    the loop's functions (body, test), whose cells and globals the iteration can change.

    A list the loop collects items in (`outs = []` before it, `outs.append(y)` in it) grows
    in that iteration: where no other name can reach it (`owned`: the names conversion found
    own their objects) and the iteration only added items to it, the loop starts from a new
    empty list instead (`[f(j) for j in range(n)]`: one scan of n iterations, not an
    iteration and a scan of n - 1 whose items are joined). The one the iteration grew is
    seen by nothing once the variable holds the loop's list.
    """
    if staging.eager() or not restartable(state, names, reads, sums):
        after, decides = iteration(state)
        return after, decides, None
    collecting = {
        i: value
        for i, (name, value) in enumerate(zip(names, state))
        if type(value) is list and not value and name in owned
    }
    watch = effects.Watch(functions, zip(names, state))
    with staging.watching(watch):
        after, decides = iteration(state)
    if not (staging.is_staged(decides) or staging.has_staged(after)):
        return after, decides, None
    # Those it grew in place (or left empty: no other name sees those either).
    kept = {i for i, value in collecting.items() if after[i] is value}
    ignoring = {id(collecting[i]) for i in kept}
    if not watch.clean(ignoring) or not restartable(state, names, reads, sums, after):
        return after, decides, None
    return after, decides, start_state(state, after, kept)


def restartable(state, names, reads=(), sums=(), after=None) -> bool:
    """Whether the loop's first iteration computes the same staged from `state` promoted (each
    Python number cast to the dtype it gets) as it does as Python: the iteration reads no
    Python value (a Python int, float or bool, a NumPy value) from the state before writing
    it, except adding to a zero (`steps = 0` ... `steps += 1`: `sums`), and the flags the passes
    made. Python computes on Python values with Python's arithmetic (unbounded ints, float64,
    `isinstance(v, int)`), the staged loop with JAX's: the first iteration must not see the
    difference. A sum is exact from zero where the iteration added a traced value to it or
    counted in ints (`after`, the state after the iteration, tells; a float it added to in
    Python, `t += 0.1`, is float64 there and float32 staged). `reads`, `sums`: names, from the
    conversion (the control-flow pass).
    """
    after = after if after is not None else (None,) * len(names)
    for name, value, next_value in zip(names, state, after):
        if not _python_values(value):
            continue
        if name in reads:
            return False
        if name not in sums:
            continue
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and value == 0):
            return False
        if isinstance(next_value, float) or (type(next_value) is int and not _int32(next_value)):
            return False
    return True


def again(
    iteration,
    state,
    names,
    functions,
    reads=(),
    sums=(),
    test_reads=(),
    compared=(),
    compared_with=None,
):
    """Runs a later iteration, `iteration(state)` -> (state after it, the test on that), as
    Python, of a loop whose test is still Python's `True` where its state is traced (`(err >
    tol or it < 5) and it < 500`: `True` while `it < 5`). Returns (state after, test, exact):
    `exact` where the loop staged from before its first iteration computes this one the same
    as Python did (see `first_iteration`; the caller keeps that state while all are): the
    iteration read no Python value from the state but ints it only adds to (`it += 1`: the
    same in int32 below 2**31, from any count), did nothing that running it again would
    repeat, and the test on the state after reads Python values only where they compare the
    same promoted (`compares_alike`). The staged loop then tests `(err > tol) | (it < 5)`
    in each iteration: true where Python's was."""
    if staging.eager() or not _counts_only(state, names, reads, sums):
        return (*iteration(state), False)
    watch = effects.Watch(functions, zip(names, state))
    with staging.watching(watch):
        after, decides = iteration(state)
    exact = (
        watch.clean()
        and _counts_only(after, names, reads, sums)
        and compares_alike(after, names, test_reads, compared, compared_with)
    )
    return after, decides, exact


def compares_alike(state, names, test_reads=(), compared=(), compared_with=None) -> bool:
    """`tests_the_same`, and what the test compares the Python ints of `state` with
    (`compared_with(*state)`, from the conversion: per variable, what its comparisons meet)
    compares with int32 as with a Python int:
    a traced value, an int in int32's range, a float that is a whole number float32 holds
    exactly (`it < 7.0`; not `it < 0.07 * 100`, 7.000000000000001, which float32 rounds to 7.0).
    Without `compared_with` (the test compares them with a call's value, say), no Python int
    may be among them."""
    if not tests_the_same(state, names, test_reads, compared):
        return False
    counted = [n for n, v in zip(names, state) if n in compared and _python_values(v)]
    if not counted:
        return True
    if compared_with is None:
        return False
    try:
        partners = compared_with(*state)
    except Exception:  # noqa: BLE001 - unbound, or raising: not known to compare alike
        return False
    return all(
        name in partners and all(_compares_as_int32(p) for p in partners[name]) for name in counted
    )


def _compares_as_int32(value) -> bool:
    if staging.is_staged(value):
        return True
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, (int, np.integer)):
        return _int32(int(value))
    if isinstance(value, (float, np.floating)):
        return float(value).is_integer() and abs(float(value)) <= 2**24
    return False


def _counts_only(state, names, reads, sums) -> bool:
    """Whether the Python values of `state` a loop's body reads are ints in int32's range
    it only adds to (`sums`), not bools."""
    for name, value in zip(names, state):
        if not _python_values(value):
            continue
        if name in reads:
            return False
        if name in sums and not (type(value) is int and _int32(value)):
            return False
    return True


def _int32(value: int) -> bool:
    """Whether int32 holds the Python int `value`."""
    return -(2**31) <= value < 2**31


def _python_values(value) -> bool:
    """Whether `value` holds a Python number or a NumPy value (not only JAX arrays)."""
    return any(
        isinstance(leaf, (bool, int, float, complex, np.ndarray, np.generic))
        for leaf in jax.tree_util.tree_leaves(value)
    )


def tests_the_same(state, names, test_reads=(), compared=()) -> bool:
    """Whether a loop test computes the same on `state` promoted (each Python number cast to
    the dtype the staged loop gives it) as on `state`: the variables it reads (`test_reads`,
    from the conversion; the flags the passes made are not among them) hold no Python number
    or NumPy value (`~flag` is -2 for a Python bool, False for a bool array; `2 ** (k - 1)` is
    0.5 for a Python int, 0 for an int32), but ints in int32's range that it only compares
    (`compared`: `i < n`)."""
    for name, value in zip(names, state):
        if name not in test_reads or not _python_values(value):
            continue
        small_int = type(value) is int and _int32(value)
        if not (name in compared and small_int):
            return False
    return True


def watched(evaluate, state, names, functions):
    """(`evaluate()`, whether evaluating it did nothing that evaluating it again would repeat:
    see `effects.Watch`). A loop's test, evaluated to tell whether the loop is staged, may be
    evaluated again in the staged loop's condition where it is clean: this evaluation is then
    dead code."""
    if staging.eager():
        return evaluate(), False
    watch = effects.Watch(functions, zip(names, state))
    with staging.watching(watch):
        value = evaluate()
    return value, watch.clean()


def start_state(before, after, collecting=frozenset()) -> tuple | None:
    """`before` with each variable given the type it has in `after` (the state one iteration
    later), where that is exact; None where it is not.

    A Python number takes the dtype JAX promotes it to there (`total = 0` before, float32 after:
    a float32 0); an array keeps its value with the weak type it has after; a variable that
    has no value yet (or a return value not set) starts as zeros, never read (the iteration
    Python ran bound it before reading it); any other object must be the very same object.
    The variables `collecting` (indices) hold the empty lists the iteration grew: a new empty
    list each (see `first_iteration`). Other lists, and variables bound on some paths only,
    are not promoted: None.
    """
    start = []
    for index, (b, a) in enumerate(zip(before, after)):
        if index in collecting:
            start.append([])
            continue
        if _container_of_own(b) or _container_of_own(a):
            return None
        if isinstance(b, (Undefined, UndefinedReturnValue)):
            if not _plain_arrays(a):
                return None
            start.append(staging.zeros_like(staging.shapes_of(staging.as_arrays(a))))
        elif staging.is_array_tree(b):
            if not staging.is_array_tree(a):
                return None
            try:
                promoted = _promoted(staging.as_arrays(b), staging.as_arrays(a))
            except OverflowError:  # a Python int no JAX integer holds
                return None
            if promoted is _NO:
                return None
            start.append(staging.in_key_order(staging.released(promoted), b))
        elif a is not b:
            return None
        else:
            start.append(b)
    return tuple(start)


def _container_of_own(value) -> bool:
    """A list (a loop sizes those from its body), or a tree holding the runtime's own
    variables (MaybeUnbound, a staged list)."""
    if type(value) is list or isinstance(value, lists_.StagedList):
        return True
    nodes = jax.tree_util.tree_leaves(
        value, is_leaf=lambda x: isinstance(x, (MaybeUnbound, lists_.StagedList, list))
    )
    return any(isinstance(x, (MaybeUnbound, lists_.StagedList, list)) for x in nodes)


def _plain_arrays(value) -> bool:
    return staging.is_array_tree(value) and all(
        staging.is_array_leaf(leaf) for leaf in jax.tree_util.tree_leaves(value)
    )


_NO = object()  # what `_promoted` gives where `before` does not promote


def _promoted(before, after):
    """The array tree `before` cast leaf by leaf to the types of `after`, or `_NO`: the trees
    differ (a held object too), a shape differs, or a dtype differs where `before` is not a
    weakly typed number that promotes to it."""
    if jax.tree_util.tree_structure(before) != jax.tree_util.tree_structure(after):
        return _NO
    leaves_b, treedef = jax.tree_util.tree_flatten(before)
    out = []
    for b, a in zip(leaves_b, jax.tree_util.tree_leaves(after)):
        if jnp.shape(b) != jnp.shape(a):
            return _NO
        weak_b, weak_a = jax.typeof(b).weak_type, jax.typeof(a).weak_type
        if b.dtype != a.dtype and not (weak_b and staging.takes_dtype(b, a.dtype)):
            return _NO
        if b.dtype == a.dtype and weak_b == weak_a:
            out.append(b)
        elif weak_a:
            out.append(staging.cast(b, staging.WeakDtype(a.dtype)))
        else:
            out.append(lax.convert_element_type(b, a.dtype))
    return jax.tree_util.tree_unflatten(treedef, out)
