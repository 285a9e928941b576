"""Loops whose first iteration, run as Python, makes them staged: the staged loop starts from
before it where that is exact (runtime/peeling.py), and from after it where it is not."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import assert_tree_close, check_grad, check_jit, check_python


def lowered(fn, *args) -> str:
    return jax.jit(transpiler.convert(fn)).lower(*args).as_text(debug_info=False)


def top_level(fn, *args) -> list[str]:
    """The primitives of the graph's outermost jaxpr, dead code left out."""
    return [eqn.primitive.name for eqn in transpiler.graph(fn)(*args).jaxpr.jaxpr.eqns]


def newton(a, tol=1e-6):
    x = a
    converged = False
    steps = 0
    while not converged:
        x_next = 0.5 * (x + a / x)
        converged = jnp.abs(x_next - x) < tol * x_next
        x = x_next
        steps += 1
    return x, steps


def test_a_while_made_staged_by_its_first_iteration_starts_staged_from_before_it():
    check_jit(newton, 2.0)
    check_jit(newton, jnp.float32(10.0))
    check_python(newton, 2.0)
    check_grad(lambda a: newton(a)[0], 2.0)
    # One division, in the loop: the iteration Python ran is dead code, not a peeled copy.
    assert lowered(newton, 2.0).count("stablehlo.divide") == 1
    assert top_level(newton, 2.0) == ["custom_jvp_call"]
    x, steps = jax.jit(transpiler.convert(newton))(2.0)
    assert int(steps) == newton(2.0)[1]


def test_the_restarted_loop_under_vmap():
    a = jnp.array([2.0, 10.0, 0.25])
    out = jax.jit(jax.vmap(transpiler.convert(newton)))(a)
    expected = [newton(float(v)) for v in a]
    assert_tree_close(out[0], np.array([e[0] for e in expected]))
    assert out[1].tolist() == [e[1] for e in expected]


def search(xs, target):
    for i in range(xs.shape[0]):
        if xs[i] == target:
            return i
    return -1


@pytest.mark.parametrize("target", [0, 5, 7, 100])
def test_a_for_with_an_early_return_starts_staged_at_its_first_item(target):
    xs = jnp.arange(8) * 1
    assert int(jax.jit(transpiler.convert(search))(xs, target)) == search(np.arange(8), target)
    assert lowered(search, xs, target).count("stablehlo.dynamic_slice") == 1
    assert top_level(search, xs, target) == ["while", "not", "select_n"]


def accumulate(xs):
    total = 0  # a Python int; the first iteration makes it float32
    count = 0
    for i in range(xs.shape[0]):
        total = total + xs[i] * 2
        count += 1
    return total, count


def test_python_numbers_take_the_dtype_the_first_iteration_gives_them():
    xs = jnp.arange(5.0)
    out = check_jit(accumulate, xs)
    total, count = jax.jit(out)(xs)
    assert total.dtype == jnp.float32 and not total.weak_type
    assert count.dtype == jnp.int32
    assert "length=5" in str(jax.make_jaxpr(out)(xs))


def test_a_loop_of_two_items_is_staged_whole():
    xs = jnp.arange(2.0)
    out = check_jit(accumulate, xs)
    assert "length=2" in str(jax.make_jaxpr(out)(xs))


def first_bound_in_the_loop(xs):
    for i in range(xs.shape[0]):
        last = xs[i] * 3.0
    return last


def test_a_variable_first_bound_by_the_loop():
    xs = jnp.arange(4.0)
    check_jit(first_bound_in_the_loop, xs)
    assert "length=4" in str(jax.make_jaxpr(transpiler.convert(first_bound_in_the_loop))(xs))


# Where the first iteration did something that running it again would repeat, the loop goes
# on from after it, as Python ran it.


def printing_newton(a):
    x = a
    converged = False
    while not converged:
        print("step")
        x_next = 0.5 * (x + a / x)
        converged = jnp.abs(x_next - x) < 1e-6 * x_next
        x = x_next
    return x


