"""break, continue and return inside staged and Python control flow, against eager execution."""

import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import (
    check_grad,
    check_jit,
    check_python,
    check_vmap,
    primitives,
)
from tests.end_to_end.test_errors import line_of

HERE = os.path.relpath(__file__)


def linear_search(x, t):
    for i in range(x.shape[0]):
        if x[i] > t:
            return i
    return -1


@pytest.mark.parametrize("t", [0.5, 2.5, 10.0])
def test_linear_search_returns_first_index_or_minus_one(t):
    x = jnp.array([0.0, 1.0, 3.0, 2.0, 5.0])
    check_jit(linear_search, x, t)
    check_python(linear_search, np.asarray(x), t)
    check_vmap(linear_search, jnp.stack([x, x + 3.0]), jnp.array([t, t]))
    jaxpr = primitives(linear_search, x, t)
    # The early return stops the loop: a while loop over the index, not a masked scan.
    assert "while[" in jaxpr and "scan[" not in jaxpr


def newton_until_converged(a, tol):
    x = a
    while True:
        x = 0.5 * (x + a / x)
        residual = jnp.abs(x * x - a)
        if residual < tol:
            break
    return x


def test_while_true_breaks_on_a_traced_residual():
    for a in (2.0, 9.0, 1e4):
        check_jit(newton_until_converged, jnp.float32(a), 1e-3)
    check_python(newton_until_converged, 2.0, 1e-9)
    assert "while[" in primitives(newton_until_converged, 2.0, 1e-3)


def nested(m, limit):
    total = 0.0
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            if m[i, j] < 0:
                continue
            total = total + m[i, j] * m[i, j]
        if total > limit:
            break
    return total


@pytest.mark.parametrize("limit", [5.0, 30.0, 1000.0])
def test_nested_loops_inner_continue_outer_break(limit):
    m = jnp.array([[1.0, -2.0, 2.0], [3.0, 1.0, -1.0], [-4.0, 4.0, 1.0]])
    check_jit(nested, m, limit)
    check_grad(nested, m, limit)
    check_python(nested, np.asarray(m), limit)


def find_or_default(xs, target):
    result = 0.0
    for x in xs:
        if x == target:
            result = x * 10
            break
    else:
        result = -1.0
    return result


@pytest.mark.parametrize("target", [2.0, 7.0])
def test_for_else_fires_only_when_nothing_was_found(target):
    xs = jnp.array([1.0, 2.0, 3.0])
    check_jit(find_or_default, xs, target)
    check_python(find_or_default, [1.0, 2.0, 3.0], target)


def while_else(x, n):
    i = 0
    while i < n:
        if x[i] < 0:
            break
        i += 1
    else:
        i = -1
    return i


def test_while_else_with_traced_break():
    for x in ([1.0, -1.0, 2.0], [1.0, 2.0, 3.0]):
        check_jit(while_else, jnp.array(x), 3)
        check_python(while_else, x, 3)


def three_returns(x):
    if x > 10:
        return x * 2
    if x < 0:
        return -x
    return x + 1


@pytest.mark.parametrize("x", [20.0, -3.0, 3.0])
def test_three_returns_two_inside_traced_ifs(x):
    check_jit(three_returns, jnp.float32(x))
    check_grad(three_returns, jnp.float32(x))
    check_python(three_returns, x)


def test_three_returns_under_vmap():
    check_vmap(three_returns, jnp.array([20.0, -3.0, 3.0]))


def sum_of_squares_until(x, limit):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i]
        if s > limit:
            break
    return s


def test_grad_through_for_range_with_traced_break():
    # Reverse mode works: the loop stays a scan (no "Reverse-mode differentiation does not work
    # for lax.while_loop" error), and the gradient is the eager one.
    for limit in (3.0, 100.0):
        check_grad(sum_of_squares_until, jnp.arange(5.0), limit)
        check_grad(sum_of_squares_until, jnp.arange(5.0), jnp.float32(limit), argnums=(0, 1))


