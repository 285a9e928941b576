"""Loops whose first iteration, run as Python, makes them staged: the staged loop starts from
before it where that is exact (runtime/peeling.py), and from after it where it is not."""

import functools
import itertools
import random

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
    # The loop tests the item in its condition and carries only the index, as by hand; the
    # return value is chosen after it (runtime/exits.py).
    assert lowered(search, xs, target).count("stablehlo.dynamic_slice") == 1
    ops = top_level(search, xs, target)
    assert ops[0] == "while" and "dynamic_slice" not in ops and "cond" not in ops


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


def read_before_bound(n):  # Paddle's for_loop_dyfunc2: `a` is bound from the second iteration
    for i in range(n):
        if i > 1:
            s = a  # noqa: F821 (bound by an earlier iteration)
        a = i * 2  # noqa: F841
    return s


def read_while_unbound(n):
    for i in range(n):
        if i > -1:
            s = a  # noqa: F821 (UnboundLocalError in the first iteration)
        a = 1  # noqa: F841
    return s


def test_a_variable_the_body_binds_read_before_it_by_another():
    assert jax.jit(transpiler.convert(read_before_bound))(5) == read_before_bound(5) == 6
    with pytest.raises(Exception, match="local variable 'a'"):
        jax.block_until_ready(jax.jit(transpiler.convert(read_while_unbound))(5))


def text_on_some_paths(n):
    for i in range(n):
        if i > 1:
            s = "many"
    return s


def test_a_loop_variable_bound_on_some_paths_to_text_is_refused_in_words():
    with pytest.raises(StagingError, match=r"'s' is set in the true branch but not .* the str"):
        jax.jit(transpiler.convert(text_on_some_paths))(5)


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


# What Python computes in the first iteration is kept: the loop restarts only where the
# staged loop computes that iteration the same way (runtime/peeling.py, `restartable`), and
# the iteration did nothing that running it again would repeat (effects.Watch). Found by an
# adversarial review: each gave a different answer with the loop staged from before.


def hash_loop(xs):
    h = 1 << 20  # Python's int arithmetic on it: (h * 4096) overflows int32
    for i in range(xs.shape[0]):
        h = (h * 4096) % 1009 + xs[i]
    return h


def cancel(t):
    x = 1.0000001  # float64 in Python: (x - 1.0) * 1e7 is 1.0000000005838672, not 1.19...
    for i in range(t.shape[0]):
        x = (x - 1.0) * 1e7 + t[i]
    return x


def big_int(xs):
    x = 10**10  # no int32 holds it
    for i in range(xs.shape[0]):
        x = x // 100000 + xs[i]
    return x


def bump_python(v):
    if isinstance(v, int):
        return v + 1
    return v


def type_test(t):
    acc = 0
    for i in range(t.shape[0]):
        acc = bump_python(acc) + t[i]  # an int in the first iteration, an array after
    return acc


def sum_then_squared(x):
    c = 0
    done = False
    while not done:
        c += 100000
        y = c * c // 100000  # Python's exact int: 100000; int32's c * c wraps
        done = x < 10
    return y


def sum_then_half(x):
    t = 0
    done = False
    while not done:
        t += 100000000
        z = (t + 0.5) - 1e8  # float64 in Python: 0.5; float32: 0.0
        done = x < 10
    return z


def sum_then_divided(x):
    c = 0
    done = False
    while not done:
        c += np.int64(3000000000)
        c = c // 1000
        done = x < 10
    return c


@pytest.mark.parametrize(
    "fn, args",
    [
        (hash_loop, (jnp.array([3, 4], jnp.int32),)),
        (cancel, (jnp.zeros(2),)),
        (big_int, (jnp.array([3, 4], jnp.int32),)),
        (type_test, (jnp.array([1.0, 2.0]),)),
        # A sum from zero restarts exactly where the iteration only adds to it; one it reads
        # again (found by an adversarial review: 14100, 0.0 and -1294968 with the restart).
        (sum_then_squared, (1.0,)),
        (sum_then_half, (1.0,)),
        (sum_then_divided, (1.0,)),
    ],
)
def test_python_arithmetic_of_the_first_iteration_is_kept(fn, args):
    out = jax.jit(transpiler.convert(fn))(*args)
    assert float(out) == pytest.approx(float(fn(*args)), rel=1e-6)


