import jax
import jax.numpy as jnp
from jax import lax

import transpiler


def f(xs, thresh):
    kept = []
    for i, x in enumerate(xs):
        if x > thresh:
            kept.append(x * i)
    buf, n = transpiler.padded(kept)
    return buf, n, sum(kept)


def f_lax(xs, thresh):
    def step(c, inp):
        buf, n, s = c
        i, x = inp
        keep = x > thresh
        v = x * i
        buf = jnp.where(keep, buf.at[n].set(v), buf)
        return (buf, n + keep, s + jnp.where(keep, v, 0.0)), None

    (buf, n, s), _ = lax.scan(
        step, (jnp.zeros_like(xs), 0, jnp.float32(0.0)), (jnp.arange(xs.shape[0]), xs)
    )
    return buf, n, s


def make_args():
    return jax.random.normal(jax.random.PRNGKey(24), (256,)), jnp.float32(0.5)


TOL = (1e-5, 1e-3)
