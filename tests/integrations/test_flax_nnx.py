"""Flax NNX modules: converted `__call__` in the class body, converted instances, under nnx.jit
and nnx.grad."""

import jax
import jax.numpy as jnp
import pytest

import transpiler
from tests.end_to_end.checks import assert_tree_close

nnx = pytest.importorskip("flax.nnx", reason="needs flax (pip install -e '.[integrations]')")
optax = pytest.importorskip("optax", reason="needs optax (pip install -e '.[test]')")


class Block(nnx.Module):
    def __init__(self, din, dout, *, rngs):
        self.linear = nnx.Linear(din, dout, rngs=rngs)
        self.calls = nnx.BatchStat(jnp.zeros((), jnp.int32))

    @transpiler.convert
    def __call__(self, x):
        self.calls[...] += 1  # state nnx.jit carries out (outside any staged branch)
        h = jnp.tanh(self.linear(x))
        # Python never runs this branch for the 3 -> 4 and 4 -> 2 blocks: `h + x` would not
        # trace there. For the 4 -> 4 block it is a cond.
        if jnp.mean(h) > 0 and x.shape == h.shape:
            h = h + x
        return h


class Net(nnx.Module):
    def __init__(self, *, rngs):
        self.blocks = nnx.List(
            [Block(3, 4, rngs=rngs), Block(4, 4, rngs=rngs), Block(4, 2, rngs=rngs)]
        )

    def __call__(self, x):
        for block in self.blocks:
            x = block(x)
        if jnp.sum(x) > 0:
            return jnp.sum(x**2)
        return jnp.sum(x)


def loss(model, x):
    return model(x) ** 2


INPUTS = [jnp.array([1.0, -0.5, 2.0]), jnp.array([-1.0, 0.3, -2.0])]


@pytest.mark.python_path  # eager calls run `__call__` as written: the unconverted reference
def test_a_converted_call_under_nnx_jit_and_nnx_grad():
    model, reference = Net(rngs=nnx.Rngs(0)), Net(rngs=nnx.Rngs(0))
    fast_model = transpiler.convert(model)  # Net's own `__call__`; the blocks' are converted
    value_and_grad = nnx.jit(nnx.value_and_grad(loss))
    for x in INPUTS:
        value, grads = value_and_grad(fast_model, x)
        expected_value, expected_grads = nnx.value_and_grad(loss)(reference, x)  # eager
        assert_tree_close(value, expected_value)
        assert_tree_close(grads, expected_grads, rtol=1e-4, atol=1e-5)
        assert_tree_close(nnx.jit(loss)(fast_model, x), expected_value)
    # Both called their blocks 4 times (2 inputs, twice): nnx.jit wrote the counts back.
    assert [int(b.calls[...]) for b in model.blocks] == [4, 4, 4]
    assert [int(b.calls[...]) for b in reference.blocks] == [2, 2, 2]
    # A block alone (4 -> 4: its residual `if` is a cond), its converted `__call__` as it is.
    block = Block(4, 4, rngs=nnx.Rngs(2))
    block_loss = lambda b, h: jnp.sum(b(h) ** 2)  # noqa: E731
    for h in (jnp.array([1.0, 0.5, -0.2, 0.3]), jnp.array([-1.0, -0.5, 0.2, -0.3])):
        grads = nnx.jit(nnx.grad(block_loss))(block, h)
        assert_tree_close(grads, nnx.grad(block_loss)(block, h), rtol=1e-4, atol=1e-5)


@pytest.mark.python_path
def test_a_converted_instance_trains_with_nnx_optimizer_like_the_original():
    model, reference = Net(rngs=nnx.Rngs(0)), Net(rngs=nnx.Rngs(0))
    fast = transpiler.convert(model)
    assert isinstance(fast, Net) and fast.blocks is model.blocks
    assert jax.tree_util.tree_leaves(nnx.state(fast)) == jax.tree_util.tree_leaves(nnx.state(model))
    optimizer = nnx.Optimizer(fast, optax.sgd(0.1), wrt=nnx.Param)
    reference_optimizer = nnx.Optimizer(reference, optax.sgd(0.1), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x):
        grads = nnx.grad(loss)(model, x)
        optimizer.update(model, grads)

    for x in INPUTS:
        train_step(fast, optimizer, x)
        reference_optimizer.update(reference, nnx.grad(loss)(reference, x))  # eager
    # The view shares the model's variables: training it trained the model.
    assert_tree_close(
        nnx.state(model, nnx.Param), nnx.state(reference, nnx.Param), rtol=1e-4, atol=1e-5
    )


