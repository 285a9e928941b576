"""A tiny RNN whose hidden state is rescaled whenever its norm grows too large.

The `for` over a Python range becomes one `lax.scan` and the `if` on a traced norm becomes a
`lax.cond` inside it, so the whole sequence compiles to one graph and `jax.grad` goes through both.
"""

import jax.numpy as jnp


def clipped_rnn(w, xs, max_norm=2.0):
    """Runs a tanh RNN over the rows of `xs`; returns the mean of the final hidden state."""
    h = jnp.zeros(w.shape[0])
    for t in range(xs.shape[0]):
        h = jnp.tanh(w @ h + xs[t])
        norm = jnp.sqrt(jnp.sum(h * h))
        if norm > max_norm:
            h = h * (max_norm / norm)
        else:
            h = h * 1.5
    return jnp.mean(h)


def main():
    import jax

    from samples.common import run

    key_w, key_x = jax.random.split(jax.random.PRNGKey(0))
    w = jax.random.normal(key_w, (4, 4))
    xs = jax.random.normal(key_x, (50, 4))
    print(f"tanh RNN with hidden size {w.shape[0]} over {xs.shape[0]} steps, norm clipped at 2:")
    _, mean_h = run(clipped_rnn, w, xs)
    print(f"  mean of the final hidden state: {float(mean_h):.6f}")


if __name__ == "__main__":
    main()
