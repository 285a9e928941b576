"""diffrax solves called from converted code, with traced `if`s around and after them."""

import jax
import jax.numpy as jnp
import pytest

import transpiler
from tests.end_to_end.checks import assert_tree_close

diffrax = pytest.importorskip("diffrax", reason="needs diffrax (pip install -e '.[integrations]')")


def decay(t, y, args):
    return -args * y


def solve(y0, rate):
    term = diffrax.ODETerm(decay)
    return diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y0, args=rate).ys[-1]


def settle(y0, rate):
    """Solve; if the state has not decayed enough, solve again from there with a faster rate."""
    y = solve(y0, rate)
    if jnp.max(jnp.abs(y)) > 0.5:
        y = solve(y, 2.0 * rate)
    return y


def either_way(y0, rate):
    """A traced `if` around the solves: one or the other runs."""
    if jnp.sum(y0) > 0:
        y = solve(y0, rate)
    else:
        y = -solve(-y0, 0.5 * rate)
    return y


def test_a_traced_if_after_and_around_diffrax_solves():
    fast_settle, fast_either = transpiler.jit(settle), transpiler.jit(either_way)
    # Rates and states for which each branch is taken, and for which it is not.
    for rate in (jnp.float32(0.1), jnp.float32(2.0)):
        for y0 in (jnp.array([1.0, 0.5]), jnp.array([-1.0, -0.2])):
            assert_tree_close(fast_settle(y0, rate), settle(y0, rate), rtol=1e-5)
            assert_tree_close(fast_either(y0, rate), either_way(y0, rate), rtol=1e-5)
    # One cond of ours at the top, around the two solves (diffrax's own conds are inside).
    jaxpr = jax.make_jaxpr(transpiler.convert(either_way))(y0, rate).jaxpr
    assert [eqn.primitive.name for eqn in jaxpr.eqns].count("cond") == 1


def switching(t, y, args):
    """A vector field with a traced `if`: diffrax traces it inside its own solve."""
    if jnp.sum(y) > 0.5:
        return -y
    return -0.1 * y


def switching_by_hand(t, y, args):
    return jnp.where(jnp.sum(y) > 0.5, -y, -0.1 * y)


def solve_with(field, y0):
    term = diffrax.ODETerm(field)
    return diffrax.diffeqsolve(term, diffrax.Euler(), 0.0, 1.0, 0.1, y0).ys[-1]


def test_a_vector_field_with_python_control_flow_converted_by_the_user():
    # diffrax calls the field from its own (unconverted) code: converting it is up to the user.
    y0 = jnp.array([1.0, 0.2])
    expected = jax.jit(solve_with, static_argnums=0)(switching_by_hand, y0)
    got = transpiler.jit(solve_with, static_argnums=0)(transpiler.convert(switching), y0)
    assert_tree_close(got, expected)


@pytest.mark.xfail(
    strict=True,
    raises=jax.errors.TracerBoolConversionError,
    reason="a function given to a class of a third-party library (diffrax.ODETerm) from "
    "converted code is not converted: only calls to JAX, NumPy and the standard library "
    "convert their function arguments",
)
def test_a_vector_field_given_to_odeterm_in_converted_code_is_converted():
    y0 = jnp.array([1.0, 0.2])
    expected = jax.jit(solve_with, static_argnums=0)(switching_by_hand, y0)
    assert_tree_close(transpiler.jit(solve_with, static_argnums=0)(switching, y0), expected)