RANDOM = np.random.default_rng(0)
NUMBERS = itertools.count()
BIG = np.zeros(100_000)
BYTES = bytearray()
__calls = [0]


def drawing(t):
    total = 0.0
    for i in range(t.shape[0]):
        total = total + random.random() * t[i]
    return total


def drawing_numpy(t):
    total = 0.0
    for i in range(t.shape[0]):
        total = total + np.random.rand() * t[i]
    return total


def drawing_generator(t):
    total = 0.0
    for i in range(t.shape[0]):
        total = total + RANDOM.uniform() * t[i]
    return total


def counting(t):
    total = 0.0
    for i in range(t.shape[0]):
        total = total + next(itertools.islice(NUMBERS, 1)) * t[i]
    return total


def big_array(t):
    total = 0.0
    for i in range(t.shape[0]):
        v = BIG[0]
        BIG[0] = v + 1  # too large to copy: the watch cannot tell, so it assumes a change
        total = total + v * t[i]
    return total


def growing_bytes(t):
    total = 0.0
    for i in range(t.shape[0]):
        BYTES.append(1)
        total = total + len(BYTES) * t[i]
    return total


def underscored(v):
    __calls[0] += 1
    return v * __calls[0]


def underscored_global(t):
    total = 0.0
    for i in range(t.shape[0]):
        total = total + underscored(t[i])
    return total


def reset_state():
    global RANDOM, NUMBERS
    random.seed(0)
    np.random.seed(0)
    RANDOM = np.random.default_rng(0)
    NUMBERS = itertools.count()
    BIG[0] = 0
    BYTES.clear()
    __calls[0] = 0


@pytest.mark.parametrize(
    "fn",
    [
        drawing,
        drawing_numpy,
        drawing_generator,
        counting,
        big_array,
        growing_bytes,
        underscored_global,
    ],
)
def test_state_the_first_iteration_changes_where_no_container_shows_it(fn):
    # Two iterations: the first as Python, the second traced in the loop. Restarted, the
    # loop would use the second trace's draw for both.
    t = jnp.array([1.0, 2.0])
    reset_state()
    expected = float(fn(t))
    reset_state()
    assert float(jax.jit(transpiler.convert(fn))(t)) == pytest.approx(expected, rel=1e-6)


debug_print = functools.partial(jax.debug.print, "v={}")


def partial_print(t):
    total = 0.0
    for i in range(t.shape[0]):
        debug_print(t[i])
        total = total + t[i]
    return total


def printing_check(v):
    debug_print(v)
    return v > 1.0


def partial_print_in_test(x):
    while printing_check(x):
        x = x / 2
    return x


@pytest.mark.parametrize(
    "fn, arg", [(partial_print, jnp.array([1.0, 2.0])), (partial_print_in_test, 3.0)]
)
def test_a_partial_of_jax_debug_print_is_an_effect_too(fn, arg, capsys):
    fn(arg)
    expected = capsys.readouterr().out.splitlines()
    jax.jit(transpiler.convert(fn))(arg)
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == expected


def indexed_print(t):
    total = 0.0
    for i in range(t.shape[0]):
        jax.debug.print("i={}", i)
        total = total + t[i]
    return total


def test_jax_debug_print_of_the_index_keeps_the_loop_a_scan():
    assert "scan[" in str(jax.make_jaxpr(transpiler.convert(indexed_print))(jnp.arange(5.0)))


class Settings:
    __slots__ = ("_values",)

    def __init__(self, values):
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name):
        return self._values[name]  # a KeyError, not an AttributeError, for `__dict__`


class Unhashable(type):
    def __eq__(cls, other):
        return cls is other


class Odd(metaclass=Unhashable):
    __slots__ = ("v",)


SETTINGS = Settings({"n": 3})
ODD = Odd()


def python_loops_beside_odd_globals(x):
    s = 0
    for i in range(SETTINGS.n):
        s = s + i
    k = 0
    while k < 3:
        k += 1
    return x + s + k


def test_python_loops_in_a_module_of_odd_objects():
    assert float(jax.jit(transpiler.convert(python_loops_beside_odd_globals))(1.0)) == 7.0


# A `while` whose leading `if C: break` is traced where its test is a Python True: staged
# from there only where that computes the same (runtime.loops.while_stmt); else that iteration
# runs as Python would, with a flag, the loop staged after it. Found by the fuzzer: the break
# folded into the test made the loop staged at once, and 1 << 20 wrapped in int32.