def return_from_while(x):
    i = 0
    while i < x.shape[0]:
        if x[i] > 3:
            return x[i] * 2
        i += 1
    return -1.0


def test_return_from_inside_a_staged_while():
    check_jit(return_from_while, jnp.arange(10.0))
    check_jit(return_from_while, jnp.zeros(10))
    check_python(return_from_while, np.arange(10.0))


def return_from_inner_loop(m):
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            if m[i, j] < 0:
                return i * 10 + j
    return -1


def test_return_from_an_inner_loop_leaves_both_loops():
    for m in ([[1, 2], [3, -4]], [[1, -2], [-3, 4]], [[1, 1], [1, 1]]):
        check_jit(return_from_inner_loop, jnp.array(m))
        check_python(return_from_inner_loop, np.array(m))


def while_true_return(x):
    n = 0
    while True:
        x = x / 2
        n += 1
        if x < 1:
            return n


def test_while_true_with_a_return_never_falls_off_the_end():
    check_jit(while_true_return, jnp.float32(100.0))
    check_python(while_true_return, 100.0)


def first_index_past(x, n):
    for i in range(n):
        if x * i > 5:
            return i
    else:
        return -1


def while_else_returns(x, n):
    i = 0
    while i < n:
        if x * i > 5:
            return i
        i += 1
    else:
        return -i


@pytest.mark.parametrize("x", [2.0, 0.5])
def test_a_loop_whose_else_returns_never_falls_off_the_end(x):
    # No break: the loop ends through its else, which returns on every path.
    check_jit(while_else_returns, jnp.float32(x), 5)
    check_python(while_else_returns, x, 5)
    expected = first_index_past(x, 5)
    assert int(jax.jit(transpiler.convert(first_index_past), static_argnums=1)(x, 5)) == expected
    check_vmap(while_else_returns, jnp.array([x, 2 * x]), jnp.array([5, 3]))


def test_python_break_stops_fetching_items():
    consumed = []

    def numbers():
        for k in itertools.count():
            consumed.append(k)
            yield k

    def f(items):
        for item in items:
            if item == 2:
                break
        return item

    assert transpiler.convert(f)(numbers()) == 2
    assert consumed == [0, 1, 2]


def test_python_continue_break_and_return_keep_python_semantics():
    def f(xs):
        out = []
        for x in xs:
            if x is None:
                continue
            if x == "stop":
                break
            if x == "ret":
                return "returned"
            out.append(x)
        else:
            out.append("no break")
        return out

    for xs in ([1, None, 2], [1, "stop", 2], [1, "ret", "stop"], []):
        check_python(f, xs)


def test_return_inside_with_and_try_finally_runs_cleanup():
    log = []

    class Ctx:
        def __enter__(self):
            log.append("enter")

        def __exit__(self, *exc):
            log.append("exit")

    def f(x):
        with Ctx():
            if x > 0:
                return "positive"
        try:
            if x < 0:
                return "negative"
        finally:
            log.append("finally")
        return "zero"

    converted = transpiler.convert(f)
    assert [converted(v) for v in (1, -1, 0)] == ["positive", "negative", "zero"]
    assert log == ["enter", "exit", "enter", "exit", "finally", "enter", "exit", "finally"]


def falls_off(x):
    if x > 0:
        return x


def test_falling_off_the_end_on_a_staged_path_is_an_error():
    converted = transpiler.convert(falls_off)
    assert converted(2.0) == 2.0 and converted(-2.0) is None
    with pytest.raises(StagingError) as e:
        jax.jit(converted)(1.0)
    line = line_of(falls_off, "if x > 0")
    ret = line_of(falls_off, "return x")
    assert str(e.value) == (
        f"'falls_off' returns float32[] on one path and None on another (the paths meet at "
        f"{HERE}:{line}). Its return statements: {HERE}:{ret}, the end of 'falls_off' (an "
        "implicit 'return None'). With traced conditions every path must return the same "
        "structure, shapes and dtypes."
    )


