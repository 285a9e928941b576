import jax
import jax.numpy as jnp
from jax import lax


def f(xs, a, b):
    counts = jnp.zeros(4, jnp.int32)
    acc = 0.0
    for x in xs:
        if x < a:
            acc = acc - x
            counts = counts.at[0].add(1)
        elif x < 0:
            acc = acc + 0.5 * x
            counts = counts.at[1].add(1)
        elif x < b:
            acc = acc + x * x
            counts = counts.at[2].add(1)
        else:
            acc = acc + b * b
            counts = counts.at[3].add(1)
    return acc, counts


def f_lax(xs, a, b):
    def step(c, x):
        acc, counts = c
        k = jnp.where(x < a, 0, jnp.where(x < 0, 1, jnp.where(x < b, 2, 3)))
        contrib = jnp.where(x < a, -x, jnp.where(x < 0, 0.5 * x, jnp.where(x < b, x * x, b * b)))
        return (acc + contrib, counts.at[k].add(1)), None

    return lax.scan(step, (jnp.float32(0.0), jnp.zeros(4, jnp.int32)), xs)[0]


def make_args():
    return jax.random.normal(jax.random.PRNGKey(17), (1024,)), jnp.float32(-1.0), jnp.float32(1.0)


TOL = (1e-4, 1e-4)
