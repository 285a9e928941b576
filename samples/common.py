"""What every sample prints: its results eager and compiled, both times, a one-line graph summary.

A sample's `main()` calls `run(...)` with its plain Python function and inputs; `run` converts
and compiles the function with `transpiler.jit`, runs it next to the unconverted function (eager
JAX with Python control flow), checks that both agree, and prints:

    eager Python   1.92 s per call
    compiled       0.61 s to convert and compile, then 0.214 ms per call (8970x)
    graph of fit: 41 ops (while x1), 9 fusions after XLA, 3.1k FLOPs, peak memory 2.4 KiB
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import jax
import numpy as np

import transpiler


def _ready(tree):
    return jax.block_until_ready(tree)


def per_call(fn: Callable, *args, budget_s: float = 0.2, max_calls: int = 200) -> float:
    """The median seconds per call of `fn(*args)` (already compiled), within about `budget_s`."""
    times = []
    spent = 0.0
    while spent < budget_s and len(times) < max_calls:
        t0 = time.perf_counter()
        _ready(fn(*args))
        times.append(time.perf_counter() - t0)
        spent += times[-1]
    return float(np.median(times))


def agree(eager, compiled, *, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Raise AssertionError unless the two results match leaf by leaf (values and shapes)."""
    eager_leaves, eager_tree = jax.tree.flatten(eager)
    compiled_leaves, compiled_tree = jax.tree.flatten(compiled)
    if eager_tree != compiled_tree:
        raise AssertionError(f"structure differs: eager {eager_tree}, compiled {compiled_tree}")
    for e, c in zip(eager_leaves, compiled_leaves):
        e, c = np.asarray(e), np.asarray(c)
        if e.shape != c.shape:
            raise AssertionError(f"shape differs: eager {e.shape}, compiled {c.shape}")
        np.testing.assert_allclose(c.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.0f} us"


def run(
    fn: Callable,
    *args,
    check: Callable | None = agree,
    jit_kwargs: dict | None = None,
    compile: Callable | None = None,
    graph_of: tuple | None = None,
    out=None,
):
    """Run `fn(*args)` eagerly and converted + compiled; print both times and the graph's summary.

    Returns `(eager_result, compiled_result)`. `check(eager, compiled)` (by default `agree`)
    raises when they differ; pass `check=None` where the sample compares them itself.
    `compile(converted_fn)` compiles (default: `jax.jit(..., **jit_kwargs)`; `eqx.filter_jit`
    for arguments that hold functions); `graph_of=(g, g_args)` is what the summary line
    describes (default: `fn` on `args`, which `jax.jit` must be able to trace).
    """
    out = out or sys.stdout
    jit_kwargs = jit_kwargs or {}
    converted = transpiler.convert(fn)
    compiled_fn = compile(converted) if compile else jax.jit(converted, **jit_kwargs)
    name = getattr(fn, "__name__", type(fn).__name__)

    progress = f"  compiling {name} ..."
    if out.isatty():
        print(progress, end="\r", file=out, flush=True)
    t0 = time.perf_counter()
    compiled = _ready(compiled_fn(*args))
    compile_s = time.perf_counter() - t0
    steady_s = per_call(compiled_fn, *args)

    _ready(fn(*args))  # JAX compiles each eager op once; time the second call
    t0 = time.perf_counter()
    eager = _ready(fn(*args))
    eager_s = time.perf_counter() - t0

    if out.isatty():
        print(" " * len(progress), end="\r", file=out)
    if check is not None:
        check(eager, compiled)
    print(f"  eager Python   {_duration(eager_s)} per call", file=out)
    print(
        f"  compiled       {_duration(compile_s)} to convert and compile, then "
        f"{_duration(steady_s)} per call ({eager_s / steady_s:.0f}x faster than eager)",
        file=out,
    )
    graph_fn, graph_args = graph_of or (fn, args)
    summary = transpiler.graph(graph_fn, **jit_kwargs)(*graph_args).summary()
    print(f"  {summary.line()}", file=out)
    return eager, compiled