def different_structures(x):
    if x > 0:
        return x, x
    return x


def test_returns_of_different_structure_name_the_function_and_each_return():
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(different_structures))(1.0)
    first = line_of(different_structures, "return x, x")
    second = first + 1
    assert str(e.value) == (
        f"'different_structures' returns (float32[], float32[]) on one path and float32[] on "
        f"another (the paths meet at {HERE}:{first - 1}). Its return statements: {HERE}:{first}, "
        f"{HERE}:{second}. With traced conditions every path must return the same structure, "
        "shapes and dtypes."
    )


def different_shapes(x):
    if x[0] > 0:
        return x
    return x[:2]


def test_returns_of_different_shapes():
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(different_shapes))(jnp.ones(3))
    first = line_of(different_shapes, "return x")
    second = first + 1
    assert str(e.value) == (
        f"the return value of 'different_shapes' is float32[3] in the true branch but float32[2] "
        f"in the false branch ({HERE}:{first - 1}, if statement). With a traced condition both "
        "branches must give the return value of 'different_shapes' the same shape and dtype. "
        f"Its return statements: {HERE}:{first}, {HERE}:{second}."
    )


def first_large_row_sum(m, t):
    total = jnp.zeros(m.shape[1])
    for row in m:
        if jnp.sum(row) > t:
            break
        total = total + row
    return jnp.sum(total * total)


def test_for_over_array_with_break_stops_there_and_stays_differentiable():
    m = jnp.array([[1.0, 2.0], [0.5, 0.5], [4.0, 4.0], [1.0, 1.0]])
    for t in (2.0, 100.0):
        check_jit(first_large_row_sum, m, t)
        check_grad(first_large_row_sum, m, t)
    jaxpr = primitives(first_large_row_sum, m, 2.0)
    assert "while[" in jaxpr and "scan[" not in jaxpr


def both_branches_return(x):
    if x > 0:
        return x * 3
    else:
        return x - 1


def test_both_branches_return():
    for x in (2.0, -2.0):
        check_jit(both_branches_return, jnp.float32(x))
        check_grad(both_branches_return, jnp.float32(x))
    check_vmap(both_branches_return, jnp.array([2.0, -2.0]))
    assert "retval = None" not in transpiler.to_source(both_branches_return)  # never falls off


def break_in_python_list_loop(x, factors):
    for w in factors:
        x = x * w
        if x > 10:
            break
    return x


def test_traced_break_in_a_loop_over_a_python_tuple_masks_the_rest():
    for x in (1.0, 0.1):
        check_jit(
            break_in_python_list_loop, jnp.float32(x), (2.0, 3.0, 4.0, 5.0), static_argnums=(1,)
        )


def return_on_carried_python_value(x, y):
    b = 0
    k = 0
    while b < y and k < 4:
        transpiler.loop_options(max_iterations=4)
        k += 1
        if b > 5:  # `b` starts as a Python int: the loop carries it traced all the same
            return b * 10
        b = b + x
    return b


def return_at_a_loop_index(x):
    for i in range(4):
        if i == 2:  # the scan's index is traced
            return x * i
    return x


def test_returns_that_only_a_traced_iteration_reaches():
    for x, y in [(3, 100), (1, 2), (4, 9)]:
        check_jit(return_on_carried_python_value, x, y)
    check_jit(return_at_a_loop_index, jnp.float32(3.0))


def int_and_float_returns(x, y):
    if x > y:
        if x > 2 * y:
            return 9  # a Python int on one path, float32 on others: promoted as JAX would
    return y * 0.5


def test_python_int_and_float_returns_promote():
    for x, y in [(5.0, 1.0), (3.0, 2.0), (1.0, 2.0)]:
        check_jit(int_and_float_returns, jnp.float32(x), jnp.float32(y))


def bounded_first_large_row_sum(m, t):
    total = jnp.zeros(m.shape[1])
    for row in m:
        transpiler.loop_options(max_iterations=4)
        if jnp.sum(row) > t:
            break
        total = total + row
    return jnp.sum(total * total * total)


