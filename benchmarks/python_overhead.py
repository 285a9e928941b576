"""What converted code costs when it runs on Python values, and what converting leaves behind.

1. Call time: `transpiler.convert(fn)` (not jitted) called with Python ints, floats, lists and
   NumPy scalars/arrays, where every `if`, `while` and `for` is decided by Python, next to the
   original `fn` on the same arguments. Timed with `timeit`, alternating the two, best of
   `--rounds` rounds of `--repeats` x N calls (N: about `--sample` seconds worth of calls, for
   each of the two, from `timeit`'s autorange). Many short samples, alternating, so that the
   best of them is a quiet moment for both even on a busy machine.
2. Memory: `--functions` distinct functions (`def f_i(x): if x > i: x = x - i; return x`:
   distinct code objects, generated as source into temporary modules) are each converted,
   called once and dropped. (A function with nothing to convert, `return x + i`, runs as
   written and generates nothing: `transpiler.straight_line`.)
   Reported: RSS and `sys.getallocatedblocks()` growth, entries left in `transpiler.api`'s
   generated-code cache, files left in the directory that holds generated code
   (`transpiler.loading`), and entries added to `linecache`. A second, smaller run under
   `tracemalloc` (`--traced` functions with an `if`) gives bytes per function and where they
   were allocated.

    python benchmarks/python_overhead.py [--no-memory]
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import importlib.util
import itertools
import linecache
import os
import pathlib
import sys
import tempfile
import timeit
import tracemalloc
import weakref

import numpy as np

import transpiler
from transpiler import api, loading

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"

_fresh = itertools.count()

# -- functions on Python values -------------------------------------------------------------------


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def sum_multiples(n):
    total = 0
    for i in range(n):
        if i % 3 == 0 or i % 5 == 0:
            total += i
    return total


def clamp(x, lo, hi):
    if x < lo:
        return lo
    elif x > hi:
        return hi
    return x


def grow(x):
    steps = 0
    while x < 1e6:
        x = x * 1.5 + 1.0
        steps += 1
    return x, steps


def first_index(items, target):
    for i, item in enumerate(items):
        if item == target:
            return i
    return -1


def count_until_negative(items):
    count = 0
    for item in items:
        if item < 0:
            break
        if item == 0:
            continue
        count += 1
    return count


def load(path: pathlib.Path):
    """Imports `path` as a new module each time: new functions, new code objects."""
    spec = importlib.util.spec_from_file_location(f"_bench_fresh_{next(_fresh)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases() -> list[tuple[str, object, tuple]]:
    clipped_rnn = load(SAMPLES / "clipped_rnn.py").clipped_rnn
    newton_sqrt = load(SAMPLES / "newton_sqrt.py").newton_sqrt
    piecewise = load(SAMPLES / "piecewise.py")
    band_count, smooth_l1 = piecewise.band_count, piecewise.smooth_l1
    rng = np.random.default_rng(0)
    floats = [float(v) for v in rng.normal(size=64)]
    return [
        ("collatz_steps(27): while + if, int", collatz_steps, (27,)),
        ("sum_multiples(1000): for + if/or, int", sum_multiples, (1000,)),
        ("clamp(x, lo, hi): if/elif + return", clamp, (2.5, 0.0, 1.0)),
        ("grow(np.float64): while, NumPy scalar", grow, (np.float64(1.0),)),
        ("first_index(list 1000): for + return", first_index, (list(range(1000)), 700)),
        ("count_until_negative: break/continue", count_until_negative, (list(range(500)) + [-1],)),
        ("samples band_count(64 floats)", band_count, (floats, -0.5, 1.5)),
        ("samples smooth_l1(float) (jnp eager)", smooth_l1, (3.5,)),
        ("samples newton_sqrt(2.0) (jnp eager)", newton_sqrt, (2.0,)),
        (
            "samples clipped_rnn(numpy) (jnp eager)",
            clipped_rnn,
            (rng.normal(size=(8, 8)) * 0.3, rng.normal(size=(16, 8))),
        ),
    ]


def call_times(
    fn, converted, args, rounds: int, repeats: int, sample: float
) -> tuple[float, float]:
    """Best seconds per call of `fn` and `converted`, measured alternately."""
    timers = [timeit.Timer(functools.partial(f, *args)) for f in (fn, converted)]
    numbers = []
    for timer in timers:
        number, seconds = timer.autorange()
        numbers.append(max(1, int(number * sample / seconds)))
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for k, (timer, number) in enumerate(zip(timers, numbers)):
            best[k] = min(best[k], min(timer.repeat(repeats, number)) / number)
    return best[0], best[1]


# -- memory ---------------------------------------------------------------------------------------

BODIES = {
    "return": "def {name}(x):\n    return x + {i}\n",
    "if": "def {name}(x):\n    if x > {i}:\n        x = x - {i}\n    return x\n",
}


def distinct_functions(directory: str, count: int, batch: int, body: str):
    """Yields `count` distinct functions (`BODIES[body]`), written `batch` to a temporary module.

    Only the function being yielded is alive: each module is dropped once its functions are.
    """
    for start in range(0, count, batch):
        names = [f"f_{i}" for i in range(start, min(start + batch, count))]
        source = "\n\n".join(
            BODIES[body].format(name=name, i=i) for i, name in zip(range(start, count), names)
        )
        path = os.path.join(directory, f"generated_{next(_fresh)}.py")
        with open(path, "w") as f:
            f.write(source)
        module = load(pathlib.Path(path))
        functions = [module.__dict__.pop(name) for name in names]
        del module
        functions.reverse()
        while functions:
            yield functions.pop()


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def generated_files() -> int:
    loading.wait_for_files()  # they are written and removed on a thread of their own
    directory = loading._directory
    return len(os.listdir(directory)) if directory and os.path.isdir(directory) else 0


def snapshot() -> dict:
    gc.collect()
    generated_dir = loading._directory or "\0"
    return {
        "rss": rss_bytes(),
        "blocks": sys.getallocatedblocks(),
        "files": generated_files(),
        "linecache": len(linecache.cache),
        "linecache generated": sum(1 for k in linecache.cache if k.startswith(generated_dir)),
        "linecache bytes": sum(len("".join(v[2])) for v in linecache.cache.values()),
        "cache": len(api._generated),
    }


def convert_and_drop(directory: str, count: int, batch: int, body: str) -> tuple[int, int]:
    """Converts, calls once and drops `count` functions; returns how many originals and
    converted functions are still alive afterwards (of those sampled)."""
    alive = []
    for k, fn in enumerate(distinct_functions(directory, count, batch, body)):
        converted = transpiler.convert(fn)
        assert converted(k + 1) == fn(k + 1)
        if k % 100 == 0:
            alive.append((weakref.ref(fn), weakref.ref(converted)))
        del fn, converted
    gc.collect()
    return sum(r[0]() is not None for r in alive), sum(r[1]() is not None for r in alive)


def memory_check(count: int, traced: int, batch: int) -> None:
    with tempfile.TemporaryDirectory(prefix="python-overhead-") as directory:
        convert_and_drop(directory, 200, batch, "if")  # warm-up: first-use caches, the runtime
        before = snapshot()
        originals_alive, converted_alive = convert_and_drop(directory, count, batch, "if")
        after = snapshot()
        print(
            f"\nMemory: {count} distinct functions `def f_i(x): if x > i: x = x - i; return x` "
            "converted, called once and dropped"
        )
        print(f"{'measure':<42} | {'before':>14} | {'after':>14} | {'growth':>14} | {'per fn':>9}")
        print("-" * 105)
        for key, label in [
            ("rss", "RSS (bytes)"),
            ("blocks", "sys.getallocatedblocks()"),
            ("files", f"files in {loading._directory}"),
            ("linecache", "linecache entries"),
            ("linecache generated", "  of which generated code"),
            ("linecache bytes", "linecache source bytes"),
            ("cache", "transpiler.api generated-code cache"),
        ]:
            growth = after[key] - before[key]
            print(
                f"{label:<42} | {before[key]:>14,} | {after[key]:>14,} | {growth:>14,} | "
                f"{growth / count:>9.1f}"
            )
        print(
            f"sampled 1 in 100: originals still alive {originals_alive}, converted still "
            f"alive {converted_alive} (of {len(range(0, count, 100))})"
        )

        tracemalloc.start(25)
        first = tracemalloc.take_snapshot()
        convert_and_drop(directory, traced, batch, "if")
        gc.collect()
        second = tracemalloc.take_snapshot()
        tracemalloc.stop()
    stats = second.compare_to(first, "traceback")
    total = sum(s.size_diff for s in stats)
    print(
        f"\ntracemalloc over {traced} more functions `def f_i(x): if x > i: x = x - i; return x`: "
        f"{total:,} bytes ({total / traced:,.0f} / fn)"
    )
    sites = collections.defaultdict(lambda: [0, 0])
    for stat in stats:
        frames = list(stat.traceback)  # oldest first
        own = [f for f in frames if _is_own(f.filename)]
        site = f"{_short(own[-1].filename)}:{own[-1].lineno} <- " if own else ""
        key = f"{site}{_short(frames[-1].filename)}"
        sites[key][0] += stat.size_diff
        sites[key][1] += stat.count_diff
    print("largest growth by site (innermost astgraph line <- file that allocated):")
    for key, (size, count) in sorted(sites.items(), key=lambda item: -item[1][0])[:6]:
        print(f"  {size:>10,} bytes {count:>7,} blocks  {key}")


def _is_own(filename: str) -> bool:
    return any(f"{os.sep}{package}{os.sep}" in filename for package in ("transpiler", "runtime"))


def _short(filename: str) -> str:
    parts = pathlib.Path(filename).parts
    return os.path.join(*parts[-3:]) if len(parts) > 3 else filename


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sample", type=float, default=0.005, help="seconds per sample")
    parser.add_argument("--functions", type=int, default=10_000)
    parser.add_argument("--traced", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--no-memory", action="store_true", help="time the calls only")
    args = parser.parse_args()

    print(
        f"python {sys.version.split()[0]}, numpy {np.__version__}; not jitted; best of "
        f"{args.rounds} rounds x {args.repeats} x N calls (timeit), microseconds per call"
    )
    header = f"{'function':<42} | {'original (us)':>13} | {'converted (us)':>14} | {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for name, fn, fn_args in cases():
        converted = transpiler.convert(fn)
        expected, got = fn(*fn_args), converted(*fn_args)
        assert np.allclose(np.asarray(got), np.asarray(expected)), (name, got, expected)
        t_original, t_converted = call_times(
            fn, converted, fn_args, args.rounds, args.repeats, args.sample
        )
        print(
            f"{name:<42} | {t_original * 1e6:13.2f} | {t_converted * 1e6:14.2f} | "
            f"{t_converted / t_original:7.2f}",
            flush=True,
        )

    if not args.no_memory:
        memory_check(args.functions, args.traced, args.batch)


if __name__ == "__main__":
    main()
