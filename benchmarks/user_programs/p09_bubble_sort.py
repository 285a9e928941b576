import jax
import jax.numpy as jnp
from jax import lax

N = 16


def f(x):
    for i in range(N):
        for j in range(N - 1 - i):
            if x[j] > x[j + 1]:
                a = x[j]
                b = x[j + 1]
                x = x.at[j].set(b)
                x = x.at[j + 1].set(a)
    return x


def f_lax(x):
    def outer(i, x):
        def inner(j, x):
            a, b = x[j], x[j + 1]
            sw = a > b
            x = x.at[j].set(jnp.where(sw, b, a))
            return x.at[j + 1].set(jnp.where(sw, a, b))

        return lax.fori_loop(0, N - 1 - i, inner, x)

    return lax.fori_loop(0, N, outer, x)


def make_args():
    return (jax.random.normal(jax.random.PRNGKey(9), (N,)),)