def test_for_with_break_and_max_iterations_has_second_derivatives():
    # Run, a while loop that tests the break (see runtime/exits.py, runtime/bounded.py);
    # differentiated, a masked scan, which second derivatives go through.
    m = jnp.array([[1.0, 2.0], [0.5, 0.5], [4.0, 4.0], [1.0, 1.0]])
    check_jit(bounded_first_large_row_sum, m, 2.0)
    assert "while[" in primitives(bounded_first_large_row_sum, m, 2.0)
    assert "scan[" in str(
        jax.make_jaxpr(jax.grad(transpiler.convert(bounded_first_large_row_sum)))(m, 2.0)
    )
    staged = jax.jit(jax.hessian(transpiler.convert(bounded_first_large_row_sum)))(m, 2.0)
    eager = jax.hessian(bounded_first_large_row_sum)(m, 2.0)
    np.testing.assert_allclose(staged, eager, rtol=1e-5)


def append_then_break(x, y):
    acc = []
    for _ in range(4):
        acc.append(y)
        if x * 3 > 6:
            break
    return len(acc), sum(acc)


def test_a_list_appended_to_before_a_break_has_the_length_python_gives():
    # Every iteration appends, but the loop stops at the break: the length is the number of
    # iterations that ran (traced), not the loop's bound.
    for x in (1, 3):
        check_jit(append_then_break, x, 7)
    check_vmap(append_then_break, jnp.array([1, 3]), jnp.array([7, 7]))


def append_then_break_inside_a_loop(x, y):
    acc = []
    for _ in range(2):
        for _ in range(3):
            acc.append(y)
            if x > 9:
                break
        y = y + 1
    return len(acc), sum(acc)


def append_then_break_inside_a_while(x):
    acc = []
    i = 0
    while i < 2:
        for j in range(3):
            acc.append(x + j)
            if x + j > 4:
                break
        i += 1
    return transpiler.padded(acc)


def test_a_list_appended_to_before_a_break_in_a_nested_loop_has_the_length_python_gives():
    # Found by the fuzzer: the outer loop's list was sized as if the inner loop never stopped
    # early (4 where Python gives 2).
    for x in (0, 10):
        check_jit(append_then_break_inside_a_loop, x, 7)
    check_vmap(append_then_break_inside_a_loop, jnp.array([0, 10, 0]), jnp.array([7, 7, 1]))
    for x in (0, 3, 5):
        stacked, n = jax.jit(transpiler.convert(append_then_break_inside_a_while))(x)
        expected, expected_n = append_then_break_inside_a_while(x)
        assert int(n) == expected_n
        np.testing.assert_array_equal(stacked[:expected_n], expected)


def first_pair_summing_to(x, target):
    for i in range(x.shape[0]):
        for j in range(i + 1, x.shape[0]):
            if x[i] + x[j] == target:
                return i * 10 + j
    return -1


def test_loops_left_only_by_a_return_carry_the_return_flag_alone():
    source = transpiler.to_source(first_pair_summing_to)
    assert "did_break" not in source and "do_return" in source
    x = jnp.array([1.0, 4.0, 2.0, 7.0])
    for target in (6.0, 9.0, 100.0):  # found in the first row, in a later one, never
        expected = first_pair_summing_to(x, target)
        assert int(jax.jit(transpiler.convert(first_pair_summing_to))(x, target)) == expected


def bounded_endless_loop_returning(x):
    n = 0
    while True:
        transpiler.loop_options(max_iterations=3)
        n += 1
        if n > x:
            return n
    return -n  # reached when the bound ends the loop (CPython compiles it to nothing)


def bounded_endless_loop_with_else(x):
    n = 0
    while True:
        transpiler.loop_options(max_iterations=3)
        n += 1
        if n > x:
            break
    else:
        n = n * 10
    return n


