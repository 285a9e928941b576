"""A `for` over a range whose body reads lists at the index (`back[t]`, `xs[t - 1]`) and does
nothing else with them is one `lax.scan` where the runtime finds, as the loop starts, every
such read in range for every item of the range (`item_uses.checked_reads`, `for_stmt(in_range=
...)`): the list is read at the traced index as Python reads it at each int. Where a read may
fall out of range, the items are not JAX arrays of one type, or the body changes the list
through other names, the loop runs unrolled, as Python, and a read out of range raises Python's
IndexError (a staged list read at a traced index clamps it)."""

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

X = jnp.array([1.0, 2.0])


def backtrace(x):
    back = []
    for t in range(5):
        back.append(x * t)
    s = x * 0
    for t in range(4, -1, -1):
        s = s * 0.5 + back[t]
    return s


def wraps_at_minus_one(x):
    xs = [x, x * 2, x * 3]
    s = x * 0
    for t in range(3):
        s = s * 2 + xs[t - 1]
    return s


def offsets_and_a_literal(x):
    xs = [x * i for i in range(6)]
    s = x * 0
    for t in range(1, 5):
        s = s + xs[t - 1] * xs[t + 1] - xs[-1]
    return s


def layer_weights(x):
    ws = [jnp.eye(2) * (i + 1) + 0.1 for i in range(3)]
    for i in range(len(ws)):
        x = jnp.tanh(ws[i] @ x)
    return x.sum()


def triangle(x):
    rows = [x * i for i in range(4)]
    s = x * 0
    for i in range(4):
        for j in range(i):
            s = s + rows[i] * rows[j]
    return s


def viterbi(log_trans, log_emit, obs):
    delta = log_emit[:, obs[0]]
    back = []
    for t in range(1, obs.shape[0]):
        scores = delta[:, None] + log_trans
        back.append(jnp.argmax(scores, axis=0))
        delta = jnp.max(scores, axis=0) + log_emit[:, obs[t]]
    state = jnp.argmax(delta)
    path = [state]
    for t in range(obs.shape[0] - 2, -1, -1):
        state = back[t][state]
        path.append(state)
    path.reverse()
    return jnp.stack(path), jnp.max(delta)


STAGED = [backtrace, wraps_at_minus_one, offsets_and_a_literal, layer_weights, triangle]


@pytest.mark.parametrize("fn", STAGED, ids=lambda f: f.__name__)
def test_reads_found_in_range_stage_the_loop(fn):
    assert "in_range=" in transpiler.to_source(fn)
    assert "scan" in primitives(fn, X)
    check_jit(fn, X)


@pytest.mark.parametrize("fn", STAGED, ids=lambda f: f.__name__)
def test_the_staged_reads_differentiate_and_batch_as_python(fn):
    check_grad(lambda x: jnp.sum(fn(x)), X)
    check_vmap(fn, jnp.stack([X, 2.0 * X, -X]))


def test_viterbi_backtrace_is_a_scan_and_exact():
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    log_trans = jax.nn.log_softmax(jax.random.normal(k[0], (4, 4)) * 2, axis=1)
    log_emit = jax.nn.log_softmax(jax.random.normal(k[1], (4, 5)) * 2, axis=1)
    obs = jax.random.randint(k[2], (12,), 0, 5)
    text = primitives(viterbi, log_trans, log_emit, obs)
    assert text.count("scan[") == 2  # the forward pass and the backtrace, no unrolled reads
    path, best = jax.jit(transpiler.convert(viterbi))(log_trans, log_emit, obs)
    want_path, want_best = viterbi(log_trans, log_emit, obs)
    np.testing.assert_array_equal(path, want_path)
    assert_tree_close(best, want_best)


def test_python_values_run_as_python():
    check_python(wraps_at_minus_one, 2.0)
    check_python(backtrace, np.float32(1.5))


# The runtime finds these reads not exact at a traced index: the loop runs unrolled, as Python.


def read_past_the_end(x):
    xs = [x, x * 2]
    s = x * 0
    for t in range(3):
        s = s + xs[t]
    return s


