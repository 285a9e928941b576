"""The public entry points: convert, jit, to_source, do_not_convert."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import weakref
from collections.abc import Callable

from transpiler import libraries, loading, parsing, pipeline
from transpiler.errors import ConversionError

_CONVERTED_FLAG = "__transpiler_converted__"
_DO_NOT_CONVERT = "__transpiler_do_not_convert__"
_CACHE_ATTRIBUTE = "__transpiler_cache__"  # on the user's function: {options: converted}


@dataclasses.dataclass(frozen=True)
class Options:
    """Conversion options; part of every cache key."""

    recursive: bool = True


@dataclasses.dataclass(frozen=True)
class _Generated:
    code: types.CodeType
    source: str  # what `to_source` shows
    filename: str


# Keyed by the user's code object, then by options: converting a function twice, or two closures
# made by the same `def`, reuses the generated code.
_code_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def convert(fn: Callable | None = None, *, recursive: bool = True) -> Callable:
    """Converts a Python function so its control flow can be staged into one JAX graph.

    The result is a plain Python callable. Called with Python or NumPy values it behaves exactly
    like `fn`; traced by `jax.jit`, `jax.vmap` or `jax.grad`, an `if`, `while` or `for` whose
    condition or iterable is traced becomes `lax.cond`, `lax.while_loop` or `lax.scan`.

    Works as a decorator (`@convert`, `@convert(recursive=False)`), on module-level functions,
    nested functions, closures and lambdas (globals and closure variables are read at call time),
    and methods (a bound method stays bound).

    Args:
      fn: the function (or bound method) to convert.
      recursive: also convert the user functions that `fn` calls (when they are called).

    Returns:
      The converted function.

    Raises:
      ConversionError: `fn` has no source (typed into a REPL, built by `exec`) or uses syntax
        that cannot be converted; the message names the user's file:line.
    """
    if fn is None:
        return functools.partial(convert, recursive=recursive)
    options = Options(recursive=recursive)
    if getattr(fn, _CONVERTED_FLAG, False) or getattr(fn, _DO_NOT_CONVERT, False):
        return fn
    if isinstance(fn, types.MethodType):
        return types.MethodType(convert(fn.__func__, recursive=recursive), fn.__self__)
    if not isinstance(fn, types.FunctionType):
        raise ConversionError(
            f"cannot convert {fn!r}: it is a {type(fn).__name__}, not a Python function",
            hint=(
                "Pass the plain Python function. To combine with jax.jit, convert first: "
                "jax.jit(transpiler.convert(f)), or use @transpiler.jit."
            ),
        )
    # Cached on the function itself: the cache entry dies with the function (a dict keyed by
    # the function would keep it alive through the converted function's __wrapped__).
    cache = fn.__dict__.get(_CACHE_ATTRIBUTE)
    if cache is not None and options in cache:
        return cache[options]
    generated = _generate(fn, options)
    from transpiler import _runtime_bridge

    new = loading.instantiate(generated.code, fn, _runtime_bridge.runtime, skip=(_CACHE_ATTRIBUTE,))
    converted = _runtime_bridge.wrap(new, fn)
    converted.__dict__.pop(_CACHE_ATTRIBUTE, None)
    setattr(converted, _CONVERTED_FLAG, True)
    converted.__transpiler_source__ = generated.source
    fn.__dict__.setdefault(_CACHE_ATTRIBUTE, {})[options] = converted
    return converted


def _generate(fn: types.FunctionType, options: Options) -> _Generated:
    per_code = _code_cache.setdefault(fn.__code__, {})
    if options not in per_code:
        parsed = parsing.parse_function(fn)
        converted = pipeline.run(
            parsed.node, fn.__globals__, fn.__code__.co_freevars, recursive=options.recursive
        )
        source = loading.unparse(converted.node)
        code, filename, line_map = loading.compile_function(
            converted.node, fn.__code__.co_freevars, parsed.filename
        )
        from transpiler import _runtime_bridge

        return_values = {
            name: (info.function, info.returns) for name, info in converted.return_values.items()
        }
        _runtime_bridge.register_source_map(filename, line_map, return_values)
        per_code[options] = _Generated(code, source, filename)
    return per_code[options]


def convert_call(fn: types.FunctionType) -> Callable:
    """What converted code calls for `fn`: `fn` itself for library code, else `convert(fn)`."""
    if libraries.is_library(fn):
        return fn
    return convert(fn)


def jit(fn: Callable | None = None, **jit_kwargs) -> Callable:
    """`jax.jit(convert(fn), **jit_kwargs)`; usable as `@jit` and `@jit(static_argnames=...)`."""
    if fn is None:
        return functools.partial(jit, **jit_kwargs)
    import jax

    return jax.jit(convert(fn), **jit_kwargs)


def loop_options(*, max_iterations: int | None = None) -> None:
    """Options for the loop whose body this call opens; does nothing when it runs.

    Written as the first statement of a loop body in converted code::

        while tok != end:
            transpiler.loop_options(max_iterations=64)
            ...

    Args:
      max_iterations: the loop runs at most this many iterations (in Python too). A staged
        `while` becomes a `lax.scan` of that many iterations, masked once its test is false:
        reverse-mode differentiable, and lists appended to in it get a buffer of that size.
    """
    del max_iterations


def do_not_convert(fn: Callable) -> Callable:
    """Marks `fn` so that converted code calls it as it is, and `convert(fn)` returns it as is."""
    setattr(fn, _DO_NOT_CONVERT, True)
    return fn


def to_source(fn: Callable, *, recursive: bool = True) -> str:
    """The generated Python source of `fn` (converted or not) as a string.

    Runtime operators are spelled out (`rt__.if_stmt`, `rt__.while_stmt`, `rt__.call`, ...) and
    the user's own names are kept, so the result reads like the `lax` calls it lowers to.
    """
    target = inspect.unwrap(fn, stop=lambda f: hasattr(f, "__transpiler_source__"))
    if isinstance(target, types.MethodType):
        target = target.__func__
    source = getattr(target, "__transpiler_source__", None)
    if source is not None:
        return source
    if not isinstance(target, types.FunctionType):
        raise ConversionError(f"cannot show the source of {fn!r}: it is not a Python function")
    options = Options(recursive=recursive)
    cached = _code_cache.get(target.__code__, {}).get(options)
    if cached is not None:
        return cached.source
    # Transform only: printing the source needs neither compiling nor JAX.
    node = parsing.parse_function(target).node
    converted = pipeline.run(
        node, target.__globals__, target.__code__.co_freevars, recursive=recursive
    )
    return loading.unparse(converted.node)