def hash_break(x, y):
    s = 1 << 20
    k = 0
    done = False
    while not done:
        if (x + k) % 7 == y:
            break
        s = (s * 4096 % 1009 + x) % 97
        k += 1
        done = k >= 3
    return s


@pytest.mark.parametrize("args", [(0, 3), (0, 0), (5, 6)])
def test_a_leading_break_traced_at_first_keeps_python_arithmetic(args):
    assert int(jax.jit(transpiler.convert(hash_break))(*args)) == hash_break(*args)


def counted_by_type(x):
    n = 0
    done = False
    while not done:
        n += 1
        done = x * n > 3
        if isinstance(n, int):  # True for the Python iteration only: n is traced after it
            x = x + 1.0
    return x, n


def test_a_counter_used_as_a_python_value_keeps_the_python_first_iteration():
    # Restarted from before the first iteration, `n` would be an int32 there too, and the
    # iteration Python ran with a Python int would compute differently.
    x, n = transpiler.jit(counted_by_type)(1.0)
    assert (float(x), int(n)) == (2.0, 2)


def sines(x):
    found = []
    for j in range(5):
        found.append(jnp.sin(x + j))
    return jnp.stack(found)


def centroids(labels, points):
    found = []
    for j in range(3):
        members = labels == j
        found.append(jnp.sum(points * members[:, None], axis=0))
    return jnp.stack(found), len(found)


def test_a_list_the_loop_collects_in_starts_empty_in_one_scan():
    # The first iteration, run as Python, appends to the list: no other name sees it, so the
    # loop is one scan of every iteration from the empty list, not that iteration joined to a
    # scan of the rest.
    graph = lowered(sines, 0.5)
    assert graph.count("stablehlo.while") == 1 and "concatenate" not in graph
    assert "stablehlo.sine" in graph and graph.count("stablehlo.sine") == 1
    check_jit(sines, 0.5)
    check_grad(lambda x: jnp.sum(sines(x)), 0.5)
    labels, points = jnp.array([0, 2, 1, 2]), jnp.arange(8.0).reshape(4, 2)
    assert "concatenate" not in lowered(centroids, labels, points)
    check_jit(centroids, labels, points)
    assert_tree_close(
        jax.vmap(transpiler.convert(sines))(jnp.arange(3.0)), jax.vmap(sines)(jnp.arange(3.0))
    )


def collected_with_an_alias(x):
    found = []
    seen = found  # another name for the list: it sees the first iteration's item
    for j in range(3):
        found.append(jnp.sin(x + j))
    return jnp.stack(found), len(seen)


def collected_after_items(x):
    found = [x]
    for j in range(3):
        found.append(jnp.sin(found[-1] + j))
    return jnp.stack(found)


def collected_and_printed(x):
    found = []
    for j in range(3):
        print("item", j)
        found.append(jnp.sin(x + j))
    return jnp.stack(found)


@pytest.mark.parametrize(
    "fn", [collected_with_an_alias, collected_after_items, collected_and_printed]
)
def test_lists_the_first_iteration_shows_to_others_go_on_from_after(fn, capsys):
    check_jit(fn, 0.5)
    printed = capsys.readouterr().out
    assert printed.count("item 0") == printed.count("item 1")


# A `while` whose test stays Python's True for several iterations where its state is traced
# (`(err > tol or it < 5)`: True while `it < 5`) is staged from before its first iteration
# where each iteration Python ran computes the same staged (`peeling.again`).


def fixed_point(a, x, tol, least=5, most=500):
    it = 0
    err = jnp.inf
    while (err > tol or it < least) and it < most:
        x_new = jnp.tanh(a @ x) + 0.5
        err = jnp.linalg.norm(x_new - x)
        x = x_new
        it += 1
    return x, it


A = jnp.array([[0.5, -0.2], [0.1, 0.3]])
X0 = jnp.array([1.0, -1.0])


