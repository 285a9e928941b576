"""Where `transpiler` meets `runtime`: imported only when a converted function is built.

Keeping this apart lets the transformation itself (parsing, analyses, passes, code generation)
run without importing JAX.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import functools
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable

from jax.extend import source_info_util

import runtime
from runtime import calls as runtime_calls
from runtime import errors as runtime_errors
from runtime import lists as runtime_lists
from runtime import staging as runtime_staging
from runtime import variables as runtime_variables
from transpiler import libraries

GENERATED_SUFFIX = runtime_errors.GENERATED_SUFFIX
source_map_footer = runtime_errors.source_map_footer
ConversionRefused = runtime_calls.ConversionRefused


def _exclude_own_frames() -> None:
    """JAX names an operation's "user frame" (in jaxprs, in "the leaked value was created on
    line ..."): the innermost frame outside the paths it excludes. With `runtime/` and
    `transpiler/` excluded, that is the generated code's frame, which maps back to the user's
    line (`runtime.errors.user_text`)."""
    for directory in runtime_errors.own_directories():
        source_info_util.register_exclusion(directory)


_exclude_own_frames()


def namespace(converter: Callable) -> runtime_calls.Runtime:
    """What generated code sees as `rt__`: the runtime's operators, with a `call` that converts
    the user functions it reaches through `converter`."""
    operators = {name: getattr(runtime, name) for name in runtime.__all__}
    operators["call"] = runtime_calls.caller(
        converter,
        libraries.is_library,
        libraries.makes_effects,
        libraries.host_effect,
        libraries.takes_functions,
    )
    operators["managed"] = operators["call"].managed
    return runtime_calls.Runtime(**operators)


_PYTHON_PATH = contextvars.ContextVar("python_path", default=True)

# The file name of the wrappers' code (in this directory: never taken for the user's frames).
_WRAPPER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "<converted function>")


def _hide_wrapper_frame(error: BaseException) -> None:
    """Drops the wrapper's own frame from `error`'s traceback (it re-raises it as it is), and
    writes places in generated code that JAX's message names as the user's."""
    tb = error.__traceback__
    if tb is not None and tb.tb_frame.f_code.co_filename == _WRAPPER_FILE:
        error.__traceback__ = tb.tb_next
    if error.args and isinstance(error.args[0], str) and GENERATED_SUFFIX in error.args[0]:
        error.args = (runtime_errors.user_text(error.args[0]), *error.args[1:])


# The globals of every wrapper: one dict, so that `rt__eval` is one store for all of them.
# What the wrapper uses is bound under reserved names: a parameter named like a builtin must not
# change what the wrapper calls.
_WRAPPER_GLOBALS = {
    "__builtins__": builtins,
    "rt__context": runtime_staging.TRACE_CONTEXT,
    "rt__read_trace": runtime_staging.READ_TRACE,
    # The fast path is taken where JAX's current trace is this one: JAX's eager evaluation, or,
    # while a `converted_code_on_python_values` block is open in any thread, a trace there is
    # none of (the context variable then decides, on the slow path).
    "rt__eval": runtime_staging.EVAL,
    "rt__any_exception": BaseException,
    "rt__hide": _hide_wrapper_frame,
}


class _Forcing:
    """How many `converted_code_on_python_values` blocks are open, in all threads."""

    lock = threading.Lock()
    count = 0
    no_trace = object()


@contextlib.contextmanager
def converted_code_on_python_values():
    """Runs converted code even where JAX evaluates eagerly (see `wrap`): for tests of the
    converted code's Python semantics, which `jax.grad` without `jax.jit` relies on."""
    token = _PYTHON_PATH.set(False)
    with _Forcing.lock:
        _Forcing.count += 1
        _WRAPPER_GLOBALS["rt__eval"] = _Forcing.no_trace
    try:
        yield
    finally:
        with _Forcing.lock:
            _Forcing.count -= 1
            if _Forcing.count == 0:
                _WRAPPER_GLOBALS["rt__eval"] = runtime_staging.EVAL
        _PYTHON_PATH.reset(token)


# The wrapper has the original's parameters, so that a call binds its arguments once, as the
# original would: no `*args, **kwargs` to pack and unpack. Where JAX evaluates eagerly it calls
# the original (the fast path: one call reading JAX's trace, one comparison), else `converted`
# (see `wrap`), which decides again, exactly (by the trace's type, and the context variable).
_PYTHON_PATH_WRAPPER = """
def rt__make(rt__original, rt__converted):
    def rt__wrapper({parameters}):
        try:
            if rt__read_trace(rt__context) is rt__eval:
                return rt__original({arguments})
            return rt__converted({positional}, {{{keywords}}})
        except rt__any_exception as rt__error:
            rt__hide(rt__error)
            raise
    return rt__wrapper
"""

_CONVERTED_WRAPPER = """
def rt__make(rt__original, rt__converted):
    def rt__wrapper({parameters}):
        try:
            return rt__converted({positional}, {{{keywords}}})
        except rt__any_exception as rt__error:
            rt__hide(rt__error)
            raise
    return rt__wrapper
"""


