"""Where `transpiler` meets `runtime`: imported only when a converted function is built.

Keeping this apart lets the transformation itself (parsing, analyses, passes, code generation)
run without importing JAX.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import types
from collections.abc import Callable

import runtime
from runtime import calls as runtime_calls
from runtime import errors as runtime_errors
from runtime import staging as runtime_staging
from transpiler import libraries

GENERATED_SUFFIX = runtime_errors.GENERATED_SUFFIX
source_map_footer = runtime_errors.source_map_footer
ConversionRefused = runtime_calls.ConversionRefused


def namespace(converter: Callable) -> runtime_calls.Runtime:
    """What generated code sees as `rt__`: the runtime's operators, with a `call` that converts
    the user functions it reaches through `converter`."""
    operators = {name: getattr(runtime, name) for name in runtime.__all__}
    operators["call"] = runtime_calls.caller(converter, libraries.is_library)
    return runtime_calls.Runtime(**operators)


_PYTHON_PATH = contextvars.ContextVar("python_path", default=True)


@contextlib.contextmanager
def converted_code_on_python_values():
    """Runs converted code even where JAX evaluates eagerly (see `wrap`): for tests of the
    converted code's Python semantics, which `jax.grad` without `jax.jit` relies on."""
    token = _PYTHON_PATH.set(False)
    try:
        yield
    finally:
        _PYTHON_PATH.reset(token)


def wrap(
    generated: types.FunctionType, original: types.FunctionType, *, python_path: bool = True
) -> types.FunctionType:
    """The callable users get: runs `generated`; exceptions name the user's file:line.

    With `python_path`, where JAX evaluates eagerly (no `jit`, `grad` or `vmap` tracing: every
    value is concrete, and converted code would let Python decide every condition) it runs
    `original` instead, which computes exactly that, at Python's speed."""
    eager = runtime_staging.eager

    @functools.wraps(original)
    def converted(*args, **kwargs):
        if python_path and eager() and _PYTHON_PATH.get():
            return original(*args, **kwargs)
        try:
            return runtime_staging.call_staging(generated, args, kwargs)
        except Exception as e:  # noqa: BLE001 - annotated and re-raised unchanged
            _add_user_location(e)
            # A StagingError names the user's line itself: generated frames would only distract.
            hide_generated = isinstance(e, runtime_errors.StagingError)
            e.with_traceback(_without_own_frames(e.__traceback__, hide_generated))
            raise

    return converted


def _add_user_location(e: BaseException) -> None:
    if isinstance(e, runtime_errors.StagingError) or getattr(e, "_transpiler_noted", False):
        return  # its message names the user's line already / an inner function noted it
    note = runtime_errors.user_frames_note(e.__traceback__)
    if note is not None and hasattr(e, "add_note"):
        e.add_note(note)
        fix = runtime_errors.fix_note(e)
        if fix is not None:
            e.add_note(fix)
        e._transpiler_noted = True


_OWN_DIRECTORIES = tuple(
    os.path.dirname(m.__file__) + os.sep for m in (runtime, __import__("transpiler"))
)


def _without_own_frames(
    tb: types.TracebackType | None, hide_generated: bool = False
) -> types.TracebackType | None:
    """The traceback minus the frames of `runtime/` and `transpiler/` (and of generated code, if
    `hide_generated`): users see their code."""
    kept = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        hidden = filename.startswith(_OWN_DIRECTORIES) or (
            hide_generated and runtime_errors.is_generated(filename)
        )
        if not hidden:
            kept.append(tb)
        tb = tb.tb_next
    result = None
    for entry in reversed(kept):
        result = types.TracebackType(result, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return result
