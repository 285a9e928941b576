import jax
import jax.numpy as jnp
from jax import lax


def gru(p, h, x):
    z = jax.nn.sigmoid(p["wz"] @ x + p["uz"] @ h)
    r = jax.nn.sigmoid(p["wr"] @ x + p["ur"] @ h)
    hh = jnp.tanh(p["wh"] @ x + p["uh"] @ (r * h))
    return (1 - z) * h + z * hh


def f(p, xs, length):
    h = jnp.zeros(p["uz"].shape[0])
    for t in range(xs.shape[0]):
        if t < length:
            h = gru(p, h, xs[t])
    return h


def f_lax(p, xs, length):
    def step(h, inp):
        t, x = inp
        return jnp.where(t < length, gru(p, h, x), h), None

    h0 = jnp.zeros(p["uz"].shape[0])
    return lax.scan(step, h0, (jnp.arange(xs.shape[0]), xs))[0]


def make_args():
    k = jax.random.split(jax.random.PRNGKey(3), 8)
    H, D, T = 32, 16, 128
    p = {
        n: jax.random.normal(k[i], (H, D if n[0] == "w" else H)) * 0.2
        for i, n in enumerate(["wz", "uz", "wr", "ur", "wh", "uh"])
    }
    xs = jax.random.normal(k[6], (T, D))
    return p, xs, 90


TOL = (1e-4, 1e-5)
