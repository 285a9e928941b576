import jax.numpy as jnp
from jax import lax

import transpiler


def f(x0):
    # Collatz-like orbit of a float map, recorded until it falls below 1 (at most 64 steps)
    x = x0
    orbit = []
    while x > 1.0:
        transpiler.loop_options(max_iterations=64)
        if x % 2.0 < 1.0:
            x = x / 2.0
        else:
            x = 3.0 * x + 1.0
        orbit.append(x)
    buf, n = transpiler.padded(orbit)
    return buf, n


def f_lax(x0):
    def cond(s):
        x, buf, n = s
        return (x > 1.0) & (n < 64)

    def body(s):
        x, buf, n = s
        x = jnp.where(x % 2.0 < 1.0, x / 2.0, 3.0 * x + 1.0)
        return x, buf.at[n].set(x), n + 1

    _, buf, n = lax.while_loop(cond, body, (x0, jnp.zeros(64), 0))
    return buf, n


def make_args():
    return (jnp.float32(7.0),)
