import jax
import jax.numpy as jnp
from jax import lax


def root(c):
    lo, hi = 0.0, 10.0
    it = 0
    while hi - lo > 1e-5 and it < 60:
        mid = (lo + hi) / 2
        if mid * mid * mid - c > 0:
            hi = mid
        else:
            lo = mid
        it += 1
    return (lo + hi) / 2


def f(cs):
    return jax.vmap(root)(cs)


def root_lax(c):
    def cond(s):
        lo, hi, it = s
        return (hi - lo > 1e-5) & (it < 60)

    def body(s):
        lo, hi, it = s
        mid = (lo + hi) / 2
        pos = mid * mid * mid - c > 0
        return jnp.where(pos, lo, mid), jnp.where(pos, mid, hi), it + 1

    lo, hi, _ = lax.while_loop(cond, body, (jnp.float32(0.0), jnp.float32(10.0), 0))
    return (lo + hi) / 2


def f_lax(cs):
    return jax.vmap(root_lax)(cs)


def make_args():
    return (jnp.linspace(0.5, 900.0, 256),)


TOL = (1e-4, 1e-4)
