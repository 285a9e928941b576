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
    # A traced number on the left: the result is chosen as a conditional expression chooses
    # (`x if x else None`), with its errors, naming the construct.
    with pytest.raises(StagingError, match=r"float32\[\] in the true branch but None.*'or' exp"):
        jax.jit(lambda x: rt.or_(x, lambda: None))(1.0)
    with pytest.raises(StagingError, match=r"\[2\] in the true branch.*'and' expression"):
        jax.jit(lambda x: rt.and_(x, lambda: jnp.ones(2)))(1.0)
    # A traced bool on the left, and the operands' own errors.
    with pytest.raises(StagingError, match="the right operand of 'or' is None"):
        jax.jit(lambda x: rt.or_(x > 0, lambda: None))(1.0)
    with pytest.raises(StagingError, match=r"the operands of 'and' are bool\[\] and float32\[2\]"):
        jax.jit(lambda x: rt.and_(x > 0, lambda: jnp.ones(2)))(1.0)


def _typed(x):
    aval = jax.typeof(x)
    return aval.shape, aval.dtype, aval.weak_type


@pytest.mark.parametrize("weak_a, weak_b", [(False, False), (True, False), (True, True)])
def test_the_runtimes_boolean_operations_type_as_jnps(weak_a, weak_b):
    # staging.both/either/negated bind one `and`/`or`/`not`; their results are typed as
    # jnp.logical_* types them (and as `&`, `|`), so nothing downstream changes; `tested` ones
    # (a loop's condition) may stay weak.
    from runtime import staging

    def operands(x):
        a = x < 3.0 if weak_a else jnp.asarray(x) < jnp.float32(3.0)
        b = x > 1.0 if weak_b else jnp.asarray(x) > jnp.float32(1.0)
        return a, b

    def check(x):
        a, b = operands(x)
        assert _typed(staging.both(a, b)) == _typed(jnp.logical_and(a, b))
        assert _typed(staging.either(a, b)) == _typed(jnp.logical_or(a, b))
        assert _typed(staging.negated(a)) == _typed(jnp.logical_not(a))
        assert _typed(staging.both(a, b)) == _typed(a & b)
        assert _typed(staging.either(a, b)) == _typed(a | b)
        assert jax.typeof(staging.both(a, b, tested=True)).dtype == jnp.bool_
        return staging.both(a, staging.negated(b)), staging.either(a, True)

    and_not, or_true = jax.jit(check)(2.0 if weak_a else jnp.float32(2.0))
    assert not bool(and_not) and bool(or_true)
    batched = jax.vmap(lambda x: check(x)[0])(jnp.array([0.5, 2.0, 4.0]))
    assert batched.tolist() == [True, False, False]
    assert " and " in str(jax.make_jaxpr(lambda x: staging.both(*operands(x)))(2.0))


def test_in_of_lists_holding_traced_values_compares_item_by_item():
    # `w in [st]` took the truth of `w == st` of two lists of tracers: a raw
    # TracerBoolConversionError (helper 126). Python asks identity first, then `==`, which for
    # lists, tuples and dicts compares item by item.
    def f(x):
        w, st, other = [x, 1.0], [x, 1.0], [2.0, x]
        return (
            rt.in_(w, [st]),
            rt.in_(w, [other]),
            rt.in_(w, [w]),
            rt.in_((x, 1.0), [st]),
            rt.in_({"a": x}, [{"a": x}]),
            rt.in_([], [[]]),
        )

    expected = (True, False, True, False, True, True)
    assert tuple(bool(v) for v in jax.jit(f)(jnp.float32(2.0))) == expected
    assert tuple(bool(v) for v in jax.jit(f)(jnp.float32(-1.0))) == expected
