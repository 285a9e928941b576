"""Nested loops whose inner range reads the outer index (`for j in range(n - 1 - i)`: bubble
sort, Cholesky, triangular sums) stage the outer loop: the inner one is then a while loop over
a traced range, its index traced as a scan's would be, which is exact where its body uses the
index only as an array and resizes no list (`ControlFlow._traced_range_bounds`). Otherwise the
outer loop runs unrolled, as Python, each inner loop a scan of its own length."""

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

X = jnp.array([3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0])


def bubble_sort(x):
    n = x.shape[0]
    for i in range(n):
        for j in range(n - 1 - i):
            if x[j] > x[j + 1]:
                a = x[j]
                b = x[j + 1]
                x = x.at[j].set(b)
                x = x.at[j + 1].set(a)
    return x


def pair_products(x):
    s = x[0] * 0
    for i in range(x.shape[0]):
        for j in range(i):
            s = s + x[i] * x[j]
    return s


def three_deep(x):
    s = x[0] * 0
    for i in range(4):
        for j in range(i):
            for k in range(j):
                s = s + x[i] * x[j] - x[k]
    return s


def stepped_both_ways(x):
    s = x[0] * 0
    for i in range(4):
        for j in range(i, 7, 2):
            s = s + x[j] * (i + 1)
        for k in range(6, i, -1):
            s = s - x[k] * 0.5
    return s


def inner_break(x):
    s = x[0] * 0
    for i in range(5):
        for j in range(i):
            if x[j] > x[i]:
                break
            s = s + x[j]
    return s


def inner_else(x):
    s = x[0] * 0
    for i in range(5):
        for j in range(i):
            s = s + x[j]
        else:
            s = s * 1.5
    return s


def value_kept_where_the_inner_loop_runs_none(x):
    y = x[0]
    s = x[0] * 0
    for i in range(4):
        for j in range(i):
            y = x[j] * 2
        s = s + y
    return s


def cholesky(a):
    n = a.shape[0]
    lower = jnp.zeros_like(a)
    for i in range(n):
        for j in range(i + 1):
            s = a[i, j]
            for k in range(j):
                s = s - lower[i, k] * lower[j, k]
            if i == j:
                lower = lower.at[i, j].set(jnp.sqrt(s))
            else:
                lower = lower.at[i, j].set(s / lower[j, j])
    return lower


STAGED = [
    bubble_sort,
    pair_products,
    three_deep,
    stepped_both_ways,
    inner_break,
    inner_else,
    value_kept_where_the_inner_loop_runs_none,
]


@pytest.mark.parametrize("fn", STAGED, ids=lambda f: f.__name__)
def test_the_outer_loop_is_staged_and_exact(fn):
    text = primitives(fn, X)
    assert "while[" in text and text.count("scan[") + text.count("while[") <= 4
    check_jit(fn, X)


@pytest.mark.parametrize("fn", STAGED, ids=lambda f: f.__name__)
def test_differentiated_and_batched_as_python(fn):
    check_grad(lambda x: jnp.sum(fn(x) * jnp.arange(1.0, 1.0 + jnp.size(fn(x)))), X)
    check_vmap(fn, jnp.stack([X, 2.0 * X, -X, X[::-1]]))


def test_cholesky_is_one_loop_nest_with_gradients():
    m = jnp.array([[1.0, 0.3, 0.1], [0.2, 1.0, 0.4], [0.0, 0.5, 1.0]])
    a = m @ m.T + jnp.eye(3)
    assert "while[" in primitives(cholesky, a)
    check_jit(cholesky, a)
    check_grad(lambda a: jnp.sum(cholesky(a)), a)
    np.testing.assert_allclose(
        jax.jit(transpiler.convert(cholesky))(a), jnp.linalg.cholesky(a), rtol=1e-5
    )


def test_python_values_run_as_python():
    check_python(pair_products, np.arange(5.0))
    check_python(three_deep, [1, 2, 3, 4])


