import jax
import jax.numpy as jnp
from jax import lax

N = 24


def f(x):
    for i in range(1, N):
        key = x[i]
        j = i - 1
        while j >= 0 and x[j] > key:
            x = x.at[j + 1].set(x[j])
            j -= 1
        x = x.at[j + 1].set(key)
    return x


def f_lax(x):
    def outer(i, x):
        key = x[i]

        def cond(s):
            j, x = s
            return (j >= 0) & (x[jnp.maximum(j, 0)] > key)

        def body(s):
            j, x = s
            return j - 1, x.at[j + 1].set(x[j])

        j, x = lax.while_loop(cond, body, (i - 1, x))
        return x.at[j + 1].set(key)

    return lax.fori_loop(1, N, outer, x)


def make_args():
    return (jax.random.normal(jax.random.PRNGKey(10), (N,)),)
