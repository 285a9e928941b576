import jax
import jax.numpy as jnp
import pytest

import runtime as rt
from runtime import StagingError


def test_python_path_is_python():
    assert rt.and_(0, lambda: 1 / 0) == 0
    assert rt.or_("x", lambda: 1 / 0) == "x"
    assert rt.and_([1], lambda: None) is None
    assert rt.or_([], lambda: ()) == ()
    assert rt.not_([]) is True and rt.not_(3) is False


def test_staged_booleans_use_logical_ops():
    jaxpr = str(jax.make_jaxpr(lambda x: rt.and_(x > 0, lambda: x < 1))(0.5))
    assert " and " in jaxpr and "cond" not in jaxpr
    f = jax.jit(lambda x: rt.or_(x > 1, lambda: rt.not_(x > -1)))
    assert [bool(f(v)) for v in (2.0, 0.0, -2.0)] == [True, False, True]


def test_staged_values_select_an_operand():
    f = jax.jit(lambda x, d: rt.or_(x, lambda: d))
    assert float(f(0.0, 5.0)) == 5.0 and float(f(2.0, 5.0)) == 2.0
    g = jax.jit(lambda x, d: rt.and_(x, lambda: d))
    assert float(g(0.0, 5.0)) == 0.0 and float(g(2.0, 5.0)) == 5.0


def test_staged_operands_must_be_arrays_of_one_shape():
    with pytest.raises(StagingError, match="the right operand of 'or' is None"):
        jax.jit(lambda x: rt.or_(x, lambda: None))(1.0)
    with pytest.raises(
        StagingError, match="the operands of 'and' are float32\\[\\] and float32\\[2\\]"
    ):
        jax.jit(lambda x: rt.and_(x, lambda: jnp.ones(2)))(1.0)
