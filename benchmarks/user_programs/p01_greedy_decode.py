import jax
import jax.numpy as jnp
from jax import lax

EOS = 0
MAX_LEN = 24


def f(emb, w, out_w, h, first):
    tokens = jnp.zeros(MAX_LEN, jnp.int32)
    token = first
    score = 0.0
    n = 0
    for t in range(MAX_LEN):
        h = jnp.tanh(w @ h + emb[token])
        logits = h @ out_w
        token = jnp.argmax(logits)
        score = score + jax.nn.log_softmax(logits)[token]
        tokens = tokens.at[t].set(token)
        n = t + 1
        if token == EOS:
            break
    return tokens, n, score


def f_lax(emb, w, out_w, h, first):
    def cond(s):
        t, _, _, _, _, done = s
        return jnp.logical_and(t < MAX_LEN, jnp.logical_not(done))

    def body(s):
        t, h, token, tokens, score, _ = s
        h = jnp.tanh(w @ h + emb[token])
        logits = h @ out_w
        token = jnp.argmax(logits).astype(jnp.int32)
        score = score + jax.nn.log_softmax(logits)[token]
        return t + 1, h, token, tokens.at[t].set(token), score, token == EOS

    t, h, token, tokens, score, _ = lax.while_loop(
        cond,
        body,
        (
            0,
            h,
            jnp.asarray(first, jnp.int32),
            jnp.zeros(MAX_LEN, jnp.int32),
            jnp.float32(0.0),
            False,
        ),
    )
    return tokens, t, score


def make_args():
    k = jax.random.split(jax.random.PRNGKey(1), 4)
    V, H = 16, 32
    emb = jax.random.normal(k[0], (V, H)) * 0.5
    w = jax.random.normal(k[1], (H, H)) * 0.3
    out_w = jax.random.normal(k[2], (H, V))
    out_w = out_w.at[:, EOS].add(-0.6)
    return emb, w, out_w, jnp.zeros(H), 3
