"""An Equinox MLP trained with optax's Adam until the loss is small, with early stopping.

The training loop is plain Python: `while loss > tol and step < max_steps:` with the model and
the optimizer state as loop state (the model is an `eqx.nn.MLP`, whose activation function rides
along unchanged), and a traced `if` that keeps the best model so far and counts the steps
without improvement; `patience` of those in a row stop the loop with a `break`. Converted, the
loop is one `lax.while_loop` and the `if` a select in it.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax


def make_model(key, width=8):
    return eqx.nn.MLP(1, 1, width, 2, activation=jnp.tanh, key=key)


def mse(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


def fit(model, x, y, tol=1e-3, max_steps=120, patience=10, lr=0.05):
    optimizer = optax.adam(lr)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
    loss = mse(model, x, y)
    best, best_loss, bad_steps, step = model, loss, 0, 0
    while loss > tol and step < max_steps:
        loss, grads = eqx.filter_value_and_grad(mse)(model, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        model = eqx.apply_updates(model, updates)
        step += 1
        if loss < best_loss:
            best, best_loss, bad_steps = model, loss, 0
        else:
            bad_steps += 1
            if bad_steps >= patience:
                break
    return best, best_loss, step


def data(key, n=32):
    x = jnp.linspace(-2.0, 2.0, n)[:, None]
    y = jnp.sin(2.0 * x) + 0.05 * jax.random.normal(key, x.shape)
    return x, y


def main():
    from samples.common import agree, run

    model = make_model(jax.random.PRNGKey(0))
    x, y = data(jax.random.PRNGKey(1))
    print("== samples/mlp_early_stopping.py: Equinox MLP, optax Adam, while + early stopping ==")
    print(f"  loss of the untrained model: {float(mse(model, x, y)):.4f}")
    params, static = eqx.partition(model, eqx.is_array)

    def fit_params(params):  # what the graph summary traces: the arrays in, the model rebuilt
        best, best_loss, steps = fit(eqx.combine(params, static), x, y)
        return eqx.filter(best, eqx.is_array), best_loss, steps

    def check(eager, compiled):
        assert int(compiled[2]) == eager[2], (eager[2], compiled[2])
        agree(
            eqx.filter(eager[:2], eqx.is_array),
            eqx.filter(compiled[:2], eqx.is_array),
            rtol=1e-3,
            atol=1e-4,
        )

    eager, compiled = run(
        fit, model, x, y, check=check, compile=eqx.filter_jit, graph_of=(fit_params, (params,))
    )
    best, best_loss, steps = compiled
    print(
        f"  best loss {float(best_loss):.5f} after {int(steps)} steps "
        f"(eager: {float(eager[1]):.5f} after {eager[2]} steps); "
        f"the activation is still {best.activation.__name__}"
    )


if __name__ == "__main__":
    main()
