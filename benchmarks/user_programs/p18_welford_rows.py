import jax
import jax.numpy as jnp
from jax import lax


def f(xs, clip):
    n = 0
    mean = jnp.zeros(xs.shape[1])
    m2 = jnp.zeros(xs.shape[1])
    skipped = 0
    for row in xs:
        if jnp.linalg.norm(row) > clip:
            skipped += 1
        else:
            n += 1
            delta = row - mean
            mean = mean + delta / n
            m2 = m2 + delta * (row - mean)
    return mean, m2 / (n - 1), skipped


def f_lax(xs, clip):
    def step(c, row):
        n, mean, m2, skipped = c
        skip = jnp.linalg.norm(row) > clip
        n1 = n + 1
        delta = row - mean
        mean1 = mean + delta / n1
        m21 = m2 + delta * (row - mean1)
        return (
            jnp.where(skip, n, n1),
            jnp.where(skip, mean, mean1),
            jnp.where(skip, m2, m21),
            skipped + skip.astype(jnp.int32),
        ), None

    z = jnp.zeros(xs.shape[1])
    (n, mean, m2, skipped), _ = lax.scan(step, (0, z, z, 0), xs)
    return mean, m2 / (n - 1), skipped


def make_args():
    return jax.random.normal(jax.random.PRNGKey(18), (512, 8)), jnp.float32(3.5)


TOL = (1e-4, 1e-5)