def read_before_the_start(x):
    xs = [x, x * 2]
    s = x * 0
    for t in range(3):
        s = s + xs[t - 3]
    return s


def items_of_two_shapes(x):
    xs = [x, x[:1], x]
    s = 0.0
    for t in range(3):
        s = s + xs[t].sum()
    return s


def python_numbers(x):
    xs = [1, 2, 3]
    s = 0
    for t in range(3):
        s = s + xs[t]
    return s + x


def numpy_items_changed_in_place(x):
    xs = [np.ones(2), np.ones(2)]
    s = x
    for t in range(2):
        y = xs[t]
        y += 1
        s = s + y
    return s, xs[0]


def changed_by_a_call(x):
    xs = [x, x + 1, x + 2]

    def bump():
        xs[0] = xs[0] * 10

    s = x * 0
    for t in range(3):
        s = s + xs[t]
        bump()
    return s, xs[0]


def shortened_by_a_call(x):
    xs = [x, x + 1, x + 2, x + 3]

    def drop():
        xs.pop()

    s = x * 0
    for t in range(3):
        s = s + xs[t]
        drop()
    return s


def unbound_list(x, make=False):
    if make:
        xs = [x]
    s = x
    for t in range(0):
        s = s + xs[t]
    return s


@pytest.mark.parametrize(
    "fn",
    [
        read_past_the_end,
        read_before_the_start,
        items_of_two_shapes,
        python_numbers,
        numpy_items_changed_in_place,
        changed_by_a_call,
        shortened_by_a_call,
        unbound_list,
    ],
    ids=lambda f: f.__name__,
)
def test_reads_not_found_in_range_run_unrolled_as_python(fn):
    # (a list a nested function changes, or one bound on one path only, is not one the lists
    # pass follows: read as Python's)
    hidden = fn in (changed_by_a_call, shortened_by_a_call, unbound_list)
    assert hidden or "in_range=" in transpiler.to_source(fn)
    try:
        expected = fn(X)
    except IndexError:
        for run in (transpiler.convert(fn), transpiler.jit(fn)):
            with pytest.raises(IndexError, match="list index out of range"):
                run(X)
        return
    assert "scan" not in primitives(fn, X)
    assert_tree_close(transpiler.convert(fn)(X), expected)
    check_jit(fn, X)


def rebinds_the_list(x):
    xs = [x, x]
    s = x * 0
    for t in range(2):
        s = s + xs[t]
        xs = [s, s]
    return s


def appends_to_the_list(x):
    xs = [x, x]
    s = x * 0
    for t in range(2):
        s = s + xs[t]
        xs.append(s)
    return s


def passes_the_list_on(x):
    xs = [x, x]
    s = x * 0
    for t in range(2):
        s = s + xs[t] + len(xs)
    return s


@pytest.mark.parametrize(
    "fn", [rebinds_the_list, appends_to_the_list, passes_the_list_on], ids=lambda f: f.__name__
)
def test_lists_the_body_binds_or_uses_otherwise_are_not_checked(fn):
    assert "in_range=" not in transpiler.to_source(fn)
    check_jit(fn, X)


def identity_of_an_item(x):
    xs = [x, x * 2, x]
    s = x * 0
    for t in range(3):
        if xs[t] is xs[0]:
            s = s + 100.0
        s = s + xs[t]
    return s


CONSTANTS = [jnp.array(0.5), jnp.array(0.25), jnp.array(0.125)]


def text_of_constant_items(x):
    xs = list(CONSTANTS)
    s = x * 0
    for t in range(3):
        s = s + len(str(xs[t])) + xs[t]
    return s


def test_items_compared_by_identity_or_constants_are_read_as_python():
    # (reviewer's findings: a read at a traced index is a new tracer, neither the item itself
    # nor a constant whose text shows its value)
    assert "in_range=" not in transpiler.to_source(identity_of_an_item)
    for fn in (identity_of_an_item, text_of_constant_items):
        check_jit(fn, X)
        assert "scan" not in primitives(fn, X)
