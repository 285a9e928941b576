"""Comprehensions with an `if` filter: staged where the filter is traced, Python's elsewhere."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime.errors import StagingError
from tests.end_to_end.checks import check_grad, check_jit, check_vmap
from tests.end_to_end.test_errors import line_of

HERE = "test_comprehensions.py"


def kept_stats(x):
    kept = [v * 2 for v in x if v > 0]
    return sum(kept), len(kept), max(kept, default=-1.0), min(kept, default=-1.0)


def positive_sum(a, b, c):
    return sum(v * v for v in [a, b, c] if v > 0)


def positive_sum_from(x, start):
    return sum((v for v in x if v > 0), start)


def largest_below(x, limit):
    return max((v for v in x if v < limit), default=0.0), min(v for v in x if v > -limit)


def pairs_above(x, t):
    # two generators, two filters: Python's order (a's filter before b's loop)
    return sum(a * b for a in x if a > 0 for b in x if a + b > t)


@pytest.mark.parametrize(
    "x", [jnp.array([1.0, -2.0, 3.0]), jnp.array([-1.0, -2.0, -3.0]), jnp.zeros(3)]
)
def test_a_traced_filter_makes_a_list_of_traced_length(x):
    check_jit(kept_stats, x)
    check_jit(positive_sum_from, x, jnp.float32(0.5))
    check_jit(largest_below, x, 2.0)
    check_jit(pairs_above, x, 1.0)
    check_vmap(positive_sum_from, jnp.stack([x, -x]), jnp.array([0.5, 1.5]))


@pytest.mark.parametrize("args", [(1.0, -2.0, 3.0), (-1.0, -2.0, -3.0), (0.0, 2.0, 0.5)])
def test_a_traced_filter_over_a_python_list_of_traced_values(args):
    check_jit(positive_sum, *[jnp.float32(a) for a in args])
    if any(a > 0 for a in args):  # else Python's sum is the int 0, which has no gradient
        check_grad(positive_sum, *[jnp.float32(a) for a in args], argnums=(0, 1, 2))


def test_the_gradient_of_a_filtered_sum_counts_the_kept_items_only():
    x = jnp.array([1.0, -2.0, 3.0, 0.0])
    grad = jax.jit(jax.grad(lambda x: transpiler.convert(positive_sum_from)(x, 0.0)))(x)
    np.testing.assert_array_equal(np.asarray(grad), [1.0, 0.0, 1.0, 0.0])


def named_weights(params):
    return [name for name in params if name.startswith("w") if params[name] is not None]


def nested(rows):
    return [[v for v in row if v % 2] for row in rows if len(row) > 1]


def test_a_python_filter_gives_python_s_list():
    params = {"w1": 1, "b1": 2, "w2": None, "w3": 3}
    converted = transpiler.convert(named_weights)(params)
    assert converted == named_weights(params) == ["w1", "w3"] and type(converted) is list
    rows = [[1, 2, 3], [4], [5, 7, 8]]
    assert transpiler.convert(nested)(rows) == nested(rows) == [[1, 3], [5, 7]]


_CALLS = []


def noted(v):
    _CALLS.append(v)
    return v


def filtered_in_order(xs):
    return [noted(-v) for v in xs if noted(v) > 1]


def test_items_and_filters_run_in_python_s_order():
    _CALLS.clear()
    assert transpiler.convert(filtered_in_order)([1, 2, 3]) == [-2, -3]
    assert _CALLS == [1, 2, -2, 3, -3]


def scaled_while_large(x, scale):
    steps = 0
    while sum(v for v in x if v > 1.0) > 2.0 and steps < 10:
        x = x * scale
        steps += 1
    return x, steps


def kept_per_row(x, t):
    total = 0.0
    for row in x:
        total = total + sum(v - t for v in row if v > t)  # reads the loop's `t`
        t = t + 0.5
    return total


def test_in_a_staged_loop_and_its_test_it_reads_the_loop_s_variables():
    x = jnp.array([1.5, 3.0, 0.5])
    check_jit(scaled_while_large, x, 0.5)
    rows = jnp.array([[1.0, 2.0], [0.5, 3.0], [2.0, 2.5]])
    check_jit(kept_per_row, rows, jnp.float32(0.75))


def any_noted(xs):
    return any(noted(v) for v in xs if v > 0)


def bound_in_filter(xs):
    return [y for v in xs if (y := v * 2) > 2], y


def test_lazy_generators_and_walrus_stay_python():
    # `any` stops at the first true item: its generator is not turned into a list
    _CALLS.clear()
    assert transpiler.convert(any_noted)([0, 1, 2]) is True
    assert _CALLS == [1]
    # `:=` binds in the enclosing function: left as it is
    assert transpiler.convert(bound_in_filter)([1, 2, 3]) == bound_in_filter([1, 2, 3])


def kept_pairs(x):
    return [(v, -v) for v in x if v > 0]


def test_what_a_list_of_traced_length_cannot_hold_is_refused_at_the_comprehension():
    line = line_of(kept_pairs, "return [(v, -v)")
    with pytest.raises(StagingError, match=f"{HERE}:{line}, if statement"):
        jax.jit(transpiler.convert(kept_pairs))(jnp.array([1.0, -2.0]))


def test_the_comprehension_is_a_nested_function_in_the_generated_source():
    source = transpiler.to_source(positive_sum)
    assert "def comprehension(items):" in source
    assert "return rt__.sum_(rt__.call(comprehension, [a, b, c]))" in source


def any_and_all_kept(x):
    return any([v > 1 for v in x if v > 0]), all([v > 1 for v in x if v > 0])


def any_of_kept_rows(x):
    out = []
    for v in x:
        if v > 0:
            out.append(jnp.stack([v, v]))
    return any(out)


@pytest.mark.parametrize("x", [[1.0, -2.0, 3.0], [-1.0, -2.0], [0.5, 2.0], [2.0, 0.0, 3.0]])
def test_any_and_all_of_a_list_of_traced_length_leave_out_its_padding(x):
    check_jit(any_and_all_kept, jnp.array(x))
    # Python refuses the truth of a row of two; here whatever the length (it may be 0)
    with pytest.raises(StagingError, match="the item is float32"):
        jax.jit(transpiler.convert(any_of_kept_rows))(jnp.array(x))


def start_read_first(xs):
    box = [0]

    def keep(v):
        box[0] += 1
        return v > 0

    return sum((v for v in xs if keep(v)), box[0])


def exhausted_in_filter(xs):
    it = iter([1])
    try:
        return sum(v for v in xs if next(it, None) is not None or _raise_stop())
    except RuntimeError:
        return "RuntimeError"


def _raise_stop():
    raise StopIteration


def test_python_s_order_and_a_generator_s_stop_iteration_are_kept():
    # `start` is evaluated before the items: a start that is not a constant stays Python's
    assert transpiler.convert(start_read_first)([1, -1, 2]) == start_read_first([1, -1, 2]) == 3
    # PEP 479: a StopIteration raised in a generator is a RuntimeError
    assert transpiler.convert(exhausted_in_filter)([1, 2]) == "RuntimeError"


def kept_then_changed(x):
    k = [v for v in x if v is not None]
    k.append(x[0])
    k[0] = x[1]
    last = k.pop()
    return isinstance(k, list), len(k), k[0], last


def popped_from_kept(x):
    k = [v for v in x if v > 0]
    last = k.pop()
    return last, len(k), sum(k)


def test_the_list_is_python_s_where_its_length_is_known_and_changes_in_place():
    x = jnp.array([1.0, -2.0, 3.0])
    check_jit(kept_then_changed, x)
    check_jit(popped_from_kept, x)


def kept_of_kept(x):
    return sum([v for v in [w * 2 for w in x if w > 0] if v < 3], 0.0)


def test_a_filtered_comprehension_in_the_first_iterable_of_another_is_converted():
    source = transpiler.to_source(kept_of_kept)
    assert source.count("def comprehension") == 2
    assert transpiler.convert(kept_of_kept)([1.0, -2.0, 3.0]) == 2.0


def not_in_seen(xs):
    seen = []
    for i in range(3):
        seen.append(xs[i])
    return sum(v for v in xs if v not in seen)


def scaled_by_log(xs):
    log = []
    log.append(2.0)
    return sum([v * len(log) for v in xs if v > 0])


def in_tests_and_loops(xs):
    total = 0.0
    if len([v for v in xs if v > 0]) > 1:
        total = total + 1.0
    for v in [u for u in xs if u > 1]:
        total = total + v
    while len([u for u in xs if u > total]) > 2:
        total = total + 1.0
    assert len([u for u in xs if u > -10]) > 0
    return total, [v for v in xs if len([u for u in xs if u > v]) > 0]


def test_lists_read_only_in_a_comprehension_keep_their_appends():
    # The list's only read is in the comprehension's function: its appends must stay.
    xs = jnp.array([1.0, 2.0, 3.0, 4.0])
    check_jit(not_in_seen, xs)
    check_jit(scaled_by_log, xs)
    assert transpiler.convert(scaled_by_log)([1.0, -2.0]) == scaled_by_log([1.0, -2.0]) == 1.0


def test_comprehensions_in_tests_loops_and_other_comprehensions():
    xs = [1.0, -2.0, 3.0, 0.5]
    assert transpiler.convert(in_tests_and_loops)(xs) == in_tests_and_loops(xs)


def reads_names_like_the_generated_ones(xs):
    stopped, items, comprehension = 2, 3, 4
    return sum(v * stopped for v in xs if v > 0) + sum([v * items * comprehension for v in xs if v])


def test_the_generated_names_shadow_none_of_the_user_s():
    assert transpiler.convert(reads_names_like_the_generated_ones)([1, -2, 3]) == 8 + 24


def filtered_twice(x):
    pos = [v for v in x if v > 0]
    big = [v * 2 for v in pos if v > 1]
    return sum(big, 0.0), len(big), sum(v for v in pos if v < 1)


def loops_over_a_filtered_list(x):
    pos = [v for v in x if v > 0]
    scaled, pairs = [], []
    for i, v in enumerate(pos):
        if v > 1:
            scaled.append(v * i)
    for a, b in zip(pos, x):
        if a > b:
            pairs.append(a - b)
    return sum(scaled), len(scaled), sum(pairs), len(pairs)


def filtered_per_row(rows):
    kept = []
    for row in rows:
        for v in [v for v in row if v > 0]:
            kept.append(v)
    return sum(kept), len(kept)


@pytest.mark.parametrize(
    "fn, x",
    [
        (filtered_twice, [0.5, 2.0, -1.0, 3.0]),
        (filtered_twice, [-0.5, -2.0]),
        (loops_over_a_filtered_list, [0.5, 2.0, -1.0, 3.0]),
        (filtered_per_row, [[0.5, 2.0, -1.0], [-3.0, 1.0, 4.0]]),
    ],
)
def test_a_loop_over_a_list_of_traced_length_appends_up_to_its_capacity(fn, x):
    # The loop takes at most as many items as the list has room for: that sizes its appends.
    x = jnp.array(x)
    check_jit(fn, x)
    check_grad(lambda x: fn(x)[0], x)


def odd_below(n):
    return [v for v in range(n) if v % 2 == 1]


def test_a_filtered_comprehension_over_a_traced_range_is_refused_as_itself():
    line = line_of(odd_below, "return [v")
    with pytest.raises(StagingError) as raised:
        transpiler.jit(odd_below)(5)
    message = str(raised.value)
    assert f"test_comprehensions.py:{line}" in message
    assert "A list comprehension with a filter" in message and "range(N) if v < n" in message
    assert "_items" not in message  # the list's generated name


def maps_a_filtered_list(x):
    keep = [v for v in x if v > 0]
    squares = [v * w + i for i, (v, w) in enumerate(zip(keep, keep))]
    grown = []
    for v in x:
        if v < 1:
            grown.append(v)
    return sum(squares), len(squares), sum(v * 2 for v in keep), max(v + 1 for v in grown)


@pytest.mark.parametrize("x", [[1.0, -2.0, 3.0, 0.5], [-1.0, -2.0, 3.0, 0.5]])
def test_a_comprehension_without_a_filter_over_a_list_of_traced_length_is_staged(x):
    x = jnp.array(x)
    check_jit(maps_a_filtered_list, x)
    check_grad(lambda x: maps_a_filtered_list(x)[0] + maps_a_filtered_list(x)[3], x)


def copies_a_filtered_generator(x):
    kept = list(v for v in x if v < 0)
    return len(kept), sum(kept)


def tuple_of_a_filtered_generator(x):
    positive = tuple(i for i in range(4) if x[i] > 0)
    return len(positive)


def test_list_of_a_filtered_generator_is_the_list_it_builds():
    # `list(...)` of the list the rewritten generator built was refused (a list of traced
    # length), though the comprehension written the same way is staged.
    x = jnp.array([1.0, -2.0, 3.0, -4.0])
    check_jit(copies_a_filtered_generator, x)
    check_jit(copies_a_filtered_generator, -x)


def test_tuple_of_a_filtered_generator_is_refused_naming_the_variable():
    # The message named the generated `kept_items`, and an append the user did not write.
    with pytest.raises(StagingError, match=r"'positive' is built by a generator expression") as e:
        jax.jit(transpiler.convert(tuple_of_a_filtered_generator))(jnp.arange(4.0))
    assert f"test_comprehensions.py:{line_of(tuple_of_a_filtered_generator, 'tuple(')}" in str(
        e.value
    )


def doubles_a_copied_generator(x):
    ys = list(v for v in x if v > 0)
    zs = [y * 2 for y in ys]
    return len(zs), sum(zs)


def test_a_comprehension_over_a_copied_filtered_generator_is_staged():
    # Python's comprehension iterated the list of traced length: refused, where the same list
    # made by a comprehension was looped over as a staged `for`.
    check_jit(doubles_a_copied_generator, jnp.array([1.0, -2.0, 3.0]))
