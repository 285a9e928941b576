"""Differential checks of generated programs: plain Python vs converted (Python path, jit, vmap).

Each generator has a `Spec` (`SPECS`): its inputs, modes and check. The integer generators
(`programs`, `model`) are checked as described below; the float generator (`numeric`) by
`_check_numeric`, against eager JAX, with a grad mode too (see "float programs" below).

For a program (module source defining `f(x, y)`, optionally `reset()` and `snapshot()`) and each
input pair, `check_program` runs:

1. plain Python: `reset()`, `f(x, y)` unconverted, with stdout captured, then `snapshot()`;
2. the Python path: the same with `transpiler.convert(f)` on Python ints;
3. jit: `jax.jit(transpiler.convert(f))`;
4. vmap: `jax.jit(jax.vmap(transpiler.convert(f)))` over all input pairs at once, when plain
   Python returned normally on every input.

What is compared, per mode:

- python: the return value with types (an `int` where Python has an `int`), the exception type
  if Python raised, stdout, and the module state that `snapshot()` returns (globals, a
  module-level object, list and dict). Anything but an exact match is a failure.
- jit: the return value as integers (arrays through `int()`) and stdout. Module state is not
  compared after a jit call: side effects of a traced function happen while it is traced and
  leave tracers in the globals, in plain JAX as here; the generated programs return the state
  they mutate (object attributes, the global counter, dict entries, list lengths), so it is
  compared through the return value instead.
  Stdout is compared as a call that *includes tracing* prints it (read after
  `jax.effects_barrier()`): trace-time output followed by run-time output. Why: that is what a
  user sees from a jitted function's first call, and it exposes `print`s the converter leaves
  as Python: a constant `print("hit", 3)` left as Python inside a staged branch or loop prints
  once, at trace time, whether or not the branch runs, and a value print left as Python shows
  a tracer. How, cheaply: `jitted = jax.jit(converted)`; `jitted.trace(x0, y0)`
  traces once with stdout captured, then `jitted(x, y)` runs per input (reusing that trace; a
  call that traces again is noticed and its own output used) with stdout captured. Tracing sees
  only abstract values, identical for every input pair (all are Python ints), so trace output
  + run output is exactly what a fresh `jax.jit` wrapper (or `jax.clear_caches()`) per input
  would print, for one compilation instead of five. (`lower().compile()` would report a leaked
  tracer as "Computation compiled for 3 inputs but called with 2", not JAX's
  UnexpectedTracerError, so it is not used.)
- vmap: the return value as integers, row by row. Stdout is not compared: under `vmap` a staged
  print prints the whole batch at once, which has no per-input Python equivalent.

Outcomes under jit/vmap: an exact match passes; a `runtime.StagingError` or
`transpiler.ConversionError` is a *refusal* (reported by its normalised first line, not a
failure); any other exception, or any difference, is a *failure* ("wrong ..." when no exception
was raised, i.e. silently wrong).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import importlib.util
import io
import itertools
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import transpiler
from runtime import StagingError
from tests.fuzz import effects_programs, model_programs, numeric_programs, programs
from transpiler import _runtime_bridge

GENERATORS: dict[str, Callable[[int], str]] = {
    "programs": programs.program,
    "model": model_programs.program,
    "numeric": numeric_programs.program,
    "effects": effects_programs.program,
}
INPUTS = [(0, 0), (3, 7), (50, 2), (-4, 11), (96, 96)]
MODES = ("python", "jit", "vmap", "grad", "hessian")
REFUSALS = (StagingError, transpiler.ConversionError)
RANK = {"pass": 0, "skip": 0, "refusal": 1, "failure": 2}

# `return`/`break`/`continue` that leave a `finally` block: the converter refuses them (PEP 765).
PEP765_SNIPPETS = {
    "return in finally": """
def f(x, y):
    try:
        x = x + 1
    finally:
        return x
""",
    "break in finally": """
def f(x, y):
    for i in range(3):
        try:
            x = x + i
        finally:
            if x > y:
                break
    return x
""",
    "continue in finally": """
def f(x, y):
    for i in range(3):
        try:
            x = x + i
        finally:
            if x > y:
                continue
        y = y + 1
    return x
