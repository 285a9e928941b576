import jax
import jax.numpy as jnp
from jax import lax


def f(xs, budget):
    total = jnp.zeros(xs.shape[1])
    used = 0
    for row in xs:
        cost = jnp.sum(jnp.abs(row))
        if used + cost > budget:
            break
        total = total + row
        used = used + cost
    return total, used


def f_lax(xs, budget):
    n = xs.shape[0]

    def cond(s):
        i, total, used = s
        row = xs[jnp.minimum(i, n - 1)]
        return (i < n) & (used + jnp.sum(jnp.abs(row)) <= budget)

    def body(s):
        i, total, used = s
        return i + 1, total + xs[i], used + jnp.sum(jnp.abs(xs[i]))

    _, total, used = lax.while_loop(cond, body, (0, jnp.zeros(xs.shape[1]), jnp.float32(0.0)))
    return total, used


def make_args():
    return jax.random.normal(jax.random.PRNGKey(26), (512, 16)), jnp.float32(3000.0)


TOL = (1e-5, 1e-3)
