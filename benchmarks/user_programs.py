"""Run time and compile time of programs written as users write them, converted, next to the
same algorithm written by hand with `lax`.

Each module of `benchmarks/user_programs/` defines `f` (plain Python, as a user writes it),
`f_lax` (an expert's `lax` version), `make_args()`, and optionally `TOL` (rtol, atol). The
programs were written by an adversarial review (helper 157, 2026-12-07) to find where the
converted program runs or compiles slower than the hand-written one: greedy decoding, Gauss-
Seidel, a ragged GRU, root finders, Runge-Kutta, Viterbi, a stack machine, sorts, k-nearest
neighbours, Monte Carlo, early stopping, histograms, filters. Each is checked against plain
Python (eager) and the hand-written version before it is timed.

    python benchmarks/user_programs.py [--only NAME] [--rounds 5] [--compile-repeats 3]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import jax
import numpy as np
from programs_vs_lax import fresh_module
from runtime_vs_lax import best_of

import transpiler

HERE = pathlib.Path(__file__).resolve().parent / "user_programs"


def close(a, b, tol) -> bool:
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    if len(leaves_a) != len(leaves_b):
        return False
    rtol, atol = tol
    for x, y in zip(leaves_a, leaves_b):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape or not np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True):
            return False
    return True


def calls_for(fn, args, seconds: float) -> int:
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    for _ in range(3):
        jax.block_until_ready(fn(*args))
    return max(1, int(seconds / max((time.perf_counter() - start) / 3, 1e-7)))


def compile_seconds(path, args, repeats: int) -> tuple[float, float, float]:
    """Best of `repeats` from fresh imports: (convert + trace + lower + compile, of which
    convert; the hand-written version's trace + lower + compile)."""
    best_conv = best_convert = best_ref = float("inf")
    for _ in range(repeats):
        module = fresh_module(path)
        jax.clear_caches()
        start = time.perf_counter()
        converted = transpiler.convert(module.f)
        converted_at = time.perf_counter()
        jax.jit(converted).lower(*args).compile()
        best_conv = min(best_conv, time.perf_counter() - start)
        best_convert = min(best_convert, converted_at - start)
        module = fresh_module(path)
        jax.clear_caches()
        start = time.perf_counter()
        jax.jit(module.f_lax).lower(*args).compile()
        best_ref = min(best_ref, time.perf_counter() - start)
    return best_conv, best_convert, best_ref


def run(path: pathlib.Path, options) -> str:
    module = fresh_module(path)
    args = module.make_args()
    tol = getattr(module, "TOL", (1e-5, 1e-6))
    converted = jax.jit(transpiler.convert(module.f))
    reference = jax.jit(module.f_lax)
    got = jax.block_until_ready(converted(*args))
    if not close(got, reference(*args), tol):
        return f"{path.stem:<30} | DIFFERS from the hand-written version"
    try:
        python = close(got, module.f(*args), tol)
    except Exception:  # noqa: BLE001 - plain Python of a traced program (`jax.vmap(f)`)
        python = None
    # (`*`: plain Python gives otherwise: a padded buffer where Python has the items)
    mark = "" if python is not False else " *"
    number = min(
        calls_for(converted, args, options.target_ms / 1e3),
        calls_for(reference, args, options.target_ms / 1e3),
    )
    run_conv = run_ref = float("inf")
    for _ in range(options.rounds):
        run_conv = min(run_conv, best_of(converted, args, options.repeats, number))
        run_ref = min(run_ref, best_of(reference, args, options.repeats, number))
    conv, convert, ref = compile_seconds(path, args, options.compile_repeats)
    return (
        f"{path.stem:<30} | {run_conv * 1e6:9.1f} | {run_ref * 1e6:9.1f} | "
        f"{run_conv / run_ref:6.3f} | {conv * 1e3:8.1f} | {ref * 1e3:8.1f} | {conv / ref:6.2f} | "
        f"{convert * 1e3:7.1f}{mark}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only the programs whose name has this")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target-ms", type=float, default=20.0)
    parser.add_argument("--compile-repeats", type=int, default=3)
    options = parser.parse_args()
    sys.path.insert(0, str(HERE))
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}; run time: best of "
        f"{options.rounds} rounds, microseconds per call; compile: convert + trace + lower + "
        f"compile, best of {options.compile_repeats}, milliseconds"
    )
    header = (
        f"{'program':<30} | {'run conv':>9} | {'run lax':>9} | {'ratio':>6} | "
        f"{'compile':>8} | {'lax':>8} | {'ratio':>6} | {'convert':>7}"
    )
    print(header)
    print("-" * len(header))
    for path in sorted(HERE.glob("p*.py")):
        if options.only not in path.stem:
            continue
        try:
            row = run(path, options)
        except Exception as e:  # noqa: BLE001 - a refusal (StagingError) is a row of its own
            row = f"{path.stem:<30} | raises {type(e).__name__}: {str(e).splitlines()[0][:70]}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
