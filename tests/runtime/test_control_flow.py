"""Runtime operators: the Python path is plain Python; the staged path matches hand-written lax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import runtime as rt


def test_if_stmt_python_path_calls_exactly_one_branch():
    calls = []

    def if_true(x):
        calls.append("true")
        return (x + 1,)

    def if_false(x):
        calls.append("false")
        return (x - 1,)

    assert rt.if_stmt([1], if_true, if_false, (0,), symbol_names=("x",)) == (1,)
    assert rt.if_stmt(None, if_true, if_false, (0,), symbol_names=("x",)) == (-1,)
    assert calls == ["true", "false"]
    with pytest.raises(ValueError):  # NumPy's "truth value of an array ... is ambiguous"
        rt.if_stmt(np.ones(2), if_true, if_false, (0,), symbol_names=("x",))


def test_if_stmt_staged_matches_lax_cond():
    # A sort is not cheap elementwise work: the branches stay a cond.
    def converted(p, x):
        return rt.if_stmt(
            p > 0, lambda x: (jnp.sort(x),), lambda x: (x - 1,), (x,), symbol_names=("x",)
        )

    def reference(p, x):
        return (lax.cond(p > 0, lambda: jnp.sort(x), lambda: x - 1),)

    for p in (1.0, -1.0):
        args = (jnp.float32(p), jnp.arange(3.0))
        np.testing.assert_array_equal(jax.jit(converted)(*args)[0], jax.jit(reference)(*args)[0])
    assert str(jax.make_jaxpr(converted)(1.0, jnp.ones(2))) == str(
        jax.make_jaxpr(reference)(1.0, jnp.ones(2))
    )


def test_cheap_branches_with_unbounded_derivatives_are_a_select_of_masked_inputs():
    def converted(p, x):
        return rt.if_stmt(
            p > 0, lambda x: (jnp.log(x),), lambda x: (x - 1,), (x,), symbol_names=("x",)
        )

    def reference(p, x):  # the double-where form: log sees 1 where it is not taken
        pred = p > 0
        return (lax.select(pred, jnp.log(lax.select(pred, x, jnp.ones_like(x))), x - 1),)

    def with_cond(p, x):
        return (lax.cond(p > 0, lambda: jnp.log(x), lambda: x - 1),)

    assert str(jax.make_jaxpr(converted)(1.0, 2.0)) == str(jax.make_jaxpr(reference)(1.0, 2.0))
    for p in (1.0, -1.0):
        for x in (0.0, 2.0, -1.0, jnp.inf):
            args = (jnp.float32(p), jnp.float32(x))
            got, want = jax.jit(converted)(*args)[0], jax.jit(with_cond)(*args)[0]
            np.testing.assert_array_equal(got, want)
            grads = [
                jax.jit(jax.grad(lambda x, f=f, p=args[0]: f(p, x)[0]))(args[1])
                for f in (converted, with_cond)
            ]
            np.testing.assert_array_equal(*grads)


def test_cheap_safe_branches_are_a_select():
    def converted(p, x, n):
        return rt.if_stmt(
            p > 0,
            lambda x, n: (x * 0.5, n + 1),
            lambda x, n: (x - 1, n),
            (x, n),
            symbol_names=("x", "n"),
        )

    def reference(p, x, n):
        pred = p > 0
        halved, incremented, decremented = x * 0.5, n + 1, x - 1  # the true branch, the false
        return lax.select(pred, halved, decremented), lax.select(pred, incremented, n)

    for p in (1.0, -1.0):
        args = (jnp.float32(p), jnp.arange(3.0), jnp.int32(4))
        for a, b in zip(jax.jit(converted)(*args), jax.jit(reference)(*args)):
            np.testing.assert_array_equal(a, b)
    args = (1.0, jnp.ones(2), jnp.int32(0))
    assert str(jax.make_jaxpr(converted)(*args)) == str(jax.make_jaxpr(reference)(*args))


def test_if_stmt_staged_passes_identical_python_objects_through():
    marker = object()

    def converted(p, x):
        return rt.if_stmt(
            p, lambda m, x: (m, x + 1), lambda m, x: (m, x), (marker, x), symbol_names=("m", "x")
        )

    out = []
    jax.jit(lambda p, x: out.append(converted(p, x)[0]) or 0)(True, 1.0)
    assert out == [marker]


def test_if_exp_staged_and_python():
    assert rt.if_exp(0, lambda: 1 / 0, lambda: "lazy") == "lazy"
    f = jax.jit(lambda x: rt.if_exp(x > 0, lambda: x, lambda: 0))
    assert f(3.0) == 3.0 and f(-3.0) == 0.0


def test_while_stmt_python_path_is_a_python_loop():
    def test(i, acc):
        return i < 4

    def body(i, acc):
        return i + 1, acc + [i]

    assert rt.while_stmt(test, body, (0, []), symbol_names=("i", "acc")) == (4, [0, 1, 2, 3])


def test_while_stmt_staged_matches_lax_while_loop():
    def converted(x):
        return rt.while_stmt(
            lambda i, x: x < 100, lambda i, x: (i + 1, x * 3), (0, x), symbol_names=("i", "x")
        )

    def reference(x):
        return lax.while_loop(lambda s: s[1] < 100, lambda s: (s[0] + 1, s[1] * 3), (0, x))

    for x in (1.0, 50.0, 200.0):
        a, b = jax.jit(converted)(x), jax.jit(reference)(x)
        assert int(a[0]) == int(b[0]) and float(a[1]) == float(b[1])
        assert a[0].dtype == jnp.int32  # the Python int became the array JAX gives it


def test_while_stmt_switches_to_staged_when_the_test_becomes_traced():
    def converted(x):
        def test(done, x):
            return not done if isinstance(done, bool) else jnp.logical_not(done)

        def body(done, x):
            x = x / 2
            return x < 1, x

        return rt.while_stmt(test, body, (False, x), symbol_names=("done", "x"))[1]

    assert float(jax.jit(converted)(10.0)) == 0.625
    assert "while[" in str(jax.make_jaxpr(converted)(10.0))


def test_for_stmt_over_python_containers_and_generators():
    def body(item, acc):
        return (acc + [item],)

    assert rt.for_stmt((1, 2), body, ([],), symbol_names=("acc",)) == ([1, 2],)
    assert rt.for_stmt({"a": 1}, body, ([],), symbol_names=("acc",)) == (["a"],)
    assert rt.for_stmt((i for i in range(2)), body, ([],), symbol_names=("acc",)) == ([0, 1],)


def test_for_stmt_range_with_traced_state_matches_lax_scan():
    def converted(x):
        return rt.for_stmt(range(2, 12, 3), lambda i, x: (x * 0.5 + i,), (x,), symbol_names=("x",))

    def reference(x):
        def step(x, i):
            return x * 0.5 + i, None

        return lax.scan(step, x, jnp.arange(2, 12, 3))[0]

    np.testing.assert_allclose(jax.jit(converted)(1.0)[0], jax.jit(reference)(1.0), rtol=1e-6)
    assert "scan[" in str(jax.make_jaxpr(converted)(1.0))


def test_range_with_traced_bound_runs_a_while_loop():
    def converted(n):
        return rt.for_stmt(rt.range_(n), lambda i, s: (s + i,), (0,), symbol_names=("s",))[0]

    assert int(jax.jit(converted)(5)) == 10 and int(jax.jit(converted)(-3)) == 0
    assert rt.range_(3) == range(3)


def test_staged_loop_binds_undefined_state_on_the_iterations_that_run():
    def converted(x):
        x, y = rt.while_stmt(
            lambda x, y: x < 3,
            lambda x, y: (x + 1, x),
            (x, rt.Undefined("y")),
            symbol_names=("x", "y"),
        )
        return rt.ld(y)

    assert jax.jit(converted)(0) == 2
    with pytest.raises(jax.errors.JaxRuntimeError, match="local variable 'y'"):
        jax.jit(converted)(5).block_until_ready()


def test_undefined_and_ld():
    u = rt.Undefined("v")
    assert repr(u) == "Undefined('v')"
    assert rt.ld(3) == 3
    with pytest.raises(UnboundLocalError, match="'v'"):
        rt.ld(u)
    with pytest.raises(UnboundLocalError):
        bool(u)


def test_a_branch_giving_a_constant_gives_back_pythons_number_not_jaxs_typed_one():
    # A jaxpr's literal holds JAX's own subclass of int (`TypedInt(5, dtype=int32)`), which a
    # Python list of the program's, printed, showed (fuzz m60293: `[0, TypedInt(5, ...)]`).
    from runtime import control_flow

    closed = jax.make_jaxpr(lambda x: (x, 5, 0.5, True))(1.0)
    values = control_flow._literals(closed, [None] * 4)
    assert [type(v) for v in values[1:]] == [int, float, bool]
    assert repr(values[1:]) == "[5, 0.5, True]"
