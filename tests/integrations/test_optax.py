"""optax optimizers inside converted training loops, with their state as loop state."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from tests.end_to_end.checks import assert_tree_close

optax = pytest.importorskip("optax", reason="needs optax (pip install -e '.[test]')")

X = jnp.linspace(-1.0, 1.0, 8)[:, None]
Y = 3.0 * X[:, 0] + 1.0


def regression_loss(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def fit(params, x, y, tol, max_steps):
    """Adam until the loss is below `tol`: a data-dependent `while` with optax state in it."""
    opt = optax.adam(0.1)
    state = opt.init(params)
    loss = regression_loss(params, x, y)
    step = 0
    while loss > tol and step < max_steps:
        loss, grads = jax.value_and_grad(regression_loss)(params, x, y)
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        step += 1
    return params, loss, step


def test_adam_while_training_loop_under_jit_equals_the_eager_loop():
    params = {"w": jnp.zeros(1), "b": jnp.zeros(())}
    fast = transpiler.jit(fit)
    for tol, max_steps in ((1e-2, 200), (1e-2, 10)):  # stopped by the loss, by the step count
        expected_params, expected_loss, expected_steps = fit(params, X, Y, tol, max_steps)
        got_params, got_loss, got_steps = fast(params, X, Y, tol, max_steps)
        assert int(got_steps) == expected_steps
        assert_tree_close((got_params, got_loss), (expected_params, expected_loss), rtol=1e-4)
    assert expected_steps == 10 and 10 < fit(params, X, Y, 1e-2, 200)[2] < 200
    jaxpr = str(jax.make_jaxpr(transpiler.convert(fit))(params, X, Y, 1e-2, 200))
    assert jaxpr.count("while[") == 1


def warmup(count):
    """A learning-rate schedule with a Python `if` on the step count (traced inside jit)."""
    if count < 3:
        return 0.05 * (count + 1)
    return 0.2


def fit_with_schedule(params, x, y, optimizer, steps):
    state = optimizer.init(params)
    for _ in range(steps):
        grads = jax.grad(regression_loss)(params, x, y)
        updates, state = optimizer.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return params


def test_a_schedule_with_python_control_flow_is_converted_by_the_user():
    # optax's code (an installed package) runs as it is, and so does what it calls: a schedule
    # with a Python `if` on the traced count is converted where it is made.
    params = {"w": jnp.zeros(1), "b": jnp.zeros(())}
    expected = fit_with_schedule(params, X, Y, optax.adam(warmup), 6)
    optimizer = optax.adam(transpiler.convert(warmup))
    fast = jax.jit(
        transpiler.convert(functools.partial(fit_with_schedule, optimizer=optimizer, steps=6))
    )
    assert_tree_close(fast(params, X, Y), expected, rtol=1e-5)
    jaxpr = str(jax.make_jaxpr(fast)(params, X, Y))
    assert "scan[" in jaxpr  # the steps staged, with the schedule's if in them


eqx = pytest.importorskip("equinox", reason="needs equinox (pip install -e '.[test]')")


class Model(eqx.Module):
    hidden: eqx.nn.Linear
    out: eqx.nn.Linear

    def __call__(self, xs):
        h = jnp.tanh(jax.vmap(self.hidden)(xs))
        if jnp.mean(h) < 0:  # a traced `if` inside the model, inside the training loop
            h = -h
        return jax.vmap(self.out)(h)[:, 0]


def train(model, x, y, tol, max_steps):
    """Early stopping: train until the loss is below `tol`, an eqx module as loop state."""
    opt = optax.adam(0.05)
    state = opt.init(eqx.filter(model, eqx.is_array))

    def batch_loss(model):
        return jnp.mean((model(x) - y) ** 2)

    loss = batch_loss(model)
    step = 0
    while loss > tol and step < max_steps:
        loss, grads = eqx.filter_value_and_grad(batch_loss)(model)
        updates, state = opt.update(grads, state, eqx.filter(model, eqx.is_array))
        model = eqx.apply_updates(model, updates)
        step += 1
    return model, loss, step


def test_an_eqx_module_trained_with_adam_until_the_loss_is_small():
    keys = jax.random.split(jax.random.PRNGKey(0))
    model = Model(eqx.nn.Linear(1, 8, key=keys[0]), eqx.nn.Linear(8, 1, key=keys[1]))
    y = jnp.sin(2.0 * X[:, 0])
    expected_model, expected_loss, expected_steps = train(model, X, y, 0.02, 100)
    got_model, got_loss, got_steps = eqx.filter_jit(transpiler.convert(train))(
        model, X, y, 0.02, 100
    )
    assert int(got_steps) == expected_steps and 1 < expected_steps < 100
    np.testing.assert_allclose(got_loss, expected_loss, rtol=1e-3)
    assert_tree_close(
        jax.tree_util.tree_leaves(got_model),
        jax.tree_util.tree_leaves(expected_model),
        rtol=1e-3,
        atol=1e-4,
    )