def test_prints_in_the_inner_loop_keep_python_order(capsys):
    def printed(x):
        s = x[0] * 0
        for i in range(3):
            for j in range(i):
                print("pair", i, j)
                s = s + x[j]
        return s

    jax.block_until_ready(transpiler.jit(printed)(X))
    assert capsys.readouterr().out == "pair 1 0\npair 2 0\npair 2 1\n"


# The inner loop needs what a traced range cannot give exactly: the outer loop runs unrolled.


def inner_appends(x):
    out = []
    for i in range(4):
        acc = []
        for j in range(i):
            acc.append(x[j])
        out.append(len(acc))
    return out


def inner_index_as_python(x):
    s = x[0] * 0
    for i in range(1, 4):
        for j in range(i):
            s = s + x[j] * 2.0**-j
    return s


def inner_index_read_after(x):
    s = x[0] * 0
    j = -1
    for i in range(4):
        for j in range(i):
            s = s + x[j]
        s = s + j
    return s


def inner_list_read_at_the_index(x):
    rows = [x[0], x[1], x[2]]
    s = x[0] * 0
    for i in range(4):
        for j in range(i):
            s = s + rows[j]
    return s


@pytest.mark.parametrize(
    "fn",
    [inner_appends, inner_index_as_python, inner_index_read_after, inner_list_read_at_the_index],
    ids=lambda f: f.__name__,
)
def test_inner_loops_a_traced_range_would_change_keep_the_outer_loop_python(fn):
    source = transpiler.to_source(fn)
    assert source.count("items_as_python=True") >= 1
    try:
        expected = fn(X)
    except IndexError:
        with pytest.raises(IndexError):
            transpiler.jit(fn)(X)
        return
    assert_tree_close(transpiler.jit(fn)(X), expected)
    check_jit(fn, X)


# Found by an adversarial review: the inner loop over a traced range computes differently from
# the one over the Python range where its state holds Python values (a Python loop then, or a
# scan from a first iteration Python runs), where tracing it raises (over the Python range: a
# loop unrolled), or where a variable it binds first is read after it: the outer loop runs
# unrolled, as Python (`for_loops._as_python_would`).


def python_int_state(x):
    s = x[0] * 0
    for i in range(x.shape[0]):
        h = 7
        for _j in range(i):
            h = h * 100003 % 1000000007  # wraps in int32
        s = s + h % 10
    return s


def python_bool_state(x):
    s = x[0] * 0
    for i in range(x.shape[0]):
        f = False
        for _j in range(i):
            f = not f
        s = s + x[i] * (f + f)  # an int in Python
    return s


def printed_python_float(x):
    s = x[0] * 0
    for i in range(3):
        c = 0
        for _j in range(i):
            c += 2
        print(c / 3)  # Python's digits
        s = s + x[i]
    return s


def tracing_raises(x):
    s = x[0] * 0
    for i in range(x.shape[0]):
        for j in range(i):
            s = s + x[j] * len((1, 2) * j)  # a Python int's repetition
    return s


def bound_in_the_inner_loop(x):
    s = x[0] * 0
    for i in range(1, 4):
        for j in range(i):
            y = x[j] * 2
        s = s + y
    return s


def zero_step(x):
    s = x[0] * 0
    for i in range(1, 4):
        for j in range(0, 6, i):
            s = s + x[j]
    return s


@pytest.mark.parametrize(
    "fn",
    [
        python_int_state,
        python_bool_state,
        printed_python_float,
        tracing_raises,
        bound_in_the_inner_loop,
        zero_step,
    ],
    ids=lambda f: f.__name__,
)
def test_inner_loops_computing_otherwise_over_a_traced_range_run_as_python(fn, capsys):
    expected = fn(X)
    printed = capsys.readouterr().out
    actual = jax.jit(transpiler.convert(fn))(X)
    jax.effects_barrier()
    assert capsys.readouterr().out == printed
    assert_tree_close(actual, expected)
