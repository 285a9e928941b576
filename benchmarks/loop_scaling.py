"""Trace + compile time of a `for i in range(N)` loop with a traced body, as N grows.

Converted, the loop is one `lax.scan`, so the time should not depend on N. Under plain `jax.jit`
the same Python loop is unrolled N times; it is measured while its predicted time (linear in N
from the last measurement; it really grows faster) stays under `--unrolled-budget` seconds.

    python benchmarks/loop_scaling.py
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

import transpiler


def body_loop(x, w, n):
    # No traced `if` here: plain jax.jit must be able to trace (unroll) the same loop.
    for i in range(n):
        h = jnp.tanh(w @ x + i * 0.001)
        x = 0.9 * x + 0.1 * h * jnp.cos(h)
    return x


def trace_and_compile_seconds(fn, n: int, repeats: int) -> float:
    """Best of `repeats`: jit, trace, lower and compile for a fresh `n` each time."""
    x, w = jnp.ones(8), jnp.eye(8) * 0.5
    best = float("inf")
    for _ in range(repeats):
        jax.clear_caches()
        start = time.perf_counter()
        jax.jit(fn, static_argnums=2).lower(x, w, n).compile()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 100_000])
    parser.add_argument("--unrolled-budget", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    converted = transpiler.convert(body_loop)
    x, w = jnp.ones(8), jnp.eye(8) * 0.5
    n_check = 20
    staged = jax.jit(converted, static_argnums=2)(x, w, n_check)
    assert jnp.allclose(staged, body_loop(x, w, n_check), atol=1e-5), "converted != eager"

    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}; trace+lower+compile, best of "
        f"{args.repeats}"
    )
    print(
        f"{'N':>8} | {'converted (s)':>13} | {'plain jax.jit, unrolled (s)':>27} | "
        f"{'converted / converted@N0':>24}"
    )
    print("-" * 84)
    first = None
    last_plain = None  # (n, seconds)
    for n in args.sizes:
        t_conv = trace_and_compile_seconds(converted, n, args.repeats)
        first = first or t_conv
        predicted = last_plain[1] * n / last_plain[0] if last_plain else 0.0
        if predicted <= args.unrolled_budget:
            seconds = trace_and_compile_seconds(body_loop, n, 1)
            last_plain = (n, seconds)
            t_plain = f"{seconds:27.3f}"
        else:
            t_plain = f"{f'not run (> {predicted:.0f} s)':>27}"
        print(f"{n:>8} | {t_conv:13.3f} | {t_plain} | {t_conv / first:24.2f}", flush=True)


if __name__ == "__main__":
    main()
