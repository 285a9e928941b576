import jax
import jax.numpy as jnp
from jax import lax

K = 8


def f(scores):
    vals = []
    idxs = []
    s = scores
    for _ in range(K):
        i = jnp.argmax(s)
        vals.append(s[i])
        idxs.append(i)
        s = s.at[i].set(-jnp.inf)
    return jnp.stack(vals), jnp.stack(idxs)


def f_lax(scores):
    def step(s, _):
        i = jnp.argmax(s)
        return s.at[i].set(-jnp.inf), (s[i], i)

    _, (vals, idxs) = lax.scan(step, scores, None, length=K)
    return vals, idxs


def make_args():
    return (jax.random.normal(jax.random.PRNGKey(22), (1000,)),)