""",
}


class Timeout(Exception):
    """A run took longer than the harness allows (a generator or minimiser bug, or a hang)."""


@dataclasses.dataclass
class Outcome:
    mode: str  # python | jit | vmap
    status: str  # pass | refusal | failure | skip
    kind: str = ""  # normalised description, the key failures and refusals are grouped by
    detail: str = ""  # which input, what Python gave, what the converted function gave
    inputs: tuple = ()  # the inputs a reproducer needs
    site: str = ""  # for exceptions: the construct of the program line that raised (`site_tag`)

    @property
    def signature(self) -> tuple[str, str, str, str]:
        return (self.mode, self.status, self.kind, self.site)


@dataclasses.dataclass
class Run:
    value: object = None
    exc: BaseException | None = None
    stdout: str = ""
    state: object = None


# -- loading --------------------------------------------------------------------------------

_DIR = None
_count = itertools.count()


def load(source: str, tag: str = "program"):
    """Imports `source` as a fresh module from a real file (the converter reads the source)."""
    global _DIR
    if _DIR is None:
        _DIR = tempfile.mkdtemp(prefix="astgraph_fuzz_")
    clean = re.sub(r"\W", "_", tag)
    name = f"fuzz_{clean}_{os.getpid()}_{next(_count)}"
    path = os.path.join(_DIR, name + ".py")
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def unload(module) -> None:
    sys.modules.pop(module.__name__, None)


# -- running --------------------------------------------------------------------------------


@contextlib.contextmanager
def time_limit(seconds: float):
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Timeout(f"run took over {seconds:g}s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _quiet_callback_log():
    """JAX logs each host callback that raises (a failing staged assert) with its traceback to
    stderr; the harness compares the exception itself."""
    logger = logging.getLogger("jax._src.debugging")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def run(module, fn, args, *, state: bool, timeout: float) -> Run:
    """reset(); fn(*args) with stdout captured; snapshot() if `state`."""
    out = Run()
    buf = io.StringIO()
    reset = getattr(module, "reset", None)
    try:
        with time_limit(timeout), warnings.catch_warnings(), _quiet_callback_log():
            warnings.simplefilter("ignore")
            if reset is not None:
                reset()
            with contextlib.redirect_stdout(buf):
                try:
                    out.value = fn(*args)
                    if not isinstance(out.value, jax.stages.Traced):
                        out.value = jax.block_until_ready(out.value)
                finally:
                    jax.effects_barrier()
    except Timeout:
        raise
    except Exception as e:  # noqa: BLE001 - every exception is a result here
        out.exc = e
    out.stdout = buf.getvalue()
    snapshot = getattr(module, "snapshot", None)
    if state and snapshot is not None:
        try:
            out.state = exact(snapshot())
        except Exception as e:  # noqa: BLE001
            out.state = ("snapshot raised", type(e).__name__)
    return out


# -- comparing ------------------------------------------------------------------------------


def _nan_marked(v):
    """`v` (a float or a nested list of them) with each NaN replaced by the text 'nan', so that
    NaN equals NaN in a comparison of canonical forms."""
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, list):
        return [_nan_marked(i) for i in v]
    return v


def exact(v):
    """A canonical form that keeps Python types: what the Python path must reproduce (NaN
    equal to NaN)."""
    if isinstance(v, bool | int | float | str) or v is None:
        return (type(v).__name__, _nan_marked(v))
    if isinstance(v, tuple | list):
        return (type(v).__name__, tuple(exact(i) for i in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, exact(i)) for k, i in v.items()))
    if isinstance(v, np.ndarray | np.generic | jax.Array):
        a = np.asarray(v)
        return ("array", str(a.dtype), a.shape, _nan_marked(a.tolist()))
    return ("object", type(v).__name__)


def loose(v):
    """Integers for scalars (arrays through int()), tuples for sequences: what jit must give."""
    if isinstance(v, tuple | list):
        return tuple(loose(i) for i in v)
    if isinstance(v, dict):
        return tuple((k, loose(i)) for k, i in v.items())
    if isinstance(v, bool | int | np.integer | np.bool_):
        return int(v)
    if isinstance(v, float | np.floating):
        return float(v)
    if isinstance(v, np.ndarray | jax.Array):
        try:
            a = np.asarray(v)
        except Exception:  # noqa: BLE001 - a leaked tracer
            return ("unreadable", type(v).__name__)
        if a.shape == ():
            return int(a) if a.dtype.kind in "iub" else float(a)
        return tuple(loose(i) for i in a)
    return ("object", type(v).__name__)


def normalise(text: str) -> str:
    """First line of an error message, with file:line, generated names and numbers masked."""
    line = text.strip().split("\n")[0] if text.strip() else ""
    line = re.sub(r"[\w./\\<>-]*\.py(:\d+)?", "FILE", line)
    line = re.sub(r"\b(?:[a-z]\d+|item|key\d+)\b", "VAR", line)
    line = re.sub(r"Traced<[^>]*>(with<[^>]*>)?", "Traced<...>", line)
    line = re.sub(r"\d+", "N", line)
    return line[:150]


def is_refusal(e: BaseException) -> bool:
    """A StagingError or ConversionError, raised while converting or tracing, or when the program
    runs (a check the converter staged: `2 ** -k` of a traced int `k`, whose type Python decides
    by its sign), where JAX reports it inside a `JaxRuntimeError`."""
    return isinstance(e, REFUSALS) or _RUN_TIME_REFUSAL in str(e)


_RUN_TIME_REFUSAL = "\nStagingError: "


def exception_kind(e: BaseException) -> str:
    text = str(e)
    if not isinstance(e, REFUSALS) and _RUN_TIME_REFUSAL in text:
        refused = text.split(_RUN_TIME_REFUSAL, 1)[1].splitlines()[0]
        return f"StagingError (when run): {normalise(refused)}"
    return f"{type(e).__name__}: {normalise(text)}"


def return_labels(source: str) -> list[str]:
    """Names of the fields of f's final `return (...)` tuple, for the report."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "f":
            last = node.body[-1]
            if isinstance(last, ast.Return) and isinstance(last.value, ast.Tuple):
                return [ast.unparse(e) for e in last.value.elts]
    return []


def _return_kind(expected, got, labels) -> str:
    if isinstance(expected, tuple) and isinstance(got, tuple) and len(expected) == len(got):
        diff = [i for i, (e, g) in enumerate(zip(expected, got)) if e != g]
        names = [labels[i] if i < len(labels) else str(i) for i in diff]
        others = [n for n in names if n not in ("a", "b")]
        return f"wrong return ({others[0] if others else 'a/b'})"
    return "wrong return"


def _stdout_kind(expected: str, got: str) -> str:
    e, g = expected.splitlines(), got.splitlines()
    if "Traced<" in got or "Tracer(" in got or "Tracer<" in got:
        return "wrong stdout: shows a tracer"
    if sorted(e) == sorted(g):
        return "wrong stdout: order"
    if len(g) > len(e):
        return "wrong stdout: extra lines"
    if len(g) < len(e):
        return "wrong stdout: missing lines"
    return "wrong stdout: different lines"


