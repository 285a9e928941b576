"""Reverse-mode gradients through data-dependent loops, as model code writes them.

Every program here has a `while` (or a `for` over a traced range) whose trip count depends on the
data, staged as a `lax.while_loop` that `jax.grad` goes through by recomputing from checkpoints.
Each gradient of the converted function, compiled, is compared with

  (a) `jax.grad` of the plain function run eagerly (Python runs its loops: the reference), and
  (b) central finite differences of the plain function in float64,

with x64 enabled inside the test. Finite differences take the derivative of the program as it
computes (a fixed number of iterations near the point), which is what reverse mode gives.
"""

from __future__ import annotations

import inspect
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import assert_tree_close

# --- the programs, written as users write them --------------------------------------------------


def newton_cube_root(a):
    x = a
    while abs(x * x * x - a) > 1e-12:
        x = x - (x * x * x - a) / (3.0 * x * x)
    return x


def _vector_field(k, y):
    return -k * y + jnp.sin(y)


def adaptive_heun(k, y0):
    """Heun's method with an Euler error estimate: steps that miss the tolerance are retried
    with half the step size."""
    t, y, dt = 0.0, y0, 0.3
    while t < 1.0:
        dt = min(dt, 1.0 - t)
        k1 = _vector_field(k, y)
        k2 = _vector_field(k, y + dt * k1)
        y_low = y + dt * k1
        y_high = y + 0.5 * dt * (k1 + k2)
        error = jnp.max(jnp.abs(y_high - y_low))
        if error < 1e-3:
            t = t + dt
            y = y_high
            dt = dt * 1.5
        else:
            dt = dt * 0.5
    return jnp.sum(y * y)


def bisection_cube_root(theta):
    lo, hi = 0.0, theta
    while hi - lo > 1e-4 * theta:
        mid = 0.5 * (lo + hi)
        if mid * mid * mid > 2.0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi) * theta


def power_iteration(m):
    a = m.T @ m
    v = jnp.ones(a.shape[0]) / np.sqrt(a.shape[0])
    eigenvalue, previous = 0.0, np.inf
    while abs(eigenvalue - previous) > 1e-10 * abs(eigenvalue):
        w = a @ v
        previous, eigenvalue = eigenvalue, v @ w
        v = w / jnp.linalg.norm(w)
    return eigenvalue


def rnn_loss(w, xs, length):
    h = jnp.zeros(w.shape[0])
    for t in range(length):
        h = jnp.tanh(w @ h + xs[t])
    return jnp.sum(h * h)


def kmeans_inertia(points, centroids):
    assignment = jnp.full(points.shape[0], -1)
    while True:
        distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        new_assignment = jnp.argmin(distances, axis=1)
        members = jax.nn.one_hot(new_assignment, centroids.shape[0])
        counts = jnp.maximum(jnp.sum(members, axis=0), 1.0)
        centroids = (members.T @ points) / counts[:, None]
        if jnp.all(new_assignment == assignment):
            break
        assignment = new_assignment
    return jnp.sum((points - centroids[assignment]) ** 2)


def beam_search(w, h0):
    """Beam search (3 beams, vocabulary of 4, token 0 ends a beam) until every beam has ended."""
    vocabulary = w.shape[1]
    scores = jnp.array([0.0, -1e9, -1e9])
    hidden = jnp.tile(h0, (3, 1))
    finished = jnp.zeros(3, dtype=bool)
    step = 0
    while not jnp.all(finished) and step < 12:
        log_probs = jax.nn.log_softmax(hidden @ w)
        only_end = jnp.where(jnp.arange(vocabulary) == 0, 0.0, -1e9)
        log_probs = jnp.where(finished[:, None], only_end, log_probs)
        candidates = (scores[:, None] + log_probs).reshape(-1)
        scores, index = jax.lax.top_k(candidates, 3)
        parent, token = index // vocabulary, index % vocabulary
        hidden = jnp.tanh(hidden[parent] + w[:, token].T)
        finished = finished[parent] | (token == 0)
        step += 1
    return scores, step


def beam_search_score(w, h0):
    scores, steps = beam_search(w, h0)
    return jnp.max(scores) + 0.01 * steps


class Particle(NamedTuple):
    position: jax.Array
    velocity: jax.Array


