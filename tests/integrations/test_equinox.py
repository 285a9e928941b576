"""Equinox modules: converted whole, with converted methods, and inside staged JAX functions."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import assert_tree_close

eqx = pytest.importorskip("equinox", reason="needs equinox (pip install -e '.[test]')")


class ResidualMLP(eqx.Module):
    """A residual connection where shapes allow it, and a traced `if` in a helper method."""

    layers: list

    def __init__(self, sizes, *, key):
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = [eqx.nn.Linear(a, b, key=k) for k, a, b in zip(keys, sizes[:-1], sizes[1:])]

    def __call__(self, x):
        for layer in self.layers:
            h = jnp.tanh(layer(x))
            # `x.shape == h.shape` is False for the 3 -> 4 and 4 -> 2 layers: Python never runs
            # the branch there (`h + x` would not even trace), whatever the mean.
            if jnp.mean(h) > 0 and x.shape == h.shape:
                h = h + x
            x = h
        return self.head(x)

    def head(self, x):
        if jnp.sum(x) > 0:
            return jnp.sum(x**2)
        return jnp.sum(x)


@functools.cache  # modules are immutable: the tests share one (initialising compiles)
def make_model():
    return ResidualMLP([3, 4, 4, 2], key=jax.random.PRNGKey(0))


INPUTS = [jnp.array([1.0, -0.5, 2.0]), jnp.array([-1.0, 0.3, -2.0]), jnp.array([0.2, 0.1, 0.0])]


def loss(model, x, y):
    return (model(x) - y) ** 2


def call(model, x):
    return model(x)


def test_convert_an_eqx_module():
    model = make_model()
    fast = transpiler.convert(model)
    assert isinstance(fast, ResidualMLP) and fast.layers is model.layers
    leaves, view_leaves = jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(fast)
    assert len(leaves) == 6 and all(a is b for a, b in zip(view_leaves, leaves))
    filter_jitted, jitted = eqx.filter_jit(fast), jax.jit(call)
    for x in INPUTS:
        expected = model(x)
        assert_tree_close(filter_jitted(x), expected)
        assert_tree_close(jitted(fast, x), expected)
    # The 4 -> 4 layer's residual (an add: a select) and `head` (x**2: a select of its input
    # masked by the condition, and the choice), staged; the other layers' ifs are decided by
    # Python.
    jaxpr = str(jax.make_jaxpr(fast)(INPUTS[0]))
    assert jaxpr.count("cond[") == 0 and jaxpr.count("select_n") == 3, jaxpr
    with pytest.raises(jax.errors.TracerBoolConversionError):
        eqx.filter_jit(model)(INPUTS[0])


def test_filter_grad_of_a_converted_modules_loss():
    model = make_model()
    fast = transpiler.convert(model)
    grad = eqx.filter_jit(eqx.filter_grad(loss))
    for x, y in zip(INPUTS, jnp.array([1.0, -1.0, 0.5])):
        grads = grad(fast, x, y)
        expected = eqx.filter_grad(loss)(model, x, y)  # eager: JAX's grad runs Python's `if`
        assert type(grads) is type(fast)  # shaped like the model, and converted as it is
        assert jax.tree_util.tree_structure(grads) == jax.tree_util.tree_structure(fast)
        assert_tree_close(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(expected))
    # A gradient step keeps the converted model converted.
    updated = eqx.apply_updates(fast, jax.tree_util.tree_map(lambda g: -0.1 * g, grads))
    expected_model = eqx.apply_updates(model, jax.tree_util.tree_map(lambda g: -0.1 * g, expected))
    assert_tree_close(eqx.filter_jit(updated)(x), expected_model(x))


class Clipped(eqx.Module):
    """Dataclass fields, `__check_init__`, and converted methods in the class body."""

    weight: jax.Array
    bound: float = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        if self.bound <= 0:
            raise ValueError("bound must be positive")

    @transpiler.convert
    def __call__(self, x):
        y = self.weight @ x
        while jnp.max(jnp.abs(y)) > self.bound:
            y = self.clip(y)
        return jnp.sum(y)

    @transpiler.convert
    def clip(self, y):
        return y / 2

    @property
    @transpiler.convert
    def norm(self):
        if jnp.sum(self.weight) > 0:
            return jnp.sum(self.weight**2)
        return -jnp.sum(self.weight**2)


def eager_clipped(weight, bound, x):
    y = weight @ x
    while np.max(np.abs(y)) > bound:
        y = y / 2
    return np.sum(y)


@pytest.mark.python_path  # eager calls run the methods as written: the unconverted reference
def test_converted_methods_in_an_eqx_module_class_body():
    weight = jnp.array([[1.0, 2.0], [-3.0, 0.5]])
    model = Clipped(weight, bound=0.7)
    assert model.bound == 0.7 and type(model).__init__.__qualname__.startswith("Clipped")
    with pytest.raises(ValueError, match="bound must be positive"):
        Clipped(weight, bound=-1.0)
    x = jnp.array([1.0, 1.0])
    expected = eager_clipped(np.asarray(weight), 0.7, np.asarray(x))
    np.testing.assert_allclose(eqx.filter_jit(model)(x), expected, rtol=1e-6)
    np.testing.assert_allclose(model(x), expected, rtol=1e-6)
    clip = model.clip  # Equinox binds methods as pytrees (its BoundMethod)
    assert_tree_close(eqx.filter_jit(clip)(x), x / 2)
    assert_tree_close(jax.jit(lambda m: m.norm)(model), jnp.sum(weight**2))  # sum(weight) > 0
    grads = eqx.filter_jit(eqx.filter_grad(lambda m, x: m(x)))(model, x)
    expected_grads = eqx.filter_grad(lambda m, x: m(x))(model, x)  # eager: the methods as written
    assert type(grads) is Clipped and grads.bound == 0.7
    assert_tree_close(grads.weight, expected_grads.weight)


class Step(eqx.Module):
    linear: eqx.nn.Linear

    def __call__(self, h, x):
        h = jnp.tanh(self.linear(h) + x)
        if jnp.sum(h) > 0:
            h = h * 0.5
        return h


def rollout(cell, h, xs):
    def step(h, x):
        h = cell(h, x)
        if jnp.max(h) > 0.2:  # Python control flow in the step that lax.scan traces
            out = jnp.sum(h)
        else:
            out = -jnp.sum(h)
        return h, out

    return jax.lax.scan(step, h, xs)


def fori_rollout(cell, h, xs):
    def body(i, h):
        h = cell(h, xs[i])
        if jnp.sum(h) < 0:
            h = -h
        return h

    return jax.lax.fori_loop(0, xs.shape[0], body, h)


def batched(cell, hs, x):
    def one(h):
        out = cell(h, x)
        if jnp.mean(out) > 0:
            out = out + 1
        return out

    return jax.vmap(one)(hs)


def grad_inside(cell, h, x):
    def objective(h):
        out = cell(h, x)
        if jnp.sum(out) > 0:
            return jnp.sum(out**2)
        return jnp.sum(out)

    return jax.grad(objective)(h)


def test_scan_fori_loop_vmap_and_grad_of_steps_with_python_control_flow():
    cell = Step(eqx.nn.Linear(2, 2, key=jax.random.PRNGKey(1)))
    h0 = jnp.array([0.3, -0.2])
    xs = jnp.array([[1.0, -1.0], [0.5, 0.5], [-2.0, 0.1], [0.0, 0.3]])

    h, outs = eqx.filter_jit(transpiler.convert(rollout))(cell, h0, xs)
    expected_h, expected_outs = h0, []
    for x in xs:  # the same steps, run eagerly by Python
        expected_h = cell(expected_h, x)
        expected_outs.append(jnp.sum(expected_h) * (1 if jnp.max(expected_h) > 0.2 else -1))
    assert_tree_close((h, outs), (expected_h, jnp.stack(expected_outs)))

    expected = h0
    for x in xs:
        expected = cell(expected, x)
        expected = -expected if jnp.sum(expected) < 0 else expected
    assert_tree_close(eqx.filter_jit(transpiler.convert(fori_rollout))(cell, h0, xs), expected)

    hs = xs
    expected = jnp.stack([cell(h, xs[0]) + (1 if jnp.mean(cell(h, xs[0])) > 0 else 0) for h in hs])
    assert_tree_close(eqx.filter_jit(transpiler.convert(batched))(cell, hs, xs[0]), expected)

    for x in xs:
        expected = grad_inside(cell, h0, x)  # eager: JAX's grad runs Python's `if`
        assert_tree_close(eqx.filter_jit(transpiler.convert(grad_inside))(cell, h0, x), expected)


def test_bound_methods_filter_jit_wrappers_and_library_modules():
    model = make_model()
    mlp = eqx.nn.MLP(2, 2, 4, 1, key=jax.random.PRNGKey(1))
    assert transpiler.convert(mlp) is mlp  # Equinox's own `__call__` is JAX's wrapper: as it is
    head = transpiler.convert(model.head)  # Equinox's BoundMethod, a pytree: its view
    assert jax.tree_util.tree_leaves(head) == jax.tree_util.tree_leaves(model.head)
    for h in (jnp.array([1.0, 2.0]), jnp.array([-1.0, 0.5])):
        assert_tree_close(eqx.filter_jit(head)(h), model.head(h))
    # A wrapper hands the function to JAX unconverted: converting it first is the way.
    with pytest.raises(
        transpiler.ConversionError,
        match="it is a _JitWrapper wrapping the function call, which converting the wrapper would leave unconverted",
    ):
        transpiler.convert(eqx.filter_jit(call))
    fast_call = eqx.filter_jit(transpiler.convert(call))
    assert transpiler.convert(fast_call) is fast_call
    assert_tree_close(fast_call(model, INPUTS[0]), model(INPUTS[0]))


# -- Models with leaves that are not arrays (eqx.nn.MLP's activation) as loop and branch state -----


def mse(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


def fit(model, x, y, lr=0.05, tol=1e-3, max_steps=20):
    loss = mse(model, x, y)
    step = 0
    while loss > tol and step < max_steps:
        grads = eqx.filter_grad(mse)(model, x, y)
        model = eqx.apply_updates(model, jax.tree.map(lambda g: -lr * g, grads))
        loss = mse(model, x, y)
        step += 1
    return model, loss, step


def doubled_if_positive(model, x):
    if jnp.sum(x) > 0:
        model = eqx.apply_updates(model, eqx.filter(model, eqx.is_array))
    return model(x)


def relu_or_tanh(model, x):
    if jnp.sum(x) > 0:
        model = eqx.tree_at(lambda m: m.activation, model, jnp.tanh)
    return model(x)


@functools.cache
def make_mlp():
    return eqx.nn.MLP(2, 1, 4, 1, key=jax.random.PRNGKey(2))


def test_a_model_with_a_function_leaf_is_while_loop_state():
    mlp = make_mlp()
    x = jax.random.normal(jax.random.PRNGKey(3), (8, 2))
    y = jnp.sum(x, axis=1, keepdims=True)
    expected_model, expected_loss, expected_steps = fit(mlp, x, y)
    model, loss, steps = eqx.filter_jit(transpiler.convert(fit))(mlp, x, y)
    assert int(steps) == expected_steps and model.activation is mlp.activation
    assert_tree_close(loss, expected_loss)
    assert_tree_close(eqx.filter(model, eqx.is_array), eqx.filter(expected_model, eqx.is_array))


def test_a_model_with_a_function_leaf_is_branch_state_and_keeps_its_objects():
    mlp = make_mlp()
    for x in (jnp.array([1.0, 2.0]), jnp.array([-1.0, -2.0])):
        assert_tree_close(
            eqx.filter_jit(transpiler.convert(doubled_if_positive))(mlp, x),
            doubled_if_positive(mlp, x),
        )
    batch = jnp.array([[1.0, 2.0], [-1.0, -2.0]])
    batched = jax.vmap(transpiler.convert(doubled_if_positive), in_axes=(None, 0))(mlp, batch)
    assert_tree_close(batched, jnp.stack([doubled_if_positive(mlp, x) for x in batch]))
    with pytest.raises(
        StagingError,
        match=r"'model\.activation' is <.*relu.*> in the true branch"
        r" but <.*tanh.*> in the false branch|very same Python object",
    ):
        eqx.filter_jit(transpiler.convert(relu_or_tanh))(mlp, jnp.array([1.0, 2.0]))


def set_in_a_staged_if(index, state, x):
    if x > 0:
        state = state.set(index, x)
    return state.get(index)


def set_in_a_loop_with_a_traced_break(index, state, x):
    for _ in range(2):
        x = x + 1.0
        state = state.set(index, x)
        if x > 0:
            break
    return x, state


@pytest.mark.parametrize("fn", [set_in_a_staged_if, set_in_a_loop_with_a_traced_break])
def test_a_state_set_in_staged_code_is_refused_not_traced_forever(fn):
    # `State.set` marks the state it is called on as used, in place: each trace does it to its
    # own copy of the state, which used to be carried as a new place every time (tracing never
    # ended, helper 134). Python marks the object itself; the staged code cannot: refused.
    layers, state = eqx.nn.make_with_state(lambda: [eqx.nn.StateIndex(jnp.zeros(()))])()
    with pytest.raises(StagingError, match=r"_state .* in place on a copy the staged"):
        jax.jit(transpiler.convert(fn), static_argnums=0)(layers[0], state, jnp.float32(-5.0))
