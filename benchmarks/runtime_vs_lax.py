"""Run time of converted code next to the same algorithm written by hand with `lax`.

Each pair computes the same thing; both are jitted and timed side by side in one run, on the
same inputs. The design target is a ratio (converted / hand-written) of at most 1.05.

    python benchmarks/runtime_vs_lax.py
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from jax import lax

import transpiler


def doubling(x, n):
    i = 0
    while jnp.sum(x) < 1e6 and i < n:
        if x[0] > 0:
            x = x * 2
        else:
            x = x - 1
        i += 1
    return x, i


def doubling_lax(x, n):
    def cond(state):
        x, i = state
        return jnp.logical_and(jnp.sum(x) < 1e6, i < n)

    def body(state):
        x, i = state
        x = lax.cond(x[0] > 0, lambda x: x * 2, lambda x: x - 1, x)
        return x, i + 1

    return lax.while_loop(cond, body, (x, 0))


def rnn(w, xs):
    h = jnp.zeros(w.shape[0])
    for t in range(xs.shape[0]):
        h = jnp.tanh(w @ h + xs[t])
        if jnp.sum(h * h) > 4.0:
            h = h * 0.5
    return h


def rnn_lax(w, xs):
    def step(h, x):
        h = jnp.tanh(w @ h + x)
        h = lax.cond(jnp.sum(h * h) > 4.0, lambda h: h * 0.5, lambda h: h, h)
        return h, None

    return lax.scan(step, jnp.zeros(w.shape[0]), xs)[0]


def search(x, t):
    for i in range(x.shape[0]):
        if x[i] > t:
            return i
    return -1


def search_lax(x, t):
    def step(carry, xi):
        found, index, i = carry
        hit = jnp.logical_and(jnp.logical_not(found), xi > t)
        return (found | hit, jnp.where(hit, i, index), i + 1), None

    (found, index, _), _ = lax.scan(step, (False, -1, 0), x)
    return jnp.where(found, index, -1)


def best_of(fn, args, repeats, number):
    jax.block_until_ready(fn(*args))  # compile
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            out = fn(*args)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - start) / number)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=200)
    args = parser.parse_args()
    key = jax.random.PRNGKey(0)
    w = jax.random.normal(key, (64, 64)) * 0.2
    xs = jax.random.normal(key, (512, 64))
    cases = [
        ("while + cond (doubling)", doubling, doubling_lax, (jnp.ones(256), 50)),
        ("for range + cond (rnn, T=512)", rnn, rnn_lax, (w, xs)),
        ("for + return (search, N=4096)", search, search_lax, (jnp.arange(4096.0), 4000.0)),
    ]
    converted_fns = {}
    for name, fn, _, _ in cases:
        start = time.perf_counter()
        converted_fns[name] = transpiler.convert(fn)
        converted_fns[name] = (converted_fns[name], (time.perf_counter() - start) * 1e3)

    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}; best of {args.repeats} x "
        f"{args.number} calls, microseconds per call"
    )
    print(f"{'case':<32} | {'converted':>10} | {'lax':>10} | {'ratio':>6} | {'convert (ms)':>12}")
    print("-" * 83)
    for name, _, ref, fn_args in cases:
        converted = jax.jit(converted_fns[name][0])
        reference = jax.jit(ref)
        a, b = jax.block_until_ready((converted(*fn_args), reference(*fn_args)))
        assert all(jnp.allclose(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
        # Alternate the two so machine noise hits both alike.
        t_conv = t_ref = float("inf")
        for _ in range(3):
            t_conv = min(t_conv, best_of(converted, fn_args, args.repeats, args.number))
            t_ref = min(t_ref, best_of(reference, fn_args, args.repeats, args.number))
        print(
            f"{name:<32} | {t_conv * 1e6:10.1f} | {t_ref * 1e6:10.1f} | {t_conv / t_ref:6.3f} | "
            f"{converted_fns[name][1]:12.1f}"
        )


if __name__ == "__main__":
    main()