@functools.lru_cache(maxsize=256)
def _wrapper_factory(template: str, signature: tuple) -> Callable:
    """The compiled `rt__make` of `template` for a signature (see `_signature`), by its text:
    functions whose parameters have the same names share it."""
    parameters, positional, keywords, arguments = signature
    source = template.format(
        parameters=parameters, positional=positional, keywords=keywords, arguments=arguments
    )
    scope: dict = {}
    exec(compile(source, _WRAPPER_FILE, "exec"), _WRAPPER_GLOBALS, scope)
    return scope["rt__make"]


def _signature(code: types.CodeType) -> tuple[str, str, str, str]:
    """For a function's code: its parameter list, and how to pass them on as a tuple and a
    dict (`(a, b, *args)`, `'k': k, **kwargs`) and in a call (`a, b, *args, k=k, **kwargs`).

    Defaults are not written: the wrapper gets the original's `__defaults__`, `__kwdefaults__`.
    """
    names = code.co_varnames
    n_positional, n_keyword = code.co_argcount, code.co_kwonlyargcount
    positional, keyword_only = names[:n_positional], names[n_positional : n_positional + n_keyword]
    rest = n_positional + n_keyword
    varargs = varkw = None
    if code.co_flags & inspect.CO_VARARGS:
        varargs, rest = names[rest], rest + 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        varkw = names[rest]
    parameters = list(positional)
    if code.co_posonlyargcount:
        parameters.insert(code.co_posonlyargcount, "/")
    if varargs:
        parameters.append(f"*{varargs}")
    elif keyword_only:
        parameters.append("*")
    parameters += keyword_only
    if varkw:
        parameters.append(f"**{varkw}")
    items = [*positional, *([f"*{varargs}"] if varargs else [])]
    as_tuple = f"({', '.join(items)},)" if items else "()"
    as_dict = [f"{k!r}: {k}" for k in keyword_only] + ([f"**{varkw}"] if varkw else [])
    call = [*items, *(f"{k}={k}" for k in keyword_only), *([f"**{varkw}"] if varkw else [])]
    return ", ".join(parameters), as_tuple, ", ".join(as_dict), ", ".join(call)


def wrap(
    generated: types.FunctionType,
    original: types.FunctionType,
    *,
    python_path: bool = True,
    builtins_read: frozenset[str] = frozenset(),
    reconvert: Callable[[], Callable] | None = None,
) -> types.FunctionType:
    """The callable users get: runs `generated`; exceptions read as the user's code ran.

    With `python_path`, where JAX evaluates eagerly (no `jit`, `grad` or `vmap` tracing: every
    value is concrete, and converted code would let Python decide every condition) it runs
    `original` instead, which computes exactly that, at Python's speed.

    `builtins_read`: the builtins `generated` was converted for. Once the module defines one of
    them (a `def format` below the decorated function, which Python calls instead), the call
    goes to `reconvert()`: the function converted again, for the module as it is now.

    The result has `original`'s parameters, defaults and `functools.wraps` attributes.
    """

    def converted(args: tuple, kwargs: dict):
        if python_path and runtime_staging.eager() and _PYTHON_PATH.get():
            return original(*args, **kwargs)
        if builtins_read and shadowed(original.__globals__, builtins_read) and reconvert:
            return reconvert()(*args, **kwargs)  # converted anew, for the module as it is now
        try:
            # A list built in staged code is returned as the Python list it stands for.
            result = runtime_staging.call_staging(generated, args, kwargs)
            if isinstance(result, runtime_variables.UndefinedReturnValue):
                # Only a path that raises as the program runs leaves the return value unset
                # (the rest set it, `None` where they fall off the end): what it gives is
                # never seen.
                return None
            return runtime_lists.as_python_lists(result)
        except Exception as e:  # noqa: BLE001 - annotated and re-raised unchanged
            if not isinstance(e, runtime_staging.Retrace):  # a request, caught further up
                _add_user_location(e)
                runtime_errors.clean(e)
            raise

    code = original.__code__
    template = _PYTHON_PATH_WRAPPER if python_path else _CONVERTED_WRAPPER
    wrapper = _wrapper_factory(template, _signature(code))(original, converted)
    # Named as the original in profiles too (its own code object: the factory's is shared).
    renamed = {"co_name": code.co_name}
    if sys.version_info >= (3, 11):
        renamed["co_qualname"] = original.__qualname__
    wrapper.__code__ = wrapper.__code__.replace(**renamed)
    wrapper.__defaults__ = original.__defaults__
    wrapper.__kwdefaults__ = original.__kwdefaults__
    return functools.wraps(original)(wrapper)


def shadowed(module: dict, builtins_read) -> bool:
    """Whether `module` (a function's globals) now binds one of `builtins_read` (names the
    function's converted code took for builtins) to something other than that builtin."""
    return any(
        name in module and module[name] is not getattr(builtins, name, None)
        for name in builtins_read
    )


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
