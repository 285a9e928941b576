"""Tracing cost of watching the containers a staged `if` detached a variable from.

A staged `if` that leaves `best` holding a new dict where Python's holds `params` on one path
records both (`runtime.identity.detached`); every call converted code makes afterwards, while
the program is traced, compares what they hold before and after it. This measures that cost:
the same program traced with the choice between two dicts (watched) and between two arrays
(nothing to watch), `STEPS` unrolled iterations of six calls each after it.

    python benchmarks/detached_watch.py [--steps 60] [--rounds 7]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

import transpiler

STEPS = list(range(60))


def helper(v):
    return jnp.tanh(v) * 0.5 + jnp.sin(v)


def chooses_a_dict(x):
    params = {"w": x, "b": x + 1}
    best = {"w": 0 * x, "b": 0 * x}
    if jnp.sum(x) > 0:
        best = params  # detached: watched across every call below
    y = x
    for _ in STEPS:
        y = helper(y) + jnp.cos(y) * jnp.exp(-y * y)
    return best["w"] + y


def chooses_an_array(x):
    params = x
    best = 0 * x
    if jnp.sum(x) > 0:
        best = params
    y = x
    for _ in STEPS:
        y = helper(y) + jnp.cos(y) * jnp.exp(-y * y)
    return best + y


def trace_ms(fns, x, rounds: int) -> list[float]:
    """Per function, the best of `rounds` traces and lowerings (a new function each time: no
    cache hit), the functions taking turns in each round (load changes hit both alike)."""
    converted = [transpiler.convert(fn) for fn in fns]
    times = [[] for _ in fns]
    for round_ in range(rounds + 1):
        for fn, found in zip(converted, times):
            start = time.perf_counter()
            jax.jit(lambda v, fn=fn: fn(v)).lower(x)
            if round_:  # the first round warms up
                found.append(time.perf_counter() - start)
    return [min(found) * 1e3 for found in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    STEPS[:] = range(args.steps)
    x = jnp.ones(8)
    watched, plain = trace_ms([chooses_a_dict, chooses_an_array], x, args.rounds)
    print(f"{args.steps} steps x 6 calls after the choice; best of {args.rounds} traces")
    print(f"{'program':40} | {'trace + lower (ms)':>18}")
    print("-" * 62)
    print(f"{'chooses a dict (watched)':40} | {watched:18.1f}")
    print(f"{'chooses an array (nothing watched)':40} | {plain:18.1f}")
    print(f"{'ratio':40} | {watched / plain:18.2f}")


if __name__ == "__main__":
    main()
