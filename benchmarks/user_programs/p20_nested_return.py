import jax.numpy as jnp
from jax import lax


def f(a, b, target):
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            if a[i] + b[j] == target:
                return i, j
    return -1, -1


def f_lax(a, b, target):
    n, m = a.shape[0], b.shape[0]

    def cond(s):
        i, j, found = s
        return (i < n) & ~found

    def body(s):
        i, j, found = s
        hit = a[i] + b[j] == target
        nj = jnp.where(j + 1 == m, 0, j + 1)
        ni = jnp.where(j + 1 == m, i + 1, i)
        return jnp.where(hit, i, ni), jnp.where(hit, j, nj), hit

    i, j, found = lax.while_loop(cond, body, (0, 0, False))
    return jnp.where(found, i, -1), jnp.where(found, j, -1)


def make_args():
    a = jnp.arange(64, dtype=jnp.int32)
    b = jnp.arange(64, dtype=jnp.int32) * 100
    return a, b, 40 * 1 + 3000
