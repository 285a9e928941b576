import jax.numpy as jnp
from jax import lax

XP = (0.0, 0.5, 1.0, 2.0, 4.0)
FP = (0.0, 0.2, 0.9, 1.5, 1.6)


def schedule(t):
    # piecewise-linear lookup with early returns
    if t <= XP[0]:
        return FP[0]
    for k in range(1, len(XP)):
        if t <= XP[k]:
            w = (t - XP[k - 1]) / (XP[k] - XP[k - 1])
            return FP[k - 1] + w * (FP[k] - FP[k - 1])
    return FP[-1]


def f(x0, ts):
    x = x0
    for t in ts:
        x = x + 0.01 * schedule(t) * jnp.cos(x)
    return x


def schedule_lax(t):
    return jnp.interp(t, jnp.array(XP), jnp.array(FP))


def f_lax(x0, ts):
    def step(x, t):
        return x + 0.01 * schedule_lax(t) * jnp.cos(x), None

    return lax.scan(step, x0, ts)[0]


def make_args():
    return jnp.linspace(-1.0, 1.0, 16), jnp.linspace(-0.5, 5.0, 512)


TOL = (1e-4, 1e-5)
