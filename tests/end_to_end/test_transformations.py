"""JAX transformations and `lax` control flow called from converted code convert the functions
they are given, so Python control flow in those functions is staged when JAX traces them.

Each converted program below hands a function with a Python `if` or `while` on traced values to a
JAX API; unconverted, JAX would call it with tracers and fail (`TracerBoolConversionError`). The
expected values come from the same API given a hand-written `jnp.where` version.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import transpiler
from tests.end_to_end.checks import assert_tree_close


def relu_ish(x):
    if x > 0:
        return x * x
    return -0.5 * x


def relu_ish_where(x):
    return jnp.where(x > 0, x * x, -0.5 * x)


def halve_until_small(x):
    while x > 1.0:
        x = x / 2.0
    return x


def halve_until_small_reference(x):
    return lax.while_loop(lambda v: v > 1.0, lambda v: v / 2.0, x)


def scan_step(carry, x):
    if x > carry:
        carry = x
    return carry, carry * 2.0


def scan_step_where(carry, x):
    carry = jnp.where(x > carry, x, carry)
    return carry, carry * 2.0


@jax.custom_jvp
def soft_abs(x):
    if x > 0:
        return x
    return -x


@soft_abs.defjvp
def _soft_abs_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    if x > 0:
        slope = 1.0
    else:
        slope = -1.0
    return soft_abs(x), slope * t * 0.5  # a deliberately different derivative: the rule is used


@jax.custom_vjp
def clipped_identity(x):
    if x > 2.0:
        return 2.0 + 0.0 * x
    return x


def _clipped_fwd(x):
    return clipped_identity(x), x


def _clipped_bwd(x, g):
    if x > 2.0:
        return (0.0 * g,)
    return (3.0 * g,)  # deliberately not the true derivative: the rule is used


clipped_identity.defvjp(_clipped_fwd, _clipped_bwd)


X = jnp.array([-1.5, 0.5, 3.0])


# Each program calls a JAX API with a function that has Python control flow on traced values;
# each reference calls it with the `jnp.where` version.


def with_grad(xs):
    return jax.vmap(jax.grad(relu_ish))(xs)


def with_value_and_grad(xs):
    return jax.value_and_grad(lambda v: jnp.sum(jax.vmap(relu_ish)(v)))(xs)


def with_vmap(xs):
    return jax.vmap(relu_ish)(xs)


def with_jacfwd(xs):
    return jax.vmap(jax.jacfwd(relu_ish))(xs)


def with_jacrev(xs):
    return jax.vmap(jax.jacrev(relu_ish))(xs)


def with_hessian(xs):
    return jax.vmap(jax.hessian(relu_ish))(xs)


def with_checkpoint(xs):
    return jax.vmap(jax.checkpoint(relu_ish))(xs)


def with_grad_of_a_while(xs):
    return jax.vmap(jax.grad(halve_until_small))(xs * 4.0)


def with_scan(xs):
    return lax.scan(scan_step, -10.0, xs)


def with_cond(xs):
    return lax.cond(xs[0] < 0, lambda v: jax.vmap(relu_ish)(v), lambda v: v, xs)


def with_switch(xs):
    return lax.switch(jnp.int32(xs[1] > 0), [halve_until_small, relu_ish], xs[1])


def with_while_loop(xs):
    return lax.while_loop(lambda v: jnp.sum(v) < 50.0, lambda v: jax.vmap(relu_ish)(v) + 1.0, xs)


def with_fori_loop(xs):
    return lax.fori_loop(0, 3, lambda i, v: jax.vmap(relu_ish)(v) + i, xs)


def with_map(xs):
    return lax.map(relu_ish, xs)


def with_tree_map(xs):
    return jax.tree.map(halve_until_small, {"a": xs[0] * 5.0, "b": xs[2] * 5.0})


def with_reduce(xs):
    return functools.reduce(lambda a, b: a if a > b else b, [xs[0], xs[1], xs[2]])


def with_builtin_map(xs):
    return list(map(relu_ish, [xs[0], xs[1]]))


def with_custom_jvp(xs):
    return jax.vmap(jax.grad(soft_abs))(xs)


def with_custom_vjp(xs):
    return jax.vmap(clipped_identity)(xs), jax.vmap(jax.grad(clipped_identity))(xs)


def _halved(v):
    return halve_until_small_reference(v)


CASES = {
    with_grad: jax.vmap(jax.grad(relu_ish_where)),
    with_value_and_grad: jax.value_and_grad(lambda v: jnp.sum(relu_ish_where(v))),
    with_vmap: relu_ish_where,
    with_jacfwd: jax.vmap(jax.grad(relu_ish_where)),
    with_jacrev: jax.vmap(jax.grad(relu_ish_where)),
    with_hessian: jax.vmap(jax.hessian(relu_ish_where)),
    with_checkpoint: relu_ish_where,
    with_grad_of_a_while: lambda xs: xs * 0 + jnp.array([1.0, 0.5, 0.0625]),  # 0, 1, 4 halvings
    with_scan: lambda xs: lax.scan(scan_step_where, -10.0, xs),
    with_cond: lambda xs: lax.cond(xs[0] < 0, relu_ish_where, lambda v: v, xs),
    with_switch: lambda xs: relu_ish_where(xs[1]),
    with_while_loop: lambda xs: lax.while_loop(
        lambda v: jnp.sum(v) < 50.0, lambda v: relu_ish_where(v) + 1.0, xs
    ),
    with_fori_loop: lambda xs: lax.fori_loop(0, 3, lambda i, v: relu_ish_where(v) + i, xs),
    with_map: relu_ish_where,
    with_tree_map: lambda xs: {"a": _halved(xs[0] * 5.0), "b": _halved(xs[2] * 5.0)},
    with_reduce: jnp.max,
    with_builtin_map: lambda xs: [relu_ish_where(xs[0]), relu_ish_where(xs[1])],
    with_custom_jvp: lambda xs: jnp.where(xs > 0, 0.5, -0.5),
    with_custom_vjp: lambda xs: (jnp.minimum(xs, 2.0), jnp.where(xs > 2.0, 0.0, 3.0)),
}


@pytest.mark.parametrize("program", CASES, ids=lambda program: program.__name__)
def test_transformation_converts_its_function(program):
    expected = jax.jit(CASES[program])(X)
    actual = jax.jit(transpiler.convert(program))(X)
    assert_tree_close(actual, expected, rtol=1e-6, atol=1e-6)


def test_function_parameters_given_to_transformations_are_converted():
    def apply_twice(fn, xs):
        return jax.vmap(fn)(jax.vmap(fn)(xs))

    program = transpiler.convert(apply_twice)
    actual = jax.jit(lambda xs: program(relu_ish, xs))(X)
    np.testing.assert_allclose(actual, relu_ish_where(relu_ish_where(X)), rtol=1e-6)


def test_nested_custom_jvp_defined_in_converted_code():
    def program(x):
        @jax.custom_jvp
        def f(z):
            if z > 0:
                return z
            return -z

        @f.defjvp
        def f_jvp(primals, tangents):
            (z,), (t,) = primals, tangents
            return f(z), 10.0 * t

        return jax.grad(f)(x)

    assert float(jax.jit(transpiler.convert(program))(jnp.float32(-2.0))) == 10.0


def test_methods_and_partials_given_to_transformations():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            if x > 0:
                return self.k * x
            return x

    def program(xs):
        s = Scaler(3.0)
        a = jax.vmap(s.apply)(xs)
        b = jax.vmap(functools.partial(lambda k, x: k * x if x > 0 else x, 2.0))(xs)
        c = jax.vmap(jax.tree_util.Partial(lambda k, x: k * x if x > 0 else x, 4.0))(xs)
        return a, b, c

    actual = jax.jit(transpiler.convert(program))(X)
    expected = tuple(jnp.where(X > 0, k * X, X) for k in (3.0, 2.0, 4.0))
    assert_tree_close(actual, expected)


def test_callable_objects_given_to_transformations_stay_data():
    """A callable pytree given to a transformation's result is data, not converted: gradients by
    its leaves are taken as JAX takes them."""

    @jax.tree_util.register_pytree_node_class
    class Linear:
        def __init__(self, w):
            self.w = w

        def __call__(self, x):
            return self.w * x

        def tree_flatten(self):
            return (self.w,), None

        @classmethod
        def tree_unflatten(cls, aux, leaves):
            return cls(*leaves)

    def loss(model, x):
        y = model(x)
        if y > 0:
            return y * y
        return -y

    def program(model, x):
        return jax.grad(loss)(model, x).w

    model = Linear(jnp.float32(2.0))
    assert float(jax.jit(transpiler.convert(program))(model, jnp.float32(1.5))) == 2 * 2.0 * 1.5**2


def loss_fn(params, batch):
    """A loss with a traced `if` and a traced `while`."""
    x, y = batch
    hidden = jnp.tanh(x @ params["w"] + params["b"])
    prediction = hidden @ params["v"]
    residual = prediction - y
    loss = jnp.mean(residual * residual)
    if loss > 1.0:  # a robust loss for large errors
        loss = jnp.sqrt(loss)
    scale = jnp.sum(params["v"] * params["v"])
    while scale > 0.5:  # a shrinking penalty, as long as the weights are large
        loss = loss + 0.01 * scale
        scale = scale * 0.5
    return loss


def train_step(params, batch, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    params = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return params, loss


def test_train_step_with_value_and_grad_equals_the_eager_run():
    rng = np.random.default_rng(0)
    params = {
        "w": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32),
        "b": jnp.zeros(4),
        "v": jnp.asarray(rng.normal(size=(4,)), jnp.float32),
    }
    batch = (jnp.asarray(rng.normal(size=(8, 3)), jnp.float32), jnp.ones(8))
    step = transpiler.jit(train_step)
    eager_params = params
    losses, eager_losses = [], []
    for _ in range(5):
        params, loss = step(params, batch, 0.1)
        eager_params, eager_loss = train_step(eager_params, batch, 0.1)
        losses.append(loss)
        eager_losses.append(eager_loss)
    assert_tree_close(losses, eager_losses, rtol=1e-5, atol=1e-6)
    assert_tree_close(params, eager_params, rtol=1e-5, atol=1e-6)
    assert eager_losses[-1] < eager_losses[0]  # it trains


def test_explicit_lax_loops_in_converted_code_are_reverse_differentiable():
    """JAX has no reverse-mode derivative for `lax.while_loop` (nor `fori_loop` with traced
    bounds); called from converted code they are the checkpointed loop, which has one."""

    def explicit_loops(x, n):
        y = lax.while_loop(lambda v: v < 10.0, lambda v: v * 1.5, x)
        return lax.fori_loop(0, n, lambda i, v: v * 1.1 + i, y)

    def python_loops(x, n):
        while x < 10.0:
            x = x * 1.5
        for i in range(n):
            x = x * 1.1 + i
        return x

    program = transpiler.convert(explicit_loops)
    for x in (0.7, 3.0, 12.0):
        expected = jax.grad(python_loops)(x, 4)
        actual = jax.jit(jax.grad(program))(jnp.float32(x), jnp.int32(4))
        np.testing.assert_allclose(actual, expected, rtol=1e-5)
        assert float(jax.jit(program)(x, 4)) == pytest.approx(float(python_loops(x, 4)), 1e-6)
    static_bounds = jax.jit(jax.grad(transpiler.convert(lambda x: explicit_loops(x, 3))))
    np.testing.assert_allclose(static_bounds(2.0), jax.grad(python_loops)(2.0, 3), rtol=1e-5)


@jax.custom_vjp
def doubled_where_positive(x):
    if x > 0:
        print("positive")
        x = x * 2
    return x


doubled_where_positive.defvjp(lambda x: (doubled_where_positive(x), None), lambda r, g: (g * 2,))


def through_a_custom_vjp(x):
    return doubled_where_positive(x) + 1


def test_a_print_in_a_staged_branch_of_a_custom_vjp_under_jit_of_grad(capsys):
    # The print's effect was tied to the caller's value (a tracer of jax.grad's), which the
    # custom_vjp's own trace must not close over: UnexpectedTracerError.
    grad = jax.jit(jax.grad(transpiler.convert(through_a_custom_vjp)))(jnp.float32(4.0))
    jax.effects_barrier()
    assert float(grad) == 2.0
    assert capsys.readouterr().out == "positive\n"
