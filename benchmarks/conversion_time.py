"""Time to convert a function, as its length, loop nesting, `if` nesting and expressions grow.

What is timed is `transpiler.convert(fn)` the first time `fn` is converted. `convert` is not
lazy: it parses the source, runs the analyses and passes, prints the generated source, compiles it
into a Python code object (written to a file in the generated-code directory) and returns the
callable, all before returning; nothing is traced (no JAX call runs). `transpiler.to_source` would
leave out only the final Python `compile`.

Each generated function is written as source into a temporary .py file and imported (so that
`inspect` finds its source); each case runs in its own subprocess, which first converts a small
function (to import the runtime and JAX outside the timing), then converts the case's function
from a fresh import of its module, best of up to `--repeats` (while the total stays under 2 s).
A case that takes more than `--timeout` seconds is stopped and reported as "> T s"; the larger
cases of the same series are then not run. An exception is reported by type and first line.

The last table is the conversion time of real functions: those in `samples/` and the top-level
functions of a few end-to-end test modules, each from a fresh import, best of 3.

    python benchmarks/conversion_time.py
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import itertools
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEST_MODULES = ["test_model_code.py", "test_loops.py", "test_early_exits.py"]

# -- generated source -----------------------------------------------------------------------------

_MODEL_BLOCKS = [
    # Each block is "typical model code", uses `k` for fresh names, and keeps x a float32[8].
    """\
h{k} = jnp.tanh(x @ w + b * {k}.0)
s{k} = jnp.sum(h{k} * h{k}) / 8.0
x = 0.9 * x + 0.1 * h{k}
acc = acc + s{k}""",
    """\
if s{j} > 1.0:
    x = x * 0.5
else:
    x = x + 0.01 * h{j}""",
    """\
for i{k} in range(4):
    x = x * 0.99 + 0.001 * i{k}
    acc = acc + jnp.mean(x)""",
    """\
n{k} = 0
while jnp.max(jnp.abs(x)) > 10.0 and n{k} < 5:
    x = x * 0.5
    n{k} = n{k} + 1""",
    """\