def _show(text: str, limit: int = 300) -> str:
    text = text if len(text) <= limit else text[:limit] + "..."
    return text.replace("\n", "\\n")


def _exc_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {_show(str(e).strip().splitlines()[0] if str(e).strip() else '')}"


_FEATURES = [
    ("walrus", r":="),
    ("in", r"\bin\b"),
    ("reversed", r"\breversed\("),
    ("range alias", r"\br\("),
    ("f-string", r"\bf['\"]"),
    ("print", r"\bprint\("),
    ("pop", r"\.pop\("),
    ("append", r"\.append\("),
    ("jax.grad", r"jax\.grad"),
    ("jax.vmap", r"jax\.vmap"),
    ("len", r"\blen\("),
    ("sum", r"\bsum\("),
    ("max", r"\bmax\("),
    ("jnp", r"\bjnp\."),
    ("method call", r"\b(obj|STATE|o|self)\.\w+\("),
    ("global helper", r"\b(record|note)\("),
    ("attribute store", r"\b(self|o|obj|STATE)\.\w+\s*=[^=]"),
    ("subscript store", r"\]\s*[-+*]?=[^=]"),
    ("ternary", r" if .* else "),
    ("and/or", r"\b(and|or)\b"),
]
_HEADS = ("if", "elif", "while", "for", "match", "case", "return", "del", "try", "global")


def site_tag(line: str, function: str) -> str:
    """A coarse description of a program line: its statement kind and notable constructs."""
    text = line.strip()
    head = text.split(" ", 1)[0].rstrip(":")
    if head not in _HEADS:
        head = "assign" if re.search(r"[^=!<>]=[^=]", text) else "expression"
    features = []
    for name, pattern in _FEATURES:
        if name == "in" and head == "for":
            continue
        if name == "ternary" and head in ("case",):
            continue
        if re.search(pattern, text):
            features.append(name)
    if head == "case" and " if " in text:
        features.insert(0, "guard")
    where = f" in {function}" if function and function != "f" else ""
    return " ".join([head] + [f"+{n}" for n in features]) + where


def _site(exc: BaseException, path: str, source: str) -> tuple[str, str]:
    """(tag, 'line N: text') of the deepest program line in exc's traceback, or ('', '')."""
    try:
        from runtime.errors import user_location
    except ImportError:  # the runtime moved: sites are a convenience
        user_location = None
    line = None
    for fs in traceback.extract_tb(exc.__traceback__):
        if fs.filename == path:
            line = fs.lineno
        elif user_location is not None:
            found = user_location(fs.filename, fs.lineno)
            if found is not None and os.path.abspath(found[0]) == path:
                line = found[1]
    if line is None:
        return "", ""
    lines = source.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    function = ""
    try:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and node.lineno <= line <= node.end_lineno:
                if not function or node.lineno > function[1]:
                    function = (node.name, node.lineno)
    except SyntaxError:
        pass
    return site_tag(text, function[0] if function else ""), f"line {line}: {text.strip()}"


def compare(mode, ref: Run, got: Run, xy, labels, *, strict: bool) -> Outcome:
    """One input's outcome in `mode`: ref is plain Python, got the converted function."""
    where = f"input {xy}"
    if got.exc is not None and isinstance(got.exc, Timeout):
        return Outcome(mode, "failure", "timeout", where, (xy,))
    if ref.exc is not None:
        if got.exc is not None and isinstance(got.exc, Timeout):
            return Outcome(mode, "failure", "timeout", where, (xy,))
        if got.exc is not None and not strict and is_refusal(got.exc):
            return Outcome(mode, "refusal", exception_kind(got.exc), where, (xy,))
        if got.exc is not None and raised_as(ref.exc, got.exc, strict=strict):
            return _after_exception(mode, ref, got, xy, strict)
        what = _exc_text(got.exc) if got.exc is not None else f"returned {got.value!r}"
        same_type = got.exc is not None and (
            type(got.exc) is type(ref.exc) or f"{type(ref.exc).__name__}:" in str(got.exc)
        )
        kind = f"python raised {type(ref.exc).__name__}, converted " + (
            type(got.exc).__name__ if got.exc is not None else "did not"
        )
        if same_type:
            kind += " (another message)"
        return Outcome(
            mode,
            "failure",
            kind,
            f"{where}: python raised {_exc_text(ref.exc)}; {mode}: {what}",
            (xy,),
        )
    if got.exc is not None:
        status = "refusal" if (not strict and is_refusal(got.exc)) else "failure"
        return Outcome(
            mode,
            status,
            exception_kind(got.exc),
            f"{where}: python returned {ref.value!r}; {mode} raised {_exc_text(got.exc)}",
            (xy,),
        )
    if strict:
        e, g = exact(ref.value), exact(got.value)
        if e != g:
            le, lg = loose(ref.value), loose(got.value)
            if le == lg:
                kind, shown = "wrong type", f"python {e} vs {mode} {g}"
            else:
                kind, shown = _return_kind(le, lg, labels), f"python {le} vs {mode} {lg}"
            return Outcome(mode, "failure", kind, f"{where}: {shown}", (xy,))
    else:
        e, g = loose(ref.value), loose(got.value)
        if e != g:
            return Outcome(
                mode,
                "failure",
                _return_kind(e, g, labels),
                f"{where}: python {e} vs {mode} {g}",
                (xy,),
            )
    return _same_effects(mode, ref, got, xy, where, strict) or Outcome(mode, "pass")


