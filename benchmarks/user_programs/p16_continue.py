import jax
import jax.numpy as jnp
from jax import lax


def f(x, w):
    total = 0.0
    count = 0
    sq = 0.0
    for i in range(x.shape[0]):
        v = x[i] * w
        if v < 0:
            continue
        if jnp.isnan(v):
            continue
        total += v
        sq += v * v
        count += 1
    mean = total / count
    return mean, sq / count - mean * mean, count


def f_lax(x, w):
    def step(c, xi):
        total, sq, count = c
        v = xi * w
        ok = (v >= 0) & ~jnp.isnan(v)
        return (
            total + jnp.where(ok, v, 0.0),
            sq + jnp.where(ok, v * v, 0.0),
            count + ok.astype(jnp.int32),
        ), None

    (total, sq, count), _ = lax.scan(step, (jnp.float32(0.0), jnp.float32(0.0), 0), x)
    mean = total / count
    return mean, sq / count - mean * mean, count


def make_args():
    x = jax.random.normal(jax.random.PRNGKey(16), (1024,))
    x = x.at[::37].set(jnp.nan)
    return x, jnp.float32(1.5)


TOL = (1e-4, 1e-5)
