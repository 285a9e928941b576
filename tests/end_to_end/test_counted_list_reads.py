"""A `for` over a range whose body reads a list it grows, at an offset from the index
(`row[j - 1]`, the dynamic-programming row), is one `lax.scan` where every such read is in
range in every iteration: the list is built just before the loop, and the body appends one
item to it in each iteration and does nothing else with it (`item_uses.counted_reads`). Where
that cannot be shown, the loop runs unrolled, as Python, and a read out of range raises
Python's IndexError (a staged list read at a traced index clamps it)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import (
    assert_tree_close,
    check_grad,
    check_jit,
    check_python,
    check_vmap,
    primitives,
)

X = jnp.linspace(0.1, 1.0, 8)


def house_robber(x):
    best = [x[0]]
    for i in range(1, x.shape[0]):
        two_back = best[i - 2] if i >= 2 else 0.0
        best.append(jnp.maximum(best[i - 1], two_back + x[i]))
    return best[-1]


def recurrence(x):
    seq = [x, 0.5 * x]
    for k in range(2, 9):
        seq.append(seq[k - 1] + 0.3 * seq[k - 2])
    return jnp.stack(seq)


def read_after_append(x):
    out = [x]
    total = jnp.zeros_like(x)
    for j in range(5):
        out.append(jnp.sin(out[j]) + 0.1)
        total = total + out[j + 1]
    return total, jnp.stack(out)


def negative_offsets(x):
    r = [x, x + 1.0]
    for j in range(4):
        r.append(r[j - 1] * 0.5)
    return jnp.stack(r)


def edit_row(a, b, i):
    prev = jnp.arange(b.shape[0] + 1)
    row = [i]
    for j in range(1, b.shape[0] + 1):
        cost = 0 if a[i - 1] == b[j - 1] else 1
        row.append(min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost))
    return jnp.array(row)


def stops_at_a_break(x):
    acc = [x[0]]
    for j in range(1, x.shape[0]):
        acc.append(acc[j - 1] * 0.9 + x[j])
        if acc[j] > 2.0:
            break
    return acc[-1], len(acc)


STAGED = [house_robber, recurrence, read_after_append, negative_offsets]


@pytest.mark.parametrize("fn", STAGED, ids=lambda f: f.__name__)
def test_reads_in_range_in_every_iteration_stage_one_scan(fn):
    assert "items_as_python=True" not in transpiler.to_source(fn)
    assert "scan" in primitives(fn, X)
    check_jit(fn, X)


@pytest.mark.parametrize("fn", STAGED, ids=lambda f: f.__name__)
def test_the_scan_differentiates_and_batches_as_python(fn):
    check_grad(lambda x: jnp.sum(jnp.asarray(jax.tree_util.tree_leaves(fn(x))[0])), X)
    check_vmap(fn, jnp.stack([X, 2.0 * X, -X]))


def test_python_values_run_as_python():
    check_python(recurrence, np.float64(0.5))
    check_python(negative_offsets, 2.0)


def test_the_dynamic_programming_row_is_one_scan():
    a = jnp.array([1, 2, 3, 4, 0, 0], jnp.int32)
    b = jnp.array([2, 3, 5, 4, 1, 0], jnp.int32)
    converted = transpiler.convert(edit_row)
    assert "scan" in str(jax.make_jaxpr(converted)(a, b, jnp.int32(3)))
    for i in (1, 3, 5):
        np.testing.assert_array_equal(jax.jit(converted)(a, b, jnp.int32(i)), edit_row(a, b, i))


def test_a_break_after_the_append_stops_the_loop_as_python():
    check_jit(stops_at_a_break, X)
    check_jit(stops_at_a_break, X * 0.1)


# Each of these may read out of range, or the length of its list at a read is not known from
# the loop alone: the loop runs unrolled, and reads as Python does.


def reads_past_the_end(x):
    r = [x]
    for j in range(3):
        r.append(r[j + 1] * 2.0)
    return r[-1]


def reads_before_the_start(x):
    r = [x]
    for j in range(1, 4):
        r.append(r[j - 3] * 2.0)
    return r[-1]


def appends_under_a_condition(x):
    r = [x]
    for j in range(1, 4):
        if j % 2:
            r.append(r[-1] + 1.0)
        r.append(r[j - 1] * 2.0)
    return r[-1]


def appends_twice(x):
    r = [x]
    for j in range(1, 4):
        r.append(r[j - 1] + 1.0)
        r.append(r[j] * 0.5)
    return r[-1]


def changed_before_the_loop(x):
    r = [x]
    r.pop()
    for j in range(1, 4):
        r.append(r[j - 1] * 2.0)
    return r[-1]


def read_by_a_lambda(x):
    r = [x]
    for j in range(1, 4):
        get = lambda: r[j + 4]  # noqa: E731, B023
        r.append(get() * 2.0)
    return r[-1]


def index_rebound(x):
    r = [x]
    for j in range(1, 4):
        r.append(r[j - 1] * 2.0)
        j = j + 3
        x = x + r[j - 1]
    return x


def start_not_a_literal(x, s=1):
    r = [x]
    for j in range(s, 4):
        r.append(r[j - 1] * 2.0)
    return r[-1]


UNROLLED = [
    reads_past_the_end,
    reads_before_the_start,
    appends_under_a_condition,
    appends_twice,
    changed_before_the_loop,
    read_by_a_lambda,
    index_rebound,
    start_not_a_literal,
]


@pytest.mark.parametrize("fn", UNROLLED, ids=lambda f: f.__name__)
def test_reads_not_shown_in_range_run_unrolled_as_python(fn):
    # (the lambda's loop carries its index as a cell: a loop of its own kind)
    assert fn is read_by_a_lambda or "items_as_python=True" in transpiler.to_source(fn)
    try:
        expected = fn(X)
    except IndexError:
        with pytest.raises(IndexError, match="list index out of range"):
            jax.jit(transpiler.convert(fn))(X)
        return
    assert_tree_close(jax.jit(transpiler.convert(fn))(X), expected)


def read_in_the_else_clause(x, offset):
    r = [x[0]]
    for j in range(3):
        r.append(r[j] + 1.0)
    else:
        y = r[j + offset]
    return y


@pytest.mark.parametrize("offset", [-1, -9, 5])
def test_the_index_read_in_the_for_else_clause_is_pythons_last_item(offset):
    fn = functools.partial(read_in_the_else_clause, offset=offset)
    converted = jax.jit(transpiler.convert(read_in_the_else_clause), static_argnums=1)
    try:
        expected = fn(X)
    except IndexError:
        with pytest.raises(IndexError, match="list index out of range"):
            converted(X, offset)
        return
    assert_tree_close(converted(X, offset), expected)


def pairs_of_items(x):
    r = [(x[0], x[1])]
    for j in range(1, 5):
        a, b = r[j - 1]
        r.append((b, a + b))
    return r[-1][1]


def python_int_first(x):
    dp = [0]
    for j in range(1, 5):
        dp.append(dp[j - 1] + x[j])
    return dp


def large_int_first(xi):
    r = [xi[0]]
    for j in range(3):
        r.append(r[j] - 16777216 + 0.5)
    return r[1], r[0]


def literal_offsets(x):
    r = [x, x, x]
    for j in range(-2, 3):
        r.append(r[-1 + j + 2 - 2] * 0.5 + r[-1])
    return jnp.stack(r)


def test_items_a_staged_list_would_change_keep_the_loop_python():
    # Tuples cannot be one array; an int32 item would be read back as float32 (16777217 is
    # 16777216.0 there): the loop runs as Python, whose items are as they were.
    assert_tree_close(jax.jit(transpiler.convert(pairs_of_items))(X), pairs_of_items(X))
    check_jit(python_int_first, X)
    xi = jnp.array([16777217, 3, 5, 7], jnp.int32)
    np.testing.assert_array_equal(jax.jit(transpiler.convert(large_int_first))(xi)[0], 1.5)
    check_jit(large_int_first, xi)


def test_negative_literals_in_the_range_and_the_index():
    assert "scan" in primitives(literal_offsets, X)
    check_jit(literal_offsets, X)


# A list a staged loop only grows holds at least the items it entered with: a read at a literal
# index within them (`hs[-1]`) needs no check as the program runs (a host call each iteration,
# a thousand times the step's cost); one beyond them, or of a list the loop pops from, is
# checked, and raises Python's IndexError.


def recurrent(w, h0):
    hs = [h0]
    for _ in range(6):
        hs.append(jnp.tanh(w @ hs[-1]))
    return jnp.stack(hs)


def two_back(x):
    hs = [x]
    for _ in range(3):
        hs.append(hs[-2] * 0.5)
    return hs[-1]


def sliding(x):
    window = [x, x + 1.0, x + 2.0]
    for _ in range(4):
        window.pop(0)
        window.append(window[-1] * 0.5 + window[0])
    return window[0]


def draining(x, pops):
    stack = [x, x + 1.0, x + 2.0, x + 3.0]
    y = x
    for _ in range(pops):
        stack.pop()
        y = y + stack[-1]
    return y


def test_a_read_within_the_items_the_loop_started_with_is_not_checked_when_run():
    w = jnp.eye(3) * 0.5
    assert "callback" not in primitives(recurrent, w, X[:3])
    check_jit(recurrent, w, X[:3])
    check_grad(lambda w: jnp.sum(recurrent(w, X[:3])), w)


def test_reads_beyond_them_are_checked_and_raise_as_python():
    with pytest.raises(IndexError):
        two_back(X)
    with pytest.raises(IndexError, match="list index out of range"):
        jax.jit(transpiler.convert(two_back))(X)
    # A window as long after each iteration as before: its reads need no check.
    assert "callback" not in primitives(sliding, X)
    check_jit(sliding, X)
    # Shorter after each iteration: the loop counts on none of its items, and checks.
    assert "callback" in primitives(draining, X, 3, static_argnums=1)
    check_jit(draining, X, 3, static_argnums=1)
    with pytest.raises(jax.errors.JaxRuntimeError, match="list index out of range"):
        jax.jit(transpiler.convert(draining), static_argnums=1)(X, 4)


# `jnp.stack(hs[1:])` of a list a staged loop built stacks a slice of its rows (one operation,
# where a Python list of its items would be one per item), and gives what Python gives.


def stacked_slices(w, h0, start, stop, step):
    hs = [h0]
    for _ in range(30):
        hs.append(jnp.tanh(w @ hs[-1]))
    return jnp.stack(hs[start:stop:step], axis=1), jnp.array(hs[start:stop:step])


@pytest.mark.parametrize(
    "part", [(1, None, None), (None, None, 2), (-3, None, None), (25, 1, -2), (2, 2, None)]
)
def test_stacking_a_slice_of_a_staged_list_is_pythons(part):
    w, h0 = jnp.eye(3) * 0.5, X[:3]
    converted = jax.jit(transpiler.convert(stacked_slices), static_argnums=(2, 3, 4))
    try:
        expected = stacked_slices(w, h0, *part)
    except ValueError as error:  # no items to stack
        with pytest.raises(ValueError, match=str(error)[:20]):
            converted(w, h0, *part)
        return
    assert_tree_close(converted(w, h0, *part), expected)
    # The rows sliced at once: about as many equations whatever the slice (a few per item of
    # a Python list of the items).
    whole = primitives(stacked_slices, w, h0, None, None, None, static_argnums=(2, 3, 4))
    sliced = primitives(stacked_slices, w, h0, *part, static_argnums=(2, 3, 4))
    assert abs(sliced.count("\n") - whole.count("\n")) <= 16


def starts_empty(x):
    hs = []
    h = x
    for _ in range(5):
        hs.append(jnp.tanh(h))
        h = hs[-1] * 0.9 + hs[0]
    return jnp.stack(hs)


def reads_before_the_first_append(x):
    hs = []
    h = x
    for _ in range(5):
        h = h + hs[-1] if hs else h
        hs.append(jnp.tanh(h))
    return jnp.stack(hs)


def test_an_append_counts_for_the_reads_after_it_in_its_iteration():
    assert "callback" not in primitives(starts_empty, X)
    check_jit(starts_empty, X)
    check_grad(lambda x: jnp.sum(starts_empty(x)), X)
    check_vmap(starts_empty, jnp.stack([X, -X]))
    check_jit(reads_before_the_first_append, X)


class Ops:
    """A user's own `stack` and `array` (not JAX's): they get the Python list of the items."""

    @staticmethod
    def stack(xs):
        return sum(xs)

    @staticmethod
    def array(xs):
        return len(xs)


OPS = Ops()


def stacked_otherwise(x):
    hs = [x]
    for _ in range(4):
        hs.append(hs[-1] * 2.0)
    return (
        OPS.stack(hs[1:]),
        OPS.array(hs[1:]),
        OPS.stack(hs),
        jnp.array(hs[1:], jnp.int32),
        jnp.asarray(hs[1:3], jnp.int32),
        jnp.stack(hs[1:], 0, dtype=jnp.int32),
        jnp.array(hs[1:], ndmin=3),
        jnp.array(hs, jnp.int32),
    )


def to_numpy(x):
    hs = [x]
    for _ in range(4):
        hs.append(hs[-1] * 2.0)
    return np.array(hs[1:3])


def test_other_stacking_functions_and_arguments_get_the_python_list():
    check_jit(stacked_otherwise, jnp.float32(1.5))
    with pytest.raises(jax.errors.TracerArrayConversionError):  # as under plain jax.jit
        jax.jit(transpiler.convert(to_numpy))(jnp.float32(1.5))


def pops_in_a_nested_loop(x):
    hs = [x, x + 1.0]
    for _ in range(3):
        y = hs[-2]
        hs.append(x * 2.0)
        for _ in range(2):
            hs.pop()
        hs.append(y + 1.0)
    return jnp.stack(hs)


def test_a_list_a_nested_loop_pops_from_stages_counting_on_none_of_its_items():
    assert primitives(pops_in_a_nested_loop, X).count("scan") >= 2
    check_jit(pops_in_a_nested_loop, X)


def bool_indices(x):
    hs = [x]
    for _ in range(3):
        hs.append(hs[-1] * 2.0)
    hs[True] = hs[True] + 1.0
    return hs[True], hs[False], hs[-True]


def test_a_bool_indexes_a_staged_list_as_the_int_it_is():
    check_jit(bool_indices, X)


def pops_from_an_empty_list(x):
    acc = []
    k = 0
    while jnp.sum(x) > 0.1 and k < 5:
        k += 1
        if len(acc) > 0:
            x = x + acc.pop()
        x = x * 0.5
    return x


def test_a_list_only_popped_from_holding_nothing_is_refused_saying_so():
    with pytest.raises(StagingError, match="'acc' is popped from .* holds no items"):
        jax.jit(transpiler.convert(pops_from_an_empty_list))(X)
