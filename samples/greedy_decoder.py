"""Greedy decoding with a tiny recurrent model: a class, a helper, a list, an early exit.

The `while` runs until the end token or `max_len` tokens; the tokens are collected with
`append`. Converted, it is one bounded `lax.scan` (so `jax.grad` can go through it) whose list
is a buffer of `max_len` tokens. How many of them there are is known only when the program runs,
so the tokens are returned as `transpiler.padded(tokens)`: the buffer and the count.
"""

import jax
import jax.numpy as jnp

import transpiler

END = 0


def softmax_temperature(logits, temperature):
    if temperature > 0:
        return jax.nn.softmax(logits / temperature)
    return jax.nn.one_hot(jnp.argmax(logits), logits.shape[0])


class TinyDecoder:
    def __init__(self, vocab=6, hidden=8, seed=0):
        k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
        self.embed = jax.random.normal(k1, (vocab, hidden))
        self.w = jax.random.normal(k2, (hidden, hidden)) * 0.5
        self.out = jax.random.normal(k3, (hidden, vocab))

    def step(self, h, token):
        h = jnp.tanh(self.w @ h + self.embed[token])
        return h, h @ self.out

    def decode(self, h, first, temperature=0.0, max_len=8):
        tokens = []
        score = 0.0
        token = first
        steps = 0
        while token != END:
            transpiler.loop_options(max_iterations=8)
            if steps >= max_len:
                break
            h, logits = self.step(h, token)
            probs = softmax_temperature(logits, temperature)
            token = jnp.argmax(probs)
            score = score + jnp.log(probs[token] + 1e-6)
            tokens.append(token)
            steps += 1
        buffer, count = transpiler.padded(tokens)
        return buffer, count, score


def main():
    from samples.common import run

    decoder = TinyDecoder(seed=1)
    h0 = jnp.ones(8) * 0.1
    print(f"greedy decoding from token 4 until the end token {END}, at most 8 tokens:")
    eager, compiled = run(decoder.decode, h0, 4, check=None)
    (tokens, n, score), (buffer, n_c, score_c) = eager, compiled
    if tokens[: int(n)].tolist() != buffer[: int(n_c)].tolist():
        raise AssertionError(f"tokens differ: eager {tokens}, compiled {buffer[: int(n_c)]}")
    if abs(float(score) - float(score_c)) > 1e-4:
        raise AssertionError(f"scores differ: eager {score}, compiled {score_c}")
    tokens_c = buffer[: int(n_c)].tolist()
    print(f"  tokens {tokens_c} ({len(tokens_c)} of them), log-probability {float(score_c):.4f}")


if __name__ == "__main__":
    main()
