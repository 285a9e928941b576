"""Which staged branches become a select: cheap, effect-free, with the cond's derivatives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import selects
from tests.end_to_end.checks import check_grad, check_jit, check_vmap, primitives


def selectable(fn, *args) -> bool:
    return selects.selectable([jax.make_jaxpr(fn)(*args)])


@pytest.mark.parametrize(
    "branch",
    [
        lambda x, n: x,  # rebinding a name computes nothing
        lambda x, n: x + 1.0,
        lambda x, n: -x * 0.5,
        lambda x, n: x / 4.0,
        lambda x, n: jnp.maximum(x, 0.0),
        lambda x, n: jnp.clip(x, -1.0, 1.0),
        lambda x, n: jnp.where(x > 0, x, 0.0),
        lambda x, n: n * n // 3 % 7,  # integers carry no derivative
        lambda x, n: jnp.abs(n),
        lambda x, n: x > 2.0,
        lambda x, n: jnp.float32(1.0),
    ],
)
def test_cheap_branches_whose_derivative_ignores_their_inputs_are_selectable(branch):
    assert selectable(branch, jnp.float32(2.0), jnp.int32(3))


@pytest.mark.parametrize(
    "branch",
    [
        lambda x, n: jnp.log(x),  # infinite derivative at 0
        lambda x, n: jnp.sqrt(x),
        lambda x, n: 1.0 / x,
        lambda x, n: x * x,  # 0 * inf at inf
        lambda x, n: jnp.abs(x),  # sign(nan) * 0
        lambda x, n: jnp.tanh(x),
        lambda x, n: x**2,
        lambda x, n: x / n,
        # XLA folds a chain of constant factors, the branch's and those after it, into one:
        # a factor above 1 could make it infinite (0 * inf: a NaN gradient, found by an
        # adversarial review with `x * 1e20 * 1e20`, and `y = x * 1e30` ... `y * 1e10`).
        lambda x, n: x * 1e20 * 1e20,
        lambda x, n: x * 2.0,
        lambda x, n: x / 0.5,
        lambda x, n: jax.lax.cond(x > 0, lambda: x, lambda: -x),
        lambda x, n: jax.debug.print("{}", x) or x,  # an effect
    ],
)
def test_branches_a_select_would_change_are_not(branch):
    assert not selectable(branch, jnp.float32(2.0), jnp.int32(3))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float8_e4m3fn])
def test_every_float_dtype_counts_as_differentiable(dtype):
    x = jnp.ones((), dtype)
    assert not selectable(jnp.log, x) and not selectable(lambda x: x * x, x)
    assert selectable(lambda x: x + x, x)


def test_costly_branches_are_not_selectable():
    many = jnp.ones(selects.MAX_ELEMENTS + 1)
    assert not selectable(lambda x: x + 1.0, many)
    assert selectable(lambda x: x + 1.0, many[:-1])

    def long(x):
        for _ in range(selects.MAX_EQUATIONS + 1):
            x = x + 1.0
        return x

    assert not selectable(long, jnp.float32(0.0))


def relu_or_leak(x):
    if x > 0:
        y = x + 1.0
    else:
        y = x * 0.1
    return y


def sqrt_or_zero(x):
    if x > 0:
        y = jnp.sqrt(x)
    else:
        y = 0.0
    return y


def square_or_zero(x):
    if x < 1e30:
        y = x * x
    else:
        y = 0.0
    return y


def test_selected_branches_give_the_eager_values_and_gradients():
    for x in (-2.0, 0.0, 3.0):
        check_jit(relu_or_leak, x)
        check_grad(relu_or_leak, x)
    check_vmap(relu_or_leak, jnp.array([-2.0, 0.0, 3.0]))
    assert "select_n" in primitives(relu_or_leak, 1.0)
    assert "cond[" not in primitives(relu_or_leak, 1.0)


def test_a_branch_with_an_unbounded_derivative_is_a_select_of_masked_inputs():
    # At 0 the untaken sqrt branch has an infinite derivative: selected as it is, the gradient
    # would be 0 * inf = NaN. Computed on where(x > 0, x, 1), it is the cond's 0.
    grad = jax.jit(jax.grad(transpiler.convert(sqrt_or_zero)))
    assert float(grad(0.0)) == 0.0 == float(jax.grad(sqrt_or_zero)(0.0))
    assert float(grad(4.0)) == 0.25
    graph = primitives(sqrt_or_zero, 1.0)
    assert "cond[" not in graph and "select_n b 1.0:f32[] a" in graph
    # x * x at inf: the derivative of the untaken branch is inf, times a zero cotangent.
    assert float(jax.jit(jax.grad(transpiler.convert(square_or_zero)))(jnp.inf)) == 0.0


def _guarded_cases():
    """(name, if-branch) pairs: `y = <branch>` if x > 0 else `y = x - 1`."""
    return [
        ("sqrt", lambda x: jnp.sqrt(x)),
        ("log", lambda x: jnp.log(x)),
        ("inverse", lambda x: 1.0 / x),
        ("square", lambda x: x * x),
        ("tanh", lambda x: jnp.tanh(x)),
        ("power", lambda x: x**1.5),
        ("log1p of square", lambda x: jnp.log1p(x * x) / x),
    ]


@pytest.mark.parametrize("name, branch", _guarded_cases())
def test_guarded_selects_have_the_conds_values_and_derivatives(name, branch):
    def with_cond(x):
        return jax.lax.cond(x > 0, branch, lambda x: x - 1.0, x)

    def piecewise(x):
        if x > 0:
            y = branch(x)
        else:
            y = x - 1.0
        return y

    converted = transpiler.convert(piecewise)
    assert "cond[" not in primitives(piecewise, 1.0)
    xs = jnp.array([-1.0, 0.0, 1e-30, 0.5, 4.0, jnp.inf, -jnp.inf, jnp.nan], jnp.float32)
    f, g = converted, with_cond
    for order in range(3):  # the value, its derivative and its second derivative, batched
        np.testing.assert_array_equal(
            jax.jit(jax.vmap(f))(xs), jax.jit(jax.vmap(g))(xs), err_msg=f"{name} {order}"
        )
        f, g = jax.grad(f), jax.grad(g)
    for x in (xs[1], xs[5]):  # unbatched, where the untaken branch's derivative is not finite
        np.testing.assert_array_equal(jax.jit(jax.grad(converted))(x), jax.grad(with_cond)(x))
        one = jnp.float32(1.0)
        tangent = jax.jvp(jax.jit(converted), (x,), (one,))[1]
        np.testing.assert_array_equal(tangent, jax.jvp(with_cond, (x,), (one,))[1])


def test_only_the_branch_that_needs_it_is_masked():
    def branches(x, y):
        if x > 0:
            z = jnp.sqrt(x)
        else:
            z = y + 1.0
        return z

    graph = primitives(branches, 1.0, 2.0)
    assert graph.count("select_n") == 2  # the mask of sqrt's input, and the choice


def partly_guarded(x, total, scale):
    if x > 0:
        y = total + scale * 0.5 + jnp.sqrt(x)
    else:
        y = total - 1.0
    return y


def test_only_the_inputs_an_unbounded_derivative_reads_are_masked():
    # `total` and `scale` reach the output through a sum and a product with 0.5 only: a zero
    # cotangent comes back to them as zeros whatever they hold, unmasked (`sqrt(x)` needs `x`
    # masked). The hand-written scan of a `continue` loop has 2 selects, not 21 (helper 157).
    graph = primitives(partly_guarded, 1.0, 2.0, 3.0)
    assert "cond[" not in graph and graph.count("select_n") == 2

    def with_cond(x, total, scale):
        return jax.lax.cond(x > 0, lambda: total + scale * 0.5 + jnp.sqrt(x), lambda: total - 1.0)

    xs, totals = np.meshgrid([-1.0, 0.0, 4.0, np.inf, -np.inf, np.nan], [2.0, np.inf, np.nan])
    args = (jnp.float32(xs.ravel()), jnp.float32(totals.ravel()), jnp.full(xs.size, 3.0))
    f, g = transpiler.convert(partly_guarded), with_cond
    for argnums in (0, 1, 2):
        got = jax.jit(jax.vmap(jax.grad(f, argnums=argnums)))(*args)
        np.testing.assert_array_equal(got, jax.vmap(jax.grad(g, argnums=argnums))(*args))
    second = jax.jit(jax.vmap(jax.grad(jax.grad(f))))(*args)
    np.testing.assert_array_equal(second, jax.vmap(jax.grad(jax.grad(g)))(*args))


def sqrt_of_an_entry(table, x):
    if x > 0:
        y = jnp.sqrt(table[2] * x)
    else:
        y = x + 1.0
    return y


def test_a_guarded_select_masking_more_than_the_branch_computes_stays_a_cond():
    # The guarded branch reads one entry of `table` but closes over all of it: masking it would
    # select MAX_ELEMENTS values in every run (3-4x a cond's time in a loop of such `if`s).
    small = jnp.linspace(0.5, 2.0, 8)
    large = jnp.linspace(0.5, 2.0, selects.MAX_ELEMENTS + 1)
    assert "cond[" not in primitives(sqrt_of_an_entry, small, 1.0)
    assert "cond[" in primitives(sqrt_of_an_entry, large, 1.0)
    for table in (small, large):
        for x in (-1.0, 0.0, 2.0):
            check_jit(sqrt_of_an_entry, table, x)
            check_grad(sqrt_of_an_entry, table, x)


def layers_until_small(h, weights):
    for w in weights:
        h = jnp.tanh(w @ h)
        if jnp.linalg.norm(h) < 0.5:
            break
    return h


def test_iterations_after_a_traced_break_log_what_they_became(caplog):
    weights = [jnp.eye(3) * s for s in (0.9, 0.5, 0.2)]
    h = jnp.ones(3)
    with caplog.at_level("INFO", logger="astgraph"):
        check_jit(layers_until_small, h, weights)
    found = [r.getMessage() for r in caplog.records if "after a traced break" in r.getMessage()]
    # A matrix product is no cheap branch: each iteration after the first is a cond.
    assert len(found) == 2 and all("for → lax.cond (this iteration" in m for m in found), found


def flagged(x, threshold):
    hit = False
    count = 0
    if x > threshold:
        hit = True
        count = count + 1
        print("over")
    return hit, count


def test_a_branch_that_prints_stays_a_cond_and_prints_when_taken(capfd):
    f = jax.jit(transpiler.convert(flagged))
    assert f(2.0, 1.0) == (True, 1)
    assert f(0.0, 1.0) == (False, 0)
    assert capfd.readouterr().out == "over\n"
    assert "cond[" in primitives(flagged, 2.0, 1.0)


def test_keys_are_never_selected():
    def pick(p, k1, k2):
        if p > 0:
            k = k1
        else:
            k = k2
        return jax.random.key_data(k)

    keys = jax.random.split(jax.random.key(0))
    f = jax.jit(transpiler.convert(pick))
    np.testing.assert_array_equal(f(1.0, *keys), jax.random.key_data(keys[0]))
    np.testing.assert_array_equal(f(-1.0, *keys), jax.random.key_data(keys[1]))


def _bool_pick(on_true: str, on_false: str) -> str:
    """The source of `if p > 0: flag = <on_true> else: flag = <on_false>`."""
    return (
        "def pick(p, a, b):\n"
        "    if p > 0:\n"
        f"        flag = {on_true}\n"
        "    else:\n"
        f"        flag = {on_false}\n"
        "    return flag\n"
    )


@pytest.mark.parametrize("on_true", ["True", "False", "a", "not a"])
@pytest.mark.parametrize("on_false", ["True", "False", "b"])
def test_boolean_selects_are_and_or_with_the_select_values(tmp_path, on_true, on_false):
    # XLA's CPU backend runs a select of booleans in a loop at about half the speed of and/or,
    # so a selected boolean is written as and/or: every combination of constant and traced
    # values must still pick the branch's value.
    path = tmp_path / f"pick_{on_true.replace(' ', '_')}_{on_false}.py"
    path.write_text(_bool_pick(on_true, on_false))
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    pick = namespace["pick"]
    converted = jax.jit(transpiler.convert(pick))
    for p in (-1.0, 1.0):
        for a in (False, True):
            for b in (False, True):
                expected = pick(p, a, b)
                assert bool(converted(p, jnp.bool_(a), jnp.bool_(b))) == expected
    ps = jnp.array([-1.0, 1.0, 1.0, -1.0])
    as_ = jnp.array([False, True, False, True])
    bs = jnp.array([True, True, False, False])
    batched = jax.vmap(transpiler.convert(pick))(ps, as_, bs)
    expected = [pick(float(p), bool(a), bool(b)) for p, a, b in zip(ps, as_, bs)]
    assert [bool(v) for v in batched] == expected
    graph = primitives(pick, 1.0, jnp.bool_(True), jnp.bool_(False))
    assert "cond[" not in graph
    bool_selects = [
        line
        for line in graph.splitlines()
        if "select_n" in line and ":bool[]" in line.split("=")[0]
    ]
    assert not bool_selects


# --- the steps of a bounded loop's masked scan ------------------------------------------------


def step_lowering(body, *state, constants=()):
    jaxpr = jax.make_jaxpr(body)(*state)
    test = jax.make_jaxpr(lambda *s: True)(*state)
    dtypes = [jnp.result_type(s) for s in state]
    return selects.step_lowering(jaxpr, test, dtypes, constants)


def test_bounded_steps_are_selected_unless_an_effect_a_loop_or_their_size_forbids():
    x = jnp.float32(1.0)
    assert step_lowering(lambda x: x + 1.0, x) == "select"
    assert step_lowering(lambda x: jnp.sqrt(x) + 1.0, x) == "guarded select"
    assert step_lowering(lambda x: jax.debug.print("{}", x) or x, x) is None
    assert step_lowering(lambda x: jax.lax.while_loop(lambda v: v < 2.0, jnp.sqrt, x), x) is None
    assert step_lowering(lambda x: x + 1.0, jnp.ones(selects.MAX_STEP_ELEMENTS + 1)) is None
    assert step_lowering(lambda k: k, jax.random.key(0)) is None  # select takes no keys
    many = [np.ones(selects.MAX_MASKED_CONSTANT_ELEMENTS + 1, np.float32)]
    assert step_lowering(lambda x: jnp.sqrt(x), x, constants=many) is None
    assert step_lowering(lambda x: x + 1.0, x, constants=many) == "select"  # nothing masked


def sqrt_sum_while_positive(x):
    y = 0.0
    while x > 0.0:
        transpiler.loop_options(max_iterations=6)
        y = y + jnp.sqrt(x)  # after the loop stops, x <= 0: sqrt's derivative is inf or nan
        x = x - 1.0
    return y


def climb_to(c):
    x = 0.5
    while x < 0.9:
        transpiler.loop_options(max_iterations=5)
        x = x + 0.5 * jnp.sqrt(c - x)  # at c = 1 a step on unmasked ones takes sqrt(0)
    return x


@pytest.mark.parametrize("fn, x", [(sqrt_sum_while_positive, 2.5), (climb_to, 1.0)])
def test_bounded_loops_steps_after_the_test_failed_give_exact_derivatives(fn, x):
    # The steps after the test failed compute on masked inputs (state and closed-over
    # parameters): the derivatives of every order are the eager loop's, finite.
    converted = transpiler.convert(fn)
    for order in (jax.grad, lambda f: jax.grad(jax.grad(f))):
        got, want = jax.jit(order(converted))(x), order(fn)(x)
        assert np.isfinite(got)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    xs = jnp.array([x, 0.3 * x])
    check_vmap(fn, xs)
    batched = jax.grad(lambda xs: jax.vmap(converted)(xs).sum())(xs)  # reverse mode of vmap
    np.testing.assert_allclose(batched, [jax.grad(fn)(v) for v in xs], rtol=1e-6)
    assert "cond[" not in str(jax.make_jaxpr(jax.grad(converted))(x))


def complex_escape(a):
    z = a
    while jnp.abs(z) < 4.0:
        transpiler.loop_options(max_iterations=5)
        z = z * z + a
    return jnp.real(z)


def closes_over_a_complex(a, x):
    while x < 4.0:
        transpiler.loop_options(max_iterations=5)
        x = x + jnp.abs(a * x)
    return x


def test_bounded_steps_computing_complex_numbers_stay_conds_and_differentiate():
    a = jnp.complex64(0.5 + 0.6j)
    grad = jax.jit(jax.grad(transpiler.convert(complex_escape)))(a)
    np.testing.assert_allclose(grad, jax.grad(complex_escape)(a), rtol=1e-6)
    grad = jax.jit(jax.grad(transpiler.convert(closes_over_a_complex), argnums=1))(a, 1.0)
    np.testing.assert_allclose(grad, jax.grad(closes_over_a_complex, argnums=1)(a, 1.0), rtol=1e-6)


def scaled_in_a_branch(x):
    y = x * 1e30
    if x < 0.5:
        z = y * 1e10  # the branch not taken: its zero cotangent times 1e10 * 1e30, folded
    else:
        z = x
    return z


def overflowing_in_a_branch(x):
    if x < 0.5:
        z = x * 1e20 * 1e20
    else:
        z = x
    return z


@pytest.mark.parametrize("fn", [scaled_in_a_branch, overflowing_in_a_branch])
def test_constant_factors_xla_folds_give_no_nan_gradient(fn):
    grad = jax.jit(jax.grad(transpiler.convert(fn)))
    assert float(grad(jnp.float32(1.0))) == 1.0
    assert float(jax.grad(transpiler.convert(fn))(jnp.float32(1.0))) == 1.0


# --- plain choices: names and number literals, selected without tracing either side ----------

_KEYS = jax.random.split(jax.random.key(0))
_PLAIN_PAIRS = {  # name: (on true, on false, whether the plain path takes it)
    "python ints": (1, 0, True),
    "array and python float": (jnp.float32(2.0), 0.0, True),
    "python float and array": (0.0, jnp.float32(2.0), True),
    "python bool and bool array": (True, jnp.bool_(False), True),
    "float16 and python float": (jnp.float16(1.5), 0.25, False),
    "weak and strong arrays": (jnp.asarray(0.25), jnp.float32(3.0), True),
    "vectors": (jnp.arange(3.0), jnp.ones(3), True),
    "int and float, joined": (1, 0.5, False),
    "int32 and int16": (jnp.int32(1), jnp.int16(2), False),
    "an int out of range": (2**40, 0, False),
    "a float out of range": (1e39, 2.5, False),
    "a float out of range and an array": (1e39, jnp.float32(2.0), False),
    "shapes broadcast": (jnp.arange(3.0), 0.0, False),
    "keys": (_KEYS[0], _KEYS[1], False),
    "lists": ([1.0], [2.0], False),
}


@pytest.mark.parametrize("name", list(_PLAIN_PAIRS))
def test_a_plain_choice_gives_what_tracing_both_sides_gives(name, monkeypatch):
    # `if_exp(..., plain=True)` (names and number literals each side) selects the two values
    # where they are of one shape and dtype, without tracing either side; elsewhere the general
    # path joins them, casts them or refuses, exactly as without the flag.
    from runtime import control_flow

    on_true, on_false, selected = _PLAIN_PAIRS[name]

    def outcome(plain):
        def choose(p, a, b):
            value = control_flow.if_exp(p > 0, lambda: a, lambda: b, plain=plain)
            return jax.random.key_data(value) if name == "keys" else value

        try:
            got = [jax.jit(choose, static_argnums=())(p, on_true, on_false) for p in (1.0, -1.0)]
            got.append(
                jax.vmap(choose, in_axes=(0, None, None))(jnp.array([1.0, -1.0]), on_true, on_false)
            )
        except Exception as error:  # noqa: BLE001 - both paths must raise alike
            return type(error).__name__
        return jax.tree.map(lambda v: (jax.typeof(v), np.asarray(v).tolist()), got)

    general = outcome(False)
    if selected:  # the plain path never reaches the general one's tracing of the branches

        def traced(*args, **kwargs):
            raise AssertionError("the branches were traced")

        monkeypatch.setattr(control_flow, "_cond_or_select", traced)
    assert outcome(True) == general


def plain_bindings(p, x, n):
    k = 1 if p > 0 else 0
    y = x if p > 1 else 0.0
    if p > 2:
        lo, hi = y, 1.0
        found = True
    else:
        lo, hi = -1.0, x
        found = False
    if p > 3:
        n = k
    return k, y, lo, hi, found, n


def test_plain_bindings_are_selects_with_the_eager_values_and_derivatives():
    for p in (0.0, 1.5, 2.5, 3.5):
        check_jit(plain_bindings, p, jnp.float32(0.5), 7)
    check_vmap(plain_bindings, jnp.array([0.0, 1.5, 2.5, 3.5]), jnp.arange(4.0), jnp.arange(4))
    check_grad(lambda x, p: sum(plain_bindings(p, x, 7)[1:4]), 0.5, 2.5)
    assert "cond[" not in primitives(plain_bindings, 2.5, jnp.float32(0.5), 7)


def test_plain_if_leaves_the_rest_to_the_general_path():
    # A name bound on one path only, a global, a list: what the general path does with them.
    def one_path(p):
        if p > 0:
            y = 1.0
        return y

    f = jax.jit(transpiler.convert(one_path))
    assert f(1.0) == 1.0
    with pytest.raises(Exception, match="UnboundLocalError"):
        f(-1.0)

    def lists(p, a, b):
        if p > 0:
            chosen = a
        else:
            chosen = b
        return chosen[0]

    f = jax.jit(transpiler.convert(lists))
    assert f(1.0, [jnp.float32(1)], [jnp.float32(2)]) == 1.0
    assert f(-1.0, [jnp.float32(1)], [jnp.float32(2)]) == 2.0


ONE_AND_A_HALF = jnp.float32(1.5)  # a concrete, strongly typed array the functions below read


def plain_alias(c):
    y = 1.5 if c > 0 else ONE_AND_A_HALF
    z = y
    y += 1  # a new array: `z` keeps 1.5
    return z, y


def plain_alias_if(c):
    y = ONE_AND_A_HALF
    if c > 0:
        y = 1.5
    z = y
    y += 1
    return z, y


def plain_set(c):
    y = ONE_AND_A_HALF if c > 0 else 1.5
    return y.at[()].set(3.0)  # where Python takes the array's path


def signed_zero(c):
    y = 0.0 if c > 0 else -0.0
    return jnp.copysign(1.0, y)


def test_a_plain_choice_of_equal_constants_gives_an_array_no_change_reaches():
    # Both sides equal (1.5 and a float32 1.5): the value is that constant, a JAX array, not a
    # NumPy one that `y += 1` would change in place under `z` too (helper 133).
    for c in (1.0, -1.0):
        check_jit(plain_alias, jnp.float32(c))
        check_jit(plain_alias_if, jnp.float32(c))
    check_vmap(plain_alias, jnp.array([1.0, -1.0]))
    check_jit(plain_set, jnp.float32(1.0))


def test_signed_zeros_are_different_constants():
    # 0.0 == -0.0, but a select keeps them apart: `copysign` tells them apart after it.
    for c in (1.0, -1.0):
        check_jit(signed_zero, jnp.float32(c))
