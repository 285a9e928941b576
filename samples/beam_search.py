"""Beam search over a tiny next-token model, stopping early once every beam has ended.

`while step < max_len and not jnp.all(done):` runs as many steps as the data needs (a
`lax.while_loop` when converted); each step extends every beam by every token, keeps the
`beam` best, and marks the beams that emitted `EOS`, which from then on only repeat `EOS` at no
cost. An `if` on the traced step applies a length bonus once the minimum length is reached.
"""

import jax
import jax.numpy as jnp

BOS, EOS = 0, 1


def make_model(key, vocab=12, dim=8, eos_bias=2.0):
    """Token embeddings and the output projection of a one-layer next-token model (`eos_bias`
    makes ending likelier)."""
    k1, k2 = jax.random.split(key)
    w_out = jax.random.normal(k2, (dim, vocab)) * 1.5
    return jax.random.normal(k1, (vocab, dim)), w_out.at[:, EOS].add(eos_bias)


def beam_search(emb, w_out, beam=3, max_len=10, min_len=3, bonus=0.1):
    vocab = w_out.shape[1]
    tokens = jnp.full((beam, max_len), EOS).at[:, 0].set(BOS)
    scores = jnp.zeros(beam).at[1:].set(-jnp.inf)  # one live beam to start with
    done = jnp.zeros(beam, dtype=bool)
    only_eos = jnp.where(jnp.arange(vocab) == EOS, 0.0, -jnp.inf)
    step = 1
    while step < max_len and not jnp.all(done):
        logp = jax.nn.log_softmax(jnp.tanh(emb[tokens[:, step - 1]]) @ w_out)
        logp = jnp.where(done[:, None], only_eos, logp)
        if step >= min_len:
            logp = logp + bonus  # a length bonus for every token past the minimum
        candidates = (scores[:, None] + logp).reshape(-1)
        top = jnp.argsort(-candidates)[:beam]
        parent, token = top // vocab, top % vocab
        tokens = tokens[parent].at[:, step].set(token)
        scores = candidates[top]
        done = done[parent] | (token == EOS)
        step += 1
    best = jnp.argmax(scores)
    return tokens[best], scores[best], step


def main():
    from samples.common import run

    emb, w_out = make_model(jax.random.PRNGKey(0))
    print("== samples/beam_search.py: beam search, while with an early stop, if on the step ==")
    eager, compiled = run(beam_search, emb, w_out)
    tokens, score, steps = compiled
    print(
        f"  best sequence {tokens.tolist()} (score {float(score):.3f}) after {int(steps)} steps "
        f"of at most 10; eager: {eager[0].tolist()} after {eager[2]} steps"
    )


if __name__ == "__main__":
    main()
