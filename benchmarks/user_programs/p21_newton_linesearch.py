import jax
import jax.numpy as jnp
from jax import lax


def rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def f(x, tol):
    it = 0
    g = jax.grad(rosen)(x)
    while jnp.linalg.norm(g) > tol and it < 200:
        d = -g
        step = 1.0
        fx = rosen(x)
        while rosen(x + step * d) > fx - 1e-4 * step * (g @ g):
            step = step * 0.5
        x = x + step * d
        g = jax.grad(rosen)(x)
        it += 1
    return x, it


def f_lax(x, tol):
    def cond(s):
        x, g, it = s
        return (jnp.linalg.norm(g) > tol) & (it < 200)

    def body(s):
        x, g, it = s
        d = -g
        fx = rosen(x)
        gg = g @ g
        step = lax.while_loop(
            lambda st: rosen(x + st * d) > fx - 1e-4 * st * gg,
            lambda st: st * 0.5,
            jnp.float32(1.0),
        )
        x = x + step * d
        return x, jax.grad(rosen)(x), it + 1

    x, _, it = lax.while_loop(cond, body, (x, jax.grad(rosen)(x), 0))
    return x, it


def make_args():
    return jnp.array([-1.2, 1.0, 0.5, 0.8]), jnp.float32(1e-3)


TOL = (1e-4, 1e-5)
