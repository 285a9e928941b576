import jax.numpy as jnp
from p12_knn import K, f_lax, make_args  # noqa: F401 - this program's inputs and lax


def f(points, q):
    d0 = d1 = d2 = jnp.inf
    i0 = i1 = i2 = -1
    for i in range(points.shape[0]):
        d = jnp.sum((points[i] - q) ** 2)
        if d < d0:
            d0, d1, d2 = d, d0, d1
            i0, i1, i2 = i, i0, i1
        elif d < d1:
            d1, d2 = d, d1
            i1, i2 = i, i1
        elif d < d2:
            d2 = d
            i2 = i
    return jnp.stack([d0, d1, d2]), jnp.stack([i0, i1, i2])
