"""A `for` over a range whose body needs the index as a Python int runs unrolled, as Python: the
index's identity (`i is ZERO`), a negative power of it, a shape or a static slice bound made from
it, an `if` on it that decides how long a list grows. Staged as a scan, the index would be an
int32 tracer: a different result, or JAX's error for a tracer where it needs a value."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import assert_tree_close, check_grad, check_jit, check_vmap, primitives

ZERO = 0


def identity_of_the_index(x):
    for i in range(3):
        if i is ZERO:
            x = x + 10
        x = x * 2
    return x


def negative_power_of_the_index(x):
    acc = x
    for i in range(1, 4):
        acc = acc + x * i**-1
    return acc


def shape_from_the_index(x):
    acc = 0.0
    for i in range(1, 4):
        acc = acc + jnp.sum(jnp.ones(i) * x)
    return acc


def concatenated_pieces(x):
    pieces = []
    for i in range(1, 4):
        pieces.append(jnp.ones((i + 1, 2)) * x)
    return jnp.concatenate(pieces)


def slice_bound_from_the_index(m):
    acc = 0.0
    for i in range(1, 3):
        acc = acc + jnp.sum(m[:, :i])
    return acc


def static_argument_from_the_index(x):
    acc = 0.0
    for i in range(1, 4):
        acc = acc + jnp.sum(jnp.tril(jnp.ones((3, 3)) * x, k=i - 1))
    return acc


def every_other_state(xs, h):
    outs = []
    for t in range(xs.shape[0]):
        h = jnp.tanh(h + xs[t])
        if t % 2 == 0:
            outs.append(h)
    return jnp.stack(outs)


def diagonal_of_two_indices(m):
    outs = []
    for t in range(3):
        for u in range(3):
            if t == u:
                outs.append(m[t, u] * u)
    return jnp.stack(outs)


def diagonal_of_aliased_indices(m):
    outs = []
    for t in range(3):
        k = t
        for u in range(3):
            w = u + 0
            if k == w:
                outs.append(m[t, u])
    return jnp.stack(outs)


def upper_triangle_by_the_inner_index(m):
    outs = []
    for t in range(3):
        row = m[t] * 2.0
        for u in range(t, 3):
            if u > t:
                outs.append(row[u])
    return jnp.stack(outs)


def text_of_the_enumerate_index(xs):
    s = 0.0
    for i, v in enumerate(xs):
        if str(i) == "1":
            s = s + v
    return s


def type_of_a_zipped_range_item(xs):
    s = 0.0
    for i, v in zip(range(3), xs):
        s = s + v * isinstance(i, int)
    return s


def zipped_pairs_repeated_by_the_index(xs, ys):
    n = 0
    for i, p in enumerate(zip(xs, ys)):
        n += len(p * i)  # a tuple repeated: Python's index, not a traced one
    return n


CASES = [
    (identity_of_the_index, (1.0,)),
    (negative_power_of_the_index, (1.0,)),
    (shape_from_the_index, (1.0,)),
    (concatenated_pieces, (2.0,)),
    (slice_bound_from_the_index, (jnp.arange(6.0).reshape(2, 3),)),
    (static_argument_from_the_index, (1.5,)),
    (every_other_state, (jnp.ones((5, 2)), jnp.zeros(2))),
    (diagonal_of_two_indices, (jnp.arange(9.0).reshape(3, 3),)),
    (upper_triangle_by_the_inner_index, (jnp.arange(9.0).reshape(3, 3),)),
    (diagonal_of_aliased_indices, (jnp.arange(9.0).reshape(3, 3),)),
    # Over a traced array, the index of `enumerate` (and a zipped range's) is still Python's.
    (text_of_the_enumerate_index, (jnp.array([1.0, 2.0, 3.0]),)),
    (type_of_a_zipped_range_item, (jnp.array([1.0, 2.0, 3.0]),)),
    (zipped_pairs_repeated_by_the_index, (jnp.arange(3.0), jnp.arange(3.0))),
]


@pytest.mark.parametrize("fn, args", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_the_index_used_as_a_python_int_runs_unrolled(fn, args):
    expected = fn(*args)
    assert_tree_close(transpiler.jit(fn)(*args), expected)
    assert_tree_close(transpiler.convert(fn)(*args), expected)


def shape_in_a_staged_while(x, n):
    while x < 10:
        x = x + jnp.sum(jnp.ones(n))
    return x


def test_a_shape_from_a_traced_value_in_a_staged_loop_names_the_line():
    where = r"where JAX needs a Python value \(\S*test_loop_index.py:\d+: x = x"
    with pytest.raises(StagingError, match=where):
        transpiler.jit(shape_in_a_staged_while)(1.0, 3)


def numpy_shape_from_the_index(x):
    acc = x
    for i in range(3):
        acc = acc + np.zeros(i).sum() + i
    return acc


def index_times_a_large_int(x):
    acc = x
    for i in range(3):
        acc = acc + (i * 2654435761) % 1000
    return acc


@pytest.mark.parametrize("fn", [numpy_shape_from_the_index, index_times_a_large_int])
def test_what_a_traced_index_cannot_do_runs_unrolled(fn):
    assert float(transpiler.jit(fn)(0.0)) == fn(0.0)


def array_plus_a_list(x):
    for i in range(3):
        x = x + [i]
    return x


def test_an_operator_error_of_a_traced_value_is_the_programs_also_unrolled():
    # The scan's TypeError runs the loop unrolled, where it is raised again, at its line.
    with pytest.raises(TypeError, match=r"unsupported operand(.|\n)*test_loop_index.py:\d+: x = x"):
        transpiler.jit(array_plus_a_list)(jnp.ones(2))


def show(message):
    print(message)


def printed_steps(xs):
    for i, v in enumerate(xs):
        show(f"step {i}")
        xs = xs * v
    return xs


def test_the_enumerate_index_over_a_traced_array_prints_as_python(capsys):
    xs = jnp.array([1.0, 2.0])
    expected = printed_steps(xs)
    assert capsys.readouterr().out == "step 0\nstep 1\n"
    assert_tree_close(transpiler.jit(printed_steps)(xs), expected)
    assert capsys.readouterr().out == "step 0\nstep 1\n"


def prints_a_fraction_of_the_index(y):
    for i in range(3):
        y = y * 2
        print("step", i, y, i / 3)
    return y


def prints_a_float_bound_from_the_index(y):
    for i in range(3):
        y = y * 2
        frac = i / 3
        print("frac", frac + 1, f"{i * 0.1}")
    return y


def prints_ints_made_from_the_index(y):
    for i in range(3):
        y = y * 2 + i / 3
        print("step", i, i * 2, 2 * i + 1, (i + 1) // 2, -i)
    return y


def prints_a_float_divided_in_place(y):
    for i in range(3):
        y = y * 2
        j = i + 1
        j /= 3
        print(j)
    return y


SCALE = 0.1


def prints_the_index_times_a_python_float(y):
    for i in range(3):
        y = y * 2
        print(i * SCALE, math.pi * i, float(i) * 2)
    return y


def prints_floats_unpacked_and_chosen(y):
    for i in range(3):
        y = y * 2
        a, b = i, i / 3
        print(a)
        print(b, max(i, 0.5), 0.5 if i == 1 else i, i or 0.5)
    return y


def prints_an_array_made_with_the_index(y, xs):
    for i in range(3):
        y = y * 2 + xs[i] * i  # an array in Python too
        print(y)
    return y


@pytest.mark.parametrize(
    "fn, staged",
    [
        (prints_a_fraction_of_the_index, False),
        (prints_a_float_bound_from_the_index, False),
        (prints_ints_made_from_the_index, True),  # an int prints as Python's: a scan
        (prints_a_float_divided_in_place, False),
        (prints_the_index_times_a_python_float, False),
        (prints_floats_unpacked_and_chosen, False),  # a join of 1 and 0.5 prints 1.0 staged
        (prints_an_array_made_with_the_index, True),
    ],
)
def test_a_float_made_from_the_index_prints_python_digits(fn, staged, capfd):
    # `i / 3` of a staged index is a float32: `0.33333334` printed, where Python prints
    # `0.3333333333333333`; such a loop runs unrolled, as for text made from the index.
    args = (jnp.float32(1.0), jnp.arange(3.0))[: fn.__code__.co_argcount]
    fn(*args)
    expected = capfd.readouterr().out
    jax.jit(transpiler.convert(fn))(*args)
    jax.effects_barrier()
    assert capfd.readouterr().out == expected
    assert ("items_as_python=True" not in transpiler.to_source(fn)) == staged


def raise_by_index_caught(x):
    s = 0
    for i in range(3):
        try:
            if i == 1:
                raise KeyError
            s = s + x * i
        except KeyError:
            s = s - 100
    return s


def test_a_raise_the_index_decides_inside_a_try_runs_as_python():
    # Staged, `if i == 1: raise` would be a check made as the program runs, which the `except`
    # cannot catch (a JaxRuntimeError); with the loop's index a Python int the raise is Python's
    # and caught (AutoGraph's nested_control_flow tests, translated: helper 135).
    check_jit(raise_by_index_caught, jnp.int32(2))
    check_vmap(raise_by_index_caught, jnp.arange(3))


def centroids_of_labels(labels, points):
    new = []
    for j in range(3):
        members = labels == j
        new.append(jnp.sum(points * members[:, None], axis=0) / jnp.maximum(jnp.sum(members), 1))
    return jnp.stack(new)


def test_an_item_of_an_array_made_from_the_index_keeps_the_loop_one_scan():
    # `members[:, None]` indexes the array `labels == j` (Lloyd's k-means step): an array
    # either way, so the loop is one scan, not three copies of its body.
    labels = jnp.array([0, 2, 1, 2, 0])
    points = jnp.arange(10.0).reshape(5, 2)
    assert primitives(centroids_of_labels, labels, points).count("scan[") == 1
    check_jit(centroids_of_labels, labels, points)
    check_vmap(centroids_of_labels, jnp.stack([labels, labels[::-1]]), jnp.stack([points] * 2))
    check_grad(lambda p: jnp.sum(centroids_of_labels(labels, p) ** 2), points)


def nearest_three(points, q):
    best_i = [-1, -1, -1]
    best_d = [jnp.inf, jnp.inf, jnp.inf]
    for i in range(points.shape[0]):
        d = jnp.sum((points[i] - q) ** 2)
        if d < best_d[0]:
            best_d = [d, best_d[0], best_d[1]]
            best_i = [i, best_i[0], best_i[1]]
        elif d < best_d[1]:
            best_d = [best_d[0], d, best_d[1]]
            best_i = [best_i[0], i, best_i[1]]
    return jnp.stack(best_d), jnp.stack(best_i)


def parity_flags(x):
    for i in range(4):
        p = [i % 2 == 0, i]
        x = x + (p[0] + p[0])  # True + True is 2 in Python, a bool's `or` staged
    return x


def test_a_list_the_body_builds_of_the_index_keeps_the_loop_one_scan():
    # `best_i = [i, best_i[0], best_i[1]]`: its items are the index and items of itself, Python
    # ints used as ints; unrolled, 64 points made a 25,000x slower program (helper 157).
    points = jax.random.normal(jax.random.PRNGKey(0), (12, 3))
    q = jnp.zeros(3)
    assert primitives(nearest_three, points, q).count("scan[") == 1
    check_jit(nearest_three, points, q)
    check_vmap(nearest_three, jnp.stack([points, points[::-1]]), jnp.stack([q, q + 1.0]))
    check_grad(lambda p: jnp.sum(nearest_three(p, q)[0]), points)
    # An item that may be a bool, in arithmetic: Python's, so the loop runs unrolled.
    assert "scan[" not in primitives(parity_flags, jnp.float32(0.0))
    check_jit(parity_flags, jnp.float32(0.0))


def kept_by_position(xs, t):
    kept = []
    for i in range(xs.shape[0]):
        if xs[i] > t:
            kept.append(xs[i] * i)
    return transpiler.padded(kept)


def kept_rows(xs, t):
    kept = []
    for i, x in enumerate(xs):
        if x > t:
            kept.append(x * i)
    return sum(kept)


def named_rows(rows):
    names = []
    for i, r in enumerate(rows):
        names.append(f"{i}:{r}")
    return names


def test_appending_what_an_item_of_an_array_makes_of_the_index_keeps_the_loop_one_scan():
    # `xs[i] * i`, `x * i` of `enumerate(xs)`: arrays in Python too. Unrolled, a filter over
    # 256 items ran 13x slower and compiled 371x slower (helper 157).
    xs = jnp.array([0.5, 3.0, -1.0, 4.0, 2.5])
    for fn in (kept_by_position, kept_rows):  # the body (and a first iteration), not 5 copies
        assert primitives(fn, xs, 1.0).count(" gt ") <= 2
    check_jit(kept_rows, xs, 1.0)
    check_vmap(kept_rows, jnp.stack([xs, -xs]), jnp.array([1.0, -1.0]))
    check_grad(lambda x: kept_rows(x, 1.0), xs)
    # Room for one item per iteration, no more (the first iteration's `if` made room for one).
    buffer, count = jax.jit(transpiler.convert(kept_by_position))(xs, 1.0)
    assert int(count) == 3 and buffer.shape == (5,)
    np.testing.assert_array_equal(buffer[:3], kept_by_position(xs, 1.0)[0])
    # The rows of a Python list are Python's: their text is the values', as Python's loop has it.
    rows = [jnp.float32(1.5), jnp.float32(2.0)]
    assert transpiler.convert(named_rows)(rows) == named_rows(rows) == ["0:1.5", "1:2.0"]
    got = []

    def traced(x):  # (under a trace: the loop over the list still runs as Python)
        got.extend(transpiler.convert(named_rows)(rows))
        return x

    jax.jit(traced)(1.0)
    assert got == ["0:1.5", "1:2.0"]


def backtrack(scores, state):
    pointers = []
    for s in scores:
        pointers.append(jnp.argmax(s, axis=0))
    table = jnp.stack(pointers)
    path = [state]
    for t in range(table.shape[0] - 1, -1, -1):
        state = table[t][state]
        path.append(state)
    return jnp.stack(path)


def test_an_item_of_a_stacked_list_read_at_the_index_keeps_the_loop_one_scan():
    # `table = jnp.stack(pointers)` is an array: `table[t]` reads an array at the index, not a
    # list (a Viterbi backtrack, 4x slower and 13x slower to compile unrolled: helper 157).
    scores = jax.random.normal(jax.random.PRNGKey(1), (6, 4, 4))
    state = jnp.int32(2)
    graph = primitives(backtrack, scores, state)
    assert graph.count("scan[") == 2 and graph.count("dynamic_slice") <= 3
    check_jit(backtrack, scores, state)
    check_vmap(backtrack, jnp.stack([scores, -scores]), jnp.array([2, 0]))


def printed_fractions(x, n=3):
    hist = [0, 0]
    for i in range(3):
        hist = [i, hist[0]]
        print(hist[0] / n)
        x = x + 1.0
    return x


def last_two_as_text(x):
    last = [-1, -1]
    for i in range(4):
        last = [i, last[0]]
        x = x + 1.0
    return x, str(last[0]) + "," + str(last[1])


def test_an_item_of_a_list_of_the_index_is_python_where_python_shows_it(capfd):
    # A float made of it printed, text made of it after the loop: Python's int (helper 158).
    jax.block_until_ready(jax.jit(transpiler.convert(printed_fractions))(jnp.float32(0.0)))
    assert capfd.readouterr().out == "0.0\n0.3333333333333333\n0.6666666666666666\n"
    got = []

    def traced(x):
        y, text = transpiler.convert(last_two_as_text)(x)
        got.append(text)
        return y

    jax.jit(traced)(jnp.float32(0.0))
    assert got == ["3,2"]


def pair_summing_to(a, b, target):
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            if a[i] + b[j] == target:
                return i, j
    return -1, -1


def test_indices_returned_from_nested_loops_keep_them_staged():
    # `return i, j`: the return value is a tuple of the indices, given back as the loops'
    # variables are (arrays after staged loops); unrolled, 64 x 64 took 25 s to compile.
    a, b = jnp.arange(16), jnp.arange(16) * 100
    graph = primitives(pair_summing_to, a, b, 1203)
    assert graph.count("while[") <= 3 and graph.count(" eq ") <= 3  # (a first iteration apart)
    for target in (1203, 7):
        check_jit(pair_summing_to, a, b, target)


def backtrack_same_name(scores, state):
    pointers = []
    for s in scores:
        pointers.append(jnp.argmax(s, axis=0))
    pointers = jnp.stack(pointers)  # the list, stacked under its own name
    path = [state]
    for t in range(pointers.shape[0] - 1, -1, -1):
        state = pointers[t][state]
        path.append(state)
    return jnp.stack(path)


def test_a_list_stacked_under_its_own_name_is_read_as_an_array_after():
    scores = jax.random.normal(jax.random.PRNGKey(2), (6, 4, 4))
    state = jnp.int32(1)
    graph = primitives(backtrack_same_name, scores, state)
    assert graph.count("scan[") == 2 and graph.count("dynamic_slice") <= 3
    check_jit(backtrack_same_name, scores, state)
    check_vmap(backtrack_same_name, jnp.stack([scores, -scores]), jnp.array([1, 3]))


class _Layers:
    """A Python sequence class that takes only Python ints, as NNX's `List` does."""

    def __init__(self, weights):
        self._weights = weights

    def __len__(self):
        return len(self._weights)

    def __getitem__(self, i):
        if not isinstance(i, int):
            raise TypeError("Invalid index type")
        return self._weights[i]


LAYERS = _Layers([jnp.eye(2) * (k + 1) for k in range(3)])


def through_layers(x):
    for i in range(len(LAYERS)):
        x = jnp.tanh(LAYERS[i] @ x)
    return x


def test_a_sequence_class_read_at_the_index_runs_the_loop_unrolled():
    # (helper 164: `model.layers[i]` of an `nnx.List` raised NNX's TypeError under jit) Its
    # `__getitem__` refuses a traced index: the loop runs unrolled, the index Python's.
    check_jit(through_layers, jnp.array([0.5, -0.25]))
