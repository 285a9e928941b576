"""A `for` over a range whose body reads a list it grows, at an offset from the index
(`row[j - 1]`, the dynamic-programming row), is one `lax.scan` where every such read is in
range in every iteration: the list is built just before the loop, and the body appends one
item to it in each iteration and does nothing else with it (`item_uses.counted_reads`). Where
that cannot be shown, the loop runs unrolled, as Python, and a read out of range raises
Python's IndexError (a staged list read at a traced index clamps it)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
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