def debug_printing_newton(a):
    x = a
    converged = False
    while not converged:
        jax.debug.print("step")
        x_next = 0.5 * (x + a / x)
        converged = jnp.abs(x_next - x) < 1e-6 * x_next
        x = x_next
    return x


@pytest.mark.parametrize("fn", [printing_newton, debug_printing_newton])
def test_prints_of_the_first_iteration_are_not_made_twice(fn, capsys):
    fn(2.0)
    jax.effects_barrier()
    expected = capsys.readouterr().out.splitlines()
    out = jax.jit(transpiler.convert(fn))(2.0)
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == expected
    assert float(out) == pytest.approx(2.0**0.5)


class Counter:
    def __init__(self):
        self.calls = 0


COUNTER = Counter()


def counting_newton(a):
    x = a
    converged = False
    while not converged:
        COUNTER.calls = COUNTER.calls + 1  # Python state the iteration changes
        x_next = 0.5 * (x + a / x)
        converged = jnp.abs(x_next - x) < 1e-6 * x_next
        x = x_next
    calls = COUNTER.calls
    COUNTER.calls = 0
    return x, calls


def test_python_state_the_first_iteration_changes_is_not_changed_twice():
    expected = counting_newton(2.0)
    x, calls = jax.jit(transpiler.convert(counting_newton))(2.0)
    assert int(calls) == expected[1]
    assert float(x) == pytest.approx(float(expected[0]))


def keep_previous(a):
    x = a
    previous = None  # None before, an array after: the types do not promote
    converged = False
    while not converged:
        previous = x
        x = 0.5 * (x + a / x)
        converged = jnp.abs(x - previous) < 1e-6 * x
    return x, previous


def test_a_state_whose_python_value_cannot_be_promoted_goes_on_from_after():
    check_jit(keep_previous, 2.0)
    check_python(keep_previous, 2.0)


def collect(xs):
    found = []
    for i in range(xs.shape[0]):
        found.append(xs[i] * 2)
        if xs[i] > 2:
            break
    return found


def test_a_loop_with_lists_goes_on_from_after():
    xs = jnp.arange(5.0)
    buffer, length = transpiler.padded(jax.jit(transpiler.convert(collect))(xs))
    assert buffer[: int(length)].tolist() == [float(v) for v in collect(np.arange(5.0))]


def ticking(x):
    box = {"n": 0}

    def more(x):
        box["n"] = box["n"] + 1  # Python state the test changes
        return x < 10

    while more(x):
        x = x * 2
    return x, box["n"]


def test_a_staged_loop_whose_test_changes_python_state_is_refused():
    check_python(ticking, 1.0)
    with pytest.raises(StagingError, match=r"box\['n'\] .* by the test of the while"):
        jax.jit(transpiler.convert(ticking))(1.0)


def printing_test(x):
    def more(x):
        print("test")
        return x < 10

    while more(x):
        x = x * 2
    return x


def test_a_test_that_prints_prints_once_per_evaluation(capsys):
    printing_test(1.0)
    expected = capsys.readouterr().out.splitlines()
    jax.jit(transpiler.convert(printing_test))(1.0)
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == expected


def bisection(lo, hi, tol):
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if mid * mid > 2.0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def test_a_test_traced_from_the_start_is_evaluated_in_the_loop_condition():
    check_jit(bisection, 1.0, 2.0, 1e-6)
    # The evaluation that told the loop is staged is dead code: the loop's condition tests.
    assert top_level(bisection, 1.0, 2.0, 1e-6) == ["custom_jvp_call", "add", "mul"]
    assert lowered(bisection, 1.0, 2.0, 1e-6).count("stablehlo.subtract") == 1


def at_most_once(x):
    i = 0
    while i < 5:
        transpiler.loop_options(max_iterations=1)
        x = x * 2
        i = i + 1 if i < 1 else i + 100  # a second test would see i == 1
    return x, i


def test_max_iterations_one_runs_the_body_once_and_the_test_once():
    assert transpiler.convert(at_most_once)(3.0) == (6.0, 1)
    x, i = jax.jit(transpiler.convert(at_most_once))(3.0)
    assert (float(x), int(i)) == (6.0, 1)
