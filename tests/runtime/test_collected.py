"""A list a staged scan only appends to, one item per iteration, is the scan's stacked output."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import carry, collected
from tests.end_to_end.checks import check_grad, check_jit, check_vmap, primitives

XS = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
H = jnp.full(3, 0.5, dtype=jnp.float32)


def rnn_states(xs, h):
    outs = []
    for x in xs:
        h = jnp.tanh(h + x)
        outs.append(h)
    return jnp.stack(outs)


def source_of(fn) -> str:
    return transpiler.to_source(fn)


def test_the_items_are_the_scans_outputs_and_the_body_is_traced_once():
    assert "collects=(('outs', 0),)" in source_of(rnn_states)
    jaxpr = primitives(rnn_states, XS, H)
    assert jaxpr.count("scan[") == 1
    # Nothing carried for the list: no buffer written row by row, and the body traced once.
    assert "dynamic_update_slice" not in jaxpr and "scatter" not in jaxpr
    assert jaxpr.count("tanh") == 1
    check_jit(rnn_states, XS, H)
    check_grad(lambda h: rnn_states(XS, h).sum(), H)
    check_grad(lambda xs: rnn_states(xs, H).sum(), XS)
    check_vmap(rnn_states, jnp.stack([XS, -XS]), jnp.stack([H, -H]))


def probes(fn, *args) -> int:
    """How many times `runtime.carry` probes a loop body of converted `fn` when it is traced."""
    calls = []
    probe = carry.Carry._probe

    def counting(self, *a, **k):
        calls.append(self.site)
        return probe(self, *a, **k)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(carry.Carry, "_probe", counting)
        jax.jit(transpiler.convert(fn)).trace(*args)
    return len(calls)


def rnn_reading(xs, h):
    outs = [h]
    for x in xs:
        outs.append(jnp.tanh(outs[0] + x))
    return jnp.stack(outs)


def test_no_probe_of_the_body_where_the_list_is_only_appended_to():
    assert probes(rnn_states, XS, H) == 0
    assert probes(rnn_last, XS, H) == 0
    # Read otherwise: carried, so probed first (the buffer's type comes from the body).
    assert "collects=" not in source_of(rnn_reading)
    assert probes(rnn_reading, XS, H) == 1


# Reads of the last items before the iteration's append: the scan carries those items.


def rnn_last(xs, h):
    hs = [h]
    for x in xs:
        hs.append(jnp.tanh(hs[-1] + x))
    return jnp.stack(hs[1:])


def max_independent_sum(x):
    best = [x[0], jnp.maximum(x[0], x[1])]
    for i in range(2, x.shape[0]):
        best.append(jnp.maximum(best[i - 1], best[i - 2] + x[i]))
    return best[-1], len(best)


def fibonacci_like(x):
    seq = [x, x * 2.0, x * 3.0]
    for k in range(3, 12):
        a = seq[-3]
        b = seq[k - 2] * 0.5
        seq.append(a - b + seq[-1] * 0.25)
    return jnp.stack(seq)


def dp_row(prev, a, b):
    row = [prev[0] + 1]
    for j in range(1, b.shape[0] + 1):
        cost = jnp.where(a == b[j - 1], 0, 1)
        row.append(jnp.minimum(jnp.minimum(prev[j] + 1, row[j - 1] + 1), prev[j - 1] + cost))
    return jnp.stack(row)


@pytest.mark.parametrize(
    "fn, args, depth",
    [
        (rnn_last, (XS, H), 1),
        (max_independent_sum, (jnp.array([3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0]),), 2),
        (fibonacci_like, (jnp.float32(0.3),), 3),
        (dp_row, (jnp.arange(6), jnp.int32(2), jnp.array([1, 2, 3, 2, 1])), 1),
    ],
)
def test_reads_of_the_last_items_come_from_a_window_the_scan_carries(fn, args, depth):
    assert f", {depth}),)" in source_of(fn)
    jaxpr = primitives(fn, *args)
    assert jaxpr.count("scan[") == 1
    assert "dynamic_update_slice" not in jaxpr and "scatter" not in jaxpr
    assert probes(fn, *args) == 0
    check_jit(fn, *args)
    if jnp.issubdtype(args[0].dtype, jnp.floating):
        check_grad(lambda *a: jnp.sum(jnp.asarray(fn(*a)[0])), *args)
        check_vmap(fn, *(jnp.stack([a, a * 0.5]) for a in args))


def reads_after_the_append(xs, h):
    hs = [h]
    for x in xs:
        hs.append(jnp.tanh(x))
        h = h + hs[-2]
    return jnp.stack(hs), h


def reads_past_the_start(xs):
    hs = [xs[0]]
    for x in xs:
        hs.append(x + hs[-2])
    return jnp.stack(hs)


def reads_a_python_int_first(xs):
    out = [0]
    for x in xs:
        out.append(out[-1] + jnp.sum(x))
    return jnp.stack(out)


def repeats_its_items(x, y):
    row = [0, y]
    for j in range(0, 3):
        row.append(row[j])
    return row


def test_items_of_other_types_before_the_loop_are_read_as_they_are():
    # `row[j]` is `row[-2]` in every iteration; the Python int 0 is read as Python's int, not
    # as the float32 the loop carries it as after a promotion (fuzz p54433).
    check_jit(repeats_its_items, 0, jnp.float32(2.5))
    check_jit(repeats_its_items, 1.5, 2.5)
    check_jit(fibonacci_like, 0.3)


def test_reads_that_are_not_of_the_last_items_before_the_append_are_as_before():
    assert "collects=" not in source_of(reads_after_the_append)
    check_jit(reads_after_the_append, XS, H)
    # Out of range in the first iteration, as in Python.
    with pytest.raises(IndexError):
        reads_past_the_start(XS)
    with pytest.raises((IndexError, jax.errors.JaxRuntimeError), match="index out of range"):
        jax.jit(transpiler.convert(reads_past_the_start))(XS)  # (checked as the program runs)
    # The first read gives the Python int as it is: the list is carried as before.
    assert probes(reads_a_python_int_first, XS) == 1
    check_jit(reads_a_python_int_first, XS)


def with_items_before(xs, h):
    outs = [h, 2 * h]
    for i in range(xs.shape[0]):
        h = jnp.tanh(h + xs[i])
        outs.append(h)
    return jnp.stack(outs), len(outs), outs[-1], outs[1]


def python_numbers(xs):
    out = [1, 2]
    for _ in xs:
        out.append(3)
    return out


def ints_then_floats(xs):
    out = [1, 2]
    for x in xs:
        out.append(jnp.sum(x))
    return jnp.stack(out)


def bools(xs):
    signs = []
    for x in xs:
        signs.append(jnp.sum(x) > 0)
    return jnp.stack(signs)


def two_lists(xs, h):
    hs, sums = [], []
    for x in xs:
        h = h * 0.5 + x
        hs.append(h)
        sums.append(jnp.sum(h))
    return jnp.stack(hs), jnp.stack(sums)


def keys(key, xs):
    keys = []
    for _ in xs:
        key, sub = jax.random.split(key)
        keys.append(sub)
    return jax.random.key_data(jnp.stack(keys))


@pytest.mark.parametrize(
    "fn, args",
    [
        (with_items_before, (XS, H)),
        (python_numbers, (XS,)),
        (ints_then_floats, (XS,)),
        (bools, (XS,)),
        (two_lists, (XS, H)),
        (keys, (jax.random.key(0), XS)),
    ],
)
def test_collected_lists_hold_what_python_appends(fn, args):
    assert "collects=" in source_of(fn)
    check_jit(fn, *args)


def appends_twice(xs):
    out = []
    for x in xs:
        out.append(x)
        out.append(-x)
    return jnp.stack(out)


def appends_under_if(xs):
    out = []
    for x in xs:
        if jnp.sum(x) > 0:
            out.append(x)
    return transpiler.padded(out)


def appends_after_continue(xs):
    out = []
    for x in xs:
        if jnp.sum(x) > 0.5:
            continue
        out.append(x)
    return transpiler.padded(out)


def appends_until_break(xs):
    out = []
    for x in xs:
        if jnp.sum(x) > 0.5:
            break
        out.append(x)
    return transpiler.padded(out)


def reads_its_length(xs):
    out = []
    for x in xs:
        out.append(x * len(out))
    return jnp.stack(out)


def appends_what_it_holds(xs):
    out = [xs[0]]
    for x in xs:
        out.append(out[0] + x)
    return jnp.stack(out)


@pytest.mark.parametrize(
    "fn",
    [
        appends_twice,
        appends_under_if,
        appends_after_continue,
        appends_until_break,
        reads_its_length,
        appends_what_it_holds,
    ],
)
def test_lists_used_otherwise_are_carried_as_before(fn):
    assert "collects=" not in source_of(fn)
    if "padded" not in fn.__code__.co_names:
        check_jit(fn, XS)
        return
    (buffer, count), (eager, n) = jax.jit(transpiler.convert(fn))(XS), fn(XS)
    assert int(count) == n and n > 0
    np.testing.assert_allclose(buffer[:n], eager)


def items_of_another_shape(xs):
    out = [jnp.zeros(2)]
    for x in xs:
        out.append(x)
    return jnp.stack(out)


def test_items_of_another_shape_than_those_before_the_loop_unroll_it_as_before():
    # Not one array: the loop runs as Python, and stacking the items fails as it does there.
    assert "collects=(('out', 0),)" in source_of(items_of_another_shape)
    with pytest.raises(ValueError, match="same shape"):
        items_of_another_shape(XS)
    with pytest.raises(ValueError, match="same shape"):
        jax.jit(transpiler.convert(items_of_another_shape))(XS)


def centroids(points, start, iterations=3):
    c = start
    for _ in range(iterations):
        new = []
        for j in range(c.shape[0]):
            members = jnp.argmin(jnp.sum((points[:, None] - c) ** 2, axis=-1), axis=1) == j
            count = jnp.sum(members)
            if count > 0:
                m = jnp.sum(points * members[:, None], axis=0) / count
            else:
                m = c[j]
            new.append(m)
        c = jnp.stack(new)
    return c


def test_a_list_collected_in_a_loop_nested_in_another():
    points = jnp.array([[0.0, 0.0], [0.1, 0.2], [2.0, 2.0], [2.1, 1.9], [9.0, 9.0]])
    start = jnp.array([[0.0, 1.0], [2.0, 1.0], [50.0, 50.0]])
    assert "collects=(('new', 0),)" in source_of(centroids)
    check_jit(centroids, points, start)
    check_vmap(centroids, jnp.stack([points, points + 1.0]), jnp.stack([start, start]))


def empty_loop(xs):
    out = [0.5]
    for x in xs:
        out.append(jnp.sum(x))
    return len(out), jnp.stack(out)


def test_a_scan_of_no_iterations_leaves_the_items_before_it():
    check_jit(empty_loop, jnp.zeros((0, 3)))


def test_the_collector_refuses_any_other_number_of_appends():
    c = collected.Collector("out", [])
    c.start()
    with pytest.raises(collected.NotCollected):
        c.row()
    c.append(jnp.ones(2))
    c.append(jnp.ones(2))
    with pytest.raises(collected.NotCollected):
        c.row()
    c.start()
    c.append((jnp.ones(2), jnp.ones(2)))  # not an array: the carried list's error says so
    with pytest.raises(collected.NotCollected):
        c.row()


def weak_window(xs):
    hs = [100]
    for _ in xs:
        hs.append(hs[-1] + 10)
    return hs[-1] + jnp.int8(1)


def first_item_before_a_promotion(xs):
    outs = []
    h = 1
    for x in xs:
        outs.append(h)
        h = h * x
    return outs[0] + jnp.int8(127)


def fibonacci_plus(n):
    best = [0, 1]
    for i in range(2, 6):
        best.append(best[i - 1] + best[i - 2] + n)
    return best


@pytest.mark.parametrize(
    "fn, args",
    [
        (weak_window, (jnp.arange(1.0, 5.0),)),
        (first_item_before_a_promotion, (jnp.arange(1.0, 5.0),)),
        (fibonacci_plus, (1,)),
    ],
)
def test_python_numbers_keep_their_types_through_a_promotion(fn, args):
    # Helper 153: a loop staged again after a promotion collects nothing (its first items would
    # take the promoted type: int8 -115 read as int32 141).
    check_jit(fn, *args)


def grows_past_int32(xs, c):
    hs = [2**20]
    for _ in xs:
        hs.append(hs[-1] * 2048 + c)
    return hs


def divides_by_a_python_zero(xs, c):
    hs = [0.0]
    for _ in xs:
        hs.append(1.0 / hs[-1] + c)
    return hs


def adds_python_bools(xs):
    hs = [True]
    for x in xs:
        hs.append((hs[-1] + hs[-1]) & (x > 0))
    return hs


def inverts_a_python_bool(xs):
    hs = [True]
    for x in xs:
        hs.append(~hs[-1] | (x < 0))
    return hs


def starts_from_none(xs):
    hs = [None]
    for x in xs:
        prev = hs[-1]
        hs.append(x if prev is None else prev + x)
    return hs[1:]


@pytest.mark.parametrize(
    "fn, args, error",
    [
        (grows_past_int32, (jnp.arange(1.0, 4.0), 1), OverflowError),
        (divides_by_a_python_zero, (jnp.arange(1.0, 4.0), 1.0), ZeroDivisionError),
        (adds_python_bools, (jnp.arange(1, 5),), None),
        (inverts_a_python_bool, (jnp.arange(1, 5),), None),
        (starts_from_none, (jnp.arange(1.0, 4.0),), None),
    ],
)
def test_a_window_starts_from_arrays_only(fn, args, error):
    # Helper 154: a Python number read from the window computed as an array (wrapped in int32,
    # divided by zero, `True + True` a bool), and `None` raised JAX's ValueError: those lists are
    # carried as before, their first reads Python's.
    if error is None:
        check_jit(fn, *args)
        return
    with pytest.raises(error):
        jax.jit(fn)(*args)
    with pytest.raises(error):
        jax.jit(transpiler.convert(fn))(*args)
