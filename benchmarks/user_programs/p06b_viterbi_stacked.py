import jax
import jax.numpy as jnp
from jax import lax

T = 64


def f(log_init, log_trans, log_emit, obs, length):
    delta = log_init + log_emit[:, obs[0]]
    back = []
    for t in range(1, T):
        scores = delta[:, None] + log_trans
        best_prev = jnp.argmax(scores, axis=0)
        new_delta = jnp.max(scores, axis=0) + log_emit[:, obs[t]]
        if t < length:
            delta = new_delta
            back.append(best_prev)
        else:
            back.append(jnp.arange(delta.shape[0]))
    back = jnp.stack(back)
    state = jnp.argmax(delta)
    path = [state]
    for t in range(T - 2, -1, -1):
        state = back[t][state]
        path.append(state)
    path.reverse()
    return jnp.stack(path), jnp.max(delta)


def f_lax(log_init, log_trans, log_emit, obs, length):
    S = log_init.shape[0]

    def fwd(delta, inp):
        t, o = inp
        scores = delta[:, None] + log_trans
        bp = jnp.argmax(scores, axis=0)
        nd = jnp.max(scores, axis=0) + log_emit[:, o]
        live = t < length
        return jnp.where(live, nd, delta), jnp.where(live, bp, jnp.arange(S))

    delta0 = log_init + log_emit[:, obs[0]]
    delta, back = lax.scan(fwd, delta0, (jnp.arange(1, T), obs[1:]))
    last = jnp.argmax(delta)

    def bwd(state, bp):
        s = bp[state]
        return s, s

    _, states = lax.scan(bwd, last, back, reverse=True)
    return jnp.concatenate([states, last[None]]), jnp.max(delta)


def make_args():
    k = jax.random.split(jax.random.PRNGKey(6), 4)
    S, O = 8, 10
    log_init = jax.nn.log_softmax(jax.random.normal(k[0], (S,)))
    log_trans = jax.nn.log_softmax(jax.random.normal(k[1], (S, S)) * 2, axis=1)
    log_emit = jax.nn.log_softmax(jax.random.normal(k[2], (S, O)) * 2, axis=1)
    obs = jax.random.randint(k[3], (T,), 0, O)
    return log_init, log_trans, log_emit, obs, 50


TOL = (1e-5, 1e-5)
