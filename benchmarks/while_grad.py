"""Reverse-mode gradients through a data-dependent `while`: time and memory, side by side.

One small loop, `x = tanh(w @ x) * 0.5 + 0.5 * x` on a 64-float state, run n times (the trip
count is a traced argument, so the loop is a `lax.while_loop`); the gradient of `sum(x)` by the
initial state and by `w`, compiled, through:

  checkpointed     the converted Python `while` (checkpointed.while_loop, 64 checkpoints)
  max_iterations   the converted `while` with `loop_options(max_iterations=n)`: a masked scan
                   that stores every iteration
  equinox          `equinox.internal.while_loop(kind="checkpointed", max_steps=n)` (when
                   installed), the loop diffrax uses
  lax.scan         a hand-written `lax.scan` of exactly n steps (n static): the reference

Peak memory is XLA's memory analysis of the compiled gradient (temporary buffers); time is the
best of a few rounds of calls. Ratios are against `lax.scan`.

    python benchmarks/while_grad.py [--sizes 100 1000 10000]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import transpiler

DIM = 64


def step(w, x):
    return jnp.tanh(w @ x) * 0.5 + 0.5 * x


def checkpointed(w, x, n):
    i = 0
    while i < n:
        x = step(w, x)
        i += 1
    return jnp.sum(x)


def bounded(w, x, n, bound):
    i = 0
    while i < n:
        transpiler.loop_options(max_iterations=bound)
        x = step(w, x)
        i += 1
    return jnp.sum(x)


def scanned(w, x, n):
    final, _ = lax.scan(lambda x, _: (step(w, x), None), x, None, length=n)
    return jnp.sum(final)


def equinox_loop(w, x, n, bound):
    import equinox.internal as eqxi

    def body(carry):
        i, x = carry
        return i + 1, step(w, x)

    _, final = eqxi.while_loop(
        lambda carry: carry[0] < n, body, (0, x), max_steps=bound, kind="checkpointed"
    )
    return jnp.sum(final)


def variants(n: int) -> dict:
    """name -> (compiled gradient, its arguments)."""
    w = jnp.asarray(np.random.default_rng(0).normal(size=(DIM, DIM)) / np.sqrt(DIM), jnp.float32)
    x = jnp.linspace(-1.0, 1.0, DIM)
    args = (w, x, jnp.int32(n))  # the trip count is traced: the loops are while loops

    def compiled(fn, **static):
        return jax.jit(jax.grad(functools.partial(fn, **static), (0, 1)))

    found = {
        "checkpointed": compiled(transpiler.convert(checkpointed)),
        "max_iterations": compiled(transpiler.convert(bounded), bound=n),
    }
    if importlib.util.find_spec("equinox") is not None:
        found["equinox"] = compiled(equinox_loop, bound=n)
    scan = jax.jit(jax.grad(lambda w, x: scanned(w, x, n), (0, 1)))
    found = {name: (fn, args) for name, fn in found.items()}
    found["lax.scan"] = (scan, (w, x))  # n static: the scan has exactly n steps
    return found


def measure(fn, args, rounds: int, calls: int) -> tuple[float, int, np.ndarray]:
    compiled = fn.lower(*args).compile()
    memory = compiled.memory_analysis().temp_size_in_bytes
    result = jax.block_until_ready(compiled(*args))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(compiled(*args))
        best = min(best, (time.perf_counter() - start) / calls)
    return best, memory, np.concatenate([np.ravel(r) for r in result])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"jax {jax.__version__}, {jax.default_backend()}; state of {DIM} floats;")
    print(f"gradient time (best of {args.rounds} rounds) and XLA temp memory of the compiled grad")
    header = (
        f"{'n':>6} | {'loop':<15}| {'grad time':>10} | {'temp memory':>12} |"
        " time / scan | memory / scan"
    )
    print(header)
    print("-" * len(header))
    for n in args.sizes:
        results = {}
        calls = max(1, 2000 // n)
        for name, (fn, fn_args) in variants(n).items():
            results[name] = measure(fn, fn_args, args.rounds, calls)
        scan_time, scan_memory, expected = results["lax.scan"]
        for name, (seconds, memory, value) in results.items():
            np.testing.assert_allclose(value, expected, rtol=2e-3, atol=2e-4, err_msg=name)
            print(
                f"{n:>6} | {name:<15}| {seconds * 1e3:>8.2f}ms | {memory / 1024:>9.0f} KB |"
                f" {seconds / scan_time:>11.2f} | {memory / max(scan_memory, 1):>13.3f}"
            )
        print("-" * len(header))


if __name__ == "__main__":
    main()