def _same_effects(mode, ref: Run, got: Run, xy, where: str, strict: bool, raised=False):
    """A failure where stdout differs (or, `strict`, the module state), else None. `raised`:
    both raised, and the kinds say it ("... (before the exception)")."""
    if got.stdout is not None and ref.stdout != got.stdout:
        return Outcome(
            mode,
            "failure",
            _stdout_kind(ref.stdout, got.stdout) + (" (before the exception)" if raised else ""),
            f"{where}: python stdout '{_show(ref.stdout)}' vs {mode} '{_show(got.stdout)}'",
            (xy,),
        )
    if strict and ref.state != got.state:
        return Outcome(
            mode,
            "failure",
            "wrong module state" + (" (after the exception)" if raised else ""),
            f"{where}: python snapshot() {ref.state} vs {mode} {got.state}",
            (xy,),
        )
    return None


def raised_as(expected: BaseException, got: BaseException, *, strict: bool) -> bool:
    """Whether `got` is the exception Python raised (`expected`): the same type with the same
    message; or, not `strict` (jit, vmap), an exception whose text carries Python's
    `Type: message` as a line of its own, or followed by the line it was raised at
    (` (file.py:N)`), as a check or a `raise` the compiled program makes is reported (JAX's
    `JaxRuntimeError` carrying it). A Python exception without a message is `Type` alone or
    `Type: ` followed by anything (the library writes `assertion failed`)."""
    if type(got) is type(expected) and str(got) == str(expected):
        return True
    if strict:
        return False
    name, message, text = type(expected).__name__, str(expected), str(got)
    where = r"(?: \([^()\n]*:\d+\))?$"  # the line, where the library adds it
    if message:
        pattern = r"(?:^|\W)" + re.escape(f"{name}: {message}") + where
    else:
        pattern = r"(?:^|\W)" + re.escape(name) + r"(?::[^\n]*)?$"
    return re.search(pattern, text, re.MULTILINE) is not None


def _after_exception(mode, ref: Run, got: Run, xy, strict: bool) -> Outcome:
    """Both raised the same exception: stdout up to it must match (a staged program's prints
    are made in order and the first failing check ends the run: docs/semantics.md, "print and
    assert"), and, on the Python path, the module state it leaves."""
    where = f"input {xy}, python raised {_exc_text(ref.exc)}"
    return _same_effects(mode, ref, got, xy, where, strict, raised=True) or Outcome(mode, "pass")


def _worst(outcomes: list[Outcome], mode: str) -> Outcome:
    best = Outcome(mode, "pass")
    for o in outcomes:
        if RANK[o.status] > RANK[best.status]:
            best = o
    return best


# -- the check ------------------------------------------------------------------------------


@dataclasses.dataclass
class Checked:
    outcomes: list[Outcome]
    reference_ok: bool  # plain Python returned normally on every input


def check_program(
    source: str,
    tag: str = "program",
    modes=None,
    inputs=None,
    timeout: float = 20.0,
    spec: Spec | None = None,
) -> Checked:
    """Runs `source`'s f in plain Python and in each of `modes` (default: all of the spec's,
    modes the spec does not know are left out); one Outcome per mode. `spec`: how the
    generator's programs are run and judged (default: the integer generators')."""
    spec = spec or INT_SPEC
    modes = spec.modes if modes is None else tuple(m for m in modes if m in spec.modes)
    inputs = spec.inputs if inputs is None else inputs
    try:
        module = load(source, tag)
    except Exception as e:  # noqa: BLE001
        return Checked([Outcome("python", "failure", f"generator: {exception_kind(e)}")], False)
    try:
        return spec.check(module, source, modes, inputs, timeout)
    finally:
        unload(module)


def _row(got: Run, i: int) -> Run:
    """Row `i` of a vmapped run: its exception, or the `i`th item of each of its leaves."""
    row = Run(exc=got.exc, stdout=None)
    if got.exc is None:
        try:
            row.value = jax.tree_util.tree_map(lambda leaf: leaf[i], got.value)
        except Exception as e:  # noqa: BLE001
            row.exc = e
    return row


def _converting(module, f, timeout: float):
    """(`f` converted, or None; what converting it raised, or None; a function that runs a
    converted function of `module` on arguments as `run` does, `state` False by default: where
    converting failed, a Run whose exception is that error; past `timeout`, a Timeout)."""
    try:
        converted, conversion_error = transpiler.convert(f), None
    except Exception as e:  # noqa: BLE001
        converted, conversion_error = None, e

    def converted_run(fn, args, *, state=False):
        if conversion_error is not None:
            return Run(exc=conversion_error, stdout=None)
        try:
            return run(module, fn, args, state=state, timeout=timeout)
        except Timeout as e:
            return Run(exc=e)

    return converted, conversion_error, converted_run


