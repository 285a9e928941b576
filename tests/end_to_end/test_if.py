"""if / elif / else, staged and Python, against eager execution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from tests.end_to_end.checks import check_grad, check_jit, check_python, check_vmap, primitives


def piecewise(x):
    if x < -1.0:
        y = -x
    elif x < 1.0:
        y = x * x
    else:
        y = 2.0 * x - 1.0
    return y


@pytest.mark.parametrize("x", [-3.0, -0.5, 0.0, 0.7, 4.0])
def test_if_elif_else_under_jit_grad_and_python(x):
    check_jit(piecewise, jnp.float32(x))
    check_grad(piecewise, jnp.float32(x))
    check_python(piecewise, x)


def test_if_elif_else_under_vmap_batches_the_predicate():
    check_vmap(piecewise, jnp.array([-3.0, -0.5, 0.0, 0.7, 4.0]))


def project_or_shift(x, w):
    if jnp.sum(x) > 0:
        x = w @ x
    else:
        x = x - 1.0
    return x


def test_traced_if_becomes_select_of_cheap_branches_and_cond_of_others():
    # Elementwise branches (x * x on a masked input) are a select; a matrix product is a cond.
    assert "cond[" not in primitives(piecewise, 1.0)
    w, x = jnp.eye(3) * 2.0, jnp.arange(3.0)
    assert "cond[" in primitives(project_or_shift, x, w)
    check_jit(project_or_shift, x, w)
    check_jit(project_or_shift, -x, w)


def array_branches(x):
    if jnp.sum(x) > 0:
        x = x * 2
        scale = 2.0
    else:
        x = x - 1
        scale = 1
    return x * scale


def array_branches_sum(x):
    return jnp.sum(array_branches(x))  # converted too, when called from converted code


def test_branches_over_arrays_promote_python_scalars():
    for x in (jnp.array([1.0, 2.0]), jnp.array([-1.0, -2.0])):
        check_jit(array_branches, x)
        check_grad(array_branches_sum, x)
    check_vmap(array_branches, jnp.array([[1.0, 2.0], [-1.0, -2.0]]))


def test_python_predicate_stays_python_with_side_effects():
    calls = []

    def f(x, training):
        if training:
            calls.append("train")
            x = x * 0.5
        return x

    converted = transpiler.convert(f)
    assert converted(4, True) == 2.0 and converted(4, False) == 4
    assert calls == ["train"]
    # A Python predicate under jit is decided while tracing: no cond in the graph.
    jaxpr = str(jax.make_jaxpr(converted, static_argnums=1)(jnp.float32(1.0), True))
    assert "cond" not in jaxpr


def truthiness(x, items):
    if items:
        x = x + len(items)
    if x:
        x = x * 10
    return x


@pytest.mark.parametrize("args", [(0, []), (0, [1, 2]), (-2, [1, 2]), (np.int64(3), ())])
def test_python_truthiness_of_lists_none_and_ints(args):
    check_python(truthiness, *args)


def none_default(x, bias=None):
    if bias is None:
        bias = jnp.zeros_like(x)
    if jnp.max(x) > 0:
        out = x + bias
    else:
        out = x - bias
    return out


def test_none_checks_stay_python_inside_jit():
    check_jit(none_default, jnp.array([1.0, -2.0]))
    check_jit(none_default, jnp.array([-1.0, -2.0]), jnp.array([0.5, 0.5]))


def only_modified_in_one_branch(x, y):
    z = y
    if x > 0:
        z = y * 3
    return z + x


def test_variable_modified_in_one_branch_keeps_its_value_in_the_other():
    for x in (1.0, -1.0):
        check_jit(only_modified_in_one_branch, jnp.float32(x), jnp.float32(2.0))


def nested_ifs(x, y):
    if x > 0:
        if y > 0:
            r = x + y
        else:
            r = x - y
    else:
        r = 0.0
    return r


def test_nested_ifs():
    for x, y in [(1.0, 2.0), (1.0, -2.0), (-1.0, 5.0)]:
        check_jit(nested_ifs, jnp.float32(x), jnp.float32(y))
        check_grad(nested_ifs, jnp.float32(x), jnp.float32(y), argnums=(0, 1))
    check_vmap(nested_ifs, jnp.array([1.0, 1.0, -1.0]), jnp.array([2.0, -2.0, 5.0]))


def pytree_state(params, x):
    if x > 0:
        params = {"w": params["w"] * x, "b": (params["b"][0] + 1.0, params["b"][1])}
    return params


def test_dict_and_tuple_state_through_a_staged_if():
    params = {"w": jnp.ones(2), "b": (jnp.float32(0.0), jnp.zeros(3))}
    for x in (2.0, -2.0):
        check_jit(pytree_state, params, jnp.float32(x))


def branch_local_temporaries(x):
    if x > 0:
        tmp = x * 2
        x = tmp + 1
    else:
        tmp = x
        x = -tmp
    return x


def test_branch_temporaries_are_not_state():
    source = transpiler.to_source(branch_local_temporaries)
    assert "symbol_names=('x',)" in source
    for x in (3.0, -3.0):
        check_jit(branch_local_temporaries, jnp.float32(x))


def kept_python_number_or_long_branch(x, y):
    t = 0.0  # a Python float: weakly typed, kept by the branch not taken
    if x < 10.0:  # a branch too long for a select: a lax.cond
        t = min(max(y / 4, -1000.0), 1000.0)
        t = min(max(x + 2.0, -1000.0), 1000.0)
    return t * jnp.float16(0.1)  # float32 where t is the float32 array, as in Python


def kept_python_number_or_short_branch(x, y):
    t = 0.0
    if x < 10.0:  # a select
        t = x + 2.0
    return t * jnp.float16(0.1)


@pytest.mark.parametrize(
    "fn",
    [kept_python_number_or_long_branch, kept_python_number_or_short_branch],
    ids=lambda fn: fn.__name__,
)
def test_a_strongly_typed_branch_output_stays_strong_against_a_kept_python_number(fn):
    args = (jnp.float32(0.0), jnp.float32(0.0))
    expected = fn(*args)  # float32: the branch ran, t is x + 2.0 (float32) times a float16
    converted = jax.jit(transpiler.convert(fn))(*args)
    assert converted.dtype == expected.dtype == jnp.float32
    assert float(converted) == float(expected)


def bool_or_python_int(c, h, w):
    y = h  # a bool array
    if c > 0:
        y = 2  # a Python int: Python's y * w is then a uint8, as it is for the bool
    return y * w


@pytest.mark.parametrize("c", [1.0, -1.0])
def test_a_bool_array_joined_with_a_python_int_computes_as_either_does(c):
    args = (jnp.float32(c), jnp.bool_(True), jnp.uint8(200))
    expected = bool_or_python_int(*args)  # 2 * 200 wraps to 144; True * 200 is 200
    got = jax.jit(transpiler.convert(bool_or_python_int))(*args)
    assert got.dtype == expected.dtype == jnp.uint8
    assert int(got) == int(expected)


def mask_or_its_double(x):
    w = x > 0
    if jnp.sum(x) > 0:
        w = w * 2  # a weakly typed int array: the join is one too
    return w


def test_a_bool_array_joined_with_a_weakly_typed_int_array():
    # Casting the bool array weak failed for arrays (lax.full_like takes a scalar).
    x = jnp.array([1.0, -2.0, 3.0])
    got = jax.jit(transpiler.convert(mask_or_its_double))(x)
    assert got.tolist() == mask_or_its_double(x).tolist() == [2, 0, 2]
    assert jax.typeof(got).weak_type


def deletes_in_both_branches(c):
    i = 1
    if c:
        del i
    else:
        del i
    return i


def test_a_variable_deleted_in_both_branches_is_unbound_after_the_if():
    # As Python: reading it raises UnboundLocalError (was a StagingError saying it was
    # "undefined in the true branch but undefined in the false branch").
    with pytest.raises(UnboundLocalError):
        transpiler.jit(deletes_in_both_branches)(jnp.bool_(True))