class Cell(nnx.Module):
    def __init__(self, *, rngs):
        self.linear = nnx.Linear(4, 4, rngs=rngs)

    def __call__(self, h):
        h = jnp.tanh(self.linear(h))
        if jnp.sum(h) < 0:
            h = -h
        return h


class Plain(nnx.Module, pytree=False):
    def __init__(self, *, rngs):
        self.linear = nnx.Linear(2, 2, rngs=rngs)

    def __call__(self, x):
        h = self.linear(x)
        return h if jnp.sum(h) > 0 else -h


def test_a_converted_instance_keeps_the_pytree_keyword_of_its_class():
    plain, cell = Plain(rngs=nnx.Rngs(0)), Cell(rngs=nnx.Rngs(0))
    fast_plain, fast_cell = transpiler.convert(plain), transpiler.convert(cell)
    assert jax.tree_util.tree_leaves(fast_plain) == [fast_plain]  # not a pytree, as `plain`
    assert len(jax.tree_util.tree_leaves(fast_cell)) == len(jax.tree_util.tree_leaves(cell)) == 2
    x = jnp.array([1.0, -2.0])
    assert_tree_close(nnx.jit(lambda m, x: m(x))(fast_plain, x), plain(x))


@pytest.mark.python_path
def test_lax_scan_over_an_nnx_model_in_a_step_with_python_control_flow():
    # (A Variable written in a step of `lax.scan` is refused by Flax; `nnx.scan` carries it.)
    cell = Cell(rngs=nnx.Rngs(1))

    def rollout(cell, h, xs):
        def step(h, x):
            h = cell(h + x)
            if jnp.max(h) > 0.3:
                out = jnp.sum(h)
            else:
                out = -jnp.sum(h)
            return h, out

        return jax.lax.scan(step, h, xs)

    xs = jnp.array([[1.0, -1.0, 0.5, 0.0], [0.5, 0.5, -0.5, 1.0], [-2.0, 0.1, 0.3, 0.2]])
    h0 = jnp.array([0.3, -0.2, 0.1, 0.0])
    h, outs = nnx.jit(transpiler.convert(rollout))(cell, h0, xs)
    expected_h, expected_outs = h0, []
    for x in xs:  # the same steps, run eagerly by Python
        expected_h = cell(expected_h + x)
        expected_outs.append(jnp.sum(expected_h) * (1 if jnp.max(expected_h) > 0.3 else -1))
    assert_tree_close((h, outs), (expected_h, jnp.stack(expected_outs)))


class Counter(nnx.Module):
    def __init__(self):
        self.positives = nnx.BatchStat(jnp.zeros((), jnp.int32))

    @transpiler.convert
    def __call__(self, x):
        if jnp.sum(x) > 0:
            self.positives[...] += 1  # a Variable written in a staged branch
        return x


def test_a_variable_written_in_a_staged_branch_is_refused_by_flax_never_wrong():
    counter = Counter()
    call = nnx.jit(lambda m, x: m(x))
    call(counter, -jnp.ones(2))  # the branch is not taken: nothing is written
    assert int(counter.positives[...]) == 0
    # Taken, Flax refuses the write from inside `lax.cond` when the program runs.
    with pytest.raises(Exception, match="Cannot mutate BatchStat from a different trace level"):
        jax.block_until_ready(call(counter, jnp.ones(2)))


class NormalizedStack(nnx.Module):
    def __init__(self, rngs):
        self.linears = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(3)])
        self.norms = nnx.List([nnx.BatchNorm(4, rngs=rngs) for _ in range(3)])

    def __call__(self, x, tol):
        for linear, norm in zip(self.linears, self.norms):
            x = norm(jnp.tanh(linear(x)))
            if jnp.mean(jnp.abs(x)) > tol:
                break
        return x


def test_an_nnx_update_in_a_staged_branch_says_what_made_it_one():
    # After a traced `break`, the rest of each iteration is a staged branch, where Flax cannot
    # update a BatchNorm's statistics: raised where that branch runs (helper 134), with what it
    # means, where Flax's text alone said "from a different trace level".
    x = jax.random.normal(jax.random.PRNGKey(0), (8, 4))
    model = NormalizedStack(nnx.Rngs(0))
    with pytest.raises(Exception, match="Flax NNX raised this while a staged statement"):
        nnx.jit(transpiler.convert(lambda m, x, tol: m(x, tol)))(model, x, 100.0)