def _check(module, source, modes, inputs, timeout) -> Checked:
    labels = return_labels(source)
    f = module.f
    refs = []
    for xy in inputs:
        try:
            refs.append(run(module, f, xy, state=True, timeout=timeout))
        except Timeout:
            return Checked(
                [Outcome("python", "failure", "generator: plain Python timed out")], False
            )
    reference_ok = all(r.exc is None for r in refs)
    results = []
    converted, conversion_error, converted_run = _converting(module, f, timeout)

    path = os.path.abspath(module.__file__)

    def judge(mode, ref, got, xy, strict):
        o = compare(mode, ref, got, xy, labels, strict=strict)
        if got.exc is not None and o.status in ("failure", "refusal"):
            o.site, where = _site(got.exc, path, source)
            if where:
                o.detail += f" [at {where}]"
        return o

    if "python" in modes:
        # Eagerly, a converted function runs the original; the converted code's Python
        # semantics (which jax.grad without jit relies on) are what is checked here.
        with _runtime_bridge.converted_code_on_python_values():
            outs = [
                judge("python", ref, converted_run(converted, xy, state=True), xy, True)
                for ref, xy in zip(refs, inputs)
            ]
        results.append(_worst(outs, "python"))

    if "jit" in modes:
        # Trace once (`jax.jit(...).trace`, stdout captured: trace-time output), then call the
        # same jitted function per input, which reuses that trace (stdout: run-time output).
        # Tracing sees only abstract values, the same for every input pair, so trace output +
        # run output is exactly what a first call, which traces, prints for each input. A call
        # that traces again anyway (counted) already prints both.
        traces = [0]

        def counted(x, y):
            traces[0] += 1
            return converted(x, y)

        jitted = jax.jit(counted)
        traced = Run(stdout="")
        if conversion_error is not None:
            traced.exc = conversion_error
        else:
            try:
                traced = run(module, jitted.trace, inputs[0], state=False, timeout=timeout)
            except Timeout as e:
                traced.exc = e
        outs = []
        for ref, xy in zip(refs, inputs):
            if traced.exc is not None:
                got = Run(exc=traced.exc, stdout=None)
            else:
                before = traces[0]
                got = converted_run(jitted, xy, state=False)
                if traces[0] == before:
                    got.stdout = traced.stdout + (got.stdout or "")
            o = judge("jit", ref, got, xy, False)
            outs.append(o)
            if traced.exc is not None:
                break  # the same tracing error for every input
        results.append(_worst(outs, "jit"))

    if "vmap" in modes:
        # over the inputs on which plain Python returned (a check that fails on another input
        # must not fire for these: under vmap a staged branch's checks are made only for the
        # elements that take it)
        returned = [(ref, xy) for ref, xy in zip(refs, inputs) if ref.exc is None]
        if not returned:
            results.append(Outcome("vmap", "skip", "python raised on every input"))
        else:
            batch = tuple(xy for _, xy in returned)
            xs = jnp.array([xy[0] for xy in batch], dtype=jnp.int32)
            ys = jnp.array([xy[1] for xy in batch], dtype=jnp.int32)
            got = converted_run(
                jax.jit(jax.vmap(converted)) if converted is not None else None,
                (xs, ys),
                state=False,
            )
            outs = []
            for i, (ref, xy) in enumerate(returned):
                row = _row(got, i)
                o = judge("vmap", ref, row, xy, False)
                o.inputs = batch
                outs.append(o)
            results.append(_worst(outs, "vmap"))
    return Checked(results, reference_ok)


# -- float programs ---------------------------------------------------------------------------
#
# The `numeric` generator's programs compute over floats and mixed dtypes, where "what Python
# gives" needs a reference per mode and a comparison that knows JAX's types:
#
# - python: the converted code (forced to run, as for the integer generators) on three
#   variants of each input, each against the original on the same arguments, exactly
#   (`compare`, strict: types and values, NaN equal to NaN): Python floats, NumPy float32
#   scalars, and concrete `jnp.float32` arrays (the path `jax.grad` without `jax.jit` takes).
# - jit: `jax.jit(convert(f))(jnp.float32(x), jnp.float32(y))` against the ORIGINAL run eagerly
#   on the same `jnp.float32` inputs (eager JAX follows Python control flow on concrete values).
#   An input on which the eager original raises (`int()` of a NaN, a ConcretizationTypeError)
#   is skipped. Leaves are compared by `compare_numeric` (below).
# - vmap: `jax.jit(jax.vmap(convert(f)))` over all inputs at once, row by row against the eager
#   original per input (rows whose eager run raised are skipped).
# - grad: where the eager first output is a float, `jax.jit(jax.grad(first, (0, 1)))` of the
#   converted function against `jax.grad(first, (0, 1))` of the original run eagerly.
# - hessian: the same of `jax.hessian(first, (0, 1))`, its four second derivatives (a
#   derivative JAX skips where a cotangent is its symbolic zero, computed on one path only, is
#   where moving work out of a branch could differ: `runtime/shared.py`).
#
# `compare_numeric`, leaf by leaf (tuples must have the same length):
# - dtype: a leaf's dtype is `jnp.asarray(v).dtype` (a Python float is float32, an int int32,
#   a bool bool). Where the eager leaf is strongly typed (an array that is not weak), the
#   converted one must have the same dtype and be strong too. Where it is weakly typed (a
#   Python number, or a weak array), the converted one may be of a wider kind (bool < int <
#   float) and strong: docs/semantics.md ("Branches agree", "Loops keep types") — a staged
#   `if` or loop joins a Python number with the array of the other path, or promotes a weak
#   start value to what the body makes of it, so `acc = 0` left untouched by the path Python
#   took is an int there and a float32 staged. A narrower kind (a float that came back an
#   int) is a failure.
# - value: ints and bools exactly; floats with NaN equal to NaN, an inf equal to the same inf,
#   otherwise |e - g| <= ATOL + RTOL * |e| with RTOL = ATOL = 1e-6 for float32 (XLA fuses and
#   reorders arithmetic, and a Python float is a float64 where the staged value is a float32:
#   a few ulps), and 4 ulps of the narrower dtype for float16 / bfloat16.