@pytest.mark.parametrize("tol", [1e-6, 10.0])  # stops by its error, or after `least`
def test_a_test_python_true_for_several_iterations_is_staged_from_the_start(tol):
    converted = check_jit(fixed_point, A, X0, tol)
    # One matrix product, in the loop: none of the iterations Python ran is left before it.
    assert lowered(fixed_point, A, X0, tol).count("stablehlo.dot_general") == 1
    x, it = jax.jit(converted)(A, X0, tol)
    assert int(it) == fixed_point(A, X0, tol)[1]
    check_grad(lambda x: jnp.sum(fixed_point(A, x, tol)[0]), X0)
    batched = jax.vmap(converted, in_axes=(None, 0, None))(A, jnp.stack([X0, 2 * X0]), tol)
    for i, x0 in enumerate([X0, 2 * X0]):
        assert_tree_close(
            jax.tree_util.tree_map(lambda v, i=i: v[i], batched), fixed_point(A, x0, tol)
        )


def test_a_loop_that_ends_while_its_test_is_python_stays_python():
    # Python's loop ends at it == 3 on a Python False: `it` stays a Python int.
    x, it = transpiler.convert(fixed_point)(A, X0, 10.0, 5, 3)
    assert type(it) is int and it == 3
    assert_tree_close(x, fixed_point(A, X0, 10.0, 5, 3)[0])


def fixed_point_printing(a, x, tol):
    it = 0
    err = jnp.inf
    while (err > tol or it < 3) and it < 50:
        print("step")
        x = jnp.tanh(a @ x) + 0.5
        err = jnp.abs(x).sum()
        it += 1
    return x, it


def fixed_point_reading_the_count(a, x, tol):
    it = 0
    err = jnp.inf
    while (err > tol or it < 3) and it < 50:
        x = jnp.tanh(a @ x) + 0.5 / (it + 1)
        err = jnp.abs(x).sum()
        it += 1
    return x, it


def fixed_point_float_time(a, x, tol):
    t = 0.0
    err = jnp.inf
    while (err > tol or t < 0.3) and t < 5.0:
        x = jnp.tanh(a @ x) + 0.5
        err = jnp.abs(x).sum()
        t += 0.1
    return x, t


@pytest.mark.parametrize(
    "fn", [fixed_point_printing, fixed_point_reading_the_count, fixed_point_float_time]
)
def test_iterations_staging_would_compute_differently_stay_python(fn, capsys):
    expected = fn(A, X0, 100.0)
    printed = capsys.readouterr().out
    actual = jax.jit(transpiler.convert(fn))(A, X0, 100.0)
    assert_tree_close(actual, expected)
    assert capsys.readouterr().out == printed  # each Python iteration's print, once
    # The Python iterations are left before the loop: a product each, and the loop's.
    assert lowered(fn, A, X0, 100.0).count("stablehlo.dot_general") > 1


def warm_up(w, max_steps=100, warmup_frac=0.07):
    step = 0
    loss = jnp.inf
    while (loss > 1e-3 or step < warmup_frac * max_steps) and step < max_steps:
        w = w - 0.8 * (w - 3.0)
        loss = (w - 3.0) ** 2
        step += 1
    return w, loss, step


def test_a_counter_compared_with_what_int32_compares_otherwise_keeps_python_iterations():
    # (helper 164) 0.07 * 100 is 7.000000000000001: Python's 7 < it holds, float32's 7.0 does
    # not; staged from the start, the loop stopped a step early. A whole float, 7.0, compares
    # alike: staged from the start.
    for frac, restarted in ((0.07, False), (0.5, True)):
        check_jit(warm_up, jnp.float32(0.0), 100, frac, static_argnums=(1, 2))
        text = lowered(lambda w, frac=frac: warm_up(w, 100, frac), jnp.float32(0.0))
        assert (text.count("stablehlo.multiply") <= 3) == restarted, frac
    w, loss, step = jax.jit(transpiler.convert(warm_up), static_argnums=(1, 2))(
        jnp.float32(0.0), 100, 0.07
    )
    assert int(step) == warm_up(jnp.float32(0.0), 100, 0.07)[2]


def solve(a, max_iter):
    x, it, err = a, 0, jnp.inf
    while (err > 1e-4 or it < 3) and it < max_iter:
        x = 0.5 * (x + a / x)
        err = jnp.abs(x * x - a)
        it += 1
    return x, it


def test_a_counter_compared_with_an_int_past_int32_keeps_python_iterations():
    # (helper 164) `it < sys.maxsize`: no int32 holds it; the first iterations stay Python's.
    assert "compared_with=" in transpiler.to_source(solve)
    for bound in (50, 2**31 - 1):
        check_jit(solve, jnp.float32(2.0), bound, static_argnums=(1,))
