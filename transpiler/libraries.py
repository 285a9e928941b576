"""Which code converted code calls as it is: JAX, NumPy, the standard library, installed
packages, this project."""

from __future__ import annotations

import functools
import importlib.util
import inspect
import io
import os
import sys
import sysconfig
import types

PACKAGES = frozenset({"jax", "jaxlib", "numpy", "ml_dtypes", "opt_einsum", "runtime", "transpiler"})
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep


def is_library(value) -> bool:
    """Whether `value` (a module, function, class or other object) belongs to library code.

    A function is judged by the file its code lives in, not by its `__module__`: wrappers made
    with `functools.wraps` (`jax.grad(f)`, `jax.vmap(f)`) copy the `__module__` of the user
    function they wrap, but their code is JAX's.
    """
    if isinstance(value, types.ModuleType):
        if value.__name__.split(".")[0] in PACKAGES:
            return True
        file = getattr(value, "__file__", None)
        return file is None or _is_library_file(file)  # no file: built into the interpreter
    code = getattr(value, "__code__", None)
    if isinstance(code, types.CodeType):
        return _is_library_file(code.co_filename)
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        return False
    return module.split(".")[0] in PACKAGES or module == "builtins"


@functools.lru_cache(maxsize=4096)
def _is_library_file(filename: str) -> bool:
    # Cached: converted code asks this for every call it makes while tracing (realpath is I/O).
    path = os.path.realpath(filename)
    if path.startswith(_package_directories()):
        return True
    # Installed packages (Equinox, Flax, optax, diffrax, ...) are called as they are: their
    # authors wrote them for JAX. (The user functions handed to them are converted.)
    parts = path.split(os.sep)
    return path.startswith(_STDLIB) or "site-packages" in parts or "dist-packages" in parts


@functools.cache
def _package_directories() -> tuple[str, ...]:
    """Where the library packages live, found without importing them."""
    found = []
    for name in sorted(PACKAGES):
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(os.path.realpath(location) + os.sep)
    return tuple(found)


# JAX's functions that make effects of the program when it runs (a print, a callback, a check),
# by their public names.
EFFECT_FUNCTIONS = (
    "jax.debug.print",
    "jax.debug.callback",
    "jax.debug.breakpoint",
    "jax.experimental.io_callback",
    "jax.experimental.checkify.check",
    "jax.experimental.checkify.debug_check",
)


_LOGGING_CALLS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
)


def host_effect(value) -> bool:
    """Whether `value` is a standard-library function whose effect is on the host: a logging
    call (`logging.info`, a `Logger`'s `warning`), `warnings.warn`, or a stream's `write`,
    `writelines` or `flush` (`sys.stdout`, a file, an `io.StringIO`). Staged, such a call is
    made when the program runs it (see `runtime.debugging.host_call`), not once while it is
    traced. Imports nothing."""
    warnings = sys.modules.get("warnings")
    if warnings is not None and value is warnings.warn:
        return True
    logging = sys.modules.get("logging")
    name = getattr(value, "__name__", None)
    owner = getattr(value, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        if owner is sys.stdout or owner is sys.stderr or isinstance(owner, io.IOBase):
            return name in ("write", "writelines", "flush")
        loggers = (logging.Logger, logging.LoggerAdapter) if logging is not None else ()
        return isinstance(owner, loggers) and name in _LOGGING_CALLS
    return logging is not None and name in _LOGGING_CALLS and getattr(logging, name) is value


def makes_effects(value) -> bool:
    """Whether `value` is one of JAX's functions that make effects of the program when it runs
    (`EFFECT_FUNCTIONS`), or a `functools.partial` of one. Looks only in modules already
    imported: this imports nothing."""
    while isinstance(value, functools.partial):
        value = value.func
    for path in EFFECT_FUNCTIONS:
        module_name, _, name = path.rpartition(".")
        module = sys.modules.get(module_name)
        if module is not None and getattr(module, name, None) is value:
            return True
    return False


# Parameter names that, by the convention of JAX, NumPy and Python itself, receive functions.
_FUNCTION_PARAMETERS = frozenset(
    {"fun", "f", "fn", "func", "pyfunc", "function", "body_fun", "cond_fun", "true_fun"}
    | {"false_fun", "branches", "callback", "key", "computation", "fwd", "bwd", "jvp"}
)


def takes_functions(value) -> bool | None:
    """Whether the library callable `value` declares a parameter that receives functions (one
    annotated `Callable`, or named as JAX names them: `fun`, `body_fun`, `branches`, `key`, ...).

    None when its signature cannot be had (`map`, `functools.reduce`): the caller must judge by
    the arguments.
    """
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return None
    return any(
        "Callable" in str(parameter.annotation) or parameter.name in _FUNCTION_PARAMETERS
        for parameter in signature.parameters.values()
    )


def is_user_function(value) -> bool:
    """Whether `value` is a function written in user code (one that converted code converts when
    it is given to library code): a function, bound method or partial of one, or a JAX
    custom-derivative function."""
    while isinstance(value, (functools.partial, types.MethodType)):
        value = value.func if isinstance(value, functools.partial) else value.__func__
    if type(value).__name__ in ("custom_jvp", "custom_vjp") and is_library(type(value)):
        return True
    return isinstance(value, types.FunctionType) and not is_library(value)
