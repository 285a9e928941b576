"""Ternaries, and/or/not, chained comparisons: Python semantics and staged semantics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import check_grad, check_jit, check_python, check_vmap, primitives


def abs_ternary(x):
    return x if x > 0 else -x


@pytest.mark.parametrize("x", [-2.0, 3.0])
def test_ternary_under_jit_grad_python(x):
    check_jit(abs_ternary, jnp.float32(x))
    check_grad(abs_ternary, jnp.float32(x))
    check_python(abs_ternary, x)
    check_python(abs_ternary, int(x))


def log_or_zero(x):
    return jnp.log(x) if x > 0 else 0.0


def test_ternary_under_vmap_is_a_select_or_a_cond():
    check_vmap(abs_ternary, jnp.array([-2.0, 3.0, 0.0]))
    check_vmap(log_or_zero, jnp.array([-2.0, 3.0, 0.0]))
    # Negation is cheap, and its derivative is the cond's: a select. log's is infinite at 0:
    # a select of log on its input masked by the condition (the branch not taken sees 1).
    assert "select_n" in primitives(abs_ternary, 1.0) and "cond[" not in primitives(
        abs_ternary, 1.0
    )
    graph = primitives(log_or_zero, 1.0)
    assert "cond[" not in graph and "select_n b 1.0:f32[] a" in graph
    assert float(jax.jit(jax.grad(transpiler.convert(log_or_zero)))(0.0)) == 0.0


def test_ternary_is_lazy_for_python_values():
    calls = []

    def f(p):
        return calls.append("yes") or 1 if p else calls.append("no") or 2

    converted = transpiler.convert(f)
    assert converted(True) == 1 and converted(0) == 2
    assert calls == ["yes", "no"]


def python_and_or(a, b, default):
    return (a and b) or default


@pytest.mark.parametrize(
    "args",
    [(0, 5, "d"), (3, 5, "d"), (3, 0, "d"), ([], [1], None), ([2], [], (1,)), (None, 1, 0)],
)
def test_and_or_return_operands_like_python(args):
    check_python(python_and_or, *args)


def test_and_or_short_circuit_python_values():
    calls = []

    def touch(v):
        calls.append(v)
        return v

    def f(a):
        return a and touch("and") or touch("or")

    converted = transpiler.convert(f)
    assert converted(0) == "or" and calls == ["or"]
    assert converted(1) == "and" and calls == ["or", "and"]


def traced_logic(x, y):
    return (x > 0 and y > 0) or not x < -1


@pytest.mark.parametrize("x,y", [(1.0, 1.0), (-2.0, 1.0), (1.0, -1.0), (-0.5, -3.0)])
def test_and_or_not_with_traced_operands(x, y):
    check_jit(traced_logic, jnp.float32(x), jnp.float32(y))


def test_and_or_not_under_vmap():
    check_vmap(traced_logic, jnp.array([1.0, -2.0, 1.0, -0.5]), jnp.array([1.0, 1.0, -1.0, -3.0]))


def value_or(x, fallback):
    return x or fallback


def test_or_with_traced_values_selects_an_operand():
    for x in (0.0, 2.5):
        check_jit(value_or, jnp.float32(x), jnp.float32(7.0))
        check_grad(value_or, jnp.float32(x), jnp.float32(7.0), argnums=(0, 1))


def doubled_or_halved(x):
    return x > 1 and x * 2 or x / 2


def shifted_or_five(x):
    return x > 0 and x - 1 or 5.0  # x == 1: `x - 1` is 0, false: 5.0


def sign_of(x, y):
    out = []
    for v in (x, y):
        out.append(v > 0 and 1.0 or -1.0)
    return out


def root_or_zero(x):
    return x > 0 and jnp.sqrt(x) or 0.0


def inverse_or_zero(x):
    return x != 0 and 1.0 / x or 0.0


def value_or_root(x):
    return x or jnp.sqrt(x - 1.0)


def root_if(x, y):
    return y and jnp.sqrt(x)


@pytest.mark.parametrize("x", [-1.0, 0.0, 0.5, 4.0])
def test_and_or_take_no_nan_from_the_operand_not_taken_in_a_gradient(x):
    # `where(x > 0, sqrt(x), 0)` has a NaN gradient at x = -1 (0 * inf); Python's is 0.
    for fn in (root_or_zero, inverse_or_zero):
        check_grad(fn, jnp.float32(x))
        assert jax.jit(jax.grad(transpiler.convert(fn)))(x) == jax.grad(fn)(x)
    if x > 0:
        assert jax.jit(jax.grad(transpiler.convert(value_or_root)))(x) == 1.0
    assert jax.jit(jax.grad(transpiler.convert(root_if)))(x, 0.0) == 0.0
    grads = jax.vmap(jax.grad(transpiler.convert(root_or_zero)))(jnp.array([x, 4.0]))
    assert float(grads[0]) == float(jax.grad(root_or_zero)(x)) and float(grads[1]) == 0.25


_HOST_CALLS = []


def value_or_noted(x, y):
    return x or jax.debug.callback(_HOST_CALLS.append, y) or y


def first_nonzero(a, b, c, d, e, f, g, h):
    return a or b or c or d or e or f or g or h


def test_the_right_operand_of_or_runs_once_and_chains_stay_linear():
    # The right operand is evaluated once, in its branch: its effects happen once, where
    # Python's do. A chain of `or`s of plain values is a chain of selects (each truth test is
    # cheap: `staging.truth` reads a float's bits), never a cond per operand.
    _HOST_CALLS.clear()
    for x in (0.0, 2.0):
        out = transpiler.jit(value_or_noted)(jnp.float32(x), jnp.float32(3.0))
        jax.effects_barrier()
        assert float(out) == (x or 3.0)
    assert [float(v) for v in _HOST_CALLS] == [3.0]
    args = [jnp.float32(v) for v in (0, 0, 0, 0, 0, 0, 5, 7)]
    check_jit(first_nonzero, *args)
    assert primitives(first_nonzero, *args).count("cond[") == 0
    # -0.0 is false, a subnormal and NaN are true, as Python reads them
    for values in ((-0.0, 0, 1e-45, 0, 0, 0, 5, 7), (0, -0.0, 0, float("nan"), 0, 0, 0, 7)):
        check_jit(first_nonzero, *[jnp.float32(v) for v in values])


def scaled_or_zero(x):
    return x > 0 and _scaled(x) or 0.0


def _scaled(x):
    return 2 * x


@pytest.mark.parametrize("x", [3.0, 0.5, 1.0, 2.0, -2.0])
def test_the_and_or_idiom_with_a_traced_condition_is_one_of_two_values(x):
    # `a and b or c`: b where a and b are true, else c; `a and b` alone (a bool, or b) is
    # never the result.
    for fn in (doubled_or_halved, shifted_or_five):
        check_python(fn, x)
        check_jit(fn, jnp.float32(x))
        check_grad(fn, jnp.float32(x))
    check_jit(sign_of, jnp.float32(x), jnp.float32(-x))
    check_vmap(shifted_or_five, jnp.array([1.0, 2.0, -2.0, x]))


def printed_or_zero(x):
    return x > 0 and _printed(x) or 0.0


def _printed(x):
    print("scaled", x)
    return 2 * x


@pytest.mark.parametrize("x", [2.0, -1.0])
def test_the_and_or_idiom_calling_user_code_calls_it_where_python_does(x, capsys):
    # `b` calls user code: evaluated only where `a` is true (a cond), as Python evaluates it.
    check_python(scaled_or_zero, x)
    check_jit(scaled_or_zero, jnp.float32(x))
    check_grad(scaled_or_zero, jnp.float32(x))
    expected = printed_or_zero(x)
    printed = capsys.readouterr().out
    got = jax.block_until_ready(jax.jit(transpiler.convert(printed_or_zero))(x))
    assert float(got) == expected
    assert capsys.readouterr().out == printed  # "scaled 2.0" where x > 0, else nothing


def test_not_of_python_values():
    def f(a):
        return not a

    for a in (0, 1, [], [0], None, "x"):
        check_python(f, a)


def in_unit_interval(x):
    return 0 < x < 1


@pytest.mark.parametrize("x", [-1.0, 0.5, 2.0])
def test_chained_comparison(x):
    check_python(in_unit_interval, x)
    check_jit(in_unit_interval, jnp.float32(x))


def test_chained_comparison_evaluates_middle_once_and_lazily():
    calls = []

    def mid(v):
        calls.append(v)
        return v

    def f(a, b, c):
        return a < mid(b) < mid(c) < 10

    converted = transpiler.convert(f)
    assert converted(1, 2, 3) is True and calls == [2, 3]
    calls.clear()
    assert converted(5, 2, 3) is False and calls == [2]  # stops at the first false comparison


def test_chained_comparison_with_traced_middle_operand():
    def f(x):
        return -1 < jnp.sin(x) * 2 <= 1

    for x in (0.1, 1.5):
        check_jit(f, jnp.float32(x))


def test_if_on_and_of_traced_values():
    def f(x, y):
        if x > 0 and y > 0:
            out = x * y
        else:
            out = x + y
        return out

    for x, y in [(1.0, 2.0), (1.0, -2.0), (-1.0, 2.0)]:
        check_jit(f, jnp.float32(x), jnp.float32(y))
    check_vmap(f, jnp.array([1.0, 1.0, -1.0]), jnp.array([2.0, -2.0, 2.0]))
    assert jax.jit(transpiler.convert(f))(1.0, 2.0) == 2.0


def all_finite_step(params, grads, scale):
    if all(jnp.all(jnp.isfinite(g)) for g in grads):
        params = [p - 0.1 * g for p, g in zip(params, grads)]
    else:
        scale = scale / 2
    return params, scale


def any_over(xs, t):
    return any(x > t for x in xs), all([True, *(x > 0 for x in xs)]), any([0, 0.0, xs[0] > t])


def test_all_and_any_of_traced_items_stage_and_of_python_items_are_pythons():
    params = [jnp.ones(2), jnp.ones(3)]
    for grads in ([jnp.ones(2), jnp.ones(3)], [jnp.ones(2), jnp.array([1.0, jnp.inf, 0.0])]):
        check_jit(all_finite_step, params, grads, 1024.0)
    check_jit(any_over, jnp.array([1.0, -2.0]), 0.5)
    check_vmap(any_over, jnp.array([[1.0, -2.0], [3.0, 4.0]]), jnp.array([0.5, 3.5]))
    converted = transpiler.convert(any_over)
    assert converted([1, 2], 5) == any_over([1, 2], 5) == (False, True, False)
    seen = []

    def items():
        for v in (1, 0, 2):
            seen.append(v)
            yield v

    def all_of(it):
        return all(it)

    assert transpiler.convert(all_of)(items()) is False and seen == [1, 0]  # ends as Python's


def halving_sum(n):
    k, total = 0, 0.0
    while k < n:
        k += 1
        total = total + k**-1 + pow(k, -2)
    return total


def powers_of_counters(x, n):
    k = 0
    while k < n:
        k += 1
        x = x + k**2 + k**-1
    k **= 2
    return x, k, 2**n, 2.0**-n


def test_a_power_of_python_ints_is_a_float_for_a_negative_exponent_also_staged():
    # The counter is a traced int32 once staged: JAX's power of ints gave 0 for k ** -1.
    expected = halving_sum(3)
    assert abs(float(transpiler.jit(halving_sum)(3)) - expected) < 1e-6
    assert abs(float(transpiler.jit(halving_sum)(jnp.int32(3))) - expected) < 1e-6
    assert transpiler.convert(halving_sum)(3) == expected
    expected = powers_of_counters(1.5, 3)
    got = transpiler.jit(powers_of_counters)(1.5, 3)
    assert [type(v) for v in expected] == [float, int, int, float]
    assert [v.dtype for v in got] == [jnp.float32, jnp.int32, jnp.int32, jnp.float32]
    for value, want in zip(got, expected):
        assert abs(float(value) - want) < 1e-5
    batched = jax.vmap(transpiler.convert(powers_of_counters), in_axes=(0, None))
    assert jnp.allclose(batched(jnp.array([1.5, 2.5]), 3)[0], jnp.array([1.5, 2.5]) + 15.833333)


def power_of_a_traced_exponent(n):
    return 2 ** (n - 5)


def halving_by_a_power_of_the_counter(n):
    k, total = 0, 0.0
    while k < n:
        k += 1
        total = total + 2**-k  # Python: a float; JAX's power of ints: 0
    return total


def test_a_traced_negative_int_exponent_of_an_int_raises_when_the_program_runs():
    assert int(transpiler.jit(power_of_a_traced_exponent)(7)) == 4
    with pytest.raises(Exception, match=r"exponent -2 \(.*test_expressions.py:\d+, \*\* of ints\)"):
        transpiler.jit(power_of_a_traced_exponent)(3).block_until_ready()
    assert transpiler.convert(power_of_a_traced_exponent)(3) == 0.25
    with pytest.raises(Exception, match=r"exponent -1 \(.*test_expressions.py:\d+, \*\* of ints"):
        transpiler.jit(halving_by_a_power_of_the_counter)(3).block_until_ready()
    assert transpiler.convert(halving_by_a_power_of_the_counter)(3) == 0.875


class _Scaled:
    def __init__(self):
        self.scale = 2


def powers_of_items_and_attributes(n):
    vals, table, scaled = [2, 3], {"k": 4}, _Scaled()
    k = 0
    while k < n:
        k += 1
    vals[0] **= -k
    table["k"] **= -1
    scaled.scale **= -k
    return vals[0], table["k"], scaled.scale


def test_a_power_assigned_to_an_item_or_an_attribute_keeps_python_s_type():
    expected = powers_of_items_and_attributes(2)
    assert expected == (0.25, 0.25, 0.25)
    with pytest.raises(Exception, match=r"\*\* of ints"):
        jax.block_until_ready(transpiler.jit(powers_of_items_and_attributes)(2))
    got = transpiler.jit(powers_of_items_and_attributes)(0)  # -k is 0: no negative exponent
    assert [float(v) for v in got] == [1.0, 0.25, 1.0]


def modular_power(k):
    return pow(k, 2, 7)


def test_a_modular_power_of_traced_ints_is_refused_by_name():
    assert transpiler.convert(modular_power)(5) == 4
    with pytest.raises(StagingError, match=r"pow\(base, exponent, mod\) of traced values"):
        transpiler.jit(modular_power)(5)


def power_of_an_appended_item(n, exponent_of_k):
    vals = []
    for _ in range(2):
        vals.append(2)
    k = 0
    while k < n:
        k += 1
        vals[1] **= -k if exponent_of_k else -1
    return vals[1]


def power_of_two_python_ints(n):
    k = 0
    while k < n:
        k += 1
    return 2**k * jnp.int8(1)  # 2 ** k is a Python int: int8 times it is an int8


def test_a_power_of_two_python_ints_stands_for_a_python_int():
    # jnp.power made it a strongly typed int32 (the product an int32).
    expected = power_of_two_python_ints(jnp.int32(3))
    got = jax.jit(transpiler.convert(power_of_two_python_ints))(3)
    assert got.dtype == expected.dtype == jnp.int8
    assert int(got) == int(expected) == 8


def test_a_power_assigned_to_an_item_of_a_list_the_function_builds():
    # `rt__.list_update` made it with `operator.ipow`: JAX's int power, 0 for 2 ** -1.
    assert power_of_an_appended_item(2, False) == 2.0
    assert float(transpiler.jit(power_of_an_appended_item, static_argnums=1)(2, False)) == 2.0
    with pytest.raises(Exception, match=r"\*\* of ints"):
        jax.block_until_ready(transpiler.jit(power_of_an_appended_item, static_argnums=1)(2, True))


def python_numbers_of_traced_values(h, u):
    return int(h) * u, float(h) * jnp.float16(1), int(h) + 0.5


def test_int_and_float_of_a_traced_value_stand_for_python_numbers():
    # They were strongly typed int32/float32 arrays: int(h) * u8 an int32, not a uint8.
    args = (jnp.float32(2.5), jnp.uint8(200))
    expected = python_numbers_of_traced_values(*args)
    got = jax.jit(transpiler.convert(python_numbers_of_traced_values))(*args)
    for e, g in zip(expected, got):
        assert jnp.result_type(e) == g.dtype
        assert float(e) == float(g)
    assert [g.dtype for g in got] == [jnp.uint8, jnp.float16, jnp.float32]


def python_bool_and_float_by_and(x):
    return x > 0 and x


def python_bool_and_float_by_ternary(x):
    return x if x > 0 else x > 0


def python_bool_and_float_by_max(x):
    return max(x > 0, x)


def python_bool_and_float_by_if(x):
    y = x > 0
    if x > -5:
        y = x
    return y


@pytest.mark.parametrize(
    "fn",
    [
        python_bool_and_float_by_and,
        python_bool_and_float_by_ternary,
        python_bool_and_float_by_max,
        python_bool_and_float_by_if,
    ],
)
def test_a_staged_choice_of_a_python_bool_and_a_python_float_is_refused(fn):
    # `x > 0` of a Python float (weakly typed in jit) is a Python bool: joined with the float it
    # was a float32 (0.0, where Python gives False; False * u8 is a uint8, 0.0 * u8 a float32).
    assert fn(-10.0) is False
    with pytest.raises(StagingError, match="bool"):
        transpiler.jit(fn)(-10.0)


def python_bool_or_python_int(x, n):
    return x > 0 and n


def test_a_staged_choice_of_a_python_bool_and_a_python_int_is_a_python_int():
    got = transpiler.jit(python_bool_or_python_int)(-1.0, 3)
    assert int(got) == 0 and jax.typeof(got).weak_type
    assert int(transpiler.jit(python_bool_or_python_int)(1.0, 3)) == 3


def rounded_python_numbers(x, v):
    return round(float(x)) * v, round(x) * v, round(float(x), 1) * jnp.float16(1)


def test_round_of_a_python_number_is_weakly_typed_and_of_an_array_is_jaxs():
    # round(float(x)) was a strongly typed int32 (200 * 3 was 600, not the uint8 88).
    args = (jnp.float32(2.6), jnp.array([1, 2, 200], jnp.uint8))
    expected = rounded_python_numbers(*args)
    got = jax.jit(transpiler.convert(rounded_python_numbers))(*args)
    for e, g in zip(expected, got):
        assert e.dtype == g.dtype
        assert np.asarray(e).tolist() == np.asarray(g).tolist()
    assert [g.dtype for g in got] == [jnp.uint8, jnp.int32, jnp.float16]


def rounded_ints(k, flag):
    return round(k, -1), round(k, -2), round(k), round(flag)


@pytest.mark.parametrize("k", [15, 25, -15, -25, 14, 150, 250, 349, -350, 7])
def test_round_of_a_traced_int_is_pythons(k):
    # JAX's round refuses ints to decimals < 0 (NotImplementedError) and bools.
    got = jax.jit(transpiler.convert(rounded_ints))(k, k > 10)
    assert tuple(int(v) for v in got) == rounded_ints(k, k > 10)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8, jnp.int16])
@pytest.mark.parametrize("ndigits", [-1, -2, -3, -10])
def test_round_of_a_narrow_traced_int_does_not_wrap(dtype, ndigits):
    # 2 * r wrapped in int8 (round(75, -2) was 0); 10 ** 10 overflowed the dtype.
    rounded = jax.jit(transpiler.convert(lambda k: round(k, ndigits)))
    info = np.iinfo(dtype)
    for v in (int(info.min), -110, -75, -50, -15, 0, 15, 50, 75, 110, 125, int(info.max)):
        if info.min <= v <= info.max and info.min <= round(v, ndigits) <= info.max:
            assert int(rounded(dtype(v))) == round(v, ndigits), v


def logs_python_numbers(x):
    loss = jnp.sum(x)
    print("loss", float(loss), "fmt {}".format(float(loss)), "pct %s" % float(loss))  # noqa: UP031, UP032
    lf = float(loss)
    print(lf, [lf, 1], repr(lf), f"{lf:.3f} {lf!r}")
    lr = 0.1
    if loss > 1:
        lr = lr * 0.5
    n = 0
    for v in x:
        if v > 0:
            n += 1
    print("lr", lr, [lr], "n", n, [n, int(loss)], (n,), [i for i in range(4) if i < n])
    print((n / 2 > 0.4,), [lr < 0.1], {"k": n == 1}, n > 1)  # Python's bools (not np.True_)
    return loss


@pytest.mark.parametrize("x", [[1.3, -0.7, 2.11111], [-1.3, 0.7, -2.1]])
def test_python_numbers_staged_code_carries_print_as_python_prints_them(x, capsys):
    # float(loss) with every digit of its float32 value; a counter as an int, also in a list.
    x = jnp.array(x)
    logs_python_numbers(x)
    expected = capsys.readouterr().out
    transpiler.jit(logs_python_numbers)(x)
    assert capsys.readouterr().out == expected


def logs_metrics(x):
    loss = jnp.sum(x)
    out = []
    for v in x:
        if v > 0:
            out.append(v)
    print("metrics", {"loss": loss, "positive": x[0] > 0}, [x, loss], (loss,), out)
    print(f"{loss:.3f} {loss} {loss!r}", "%.2f %s %r" % (loss, loss, loss), str(loss), repr(x))  # noqa: UP031
    return loss


def test_arrays_print_as_an_eager_run_prints_them(capsys):
    # JAX's repr in lists, dicts and tuples (`Array(2.5, dtype=float32)`), not NumPy's.
    x = jnp.array([1.3, -0.7, 2.11111])
    logs_metrics(x)
    expected = capsys.readouterr().out
    transpiler.jit(logs_metrics)(x)
    jax.effects_barrier()
    assert capsys.readouterr().out == expected


def _logged_below(x, log):
    log.append(x)
    return x < 5


def appends_in_the_right_operand_of_an_if_test(x):
    log = []
    if x > 0 and _logged_below(x, log):
        return x
    return -x


def test_an_effect_in_the_right_operand_of_an_if_test_names_the_and():
    # It named a "conditional expression", which the user did not write (helper 115).
    with pytest.raises(StagingError, match=r"while the 'and' expression is traced \(.*'and' "):
        jax.jit(transpiler.convert(appends_in_the_right_operand_of_an_if_test))(jnp.float32(1.0))
