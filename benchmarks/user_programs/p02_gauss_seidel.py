import jax
import jax.numpy as jnp
from jax import lax

N = 16


def f(a, b, tol):
    x = jnp.zeros_like(b)
    err = jnp.inf
    it = 0
    while err > tol and it < 200:
        x_old = x
        for i in range(N):
            s = a[i] @ x - a[i, i] * x[i]
            x = x.at[i].set((b[i] - s) / a[i, i])
        err = jnp.max(jnp.abs(x - x_old))
        it += 1
    return x, it


def f_lax(a, b, tol):
    def sweep(i, x):
        s = a[i] @ x - a[i, i] * x[i]
        return x.at[i].set((b[i] - s) / a[i, i])

    def cond(s):
        _, err, it = s
        return jnp.logical_and(err > tol, it < 200)

    def body(s):
        x, _, it = s
        xn = lax.fori_loop(0, N, sweep, x)
        return xn, jnp.max(jnp.abs(xn - x)), it + 1

    x, _, it = lax.while_loop(cond, body, (jnp.zeros_like(b), jnp.float32(jnp.inf), 0))
    return x, it


def make_args():
    k = jax.random.split(jax.random.PRNGKey(2), 2)
    m = jax.random.normal(k[0], (N, N)) * 0.3
    a = m + jnp.diag(jnp.full(N, 4.0))
    b = jax.random.normal(k[1], (N,))
    return a, b, 1e-5


TOL = (1e-4, 1e-5)
