import jax
from jax import lax
from jax.scipy.special import logsumexp


def f(log_init, log_trans, log_emit, obs, length):
    alpha = log_init + log_emit[:, obs[0]]
    for t in range(1, length):
        alpha = logsumexp(alpha[:, None] + log_trans, axis=0) + log_emit[:, obs[t]]
    return logsumexp(alpha)


def f_lax(log_init, log_trans, log_emit, obs, length):
    def body(t, alpha):
        return logsumexp(alpha[:, None] + log_trans, axis=0) + log_emit[:, obs[t]]

    alpha = lax.fori_loop(1, length, body, log_init + log_emit[:, obs[0]])
    return logsumexp(alpha)


def make_args():
    k = jax.random.split(jax.random.PRNGKey(7), 4)
    S, O, T = 8, 10, 128
    log_init = jax.nn.log_softmax(jax.random.normal(k[0], (S,)))
    log_trans = jax.nn.log_softmax(jax.random.normal(k[1], (S, S)), axis=1)
    log_emit = jax.nn.log_softmax(jax.random.normal(k[2], (S, O)), axis=1)
    obs = jax.random.randint(k[3], (T,), 0, O)
    return log_init, log_trans, log_emit, obs, 100


TOL = (1e-5, 1e-4)