def spring_energy(k, x0):
    state = {"particle": Particle(x0, jnp.zeros_like(x0)), "work": 0.0, "t": 0.0}
    while state["t"] < 1.0 and state["work"] < 50.0:
        p = state["particle"]
        velocity = p.velocity - 0.05 * k * p.position
        position = p.position + 0.05 * velocity
        state = {
            "particle": Particle(position, velocity),
            "work": state["work"] + jnp.sum(velocity * velocity),
            "t": state["t"] + 0.05,
        }
    return jnp.sum(state["particle"].position) + state["work"]


# --- the check ----------------------------------------------------------------------------------


def _finite_differences(fn, args, argnum, h):
    x = np.asarray(args[argnum], dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        up = [*args]
        down = [*args]
        up[argnum], down[argnum] = jnp.asarray(x + step), jnp.asarray(x - step)
        grad[i] = (float(fn(*up)) - float(fn(*down))) / (2 * h)
    return grad


def check_gradient(fn, *args, argnum=0, h=1e-6, rtol=1e-5):
    """The converted gradient, compiled, equals the eager gradient and finite differences."""
    with jax.enable_x64(True):
        args = [jnp.asarray(a, jnp.float64) if np.asarray(a).dtype.kind == "f" else a for a in args]
        converted = jax.jit(jax.grad(transpiler.convert(fn), argnums=argnum))(*args)
        eager = jax.grad(fn, argnums=argnum)(*args)
        assert_tree_close(converted, eager, rtol=1e-9, atol=1e-9)
        numeric = _finite_differences(fn, args, argnum, h)
        assert_tree_close(converted, numeric, rtol=rtol, atol=rtol)
        return converted


def test_newton():
    grad = check_gradient(newton_cube_root, 5.0)
    np.testing.assert_allclose(np.asarray(grad), 5.0 ** (-2 / 3) / 3, rtol=1e-8)


def test_adaptive_ode_with_step_rejection():
    check_gradient(adaptive_heun, 0.7, np.array([1.0, -0.5, 2.0]))
    check_gradient(adaptive_heun, 0.7, np.array([1.0, -0.5, 2.0]), argnum=1)


def test_bisection():
    grad = check_gradient(bisection_cube_root, 3.0)
    assert abs(float(grad)) > 1.0  # the bounds carry the derivative: it is not zero


def test_power_iteration_until_convergence():
    m = np.random.default_rng(0).normal(size=(4, 4))
    check_gradient(power_iteration, m)


def test_rnn_over_a_traced_sequence_length():
    rng = np.random.default_rng(1)
    w, xs = 0.5 * rng.normal(size=(3, 3)), rng.normal(size=(6, 3))
    check_gradient(rnn_loss, w, xs, jnp.int32(4))
    check_gradient(rnn_loss, w, xs, jnp.int32(6), argnum=1)


def test_kmeans_while_true_break():
    rng = np.random.default_rng(2)
    points = np.concatenate([rng.normal(size=(5, 2)), rng.normal(size=(5, 2)) + 4.0])
    check_gradient(kmeans_inertia, points, points[[0, 9]] + 0.1)


def test_beam_search_until_all_beams_end():
    w = np.random.default_rng(1).normal(size=(3, 4))  # every beam ends after 3 steps
    with jax.enable_x64(True):
        _, steps = beam_search(jnp.asarray(w), jnp.ones(3))
    assert steps == 3  # the loop stops because every beam has ended, not at the limit
    check_gradient(beam_search_score, w, np.ones(3))


def test_pytree_loop_state_dict_and_namedtuple():
    check_gradient(spring_energy, 2.0, np.array([0.5, -1.0]))
    check_gradient(spring_energy, 2.0, np.array([0.5, -1.0]), argnum=1)


# --- forward mode and vmap through nested staged loops ------------------------------------------


def nested_loops(x, n):
    """A `while` inside a `for` over a traced range inside a `while`."""
    total = 0.0
    rounds = 0
    while total < 40.0 and rounds < 4:
        for j in range(n):
            y = x
            while y < 6.0:
                y = y * 1.5 + 0.1 * j
            total = total + y * x
        rounds += 1
    return total


@pytest.mark.parametrize("x", [0.7, 2.5])
def test_nested_staged_loops_under_every_transformation(x):
    converted = transpiler.convert(nested_loops)
    n = jnp.int32(3)
    x = jnp.float32(x)
    expected_value, expected_tangent = jax.jvp(lambda v: nested_loops(v, n), (x,), (1.0,))
    value, tangent = jax.jit(lambda v: jax.jvp(lambda u: converted(u, n), (v,), (1.0,)))(x)
    np.testing.assert_allclose([value, tangent], [expected_value, expected_tangent], rtol=1e-5)
    np.testing.assert_allclose(jax.jit(jax.jacfwd(converted))(x, n), expected_tangent, rtol=1e-5)
    np.testing.assert_allclose(jax.jit(jax.grad(converted))(x, n), expected_tangent, rtol=1e-5)
    xs = jnp.array([0.7, 2.5, 1.1])
    batched = jax.jit(jax.vmap(jax.grad(converted), in_axes=(0, None)))(xs, n)
    eager = [jax.grad(nested_loops)(v, n) for v in xs]
    np.testing.assert_allclose(batched, eager, rtol=1e-5)


def test_checkpoint_count_option_changes_nothing_but_memory():
    def long_loop(x, n):
        i = 0
        while i < n:
            transpiler.loop_options(checkpoints=4)
            x = jnp.sin(x) * 1.01
            i += 1
        return jnp.sum(x)

    def scanned(x, n):
        return jnp.sum(jax.lax.scan(lambda c, _: (jnp.sin(c) * 1.01, None), x, None, length=n)[0])

    x = jnp.linspace(-1.0, 1.0, 4)
    actual = jax.jit(jax.grad(transpiler.convert(long_loop)))(x, jnp.int32(300))
    np.testing.assert_allclose(actual, jax.grad(scanned)(x, 300), rtol=1e-5)


def printing_loop(x, n):
    i = 0
    while i < n:
        print("step", i)
        x = jnp.sin(x) * 1.1
        i += 1
    return x


def test_prints_in_the_loop_happen_once_per_step_under_grad(capsys):
    jax.jit(jax.grad(transpiler.convert(printing_loop)))(0.3, 3)
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == ["step 0", "step 1", "step 2"]


def guarded_steps(x):
    while x < 5.0:
        print("at", x)
        assert x < 5.0, "x went past 5"  # never fails in Python
        x = x + 1.0
    return x


def bounded_guarded_steps(x):
    while x < 5.0:
        transpiler.loop_options(max_iterations=8)
        print("at", x)
        assert x < 5.0, "x went past 5"
        x = x + 1.0
    return x


@pytest.mark.parametrize("fn", [guarded_steps, bounded_guarded_steps])
def test_loop_effects_under_vmap_happen_only_for_elements_still_looping(fn, capsys):
    # Batched, the loop runs until every element is done; an element that is done does not
    # run its body any more, so its print and assert do not happen.
    xs = jnp.array([0.5, 3.5])
    out = jax.jit(jax.vmap(transpiler.convert(fn)))(xs)
    grads = jax.jit(jax.vmap(jax.grad(transpiler.convert(fn))))(xs)
    jax.effects_barrier()
    np.testing.assert_allclose(out, [5.5, 5.5])
    np.testing.assert_allclose(grads, [1.0, 1.0])
    printed = capsys.readouterr().out.splitlines()
    assert sorted(printed[:7]) == sorted(f"at {v}" for v in (0.5, 1.5, 2.5, 3.5, 4.5, 3.5, 4.5))


def squaring_until_large(x):
    y = x
    while y < 10.0:
        y = y * y + 1.0
    return y * y


def tanh_steps(x, n):
    i = 0
    while i < n:
        x = jnp.tanh(x * 1.4) + 0.3
        i += 1
    return x**3


def bounded_tanh_steps(x, n):
    i = 0
    while i < n:
        transpiler.loop_options(max_iterations=10)
        x = jnp.tanh(x * 1.4) + 0.3
        i += 1
    return x**3


SECOND_ORDER = {
    "hessian": jax.hessian,
    "jacfwd(grad)": lambda f: jax.jacfwd(jax.grad(f)),
    "jacrev(jacrev)": lambda f: jax.jacrev(jax.jacrev(f)),
    "jacfwd(jacfwd)": lambda f: jax.jacfwd(jax.jacfwd(f)),
    "grad(jvp)": lambda f: jax.grad(lambda x: jax.jvp(f, (x,), (1.0,))[1]),
}


def lax_growth(x):
    return jax.lax.while_loop(lambda s: s < 10.0, lambda s: s * 1.5, x)


def test_second_derivatives_through_a_called_lax_while_loop_name_its_line():
    # The lax.while_loop converted code calls is the checkpointed loop too: its refusal names
    # the user's line and advice that applies to a lax loop.
    with pytest.raises(StagingError, match=r"lax.while_loop at .*test_gradients.py:\d+.*lax.scan"):
        jax.jit(jax.hessian(transpiler.convert(lax_growth)))(1.0)
    assert float(jax.jit(jax.grad(transpiler.convert(lax_growth)))(1.0)) == 1.5**6


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_derivatives_through_a_staged_while_are_refused_by_line(name):
    # The derivative of the checkpointed loop's derivative would be computed wrong (JAX
    # differentiates its custom_linear_solve as if it did not depend on the state): refused.
    second = SECOND_ORDER[name]
    with pytest.raises(Exception, match="second derivatives through a staged while loop") as e:
        jax.jit(second(transpiler.convert(squaring_until_large)))(1.3)
    assert "test_gradients.py" in str(e.value) and "max_iterations" in str(e.value)


def growing_in_a_branch(x):
    y = x
    if x[0] > 0:
        while jnp.sum(y) < 3.0:  # the loop whose line the refusal names
            y = jnp.sin(y) + y * 1.2
    return jnp.sum(y**3)


def growing_per_item(x):
    y = x
    for v in x:  # a scan
        while jnp.sum(y) < 3.0 + v:  # the loop whose line the refusal names
            y = y * 1.2 + y * y * 0.1
    return jnp.sum(y**3)


@pytest.mark.parametrize("fn", [growing_in_a_branch, growing_per_item])
@pytest.mark.parametrize("name", ["hessian", "jacfwd(jacfwd)"])
def test_second_derivatives_through_a_while_inside_a_cond_or_scan_are_refused(fn, name):
    # JAX differentiates the branch (the scan's body) as a jaxpr: the loop's derivative rule
    # is not called again, and the second derivative came out silently wrong (531.9 for
    # 606.7). The refusal is an equation of the graph now, met however JAX gets there.
    line = next(i for i, t in enumerate(inspect.getsource(fn).splitlines()) if "names" in t)
    where = f"test_gradients.py:{fn.__code__.co_firstlineno + line}, while loop"
    with pytest.raises(StagingError, match="second derivatives through a staged while") as e:
        jax.jit(SECOND_ORDER[name](transpiler.convert(fn)))(jnp.array([0.3, 0.9]))
    assert where in str(e.value)


def test_the_refusal_of_a_hessian_of_a_jitted_function_names_the_loop():
    # The message was made after the function had returned: its frame's line had moved on.
    with pytest.raises(StagingError) as e:
        jax.hessian(transpiler.jit(squaring_until_large))(1.3)
    line = squaring_until_large.__code__.co_firstlineno + 2
    assert f"test_gradients.py:{line}, while loop" in str(e.value)


def random_walk(x, key):
    while x < 3.0:
        key, sub = jax.random.split(key)
        x = x + 0.3 * jax.random.normal(sub) + 0.1
    return x


def test_derivatives_through_a_while_carrying_a_typed_key():
    # A key has no tangent: its zero is float0 (it was `zeros_like(key) + 0.0`, a TypeError).
    key = jax.random.key(0)
    expected = jax.grad(random_walk)(0.5, key)
    converted = transpiler.convert(random_walk)
    assert_tree_close(jax.jit(jax.grad(converted))(0.5, key), expected)
    assert_tree_close(jax.jit(jax.jacfwd(converted))(0.5, key), expected)


def test_second_derivatives_through_a_bounded_while_are_right():
    with jax.enable_x64(True):
        x = jnp.float64(0.3)
        staged = jax.jit(jax.hessian(transpiler.convert(bounded_tanh_steps)))(x, 4)
        eager = jax.hessian(tanh_steps)(x, 4)
        np.testing.assert_allclose(staged, eager, rtol=1e-9)


def bounded_newton(a):
    x = a
    steps = 0
    while jnp.abs(x * x - a) > 1e-5 * a:
        transpiler.loop_options(max_iterations=20)
        x = 0.5 * (x + a / x)
        steps += 1
    return x, steps


def test_a_bounded_while_runs_as_a_while_loop_that_stops_early():
    # Run, it is a while loop (as fast and as quick to compile as one written by hand); its
    # derivative is the masked scan's, which reverse mode goes through.
    converted = transpiler.convert(bounded_newton)
    assert "while[" in str(jax.make_jaxpr(converted)(2.0))
    x, steps = jax.jit(converted)(2.0)
    assert (float(x), int(steps)) == pytest.approx(tuple(map(float, bounded_newton(2.0))))
    grad = jax.jit(jax.grad(lambda a: converted(a)[0]))(2.0)
    np.testing.assert_allclose(grad, 0.5 / 2.0**0.5, rtol=1e-4)
    np.testing.assert_allclose(
        jax.jit(jax.vmap(lambda a: converted(a)[0]))(jnp.array([2.0, 9.0])),
        [2.0**0.5, 3.0],
        rtol=1e-5,
    )


def capped_noisy_test(x):
    def more(x):
        print("test", x)
        return x < 100.0

    while more(x):
        transpiler.loop_options(max_iterations=3)
        x = x * 2.0
    return x


def test_a_bounded_loop_evaluates_its_test_as_often_as_python(capsys):
    # Three iterations, then the bound: Python evaluates the test three times, not four (the
    # converted function bounds the loop when it runs as Python too).
    expected_value = transpiler.convert(capped_noisy_test)(1.0)
    assert expected_value == 8.0
    expected = capsys.readouterr().out.splitlines()
    assert float(jax.jit(transpiler.convert(capped_noisy_test))(1.0)) == expected_value
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == expected
    grad = jax.jit(jax.grad(transpiler.convert(capped_noisy_test)))(1.0)
    jax.effects_barrier()
    assert float(grad) == 8.0 and capsys.readouterr().out.splitlines() == expected


def bounded_loop_around_a_breaking_for(x, k):
    a = x * 1.0
    e = jnp.float16(1.0)
    w = 0
    while x[1] < a[1] < 2.0 and w < 4:
        transpiler.loop_options(max_iterations=5)
        for _ in k:
            a = a + e.astype(jnp.float32)
            if jnp.any(x < 0) or w % 2 == 0:
                break
    return jnp.sum(a)


def test_grad_of_a_bounded_while_around_a_for_with_a_traced_break():
    # The bounded while is a scan under jax.grad; its jvp hands the inner (checkpointed) loop
    # tangents it made as constant zeros, which JAX cannot transpose (an AssertionError in
    # JAX's _linear_solve_transpose_rule) unless they are tied to the live ones.
    x, k = jnp.array([-1.0, -0.5, 0.25]), jnp.array([2, 0, -4])
    expected = jax.grad(bounded_loop_around_a_breaking_for)(x, k)
    got = jax.jit(jax.grad(transpiler.convert(bounded_loop_around_a_breaking_for)))(x, k)
    assert_tree_close(got, expected)


def sum_of_kept_once_two(x):
    c = 1
    kept = []
    for v in x:
        w = 0
        while w < 4 and len(kept) > 1:
            if c % 2:
                return sum(kept)  # a Python 0 where nothing is kept yet: the state's int
        if x[0] < 0:
            kept.append(v)
    return 0.0


def test_reverse_mode_through_a_while_whose_state_a_python_int_starts():
    # The return value enters the checkpointed while weakly typed int32 and leaves it float32:
    # the derivative's loops kept states of the int dtype (a raw while_loop TypeError).
    x = jnp.array([-1.0, 2.0, 0.5])
    expected = jax.grad(sum_of_kept_once_two)(x)
    got = jax.jit(jax.grad(transpiler.convert(sum_of_kept_once_two)))(x)
    np.testing.assert_allclose(got, expected)


def doubling_from_a_constant(x):
    a = jnp.float32(1.0)
    b = jnp.sqrt(x)  # d b / d x is inf at 0
    while a < 10:
        a = a * 2
        b = b + a
    return a


def test_an_infinite_tangent_of_one_loop_variable_leaves_the_others_exact():
    # `a` does not depend on x: its derivative is 0, not 0 * inf (nan) from the zero tangent
    # the loop's derivative made for it next to b's.
    # (Reverse mode gives JAX's nan here, as a hand-written scan carrying b does: b's zero
    # cotangent meets sqrt's infinite derivative, 0 * inf.)
    converted = transpiler.convert(doubling_from_a_constant)
    assert float(jax.jit(jax.jacfwd(converted))(0.0)) == 0.0
    _, tangent = jax.jit(lambda x: jax.jvp(converted, (x,), (1.0,)))(0.0)
    assert float(tangent) == 0.0


def grows_past_ten(x, a):
    while x < 10.0:
        x = x * a
    return 1e-50 * x


def test_a_while_loops_derivatives_keep_float64_for_python_floats():
    # With x64, Python floats are weakly typed float64 arrays: each tangent plus the
    # checkpointed loop's float32 anchor was rounded to float32 (1e-50 made 0.0).
    with jax.enable_x64(True):
        grads = jax.jit(jax.grad(transpiler.convert(grows_past_ten), argnums=(0, 1)))(1.5, 2.0)
        expected = jax.grad(grows_past_ten, argnums=(0, 1))(1.5, 2.0)  # eager: Python's loop
        for got, want in zip(grads, expected):
            assert got.dtype == jnp.float64
            np.testing.assert_allclose(float(got), float(want), rtol=1e-12)
        assert float(expected[0]) == pytest.approx(8e-50)


def power_series(x, c):
    s = 0.0
    for k in range(4):  # staged: `k` is a traced int in the scan
        s = s + c[k] * x**k
    return s


def bounded_power_sum(x, n):
    s = 0.0
    k = 0
    while k < n:
        transpiler.loop_options(max_iterations=3)
        s = s + pow(x, k)
        k += 1
    return s


def power_sum_of_jnp_powers(x, n):
    s = 0.0
    for k in range(3):
        s = s + jnp.power(x, k) * n
    return s


def test_second_derivatives_of_a_power_by_a_loop_counter_are_pythons_at_zero():
    # JAX's power by a traced int exponent gives NaN second derivatives at x == 0 (its
    # derivative's other side, 0 * x ** -1); Python's loop has an int counter: `integer_pow`
    # (helper 129: NaN where eager gives 2.0 and 6.0).
    c = jnp.array([1.0, 2.0, 3.0, 4.0])
    for x in (0.0, 0.5, -1.5):
        cases = ((power_series, (x, c)), (bounded_power_sum, (x, 3)))
        for fn, args in (*cases, (power_sum_of_jnp_powers, (x, 3))):
            converted = transpiler.convert(fn)
            expected = jax.hessian(fn)(*args)
            np.testing.assert_allclose(jax.jit(jax.hessian(converted))(*args), expected)
            np.testing.assert_allclose(jax.jit(jax.grad(converted))(*args), jax.grad(fn)(*args))
    xs = jnp.array([0.0, 1.0, 2.0])
    np.testing.assert_allclose(
        jax.jit(jax.vmap(jax.hessian(transpiler.convert(power_series)), (0, None)))(xs, c),
        jax.vmap(jax.hessian(power_series), (0, None))(xs, c),
    )


# --- a while loop its own counter bounds ---------------------------------------------------------


def counted_heun(k, y0, max_steps=200):
    """`adaptive_heun`, stopped by a step counter too: at most `max_steps` iterations."""
    t, y, dt, steps = 0.0, y0, 0.3, 0
    while t < 1.0 and steps < max_steps:
        dt = min(dt, 1.0 - t)
        k1 = _vector_field(k, y)
        k2 = _vector_field(k, y + dt * k1)
        error = jnp.max(jnp.abs(0.5 * dt * (k2 - k1)))
        if error < 1e-3:
            t = t + dt
            y = y + 0.5 * dt * (k1 + k2)
            dt = dt * 1.5
        else:
            dt = dt * 0.5
        steps += 1
    return jnp.sum(y * y)


def test_a_while_its_counter_bounds_is_differentiated_as_a_masked_scan():
    # `steps < max_steps` with `steps += 1` in every iteration: at most 200 iterations. Run, the
    # loop is the while loop as written; differentiated, a scan of 200 masked steps that
    # stores every step (no checkpoints: no recomputed step compiled apart).
    converted = transpiler.convert(counted_heun)
    y0 = np.array([1.0, -0.5, 2.0])
    run = str(jax.make_jaxpr(converted)(0.7, y0))
    assert "while[" in run and "scan[" not in run and "custom_lin" not in run
    derivative = str(jax.make_jaxpr(jax.grad(converted))(0.7, y0))
    # (its first iteration runs as Python: it reads the Python `t`; the scan, the 199 left)
    assert "scan[" in derivative and "length=199" in derivative
    assert "custom_lin" not in derivative  # the checkpointed loop's linear solve
    check_gradient(counted_heun, 0.7, y0)
    check_gradient(counted_heun, 0.7, y0, argnum=1)


def counted_growth(x, limit):
    i = 0
    while x < 100.0 and i < limit:
        x = x * 1.5 + 0.1
        i += 1
    return x


@pytest.mark.parametrize("limit", [0, 1, 5, 600])
def test_a_counter_bound_is_taken_where_it_is_a_python_int_in_range(limit):
    converted = transpiler.convert(counted_growth)
    derivative = str(jax.make_jaxpr(jax.grad(converted), static_argnums=1)(1.0, limit))
    bounded = 1 <= limit <= 512  # 0: no iteration; 600: left to checkpoints
    assert ("scan[" in derivative) == bounded
    np.testing.assert_allclose(
        jax.jit(converted, static_argnums=1)(1.0, limit), counted_growth(1.0, limit), rtol=1e-6
    )
    np.testing.assert_allclose(
        jax.jit(jax.grad(converted), static_argnums=1)(1.0, limit),
        jax.grad(counted_growth)(1.0, limit),
        rtol=1e-5,
    )
    # A traced bound bounds nothing the program knows when it is compiled.
    assert "scan[" not in str(jax.make_jaxpr(jax.grad(converted))(1.0, jnp.int32(5)))


def counted_and_printed(x):
    i = 0

    def more(x, i):
        print("test", i)
        return x < 100.0 and i < 3

    while more(x, i):
        x = x * 2.0
        i += 1
    return x


def test_a_counter_bound_leaves_a_test_that_prints_as_python_evaluates_it(capsys):
    # `i < 3` is inside a call: no bound is read off the test; the test runs after the last
    # iteration too, as Python's.
    expected = counted_and_printed(1.0)
    printed = capsys.readouterr().out
    assert float(transpiler.jit(counted_and_printed)(jnp.float32(1.0))) == expected
    assert capsys.readouterr().out == printed


def counted_and_logged(x):
    i = 0
    while x < 10.0 and i < 5:
        jax.debug.print("x={x}", x=x)
        x = x * 2.0
        i += 1
    return x


def counted_with_a_key(w):
    key = jax.random.key(0)
    c = 0
    while c < 3 and w < 10.0:
        key, _ = jax.random.split(key)
        w = w * 2.0
        c += 1
    return w


def counted_with_large_steps(x):
    it = 0
    while jnp.sum(x) < 1e6 and it < 100:
        m = jnp.outer(x, x)  # 64 KB a step: 6.4 MB over the bound
        x = x + m @ x * 1e-3
        it += 1
    return jnp.sum(x)


def test_a_counter_bound_is_not_taken_where_the_scan_would_cost_more(capsys):
    # A body that prints keeps the checkpointed loop (its scan would print again under grad),
    # as do steps that compute more than the budget over the bound; a key in the state is fine.
    jax.jit(jax.grad(transpiler.convert(counted_and_logged)))(1.5)
    jax.effects_barrier()
    assert capsys.readouterr().out == "x=1.5\nx=3.0\nx=6.0\n"
    x = jnp.ones(128) * 0.5
    derivative = str(jax.make_jaxpr(jax.grad(transpiler.convert(counted_with_large_steps)))(x))
    assert "length=100" not in derivative
    assert float(jax.jit(transpiler.convert(counted_with_a_key))(1.0)) == 8.0
    assert float(jax.jit(jax.grad(transpiler.convert(counted_with_a_key)))(1.0)) == 8.0


def counted_down_in_its_test(x):
    c = 0
    while c < 3 and (c := c - 2) > -100:
        x = x * 1.01
        c += 1
    return x


def test_a_counter_the_test_itself_changes_bounds_nothing():
    # The walrus pass moves `c := c - 2` out of the test, where the counter analysis sees it
    # (it reads the loop as the passes before it leave it): no bound of 3 iterations, which
    # would cut its 98 short.
    assert "counted=" not in transpiler.to_source(counted_down_in_its_test)
    assert float(transpiler.jit(counted_down_in_its_test)(1.0)) == pytest.approx(
        counted_down_in_its_test(1.0), rel=1e-5
    )
