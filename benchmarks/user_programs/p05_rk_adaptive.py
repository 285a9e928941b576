import jax.numpy as jnp
from jax import lax


def field(y, mu):
    return jnp.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


def f(y, t_end, mu):
    t = 0.0
    dt = 0.01
    accepted = 0
    rejected = 0
    while t < t_end:
        dt = min(dt, t_end - t)
        k1 = field(y, mu)
        k2 = field(y + 0.5 * dt * k1, mu)
        k3 = field(y + 0.75 * dt * k2, mu)
        y_new = y + dt * (2 * k1 + 3 * k2 + 4 * k3) / 9
        k4 = field(y_new, mu)
        y_low = y + dt * (7 * k1 / 24 + k2 / 4 + k3 / 3 + k4 / 8)
        err = jnp.max(jnp.abs(y_new - y_low))
        if err < 1e-4:
            t = t + dt
            y = y_new
            accepted += 1
        else:
            rejected += 1
        dt = dt * min(5.0, max(0.2, 0.9 * (1e-4 / (err + 1e-12)) ** (1 / 3)))
    return y, accepted, rejected


def f_lax(y, t_end, mu):
    def cond(s):
        return s[0] < t_end

    def body(s):
        t, y, dt, acc, rej = s
        dt = jnp.minimum(dt, t_end - t)
        k1 = field(y, mu)
        k2 = field(y + 0.5 * dt * k1, mu)
        k3 = field(y + 0.75 * dt * k2, mu)
        y_new = y + dt * (2 * k1 + 3 * k2 + 4 * k3) / 9
        k4 = field(y_new, mu)
        y_low = y + dt * (7 * k1 / 24 + k2 / 4 + k3 / 3 + k4 / 8)
        err = jnp.max(jnp.abs(y_new - y_low))
        ok = err < 1e-4
        t = jnp.where(ok, t + dt, t)
        y = jnp.where(ok, y_new, y)
        dt = dt * jnp.clip(0.9 * (1e-4 / (err + 1e-12)) ** (1 / 3), 0.2, 5.0)
        return t, y, dt, acc + ok, rej + (~ok)

    s = lax.while_loop(cond, body, (jnp.float32(0.0), y, jnp.float32(0.01), 0, 0))
    return s[1], s[3], s[4]


def make_args():
    return jnp.array([2.0, 0.0]), jnp.float32(5.0), jnp.float32(1.0)


TOL = (1e-4, 1e-5)