@pytest.mark.parametrize(
    "fn, x, expected",
    [
        (bounded_endless_loop_returning, 10, -3),
        (bounded_endless_loop_returning, 1, 2),
        (bounded_endless_loop_with_else, 10, 30),
        (bounded_endless_loop_with_else, 1, 2),
    ],
)
def test_a_while_true_its_bound_ends_runs_the_code_after_it(fn, x, expected):
    # The code after the loop was dropped: the Python path returned the runtime's
    # UndefinedReturnValue, the staged one 0.
    assert transpiler.convert(fn)(x) == expected
    assert int(jax.jit(transpiler.convert(fn))(x)) == expected


def returns_its_list_from_a_bounded_while(x):
    v = []
    while x > 0:
        transpiler.loop_options(max_iterations=8)
        x -= 1
        if x % 3 == 0:
            return v
        v.append(x)
    return v


def returns_its_list_and_a_flag_from_a_for(x, n):
    v = []
    for i in range(6):
        if i >= n:
            return v, 1
        v.append(x * i)
    return v, 0


def test_a_list_built_in_a_staged_loop_is_returned_from_inside_it():
    # Was refused: the return value was compared with "a UndefinedReturnValue", and a list
    # returned with another value inside the loop and after it differed in how it was made.
    for x in (3, 5, 9, 0):
        got = transpiler.jit(returns_its_list_from_a_bounded_while)(jnp.int32(x))
        items, length = transpiler.padded(got)
        expected = returns_its_list_from_a_bounded_while(x)
        assert [int(v) for v in items[: int(length)]] == expected
    for n in (0, 2, 6):
        (items, length), flag = jax.jit(
            lambda x, n: (lambda out: (transpiler.padded(out[0]), out[1]))(
                transpiler.convert(returns_its_list_and_a_flag_from_a_for)(x, n)
            )
        )(jnp.float32(2.0), jnp.int32(n))
        expected, expected_flag = returns_its_list_and_a_flag_from_a_for(2.0, n)
        assert [float(v) for v in items[: int(length)]] == expected and int(flag) == expected_flag


def try_else_after_a_return(x):
    try:
        if x > 0:
            return 1.0
    except ValueError:
        return 2.0
    else:
        return 3.0


def try_else_after_a_break(x):
    for i in range(3):
        try:
            if x > i:
                break
        except ValueError:
            pass
        else:
            x = x + 10
    return x


def try_else_after_a_continue(x):
    for i in range(3):
        try:
            if x > i:
                continue
        except ValueError:
            pass
        else:
            x = x + 10
        finally:
            x = x + 1
    return x


@pytest.mark.parametrize(
    "fn", [try_else_after_a_return, try_else_after_a_break, try_else_after_a_continue]
)
def test_the_else_of_a_try_does_not_run_after_a_jump_out_of_its_body(fn):
    # It ran: `jax.jit` of the first gave 3.0 where Python returns 1.0 (x > 0).
    for x in (-2.0, 0.5, 1.5, 12.0):
        check_jit(fn, x)
        check_python(fn, x)
    check_vmap(fn, jnp.array([-2.0, 0.5, 1.5, 12.0]))


def returns_a_list_a_finally_appends_to(x):
    out = [x]
    try:
        if x > 0:
            return out
        out.append(x * 2)
    finally:
        out.append(-1.0)
    return out


def test_a_returned_list_that_becomes_of_traced_length_and_changes_after_is_refused():
    # It came back as [1.0] where Python returns [1.0, -1.0]: the `finally` appended to `out`,
    # which Python's return value is, and the staged one was a copy made before.
    with pytest.raises(StagingError, match="hold one list after a branch"):
        jax.jit(transpiler.convert(returns_a_list_a_finally_appends_to))(1.0)


def index_error_in_a_branch_not_taken(x):
    items = [1.0, 2.0]
    s = x
    for i in range(4):
        try:
            if s > 100:
                s = s + items[i]
            else:
                s = s * 2
        except IndexError:
            s = s - 1
    return s


