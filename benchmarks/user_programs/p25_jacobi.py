import jax
import jax.numpy as jnp
from jax import lax


def f(a, b, tol):
    d = jnp.diag(a)
    r = a - jnp.diag(d)
    x = jnp.zeros_like(b)
    for it in range(500):
        x_new = (b - r @ x) / d
        diff = jnp.max(jnp.abs(x_new - x))
        x = x_new
        if diff < tol:
            break
    return x, it + 1


def f_lax(a, b, tol):
    d = jnp.diag(a)
    r = a - jnp.diag(d)

    def cond(s):
        x, it, diff = s
        return (it < 500) & (diff >= tol)

    def body(s):
        x, it, _ = s
        xn = (b - r @ x) / d
        return xn, it + 1, jnp.max(jnp.abs(xn - x))

    x, it, _ = lax.while_loop(cond, body, (jnp.zeros_like(b), 0, jnp.float32(jnp.inf)))
    return x, it


def make_args():
    k = jax.random.split(jax.random.PRNGKey(25), 2)
    m = jax.random.normal(k[0], (64, 64)) * 0.1
    a = m + jnp.diag(jnp.full(64, 8.0))
    return a, jax.random.normal(k[1], (64,)), jnp.float32(1e-6)


TOL = (1e-4, 1e-5)
