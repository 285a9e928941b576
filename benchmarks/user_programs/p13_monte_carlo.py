import jax
import jax.numpy as jnp
from jax import lax


def f(key, n):
    inside = 0
    for i in range(n):
        key, k1, k2 = jax.random.split(key, 3)
        x = jax.random.uniform(k1)
        y = jax.random.uniform(k2)
        if x * x + y * y < 1.0:
            inside += 1
    return 4.0 * inside / n


def f_lax(key, n):
    def body(i, s):
        key, inside = s
        key, k1, k2 = jax.random.split(key, 3)
        x = jax.random.uniform(k1)
        y = jax.random.uniform(k2)
        return key, inside + jnp.where(x * x + y * y < 1.0, 1, 0)

    _, inside = lax.fori_loop(0, n, body, (key, 0))
    return 4.0 * inside / n


def make_args():
    return jax.random.PRNGKey(13), 500
