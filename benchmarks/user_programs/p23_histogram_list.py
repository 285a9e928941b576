import jax
import jax.numpy as jnp
from jax import lax

B = 8


def f(labels, weights):
    counts = [0] * B
    sums = [0.0] * B
    for i in range(labels.shape[0]):
        counts[labels[i]] += 1
        sums[labels[i]] += weights[i]
    return jnp.array(counts), jnp.array(sums)


def f_lax(labels, weights):
    def step(c, inp):
        counts, sums = c
        l, w = inp
        return (counts.at[l].add(1), sums.at[l].add(w)), None

    return lax.scan(step, (jnp.zeros(B, jnp.int32), jnp.zeros(B)), (labels, weights))[0]


def make_args():
    k = jax.random.split(jax.random.PRNGKey(23), 2)
    return jax.random.randint(k[0], (512,), 0, B), jax.random.uniform(k[1], (512,))


TOL = (1e-5, 1e-4)