NUMERIC_INPUTS = [(0.0, 0.0), (1.5, -2.25), (3.0, 7.5), (-0.5, 11.0), (96.0, 0.1)]
RTOL = ATOL = 1e-6
_KIND = {"b": 0, "i": 1, "u": 1, "f": 2, "V": 2}  # bfloat16's kind is 'V' in NumPy


def _python_variants(xy) -> dict[str, tuple]:
    """The arguments the python mode runs the original and the converted function on."""
    x, y = xy
    return {
        "float": (float(x), float(y)),
        "np.float32": (np.float32(x), np.float32(y)),
        "jnp.float32": (jnp.float32(x), jnp.float32(y)),
    }


def _staged_args(xy):
    return (jnp.float32(xy[0]), jnp.float32(xy[1]))


def _leaf_type(v):
    """(dtype, weak) of a leaf as JAX sees it, or None for what is no number."""
    if isinstance(v, bool | int | float):
        return jnp.asarray(v).dtype, True
    if isinstance(v, jax.Array):
        return v.dtype, bool(getattr(v, "weak_type", False))
    if isinstance(v, np.ndarray | np.generic):
        return v.dtype, False
    return None


def _tolerance(*dtypes):
    eps = max(float(jnp.finfo(d).eps) if jnp.issubdtype(d, jnp.floating) else 0.0 for d in dtypes)
    if eps <= float(jnp.finfo(jnp.float32).eps):
        return RTOL, ATOL
    return 4 * eps, 4 * eps


def _leaf_problem(e, g) -> tuple[str, str] | None:
    """(kind, text) if converted leaf `g` does not match eager leaf `e`, else None."""
    te, tg = _leaf_type(e), _leaf_type(g)
    if te is None or tg is None:
        return ("wrong return type", f"{e!r} vs {g!r}")
    (de, we), (dg, wg) = te, tg
    if np.shape(e) != np.shape(g):
        return ("wrong shape", f"{np.shape(e)} vs {np.shape(g)}")
    if not we:
        if de != dg or wg:
            return (
                "wrong dtype",
                f"{de}{'' if not we else ' weak'} vs {dg}{' weak' if wg else ''}",
            )
    elif _KIND[dg.kind] < _KIND[de.kind]:
        return ("wrong dtype", f"{de} weak vs {dg}{' weak' if wg else ''}")
    a = np.asarray(e, dtype=np.float64) if de.kind != "V" else np.asarray(e).astype(np.float64)
    b = np.asarray(g).astype(np.float64)
    if de.kind in "biu" and dg.kind in "biu":
        ok = np.array_equal(a, b)
    else:
        rtol, atol = _tolerance(de, dg)
        both_nan = np.isnan(a) & np.isnan(b)
        with np.errstate(invalid="ignore"):
            close = (a == b) | (np.abs(a - b) <= atol + rtol * np.abs(a))
        ok = bool(np.all(both_nan | close))
    if not ok:
        return ("wrong value", f"{a.tolist()} vs {b.tolist()}")
    return None


def compare_numeric(mode, ref: Run, got: Run, xy, labels) -> Outcome:
    """One input's outcome in a staged mode: `ref` is the original run eagerly."""
    where = f"input {xy}"
    if got.exc is not None and isinstance(got.exc, Timeout):
        return Outcome(mode, "failure", "timeout", where, (xy,))
    if ref.exc is not None:
        return Outcome(mode, "skip", "eager original raised", where, (xy,))
    if got.exc is not None:
        status = "refusal" if is_refusal(got.exc) else "failure"
        return Outcome(
            mode,
            status,
            exception_kind(got.exc),
            f"{where}: eager returned {ref.value!r}; {mode} raised {_exc_text(got.exc)}",
            (xy,),
        )
    e, g = ref.value, got.value
    if isinstance(e, tuple | list) != isinstance(g, tuple | list) or (
        isinstance(e, tuple | list) and len(e) != len(g)
    ):
        return Outcome(mode, "failure", "wrong return structure", f"{where}: {e!r} vs {g!r}", (xy,))
    pairs = list(zip(e, g)) if isinstance(e, tuple | list) else [(e, g)]
    for i, (le, lg) in enumerate(pairs):
        problem = _leaf_problem(le, lg)
        if problem is not None:
            name = labels[i] if isinstance(e, tuple | list) and i < len(labels) else str(i)
            if mode == "grad":
                name = ("d/dx", "d/dy")[i] if i < 2 else str(i)
            elif mode == "hessian":
                name = ("d2/dx2", "d2/dxdy", "d2/dydx", "d2/dy2")[i] if i < 4 else str(i)
            kind, text = problem
            return Outcome(
                mode,
                "failure",
                f"{kind} ({name})",
                f"{where}: eager {text} {mode} [eager {e!r}; {mode} {g!r}]",
                (xy,),
            )
    return Outcome(mode, "pass")


def _worst_numeric(outcomes: list[Outcome], mode: str) -> Outcome:
    """The worst outcome; `skip` only where every input was skipped."""
    if outcomes and all(o.status == "skip" for o in outcomes):
        return outcomes[0]
    return _worst([o for o in outcomes if o.status != "skip"], mode)


def _first_output(fn):
    def first(x, y):
        return fn(x, y)[0]

    return first


def _is_float_leaf(v) -> bool:
    t = _leaf_type(v)
    return t is not None and _KIND[t[0].kind] == 2


