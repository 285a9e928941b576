"""The model samples (`samples/loss_scaling.py`, `samples/mlp_early_stopping.py`), converted and
compiled, against their eager runs."""

import functools

import jax
import jax.numpy as jnp
import pytest

import transpiler
from samples import loss_scaling
from samples.common import agree

# -- loss_scaling ----------------------------------------------------------------------------------


@functools.cache
def _scaling_inputs():
    return loss_scaling.init_params(jax.random.PRNGKey(0)), *loss_scaling.data(
        jax.random.PRNGKey(1), n=16
    )


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_loss_scaling_skips_the_steps_eager_python_skips(dtype):
    params, x, y = _scaling_inputs()
    expected = loss_scaling.train(params, x, y, 14, dtype)
    compiled = transpiler.jit(loss_scaling.train, static_argnums=(4,))(params, x, y, 14, dtype)
    agree(expected, compiled, rtol=2e-2, atol=2e-3)
    assert int(compiled[2]) == expected[2]
    assert (expected[2] > 0) == (dtype == jnp.float16)  # float16 overflows first, bfloat16 never
    jaxpr = str(
        jax.make_jaxpr(transpiler.convert(loss_scaling.train), static_argnums=(4,))(
            params, x, y, 14, dtype
        )
    )
    assert jaxpr.count("while[") == 1


def test_loss_scaling_main(capsys):
    loss_scaling.main()
    out = capsys.readouterr().out
    assert "float16 compute:" in out and "bfloat16 compute:" in out
    assert "11 of 40 steps skipped (eager 11), final scale 2**15" in out
    assert "0 of 40 steps skipped (eager 0), final scale 2**24" in out
    assert out.count("graph of train:") == 2


# -- mlp_early_stopping ----------------------------------------------------------------------------

eqx = pytest.importorskip("equinox", reason="needs equinox (pip install -e '.[test]')")


def test_mlp_training_stops_where_eager_python_stops():
    from samples import mlp_early_stopping as sample

    model = sample.make_model(jax.random.PRNGKey(0), width=4)
    x, y = sample.data(jax.random.PRNGKey(1), n=8)
    for patience in (3, 50):  # stopped early by `break`; by the step count
        fit = functools.partial(sample.fit, max_steps=40, patience=patience, lr=0.2)
        best, loss, steps = fit(model, x, y)
        fast_best, fast_loss, fast_steps = eqx.filter_jit(transpiler.convert(fit))(model, x, y)
        assert int(fast_steps) == steps and fast_best.activation is model.activation
        agree(
            eqx.filter((best, loss), eqx.is_array),
            eqx.filter((fast_best, fast_loss), eqx.is_array),
            rtol=1e-3,
            atol=1e-4,
        )
        assert (steps < 40) == (patience == 3)


def test_mlp_early_stopping_main(capsys):
    from samples import mlp_early_stopping

    mlp_early_stopping.main()
    out = capsys.readouterr().out
    assert "best loss 0.00395 after 85 steps (eager: 0.00395 after 85 steps)" in out
    assert "graph of fit_params:" in out and "while x1" in out


# -- beam_search -----------------------------------------------------------------------------------


def test_beam_search_stops_where_eager_python_stops():
    from samples import beam_search as sample

    search = transpiler.jit(sample.beam_search, static_argnames=("beam", "max_len"))
    for seed, bias, steps in ((0, 2.0, 8), (5, 2.0, 4), (3, 0.5, 10)):  # early stops, and none
        emb, w_out = sample.make_model(jax.random.PRNGKey(seed), eos_bias=bias)
        expected = sample.beam_search(emb, w_out)
        assert expected[2] == steps
        compiled = search(emb, w_out)
        agree(expected, compiled)
        assert compiled[0].dtype == expected[0].dtype
    batched = jax.vmap(transpiler.convert(sample.beam_search))(
        *jax.vmap(sample.make_model)(jax.random.split(jax.random.PRNGKey(0), 3))
    )
    for i in range(3):
        emb, w_out = sample.make_model(jax.random.split(jax.random.PRNGKey(0), 3)[i])
        agree(sample.beam_search(emb, w_out), jax.tree.map(lambda b, i=i: b[i], batched))


def test_beam_search_main(capsys):
    from samples import beam_search

    beam_search.main()
    out = capsys.readouterr().out
    assert (
        "best sequence [0, 7, 9, 1, 1, 1, 1, 1, 1, 1]" in out and "after 8 steps of at most" in out
    )
    assert "graph of beam_search:" in out and "while x1" in out


# -- nnx_layers --------------------------------------------------------------------------------------


def test_nnx_layers_loss_and_gradients_under_nnx_jit_equal_eager(capsys):
    pytest.importorskip("flax", reason="needs flax (pip install -e '.[integrations]')")
    from samples import nnx_layers

    nnx_layers.main()  # raises if the converted model's loss or gradients differ from eager
    out = capsys.readouterr().out
    assert out.count("gradients equal") == 3 and "DIFFERENT" not in out
    assert "loss 1.00831 (eager 1.00831)" in out  # the input whose loop breaks after one layer
    assert "graph of forward:" in out and "cond x" in out
