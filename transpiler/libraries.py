"""Which code converted code calls as it is: JAX, NumPy, the standard library, this project."""

from __future__ import annotations

import functools
import os
import sysconfig
import types

PACKAGES = frozenset({"jax", "jaxlib", "numpy", "ml_dtypes", "opt_einsum", "runtime", "transpiler"})
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep


def is_library(value) -> bool:
    """Whether `value` (a module, function, class or other object) belongs to library code."""
    if isinstance(value, types.ModuleType):
        if value.__name__.split(".")[0] in PACKAGES:
            return True
        file = getattr(value, "__file__", None)
        return file is None or _in_stdlib(file)  # no file: a module built into the interpreter
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        return False
    if module.split(".")[0] in PACKAGES or module == "builtins":
        return True
    code = getattr(value, "__code__", None)
    return code is not None and _in_stdlib(code.co_filename)


@functools.lru_cache(maxsize=4096)
def _in_stdlib(filename: str) -> bool:
    # Cached: converted code asks this for every call it makes while tracing (realpath is I/O).
    path = os.path.realpath(filename)
    return path.startswith(_STDLIB) and "site-packages" not in path and "dist-packages" not in path