def _check_numeric(module, source, modes, inputs, timeout) -> Checked:
    labels = return_labels(source)
    f = module.f
    path = os.path.abspath(module.__file__)

    def site(o, exc):
        if exc is not None and o.status in ("failure", "refusal"):
            o.site, where = _site(exc, path, source)
            if where:
                o.detail += f" [at {where}]"
        return o

    # plain Python on Python floats decides whether the program is well formed (reference_ok)
    python_refs = {}
    for xy in inputs:
        for variant, args in _python_variants(xy).items():
            try:
                python_refs[(xy, variant)] = (
                    args,
                    run(module, f, args, state=False, timeout=timeout),
                )
            except Timeout:
                return Checked(
                    [Outcome("python", "failure", "generator: plain Python timed out")], False
                )
    reference_ok = all(python_refs[(xy, "float")][1].exc is None for xy in inputs)
    eager = {xy: python_refs[(xy, "jnp.float32")][1] for xy in inputs}
    converted, _, converted_run = _converting(module, f, timeout)

    results = []
    if "python" in modes:
        outs = []
        with _runtime_bridge.converted_code_on_python_values():
            for (_xy, _), (args, ref) in python_refs.items():
                got = converted_run(converted, args)
                o = compare("python", ref, got, args, labels, strict=True)
                outs.append(site(o, got.exc))
        results.append(_worst(outs, "python"))

    if "jit" in modes:
        jitted = jax.jit(converted) if converted is not None else None
        outs = []
        for xy in inputs:
            got = converted_run(jitted, _staged_args(xy))
            outs.append(site(compare_numeric("jit", eager[xy], got, xy, labels), got.exc))
        results.append(_worst_numeric(outs, "jit"))

    # Over the inputs on which eager JAX returned (a check that fails on another input must
    # not fire for these: under vmap a staged branch's checks are made only for the elements
    # that take it; one that fires raises for the whole batch).
    returned = [xy for xy in inputs if eager[xy].exc is None]
    if "vmap" in modes and not returned:
        results.append(Outcome("vmap", "skip", "eager JAX raised on every input"))
    elif "vmap" in modes:
        xs = jnp.array([xy[0] for xy in returned], dtype=jnp.float32)
        ys = jnp.array([xy[1] for xy in returned], dtype=jnp.float32)
        got = converted_run(
            jax.jit(jax.vmap(converted)) if converted is not None else None, (xs, ys)
        )
        outs = []
        for i, xy in enumerate(returned):
            row = _row(got, i)
            o = site(compare_numeric("vmap", eager[xy], row, xy, labels), got.exc)
            o.inputs = (xy,)
            outs.append(o)
        results.append(_worst_numeric(outs, "vmap"))

    for mode, derive in (("grad", _gradient_of_first), ("hessian", _hessian_of_first)):
        if mode not in modes:
            continue
        of_converted = jax.jit(derive(converted)) if converted is not None else None
        outs = []
        for xy in inputs:
            ref = eager[xy]
            value = ref.value
            if ref.exc is not None or not (
                isinstance(value, tuple) and value and _is_float_leaf(value[0])
            ):
                outs.append(Outcome(mode, "skip", "first output is no float", f"input {xy}"))
                continue
            reference = run(module, derive(f), _staged_args(xy), state=False, timeout=timeout)
            got = converted_run(of_converted, _staged_args(xy))
            outs.append(site(compare_numeric(mode, reference, got, xy, labels), got.exc))
        results.append(_worst_numeric(outs, mode))
    return Checked(results, reference_ok)


def _gradient_of_first(fn):
    return jax.grad(_first_output(fn), (0, 1))


def _hessian_of_first(fn):
    """The second derivatives of `fn`'s first output by (x, y), as one flat tuple: d2/dx2,
    d2/dxdy, d2/dydx, d2/dy2."""
    second = jax.hessian(_first_output(fn), (0, 1))

    def flat(x, y):
        return tuple(jax.tree_util.tree_leaves(second(x, y)))

    return flat


@dataclasses.dataclass(frozen=True)
class Spec:
    """How one generator's programs are run and judged: the inputs `f` is called on, the modes
    it is checked in, and the check (`_check`: integer programs, where plain Python on ints is
    the reference of every mode; `_check_numeric`: float programs, see above)."""

    inputs: list
    modes: tuple
    check: Callable


INT_SPEC = Spec(INPUTS, ("python", "jit", "vmap"), _check)
NUMERIC_SPEC = Spec(NUMERIC_INPUTS, ("python", "jit", "vmap", "grad", "hessian"), _check_numeric)
SPECS: dict[str, Spec] = {
    "programs": INT_SPEC,
    "model": INT_SPEC,
    "numeric": NUMERIC_SPEC,
    "effects": INT_SPEC,
}


def check_seed(generator: str, seed: int, modes=None) -> tuple[str, Checked]:
    source = GENERATORS[generator](seed)
    spec = SPECS[generator]
    return source, check_program(source, f"{generator}_{seed}", modes, spec=spec)


def check_pep765() -> list[tuple[str, str]]:
    """Each PEP 765 snippet must be refused with a ConversionError: [(name, problem)] if not."""
    problems = []
    for name, snippet in PEP765_SNIPPETS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = load(snippet, "pep765")
        try:
            transpiler.convert(module.f)(1, 2)
        except transpiler.ConversionError:
            continue
        except Exception as e:  # noqa: BLE001
            problems.append((name, f"raised {_exc_text(e)}"))
        else:
            problems.append((name, "converted without a ConversionError"))
        finally:
            unload(module)
    return problems


# -- minimising -----------------------------------------------------------------------------