scale{k} = jnp.where(acc > 0, 1.0, -1.0)
x = x * scale{k} + jnp.sin(x) * 0.05""",
]


def model_code(lines: int) -> str:
    """A function of about `lines` lines of model code (assignments, arithmetic, if/for/while)."""
    body, k = ["acc = 0.0", "h0 = x", "s0 = jnp.sum(x)"], 1
    while len(body) < lines - 2:  # - the `def` and the `return`
        block = _MODEL_BLOCKS[k % len(_MODEL_BLOCKS)].format(k=k, j=k - k % 5)
        body.extend(block.splitlines())
        k += 1
    body = body[: lines - 2]
    return _function("model", ["x", "w", "b"], _complete_blocks(body) + ["return x, acc"])


def _complete_blocks(body: list[str]) -> list[str]:
    """Drops a trailing header whose block was cut off (`if ...:` or `else:` with no body)."""
    while body and body[-1].endswith(":"):
        body.pop()
    return body


def nested_loops(depth: int) -> str:
    """`depth` loops inside each other, alternately `for` over a range and a counted `while`."""
    body, indent = [], ""
    for level in range(depth):
        if level % 2 == 0:
            body.append(f"{indent}for i{level} in range(2):")
        else:
            body.append(f"{indent}j{level} = 0")
            body.append(f"{indent}while j{level} < 2:")
            body.append(f"{indent}    j{level} = j{level} + 1")
        indent += "    "
    body.append(f"{indent}x = x + 1.0")
    return _function("nested_loops", ["x"], body + ["return x"])


def nested_ifs(depth: int) -> str:
    """`depth` `if` statements inside each other, each with an assignment."""
    body, indent = [], ""
    for level in range(depth):
        body.append(f"{indent}if x > {level}:")
        indent += "    "
        body.append(f"{indent}x = x + 1.0")
    return _function("nested_ifs", ["x"], body + ["return x"])


def long_sum(terms: int) -> str:
    """`y = x + x + ... + x` with `terms` terms, on one line."""
    return _function("long_sum", ["x"], ["y = " + " + ".join(["x"] * terms), "return y"])


def _function(name: str, params: list[str], body: list[str]) -> str:
    lines = [f"def {name}({', '.join(params)}):", *("    " + line for line in body)]
    return "import jax.numpy as jnp\n\n\n" + "\n".join(lines) + "\n"


def function_lines(source: str) -> int:
    return len(source.split("\n\n\n", 1)[1].splitlines())


SERIES = [
    ("function length (lines)", model_code, [10, 100, 500, 1000, 2000]),
    ("nested for/while loops", nested_loops, [1, 2, 4, 8, 12, 16, 20, 30]),
    ("nested ifs", nested_ifs, [1, 10, 30, 60, 100]),
    ("x + x + ... + x (terms)", long_sum, [50, 250, 1000]),
]

# -- the worker: one case, in its own process -----------------------------------------------------

_fresh = itertools.count()


def fresh_module(path: pathlib.Path) -> types.ModuleType:
    """Imports `path` as a new module: new functions and code objects, so nothing is cached."""
    spec = importlib.util.spec_from_file_location(f"_bench_fresh_{next(_fresh)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _warm_up(x):
    if x > 0:
        x = x + 1
    return x


def worker(path: str, name: str, repeats: int) -> dict:
    import transpiler

    transpiler.convert(_warm_up)  # imports the runtime (and JAX), outside the timing
    best, runs, spent = float("inf"), 0, 0.0
    while runs < repeats and (runs == 0 or spent < 2.0):
        try:
            fn = getattr(fresh_module(pathlib.Path(path)), name)
        except BaseException as e:  # noqa: BLE001 - reported: the generated source itself fails
            return {"error": _describe(e), "stage": "import"}
        start = time.perf_counter()
        try:
            transpiler.convert(fn)
        except BaseException as e:  # noqa: BLE001 - reported, that is what is measured
            return {"error": _describe(e), "stage": "convert"}
        elapsed = time.perf_counter() - start
        best, runs, spent = min(best, elapsed), runs + 1, spent + elapsed
    return {"ms": best * 1e3, "runs": runs}


def _describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:90]


def run_case(path: pathlib.Path, name: str, repeats: int, timeout: float) -> dict:
    command = [sys.executable, __file__, "--worker", str(path), name, str(repeats)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": True}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return {"error": f"exit code {done.returncode}: {last}"[:90], "stage": "process"}
    return json.loads(lines[-1])


# -- real functions, in this process --------------------------------------------------------------


def real_functions() -> list[tuple[str, pathlib.Path, str]]:
    """(label, file, qualified name) of the functions of samples/ and a few test modules."""
    found = []
    files = sorted((ROOT / "samples").glob("[!_]*.py"))
    files += [ROOT / "tests" / "end_to_end" / name for name in TEST_MODULES]
    for path in files:
        module = fresh_module(path)
        for name, value in vars(module).items():
            if _plain(value, module) and not name.startswith("test_"):
                found.append((f"{path.parent.name}/{path.name}:{name}", path, name))
            elif inspect.isclass(value) and value.__module__ == module.__name__:
                for attr, method in vars(value).items():
                    if _plain(method, module) and attr != "__init__":
                        qualname = f"{name}.{attr}"
                        found.append((f"{path.parent.name}/{path.name}:{qualname}", path, qualname))
    return found


def _plain(value, module: types.ModuleType) -> bool:
    """A function defined in `module` as written (not already converted, not a wrapper)."""
    return (
        inspect.isfunction(value)
        and value.__module__ == module.__name__
        and not hasattr(value, "__wrapped__")
        and not hasattr(value, "__transpiler_converted__")
    )


def convert_real(path: pathlib.Path, qualname: str, repeats: int) -> float:
    import transpiler

    best = float("inf")
    for _ in range(repeats):
        fn = fresh_module(path)
        for part in qualname.split("."):
            fn = getattr(fn, part)
        start = time.perf_counter()
        transpiler.convert(fn)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-real", action="store_true", help="only the generated series")
    parser.add_argument("--skip-generated", action="store_true", help="only the real functions")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # the test modules import `tests.end_to_end.checks`

    print(
        f"python {sys.version.split()[0]}; transpiler.convert(fn), first conversion, best of up "
        f"to {args.repeats}; each case in a subprocess, stopped after {args.timeout:g} s"
    )
    header = (
        f"{'series':<24} | {'size':>5} | {'lines':>5} | {'convert (ms)':>12} | {'ms / line':>9}"
    )
    with tempfile.TemporaryDirectory(prefix="conversion-time-") as directory:
        for series, generate, sizes in [] if args.skip_generated else SERIES:
            print()
            print(header)
            print("-" * max(len(header), 100))
            stopped = None
            for size in sizes:
                source = generate(size)
                lines = function_lines(source)
                prefix = f"{series:<24} | {size:>5} | {lines:>5} | "
                if stopped is not None:
                    print(f"{prefix}{f'not run (size {stopped} took > {args.timeout:g} s)'}")
                    continue
                path = pathlib.Path(directory) / f"case_{generate.__name__}_{size}.py"
                path.write_text(source)
                name = source.split("def ", 1)[1].split("(", 1)[0]
                result = run_case(path, name, args.repeats, args.timeout)
                if "ms" in result:
                    print(f"{prefix}{result['ms']:12.1f} | {result['ms'] / lines:9.3f}", flush=True)
                elif "timeout" in result:
                    stopped = size
                    print(f"{prefix}{f'> {args.timeout:g} s':>12} |", flush=True)
                else:
                    print(f"{prefix}{result['stage']} fails: {result['error']}", flush=True)

    if args.skip_real:
        return
    import transpiler

    transpiler.convert(_warm_up)
    print()
    print("Real functions: transpiler.convert(fn), fresh import each time, best of 3")
    rows = []
    for label, path, qualname in real_functions():
        try:
            seconds = convert_real(path, qualname, 3)
        except transpiler.ConversionError as e:
            print(f"  {label}: ConversionError: {str(e).splitlines()[0]}")
            continue
        fn = fresh_module(path)
        for part in qualname.split("."):
            fn = getattr(fn, part)
        rows.append((label, len(inspect.getsourcelines(fn.__code__)[0]), seconds * 1e3))
    width = max(len(label) for label, _, _ in rows)
    header = f"{'function':<{width}} | {'lines':>5} | {'convert (ms)':>12} | {'ms / line':>9}"
    print(header)
    print("-" * len(header))
    for label, lines, ms in rows:
        print(f"{label:<{width}} | {lines:>5} | {ms:12.2f} | {ms / lines:9.3f}")
    print("-" * len(header))
    times = [ms for _, _, ms in rows]
    per_line = [ms / lines for _, lines, ms in rows]
    print(
        f"{len(rows)} functions: median {statistics.median(times):.2f} ms, "
        f"median {statistics.median(per_line):.3f} ms / line, max {max(times):.2f} ms"
    )


if __name__ == "__main__":
    main()
