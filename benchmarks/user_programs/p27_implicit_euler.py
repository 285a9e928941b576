import jax.numpy as jnp
from jax import lax


def rhs(y, k):
    return -k * y**3


def f(y0, k, dt):
    y = y0
    ys = []
    for n in range(100):
        z = y
        for it in range(20):
            g = z - y - dt * rhs(z, k)
            dg = 1.0 + 3.0 * dt * k * z**2
            z_new = z - g / dg
            if jnp.max(jnp.abs(z_new - z)) < 1e-6:
                z = z_new
                break
            z = z_new
        y = z
        ys.append(y)
    return jnp.stack(ys)


def f_lax(y0, k, dt):
    def step(y, _):
        def cond(s):
            z, it, done = s
            return (it < 20) & ~done

        def body(s):
            z, it, _ = s
            g = z - y - dt * rhs(z, k)
            dg = 1.0 + 3.0 * dt * k * z**2
            zn = z - g / dg
            return zn, it + 1, jnp.max(jnp.abs(zn - z)) < 1e-6

        z, _, _ = lax.while_loop(cond, body, (y, 0, False))
        return z, z

    return lax.scan(step, y0, None, length=100)[1]


def make_args():
    return jnp.linspace(0.5, 3.0, 8), jnp.float32(2.0), jnp.float32(0.05)


TOL = (1e-5, 1e-6)