def _statement_lists(tree):
    """(owner, field) pairs of every statement list, outermost first."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield node, field


def _mutations(tree) -> list[Callable[[ast.AST], bool]]:
    """Candidate simplifications, each addressed by position so it applies to a fresh parse."""
    muts: list = []
    lists = list(_statement_lists(tree))
    for li, (owner, field) in enumerate(lists):
        for si, stmt in enumerate(getattr(owner, field)):
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "f":
                continue
            muts.append(("delete", li, si))
            if isinstance(stmt, ast.If | ast.For | ast.While | ast.Try):
                muts.append(("unwrap", li, si, "body"))
                if stmt.orelse:
                    muts.append(("unwrap", li, si, "orelse"))
                    if isinstance(stmt, ast.If):
                        muts.append(("drop_else", li, si))
                if isinstance(stmt, ast.Try):
                    muts.append(("unwrap", li, si, "finalbody"))
            if isinstance(stmt, ast.Match):
                for ci in range(len(stmt.cases)):
                    muts.append(("unwrap_case", li, si, ci))
                    if len(stmt.cases) > 1:
                        muts.append(("drop_case", li, si, ci))
    exprs = [n for n in ast.walk(tree) if isinstance(n, ast.expr)]
    for ei, node in enumerate(exprs):
        if isinstance(node, ast.BinOp):
            muts += [("expr", ei, "left"), ("expr", ei, "right")]
        elif isinstance(node, ast.IfExp):
            muts += [("expr", ei, "body"), ("expr", ei, "orelse")]
        elif isinstance(node, ast.BoolOp):
            muts += [("expr", ei, 0), ("expr", ei, -1)]
        elif isinstance(node, ast.Compare) and len(node.ops) > 1:
            muts.append(("expr", ei, "first"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "helper"
        ):
            muts.append(("expr", ei, "arg"))
        elif isinstance(node, ast.Tuple) and len(node.elts) > 1:
            for k in range(len(node.elts)):
                muts.append(("drop_elt", ei, k))
    return muts


def _apply(source: str, mut) -> str | None:
    tree = ast.parse(source)
    lists = list(_statement_lists(tree))
    kind = mut[0]
    if kind in ("delete", "unwrap", "drop_else", "unwrap_case", "drop_case"):
        owner, field = lists[mut[1]]
        body = getattr(owner, field)
        stmt = body[mut[2]]
        if kind == "delete":
            new = []
        elif kind == "unwrap":
            new = list(getattr(stmt, mut[3]))
            if isinstance(stmt, ast.Try) and mut[3] == "body":
                new += stmt.finalbody
        elif kind == "drop_else":
            stmt.orelse = []
            new = [stmt]
        elif kind == "unwrap_case":
            new = list(stmt.cases[mut[3]].body)
        else:
            del stmt.cases[mut[3]]
            new = [stmt]
        body[mut[2] : mut[2] + 1] = new
        if not body and (field != "orelse"):
            body.append(ast.Pass())
    else:
        exprs = [n for n in ast.walk(tree) if isinstance(n, ast.expr)]
        node = exprs[mut[1]]
        if kind == "drop_elt":
            del node.elts[mut[2]]
        else:
            which = mut[2]
            if which == "first":
                replacement = ast.Compare(node.left, node.ops[:1], node.comparators[:1])
            elif which == "arg":
                replacement = node.args[0]
            elif isinstance(which, int):
                replacement = node.values[which]
            else:
                replacement = getattr(node, which)
            _replace(tree, node, replacement)
    ast.fix_missing_locations(tree)
    try:
        return ast.unparse(tree) + "\n"
    except Exception:  # noqa: BLE001
        return None


def _replace(tree, old, new) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return


def _reads_undefined(tree) -> bool:
    """Whether some function reads a name that nothing in the module binds (a reduction slip)."""
    bound = set(dir(builtins))
    loads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loads.append(node.id)
            else:
                bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Global):
            bound.update(node.names)
    return any(name not in bound for name in loads)


def minimise(
    source: str, target: Outcome, budget_s: float = 90.0, spec: Spec | None = None
) -> tuple[str, Outcome]:
    """Greedy AST reduction of `source` keeping `target`'s (mode, status, kind).

    A candidate must still be a program that reads no name nothing binds, on which plain
    Python behaves as on the original (returns normally on all inputs if it did), and fail in
    the same mode with the same kind at the same kind of site.
    """
    spec = spec or INT_SPEC
    inputs = list(target.inputs) or spec.inputs
    deadline = time.monotonic() + budget_s
    reference_ok = check_program(source, "min", (), inputs, spec=spec).reference_ok
    everywhere_ok = check_program(source, "min", (), spec.inputs, spec=spec).reference_ok

    def same(candidate: str):
        try:
            tree = ast.parse(candidate)
            compile(tree, "candidate", "exec")
        except SyntaxError:
            return None
        if _reads_undefined(tree):
            return None
        if (
            everywhere_ok
            and not check_program(candidate, "min", (), spec.inputs, spec=spec).reference_ok
        ):
            return None
        checked = check_program(candidate, "min", (target.mode,), inputs, timeout=5.0, spec=spec)
        if checked.reference_ok != reference_ok:
            return None
        for o in checked.outcomes:
            if o.signature == target.signature:
                return o
        return None

    current, best = source, target
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for phase in ("stmt", "expr"):
            i = 0
            while time.monotonic() < deadline:
                muts = [
                    m
                    for m in _mutations(ast.parse(current))
                    if (m[0] in ("expr", "drop_elt")) == (phase == "expr")
                ]
                if i >= len(muts):
                    break
                candidate = _apply(current, muts[i])
                found = same(candidate) if candidate and candidate != current else None
                if found is not None:
                    current, best, changed = candidate, found, True
                else:
                    i += 1
    return current, best