def test_an_index_error_tracing_a_branch_not_taken_is_raised_only_where_it_runs():
    # `items[i]` past the end, traced in the branch not taken, raised while tracing (the
    # runtime's own frame made it look like a fault of ours): the `except` caught it, 2.0
    # where Python gives 16.0; without the `try`, an IndexError where Python has none.
    check_jit(index_error_in_a_branch_not_taken, 1.0)
    # Where the branch runs, the compiled program raises it, which no `except` around staged
    # code catches (docs/limitations.md): Python's catches it and returns 201.0.
    assert index_error_in_a_branch_not_taken(200.0) == 201.0
    with pytest.raises(Exception, match="list index out of range"):
        jax.jit(transpiler.convert(index_error_in_a_branch_not_taken))(200.0).block_until_ready()


def catches_what_a_branch_raises(x):
    table = {"a": 1.0}
    try:
        if x > 0:
            y = table["missing"]
        else:
            y = x
    except KeyError:
        y = -x
    return y


def test_an_except_around_a_staged_raise_is_refused_where_it_would_catch_it():
    # Under `jax.vmap` (no jit) the staged raise ran at once, inside the `try`: caught, it sent
    # every element into the handler ([2.0, -0.5] where Python gives [-2.0, -0.5]).
    batched = jax.vmap(transpiler.convert(catches_what_a_branch_raises))
    with pytest.raises(StagingError, match="no `except` around staged code can handle it"):
        batched(jnp.array([-2.0, 0.5]))
    np.testing.assert_array_equal(batched(jnp.array([-2.0, -0.5])), [-2.0, -0.5])


def continue_under_an_elif(x):
    out = []
    for i in range(4):
        if x[i] > 0:
            pass
        elif i % 2 == 0:
            out.append(x[i])
            continue
        out.append(-x[i])
    return jnp.stack(out)


def metropolis_thinned(key, x, n):
    chain = []
    accepted = 0
    for i in range(n):
        key, k1, k2 = jax.random.split(key, 3)
        proposal = x + 0.5 * jax.random.normal(k1)
        if jnp.log(jax.random.uniform(k2)) < 0.5 * (x * x - proposal * proposal):
            x = proposal
            accepted += 1
        elif i % 3 == 0:
            chain.append(x)
            continue
        chain.append(2.0 * x)
    return jnp.stack(chain), accepted


def test_a_continue_under_a_python_elif_of_a_staged_if_appends_on_every_path():
    # Each iteration appends once on every path: the rest of the body after the `elif`'s
    # `continue` goes into the paths that do not take it, so the list's length stays known
    # (with a flag guarding it, the append would sit under two staged `if`s).
    for x in ([1.0, -2.0, 3.0, -4.0], [-1.0, -2.0, -3.0, -4.0]):
        check_jit(continue_under_an_elif, jnp.array(x))
    check_vmap(continue_under_an_elif, jnp.array([[1.0, -2.0, 3.0, -4.0], [-1.0, 2.0, -3.0, 4.0]]))
    check_grad(lambda x: jnp.sum(continue_under_an_elif(x) ** 2), jnp.array([1.0, -2.0, 3.0, -4.0]))
    key = jax.random.key(3)
    check_jit(metropolis_thinned, key, jnp.float32(0.3), 7, static_argnums=(2,))


def returns_in_a_loop_that_never_runs_then_raises(x, y):
    a = x
    for _ in range(2):
        for _ in range(0):
            a = 97
            return 97
    row = [y, a]
    for j in range(2, 5):
        a = row[j]  # an IndexError, on every path the program takes
    return a


def test_the_return_value_a_raising_path_leaves_unset_is_never_returned():
    # The loop's `return` never runs, but whether it did is traced: the `if` after it that
    # raises is staged, and its other path gives back a return value never set.
    fn = returns_in_a_loop_that_never_runs_then_raises
    with pytest.raises(IndexError):
        fn(0, 1)
    with pytest.raises(jax.errors.JaxRuntimeError, match="list index out of range"):
        jax.jit(transpiler.convert(fn))(0, 1)
