"""Which code converted code calls as it is: JAX, NumPy, the standard library, this project."""

from __future__ import annotations

import functools
import importlib.util
import os
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
    return path.startswith(_STDLIB) and "site-packages" not in path and "dist-packages" not in path


@functools.cache
def _package_directories() -> tuple[str, ...]:
    """Where the library packages live, found without importing them."""
    found = []
    for name in sorted(PACKAGES):
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(os.path.realpath(location) + os.sep)
    return tuple(found)
