import jax.numpy as jnp
from jax import lax


def g(x, c):
    return jnp.cos(x) - c * x


def f(x0, x1, c):
    f0 = g(x0, c)
    f1 = g(x1, c)
    it = 0
    while abs(f1) > 1e-6 and it < 50:
        denom = f1 - f0
        if denom == 0:
            break
        x2 = x1 - f1 * (x1 - x0) / denom
        x0, f0 = x1, f1
        x1 = x2
        f1 = g(x1, c)
        it += 1
    return x1, it


def f_lax(x0, x1, c):
    def cond(s):
        x0, x1, f0, f1, it = s
        return (jnp.abs(f1) > 1e-6) & (it < 50) & (f1 - f0 != 0)

    def body(s):
        x0, x1, f0, f1, it = s
        x2 = x1 - f1 * (x1 - x0) / (f1 - f0)
        return x1, x2, f1, g(x2, c), it + 1

    x0 = jnp.asarray(x0, jnp.float32)
    x1 = jnp.asarray(x1, jnp.float32)
    _, x1, _, _, it = lax.while_loop(cond, body, (x0, x1, g(x0, c), g(x1, c), 0))
    return x1, it


def make_args():
    return jnp.float32(0.0), jnp.float32(1.0), jnp.float32(0.7)
