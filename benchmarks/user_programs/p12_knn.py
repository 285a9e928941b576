import jax
import jax.numpy as jnp
from jax import lax

K = 3


def f(points, q):
    best_d = [jnp.inf, jnp.inf, jnp.inf]
    best_i = [-1, -1, -1]
    for i in range(points.shape[0]):
        d = jnp.sum((points[i] - q) ** 2)
        if d < best_d[0]:
            best_d = [d, best_d[0], best_d[1]]
            best_i = [i, best_i[0], best_i[1]]
        elif d < best_d[1]:
            best_d = [best_d[0], d, best_d[1]]
            best_i = [best_i[0], i, best_i[1]]
        elif d < best_d[2]:
            best_d = [best_d[0], best_d[1], d]
            best_i = [best_i[0], best_i[1], i]
    return jnp.stack(best_d), jnp.stack(best_i)


def f_lax(points, q):
    def step(c, inp):
        bd, bi = c
        i, p = inp
        d = jnp.sum((p - q) ** 2)
        c0, c1, c2 = d < bd[0], d < bd[1], d < bd[2]
        nd = jnp.where(
            c0,
            jnp.stack([d, bd[0], bd[1]]),
            jnp.where(
                c1, jnp.stack([bd[0], d, bd[1]]), jnp.where(c2, jnp.stack([bd[0], bd[1], d]), bd)
            ),
        )
        ni = jnp.where(
            c0,
            jnp.stack([i, bi[0], bi[1]]),
            jnp.where(
                c1, jnp.stack([bi[0], i, bi[1]]), jnp.where(c2, jnp.stack([bi[0], bi[1], i]), bi)
            ),
        )
        return (nd, ni), None

    init = (jnp.full(K, jnp.inf), jnp.full(K, -1, jnp.int32))
    (bd, bi), _ = lax.scan(step, init, (jnp.arange(points.shape[0]), points))
    return bd, bi


def make_args():
    k = jax.random.split(jax.random.PRNGKey(12), 2)
    return jax.random.normal(k[0], (256, 4)), jax.random.normal(k[1], (4,))
