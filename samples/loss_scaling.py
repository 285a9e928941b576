"""Dynamic loss scaling for mixed precision: 16-bit compute, float32 master weights.

Every mixed-precision trainer has this control flow. Each step computes the gradients of
`loss * scale` in 16 bits (float16 or bfloat16), unscales them in float32, and then

    if all gradients are finite:   apply the update; every `growth_interval` good steps in a
                                   row, double the scale
    else:                          skip the update and halve the scale

The scale starts far too large on purpose: in float16 (largest value 65504) the first steps
overflow and are skipped until the scale comes down, then training proceeds. bfloat16 has
float32's range, so there the same loop never skips. Converted, the `for` over steps is one
`lax.scan` and the `if` a `lax.cond` (or a select) inside it.
"""

import jax
import jax.numpy as jnp


def init_params(key, n_in=8, n_hidden=16):
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (n_in, n_hidden), jnp.float32) / jnp.sqrt(n_in),
        "w2": jax.random.normal(k2, (n_hidden, 1), jnp.float32) / jnp.sqrt(n_hidden),
    }


def loss_16(params, x, y, dtype=jnp.bfloat16):
    """The forward pass in `dtype` (the master weights cast down), the loss in float32."""
    p = jax.tree.map(lambda w: w.astype(dtype), params)
    h = jnp.tanh(x.astype(dtype) @ p["w1"])
    out = (h @ p["w2"])[:, 0]
    return jnp.mean((out.astype(jnp.float32) - y) ** 2)


def scaled_loss(params, x, y, dtype, scale):
    return loss_16(params, x, y, dtype).astype(dtype) * scale.astype(dtype)


def train(params, x, y, steps, dtype, lr=0.1, growth_interval=10, max_scale=2.0**24):
    scale = jnp.float32(2.0**24)  # far too large for float16: the first steps overflow
    good_steps = 0
    skipped = 0
    for _ in range(steps):
        # Gradients of the scaled loss, computed in 16 bits, unscaled in float32.
        grads = jax.grad(scaled_loss)(params, x, y, dtype, scale)
        grads = jax.tree.map(lambda g, s=scale: g.astype(jnp.float32) / s, grads)
        finite = all(jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads))
        if finite:
            params = jax.tree.map(lambda w, g: w - lr * g, params, grads)
            good_steps += 1
            if good_steps == growth_interval and scale < max_scale:
                scale = scale * 2.0
                good_steps = 0
        else:
            scale = scale / 2.0
            good_steps = 0
            skipped += 1
    return params, scale, skipped


def data(key, n=64, n_in=8):
    kx, kw = jax.random.split(key)
    x = jax.random.normal(kx, (n, n_in), jnp.float32)
    y = jnp.sin(x @ jax.random.normal(kw, (n_in,), jnp.float32))
    return x, y


def main():
    from samples.common import run

    params = init_params(jax.random.PRNGKey(0))
    x, y = data(jax.random.PRNGKey(1))
    print("== samples/loss_scaling.py: dynamic loss scaling, 16-bit compute, f32 master weights ==")
    print(f"  loss before training: {float(loss_16(params, x, y)):.4f}")
    for dtype in (jnp.float16, jnp.bfloat16):
        name = jnp.dtype(dtype).name
        print(f"  {name} compute:")
        eager, compiled = run(
            train, params, x, y, 40, dtype, check=_agree, jit_kwargs={"static_argnums": (4,)}
        )
        trained, scale, skipped = compiled
        print(
            f"  loss {float(loss_16(trained, x, y, dtype)):.4f} (eager "
            f"{float(loss_16(eager[0], x, y, dtype)):.4f}), {int(skipped)} of 40 steps skipped "
            f"(eager {eager[2]}), final scale 2**{float(jnp.log2(scale)):.0f}"
        )


def _agree(eager, compiled):
    from samples.common import agree

    # 16-bit arithmetic: XLA's fusions round a few last bits differently from eager ops.
    agree(eager, compiled, rtol=2e-2, atol=2e-3)


if __name__ == "__main__":
    main()
