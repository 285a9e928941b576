"""Every sample and the runtime benchmarks, on the GPU and on the CPU, in one table.

Runs `main()` of each module of `samples/` that has one (discovered, not listed) and the
programs of `runtime_vs_lax.py` and `programs_vs_lax.py` (converted and hand-written with `lax`)
once under `jax.default_device(gpu)` and once under `jax.default_device(cpu)`, then prints one
table: per-call time of the compiled program on each device and, where a hand-written version
exists, the ratio converted / hand-written on each. A sample's time is the steady per-call time
that `samples.common.run` measures (one row per `run` call of its `main()`). Without a GPU the
GPU columns say "no GPU". `benchmarks/gpu_check.sh` installs the CUDA build of JAX first.

    python benchmarks/gpu_check.py [--only NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import pathlib
import pkgutil
import sys
import time
import traceback
from collections.abc import Callable

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
# This checkout's packages, not an installed copy; and the sibling benchmark scripts.
for path in (HERE, ROOT):
    if str(path) not in sys.path[:2]:
        sys.path.insert(0, str(path))

import jax  # noqa: E402 - after sys.path is set
import jax.numpy as jnp  # noqa: E402
import programs_vs_lax  # noqa: E402
import runtime_vs_lax  # noqa: E402

import samples  # noqa: E402
import samples.common  # noqa: E402
import transpiler  # noqa: E402

NO_GPU = "no GPU"


def gpu_device():
    """The first GPU, or None (no CUDA build of JAX, or no GPU it can use)."""
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


def sample_modules() -> list[str]:
    """Names of the modules of `samples` that have a `main` (helpers such as `common` do not)."""
    names = []
    for info in pkgutil.iter_modules(samples.__path__):
        if info.ispkg or info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"samples.{info.name}")
        except Exception:  # noqa: BLE001 - a sample that does not import is reported, not fatal
            names.append(info.name)
            continue
        if callable(getattr(module, "main", None)):
            names.append(info.name)
    return sorted(names)


@contextlib.contextmanager
def recording_run_times(times: list[tuple[str, float]]):
    """Records (function name, seconds per call) of every `samples.common.run` while active.

    `run` measures the steady per-call time of the compiled function with `per_call`, which it
    looks up in `samples.common` when it runs; the wrapper notes what it returns."""
    original = samples.common.per_call

    def per_call(fn, *args, **kwargs):
        seconds = original(fn, *args, **kwargs)
        times.append((getattr(fn, "__name__", type(fn).__name__), seconds))
        return seconds

    samples.common.per_call = per_call
    try:
        yield
    finally:
        samples.common.per_call = original


def run_sample(name: str) -> tuple[list[tuple[str, float]], str | None, float]:
    """`samples.NAME.main()` with its output captured: (per-call times, error, wall seconds)."""
    times: list[tuple[str, float]] = []
    out = io.StringIO()
    start = time.perf_counter()
    try:
        module = importlib.import_module(f"samples.{name}")
        with recording_run_times(times), contextlib.redirect_stdout(out):
            module.main()
        error = None
    except Exception as e:  # noqa: BLE001 - one failing sample must not hide the others
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        error = last[:200]
    return times, error, time.perf_counter() - start


def runtime_cases() -> list[tuple[str, Callable, Callable, tuple]]:
    """The cases of `runtime_vs_lax.main` (its inputs, built on the current default device)."""
    key = jax.random.PRNGKey(0)
    w = jax.random.normal(key, (64, 64)) * 0.2
    xs = jax.random.normal(key, (512, 64))
    r = runtime_vs_lax
    return [
        ("while + cond (doubling)", r.doubling, r.doubling_lax, (jnp.ones(256), 50)),
        ("for range + cond (rnn, T=512)", r.rnn, r.rnn_lax, (w, xs)),
        ("for + return (search, N=4096)", r.search, r.search_lax, (jnp.arange(4096.0), 4000.0)),
    ]


def program_cases() -> list[tuple[str, Callable, Callable, tuple]]:
    """The cases of `programs_vs_lax` (user function from a fresh import, its `lax` twin)."""
    here = pathlib.Path(programs_vs_lax.__file__).resolve()
    found = []
    for name, path, pick, args in programs_vs_lax.cases():
        fn, ref = pick(programs_vs_lax.fresh_module(path), programs_vs_lax.fresh_module(here))
        found.append((name, fn, ref, args))
    return found


def time_pair(fn, ref, args, options) -> tuple[float, float]:
    """Seconds per call of `fn` converted and of `ref`, both jitted, alternated, best of rounds."""
    converted, reference = jax.jit(transpiler.convert(fn)), jax.jit(ref)
    out_conv, out_ref = jax.block_until_ready((converted(*args), reference(*args)))
    if not programs_vs_lax.same_results(out_conv, out_ref):
        raise AssertionError(f"converted {out_conv} != hand-written {out_ref}")
    target = options.target_ms / 1e3
    number = min(
        programs_vs_lax.calls_per_repeat(reference, args, target),
        programs_vs_lax.calls_per_repeat(converted, args, target),
    )
    t_conv = t_ref = float("inf")
    for _ in range(options.rounds):
        t_conv = min(t_conv, runtime_vs_lax.best_of(converted, args, options.repeats, number))
        t_ref = min(t_ref, runtime_vs_lax.best_of(reference, args, options.repeats, number))
    return t_conv, t_ref


def measure(device, options) -> tuple[dict, list[str], float]:
    """On `device`: {row label: (seconds or error text, ratio or None)}, errors, wall seconds."""
    rows: dict[str, tuple[float | str, float | None]] = {}
    errors: list[str] = []
    start = time.perf_counter()
    with jax.default_device(device):
        for name in sample_modules():
            if options.only not in name:
                continue
            times, error, _ = run_sample(name)
            for fn_name, seconds in times:
                label = f"samples.{name}: {fn_name}"
                while label in rows:  # the same function run twice by one main()
                    label += "'"
                rows[label] = (seconds, None)
            if error is not None:
                rows[f"samples.{name}: main()"] = ("error", None)
                errors.append(f"{device.platform}: samples.{name}: {error}")
        for group, make_cases in (("runtime_vs_lax", runtime_cases), ("programs", program_cases)):
            try:
                cases = make_cases()
            except Exception as e:  # noqa: BLE001
                errors.append(f"{device.platform}: {group}: {type(e).__name__}: {e}"[:300])
                continue
            for name, fn, ref, args in cases:
                if options.only not in name:
                    continue
                label = f"{group}: {name}"
                try:
                    t_conv, t_ref = time_pair(fn, ref, args, options)
                    rows[label] = (t_conv, t_conv / t_ref)
                except Exception as e:  # noqa: BLE001
                    rows[label] = ("error", None)
                    errors.append(f"{device.platform}: {label}: {type(e).__name__}: {e}"[:300])
    return rows, errors, time.perf_counter() - start


def duration(seconds: float | str) -> str:
    if isinstance(seconds, str):
        return seconds
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.1f} us"


def table(gpu_rows: dict | None, cpu_rows: dict) -> list[str]:
    labels = list(cpu_rows)
    labels += [label for label in gpu_rows or {} if label not in cpu_rows]
    width = max([len(label) for label in labels] + [len("sample / program")])
    columns = ("GPU", "CPU", "conv/lax GPU", "conv/lax CPU")
    header = f"{'sample / program':<{width}} | " + " | ".join(f"{c:>12}" for c in columns)
    lines = [header, "-" * len(header)]
    for label in labels:
        if gpu_rows is None:
            gpu_time, gpu_ratio = NO_GPU, NO_GPU
        else:
            gpu_time, ratio = gpu_rows.get(label, ("-", None))
            gpu_ratio = "-" if ratio is None else f"{ratio:.3f}"
        cpu_time, ratio = cpu_rows.get(label, ("-", None))
        cpu_ratio = "-" if ratio is None else f"{ratio:.3f}"
        cells = (duration(gpu_time), duration(cpu_time), gpu_ratio, cpu_ratio)
        lines.append(f"{label:<{width}} | " + " | ".join(f"{c:>12}" for c in cells))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target-ms", type=float, default=10.0)
    parser.add_argument("--only", default="", help="only the samples and programs with this name")
    options = parser.parse_args()

    gpu, cpu = gpu_device(), jax.devices("cpu")[0]
    gpu_text = f"{gpu.device_kind} ({gpu})" if gpu is not None else "none (no GPU)"
    print(f"GPU: {gpu_text}")
    print(f"jax {jax.__version__}, jaxlib backends: {', '.join(sorted(_backends()))}")
    print(
        f"times per call of the compiled program; hand-written: best of {options.rounds} rounds "
        f"x {options.repeats} x N calls (~{options.target_ms:g} ms), alternated\n",
        flush=True,
    )
    transpiler.convert(programs_vs_lax.cubic)  # the first conversion builds the runtime namespace

    gpu_rows, errors, gpu_wall = None, [], 0.0
    if gpu is not None:
        gpu_rows, gpu_errors, gpu_wall = measure(gpu, options)
        errors += gpu_errors
    cpu_rows, cpu_errors, cpu_wall = measure(cpu, options)
    errors += cpu_errors

    print("\n".join(table(gpu_rows, cpu_rows)))
    walls = f"GPU {gpu_wall:.0f} s, " if gpu is not None else ""
    print(f"\nwall time: {walls}CPU {cpu_wall:.0f} s")
    if errors:
        print(f"\n{len(errors)} error(s):")
        for error in errors:
            print(f"  {error}")
    return 1 if errors else 0


def _backends() -> set[str]:
    found = set()
    for platform in ("cpu", "gpu", "tpu"):
        try:
            jax.devices(platform)
            found.add(platform)
        except RuntimeError:
            pass
    return found


if __name__ == "__main__":
    sys.exit(main())
