"""Reverse mode through a bounded `while` (`loop_options(max_iterations=N)`), side by side with
the unbounded (checkpointed) `while` and a hand-written masked `lax.scan`.

The program is the adaptive Heun-Euler integrator of `samples/adaptive_ode.py` (a `while t <
t_end` with an accept/reject `if` inside), differentiated by the damping: `jax.grad` of the final
position. Three versions, each jitted:

  bounded        the loop with `transpiler.loop_options(max_iterations=500)` as its first
                 statement: run, a `lax.while_loop`; differentiated, a scan of 500 masked steps
  checkpointed   the same loop unbounded (the sample's own `position_gradient`)
  lax.scan       `position_gradient_lax` of `benchmarks/samples_lax.py`: a scan of 500 steps,
                 `jnp.where(t < t_end, step, state)`, written by hand

Run time: best of `--rounds` rounds of N calls, alternating. Compile time: trace + lower +
compile after `jax.clear_caches()`, best of `--compile-repeats`; ratios against lax.scan.

    python benchmarks/bounded_grad.py
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from runtime_vs_lax import best_of  # a sibling script: run these as scripts
from samples_lax import position_gradient_lax

import transpiler
from samples.adaptive_ode import damped_oscillator, position_gradient


def final_position_bounded(damping, y0, t_end, h=0.5, tol=1e-2):
    """x(t_end), the sample's integration with its loop bounded to 500 iterations."""
    y, t = y0, 0.0
    while t < t_end:
        transpiler.loop_options(max_iterations=500)
        h = min(h, t_end - t)
        k1 = damped_oscillator(y, damping)
        y_euler = y + h * k1
        y_heun = y + 0.5 * h * (k1 + damped_oscillator(y_euler, damping))
        err = jnp.max(jnp.abs(y_heun - y_euler))
        if err <= tol:
            t = t + h
            y = y_heun
        h = h * min(max(0.9 * jnp.sqrt(tol / (err + 1e-12)), 0.2), 5.0)
    return y[0]


def position_gradient_bounded(damping, y0, t_end):
    return jax.grad(final_position_bounded)(damping, y0, t_end)


def compile_seconds(make, args, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        fn = make()
        jax.clear_caches()
        start = time.perf_counter()
        jax.jit(fn).lower(*args).compile()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--compile-repeats", type=int, default=3)
    args = parser.parse_args()
    inputs = (jnp.float32(0.5), jnp.array([1.0, 0.0]), jnp.float32(3.0))
    versions = {
        "bounded": lambda: transpiler.convert(position_gradient_bounded),
        "checkpointed": lambda: transpiler.convert(position_gradient),
        "lax.scan": lambda: position_gradient_lax,
    }
    jitted = {name: jax.jit(make()) for name, make in versions.items()}
    results = {name: float(fn(*inputs)) for name, fn in jitted.items()}
    assert all(abs(v - results["lax.scan"]) < 1e-4 for v in results.values()), results
    run = dict.fromkeys(versions, float("inf"))
    for _ in range(args.rounds):
        for name, fn in jitted.items():
            run[name] = min(run[name], best_of(fn, inputs, 1, args.calls))
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}; d x(3) / d damping = "
        f"{results['lax.scan']:.5f}; run: best of {args.rounds} x {args.calls} calls; compile: "
        f"trace+lower+compile, best of {args.compile_repeats}"
    )
    header = (
        f"{'version':<13} | {'run (us)':>9} | {'/ lax.scan':>10} | {'compile (ms)':>12} | "
        f"{'/ lax.scan':>10}"
    )
    print(header)
    print("-" * len(header))
    compiled = {
        name: compile_seconds(make, inputs, args.compile_repeats) for name, make in versions.items()
    }
    for name in versions:
        print(
            f"{name:<13} | {run[name] * 1e6:9.1f} | {run[name] / run['lax.scan']:10.2f} | "
            f"{compiled[name] * 1e3:12.1f} | {compiled[name] / compiled['lax.scan']:10.2f}"
        )


if __name__ == "__main__":
    main()
