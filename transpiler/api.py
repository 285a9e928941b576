"""The public entry points: convert, jit, to_source, do_not_convert, and their switches."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import os
import sys
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable

import gast

from transpiler import libraries, loading, objects, origins, parsing, pipeline, straight_line
from transpiler.analysis import callees
from transpiler.directives import loop_options  # noqa: F401 - part of the API
from transpiler.errors import ConversionError, ConversionWarning

_CONVERTED_FLAG = "__transpiler_converted__"
_DO_NOT_CONVERT = "__transpiler_do_not_convert__"
_CACHE_ATTRIBUTE = "__transpiler_conversions__"  # on the user's function: a `_Conversions`


@dataclasses.dataclass(frozen=True)
class Options:
    """Conversion options; part of every cache key."""

    recursive: bool = True


@dataclasses.dataclass(frozen=True)
class _Generated:
    # None: the function runs its own code, which converting would not change (see
    # `straight_line`; holding the code would keep its cache entry alive).
    code: types.CodeType | None
    source: str  # what `to_source` shows
    # Whether the function runs converted even on Python values (see `_runtime_bridge.wrap`
    # and `pipeline.Converted`).
    runs_converted: bool
    # The globals the code was generated for (conversion resolves names in them), so that
    # their id in the cache key is not taken for another dict's: through their module, weakly,
    # where they are a module's (holding them would hold the module, whose functions hold the
    # code the entry dies with), else the dict itself.
    globals_owner: Callable[[], dict | None]
    # The builtins the code was converted for (`len` staged as the builtin's staged version):
    # converted code must not run once the module defines one of them.
    builtins_read: frozenset[str] = frozenset()

    def is_for(self, namespace: dict) -> bool:
        """Whether the code was generated for `namespace`, as it is now: it defines none of the
        names the conversion took for builtins."""
        from transpiler import _runtime_bridge

        if self.globals_owner() is not namespace:
            return False
        return not _runtime_bridge.shadowed(namespace, self.builtins_read)


def _owner_of(namespace: dict) -> Callable[[], dict | None]:
    module = sys.modules.get(namespace.get("__name__", ""))
    if module is not None and getattr(module, "__dict__", None) is namespace:
        ref = weakref.ref(module)

        def owner():
            found = ref()
            return None if found is None else found.__dict__

        return owner
    return lambda: namespace


class _Conversions:
    """The converted versions of one function, kept in its `__dict__` (so they die with it).

    `functools.wraps` copies a function's `__dict__` onto its wrapper (`jax.grad(f)`,
    `jax.vmap(f)`, any decorator): the copy still names its real owner, so the wrapper never
    passes for `f` converted.

    A converted function refers to its original (`__wrapped__`), so the original holds it only
    weakly: no reference cycle keeps either alive once the user drops them. (Converting again
    after that reuses the generated code; only the function object is made anew.)
    """

    __slots__ = ("owner", "by_options")

    def __init__(self, owner: types.FunctionType):
        self.owner = weakref.ref(owner)
        self.by_options: dict[Options, weakref.ref] = {}

    def get(self, options: Options) -> Callable | None:
        """The function converted with `options`, unless its module has defined since a name
        the conversion took for a builtin (see `_runtime_bridge.wrap`)."""
        ref = self.by_options.get(options)
        found = ref() if ref is not None else None
        from transpiler import _runtime_bridge

        owner = self.owner()
        builtins_read = getattr(found, "__transpiler_builtins__", ())
        if owner is not None and _runtime_bridge.shadowed(owner.__globals__, builtins_read):
            return None
        return found

    def put(self, options: Options, converted: Callable) -> Callable:
        """`converted`, or the one another thread put first."""
        found = self.get(options)
        if found is not None:
            return found
        self.by_options[options] = weakref.ref(converted)
        return converted

    @staticmethod
    def of(fn: types.FunctionType) -> _Conversions:
        found = fn.__dict__.get(_CACHE_ATTRIBUTE)
        if not isinstance(found, _Conversions) or found.owner() is not fn:
            found = _Conversions(fn)
            fn.__dict__[_CACHE_ATTRIBUTE] = found
        return found


class _GeneratedCache:
    """Generated code by (code object, globals, options), compared by identity.

    Two closures made by one `def` share their code and globals, so they share the generated
    code. Code objects compare equal by value (two identical functions in two files are equal),
    so keys use identity; an entry dies with its code object.
    """

    def __init__(self):
        self._entries: dict[tuple[int, int, Options], _Generated] = {}
        self._lock = threading.Lock()

    def get(self, fn: types.FunctionType, options: Options) -> _Generated | None:
        found = self._entries.get((id(fn.__code__), id(fn.__globals__), options))
        return found if found is not None and found.is_for(fn.__globals__) else None

    def put(self, fn: types.FunctionType, options: Options, generated: _Generated) -> None:
        key = (id(fn.__code__), id(fn.__globals__), options)
        with self._lock:
            if key not in self._entries:
                weakref.finalize(fn.__code__, self._entries.pop, key, None)
            self._entries[key] = generated

    def __len__(self) -> int:
        return len(self._entries)


_generated = _GeneratedCache()
# Parsing, transforming and compiling run one at a time: CPython 3.11's AST validation keeps its
# recursion depth per interpreter, not per thread ("AST constructor recursion depth mismatch").
_conversion_lock = threading.RLock()

# The passes walk the tree recursively: a deep expression (`x + x + ... + x`, 250 terms, is
# 250 levels) needs more Python frames than the default limit of 1000. Converting raises the
# limit to this many (only while it holds the lock; Python's own compiler gives up at about a
# third of it).
_RECURSION_LIMIT = 12_000
_recursion_depth = 0  # conversions in progress on this thread's stack, under the lock


@contextlib.contextmanager
def _deep_recursion(fn: types.FunctionType):
    """Room for deep trees while converting `fn` (the caller holds `_conversion_lock`); code
    nested deeper than that is a ConversionError naming its line, not a RecursionError."""
    global _recursion_depth
    old = sys.getrecursionlimit()
    if _recursion_depth == 0 and old < _RECURSION_LIMIT:
        sys.setrecursionlimit(_RECURSION_LIMIT)
    _recursion_depth += 1
    try:
        yield
    except RecursionError:
        raise ConversionError(
            f"{fn.__qualname__!r} is nested too deeply to convert",
            parsing.deepest_location(fn),
            hint="Split the deepest expression or block into steps with names of their own.",
        ) from None
    finally:
        _recursion_depth -= 1
        if _recursion_depth == 0:
            sys.setrecursionlimit(old)


_runtime_namespace = None  # what generated code sees as `rt__`, made on first use (needs JAX)


_ON_ERROR = ("raise", "warn")


def _check_on_error(on_error: str) -> None:
    if on_error not in _ON_ERROR:
        raise ValueError(f"on_error must be 'raise' or 'warn', got {on_error!r}")


def convert(
    fn: Callable | None = None, *, recursive: bool = True, on_error: str = "raise"
) -> Callable:
    """Converts a Python function so its control flow can be staged into one JAX graph.

    The result is a plain Python callable. Called with Python or NumPy values it behaves exactly
    like `fn`; traced by `jax.jit`, `jax.vmap` or `jax.grad`, an `if`, `while` or `for` whose
    condition or iterable is traced becomes `lax.cond`, `lax.while_loop` or `lax.scan`.

    Works as a decorator (`@convert`, `@convert(recursive=False)`), on module-level functions,
    nested functions, closures and lambdas (globals and closure variables are read at call time),
    methods (a bound method stays bound; in a class body, above or below `staticmethod`,
    `classmethod` and `property`), `functools.partial` objects, and callable objects: an
    Equinox or Flax NNX module converts to a view of it whose `__call__` is converted, an
    instance of its class that shares its attributes and pytree leaves (see `docs/models.md`).

    Args:
      fn: the function, bound method or callable object to convert.
      recursive: also convert the user functions that `fn` calls (when they are called).
      on_error: what a `fn` that cannot be converted gives: `"raise"` the ConversionError, or
        `"warn"`: one `ConversionWarning` naming `fn`, its file:line and why, and `fn` itself
        (which runs as it is, unconverted).

    Returns:
      The converted function (or, with `on_error="warn"`, `fn` if it cannot be converted).

    Raises:
      ConversionError: `fn` has no source (typed into a REPL, built by `exec`) or uses syntax
        that cannot be converted; the message names the user's file:line.
      ValueError: `on_error` is neither `"raise"` nor `"warn"`.
    """
    _check_on_error(on_error)
    if fn is None:
        return functools.partial(convert, recursive=recursive, on_error=on_error)
    if on_error == "warn":
        return _convert_or_warn(fn, recursive, stacklevel=3)
    options = Options(recursive=recursive)
    if getattr(fn, _CONVERTED_FLAG, False) or getattr(fn, _DO_NOT_CONVERT, False):
        return fn
    if isinstance(fn, types.MethodType):
        return types.MethodType(convert(fn.__func__, recursive=recursive), fn.__self__)
    if not isinstance(fn, types.FunctionType):
        # A callable object: its view with a converted `__call__` (see `objects`).
        converted_object = objects.convert_object(
            fn, functools.partial(convert, recursive=recursive)
        )
        if converted_object is not None:
            return converted_object
        raise ConversionError(
            f"cannot convert {fn!r}: it is a {type(fn).__name__}, not a Python function nor an "
            "object with a __call__ method",
            hint=(
                "Pass the plain Python function. To combine with jax.jit, convert first: "
                "jax.jit(transpiler.convert(f)), or use @transpiler.jit."
            ),
        )
    wrapped = getattr(fn, "__wrapped__", None)
    if (
        isinstance(wrapped, types.FunctionType)
        and libraries.is_library(fn)
        and not libraries.is_library(wrapped)
    ):
        # `jax.grad(f)`, `jax.vmap(f)`: JAX calls `f` unconverted; convert it first.
        return objects.wrapper(fn, wrapped, kind="wrapper library code made (jax.grad, jax.vmap)")
    conversions = _Conversions.of(fn)
    converted = conversions.get(options)
    defaults = getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None)
    if (
        converted is not None
        and isinstance(fn, types.FunctionType)
        and (
            converted.__defaults__ is not defaults[0] or converted.__kwdefaults__ is not defaults[1]
        )
    ):
        # `f.__defaults__ = ...` rebound since: the converted function takes the new ones.
        converted.__defaults__, converted.__kwdefaults__ = defaults
    if converted is None:
        generated = _generate(fn, options)
        from transpiler import _runtime_bridge

        # None: nothing to convert, it runs as written (see `straight_line`).
        code = fn.__code__ if generated.code is None else generated.code
        new = loading.instantiate(code, fn, _runtime(), skip=(_CACHE_ATTRIBUTE,))
        converted = _runtime_bridge.wrap(
            new,
            fn,
            python_path=not generated.runs_converted,
            builtins_read=generated.builtins_read,
            reconvert=functools.partial(convert, fn, recursive=recursive),
        )
        converted.__dict__.pop(_CACHE_ATTRIBUTE, None)
        setattr(converted, _CONVERTED_FLAG, True)
        converted.__transpiler_source__ = generated.source
        converted.__transpiler_builtins__ = generated.builtins_read
        converted.__transpiler_recursive__ = recursive  # how, for `to_source(source_map=True)`
        converted = conversions.put(options, converted)
    return converted


def _convert_or_warn(fn: Callable, recursive: bool, stacklevel: int) -> Callable:
    """`convert(fn)`, or `fn` itself with a ConversionWarning if it cannot be converted."""
    try:
        return convert(fn, recursive=recursive)
    except ConversionError as e:
        warnings.warn(
            ConversionWarning(f"{_describe(fn)} runs unconverted, as it is: {e}"),
            stacklevel=stacklevel,
        )
        return fn


def _describe(fn: Callable) -> str:
    """`'step' (model.py:12)`: a function and where it is defined, for messages."""
    target = getattr(fn, "__func__", fn)
    name = getattr(target, "__qualname__", None) or repr(target)
    code = getattr(target, "__code__", None)
    if not isinstance(code, types.CodeType):
        return repr(fn)
    return f"{name!r} ({origins.display_path(code.co_filename)}:{code.co_firstlineno})"


def _runtime():
    global _runtime_namespace
    if _runtime_namespace is None:
        from transpiler import _runtime_bridge

        with _conversion_lock:
            if _runtime_namespace is None:
                _runtime_namespace = _runtime_bridge.namespace(_convert_call)
    return _runtime_namespace


def _generate(fn: types.FunctionType, options: Options) -> _Generated:
    generated = _generated.get(fn, options)
    if generated is not None:
        return generated
    from transpiler import _runtime_bridge

    _follow_verbosity_variable()
    started = time.perf_counter()
    with _conversion_lock, _deep_recursion(fn):
        parsed = parsing.parse_function(fn)
        if straight_line.unchanged(parsed.node, fn):
            generated = _Generated(None, parsed.as_written(), False, _owner_of(fn.__globals__))
            _generated.put(fn, options, generated)
            _log_conversion(fn, started, generated, "nothing to convert: runs as written")
            return generated
        converted = pipeline.run(
            parsed.node,
            fn.__globals__,
            fn.__code__.co_freevars,
            recursive=options.recursive,
            closure=callees.closure_of(fn),
        )
        runs_converted, builtins_read = converted.runs_converted, converted.builtins_read
        return_values = {
            name: (info.function, info.returns) for name, info in converted.return_values.items()
        }
        code, source = loading.compile_function(
            converted.node,
            fn.__code__.co_freevars,
            parsed.filename,
            fn.__qualname__,
            suffix=_runtime_bridge.GENERATED_SUFFIX,
            footer=lambda line_map: _runtime_bridge.source_map_footer(line_map, return_values),
            flags=parsing.future_flags(fn.__code__),
            generated=converted.generated,
        )
    generated = _Generated(code, source, runs_converted, _owner_of(fn.__globals__), builtins_read)
    _generated.put(fn, options, generated)
    _log_conversion(fn, started, generated)
    return generated


def _log_conversion(fn, started: float, generated: _Generated, how: str = "") -> None:
    if _logger.isEnabledFor(logging.INFO):
        seconds = time.perf_counter() - started
        how = f" ({how})" if how else ""
        _logger.info("converted %s in %.1f ms%s", _describe(fn), seconds * 1e3, how)
        _logger.debug("generated source of %s:\n%s", _describe(fn), generated.source)


def _convert_call(fn: types.FunctionType) -> Callable:
    """What converted code calls for `fn`: `fn` itself for library code, else `convert(fn)`."""
    if libraries.is_library(fn):
        return fn
    try:
        return convert(fn)
    except ConversionError as e:
        from transpiler import _runtime_bridge

        raise _runtime_bridge.ConversionRefused(str(e)) from e


def jit(fn: Callable | None = None, *, on_error: str = "raise", **jit_kwargs) -> Callable:
    """`jax.jit(convert(fn, on_error=on_error), **jit_kwargs)`, which `run_eagerly` can switch
    off; usable as `@jit` and `@jit(static_argnames=...)`.

    The result is called like the jitted function and has its methods (`lower`, `trace`,
    `eval_shape`, `clear_cache`). While `run_eagerly(True)` is in force, calling it calls `fn`
    itself, unconverted and not compiled, so that pdb and print work in it as in any Python.
    """
    _check_on_error(on_error)
    if fn is None:
        return functools.partial(jit, on_error=on_error, **jit_kwargs)
    import jax

    if on_error == "warn":
        converted = _convert_or_warn(fn, recursive=True, stacklevel=3)
    else:
        converted = convert(fn)
    jitted = jax.jit(converted, **jit_kwargs)

    @functools.wraps(fn)
    def jitted_or_eager(*args, **kwargs):
        if _switches.run_eagerly:
            return fn(*args, **kwargs)
        return jitted(*args, **kwargs)

    for name in dir(jitted):
        if not name.startswith("_"):  # lower, trace, eval_shape, clear_cache
            setattr(jitted_or_eager, name, getattr(jitted, name))
    jitted_or_eager.__wrapped__ = jitted
    setattr(jitted_or_eager, _CONVERTED_FLAG, True)  # convert() and converted code keep it
    jitted_or_eager.__dict__.pop(_CACHE_ATTRIBUTE, None)
    return jitted_or_eager


VERBOSITY_VARIABLE = "TRANSPILER_VERBOSITY"
"""The environment variable giving the verbosity (see `set_verbosity`) until it is set."""

RUN_EAGERLY_VARIABLE = "TRANSPILER_RUN_EAGERLY"
"""The environment variable that switches `run_eagerly` on (`=1`) when `transpiler` is
imported."""

_logger = logging.getLogger("astgraph")
# Where the verbosity applies: `runtime/for_loops.py` logs the loops it unrolls to "transpiler".
_LOGGERS = ("astgraph", "transpiler")
_LEVELS = {1: logging.INFO, 2: logging.DEBUG}


class _Stderr(logging.Handler):
    """Writes to `sys.stderr` as it is when a message comes (tests and tools replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging's convention: report, never raise
            self.handleError(record)


@dataclasses.dataclass
class _Switches:
    run_eagerly: bool
    verbosity: int = 0
    verbosity_set: bool = False  # by set_verbosity; else TRANSPILER_VERBOSITY gives it
    handler: logging.Handler | None = None


_switches = _Switches(run_eagerly=os.environ.get(RUN_EAGERLY_VARIABLE, "0") not in ("", "0"))


def set_verbosity(level: int) -> None:
    """How much converting and staging log, to the `astgraph` logger and stderr.

    - 0 (the default): nothing on stderr;
    - 1: each conversion (the function, its file:line, the time it took) and each statement
      staged (`model.py:12: while → lax.while_loop`, `model.py:14: if → lax.cond`);
    - 2: also the generated source of each converted function.

    Until it is called, the environment variable `TRANSPILER_VERBOSITY` gives the level. Above
    0, messages go to stderr through a handler of the `astgraph` logger; to route them
    elsewhere, leave the verbosity at 0 and configure that logger (`logging.getLogger(
    "astgraph").setLevel(logging.INFO)`, plus a handler of yours).

    Args:
      level: 0, 1 or 2.
    """
    _switches.verbosity_set = True
    _apply_verbosity(level)


def _apply_verbosity(level: int) -> None:
    if isinstance(level, bool) or not isinstance(level, int) or level not in (0, 1, 2):
        raise ValueError(f"the verbosity must be 0, 1 or 2, got {level!r}")
    if _switches.handler is None:
        _switches.handler = _Stderr()
        _switches.handler.setFormatter(logging.Formatter("astgraph: %(message)s"))
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if level == 0:
            logger.removeHandler(_switches.handler)
            if _switches.verbosity > 0:
                logger.setLevel(logging.NOTSET)  # back to what applications configure
        else:
            logger.setLevel(_LEVELS[level])
            if _switches.handler not in logger.handlers:
                logger.addHandler(_switches.handler)
    _switches.verbosity = level


def _follow_verbosity_variable() -> None:
    """Applies `TRANSPILER_VERBOSITY` (read now) unless `set_verbosity` was called."""
    if _switches.verbosity_set:
        return
    value = os.environ.get(VERBOSITY_VARIABLE, "0").strip() or "0"
    try:
        level = int(value)
    except ValueError:
        level = -1
    if level not in (0, 1, 2):
        raise ValueError(f"{VERBOSITY_VARIABLE} must be 0, 1 or 2, got {value!r}")
    if level != _switches.verbosity:
        _apply_verbosity(level)


def get_verbosity() -> int:
    """The verbosity in force (see `set_verbosity`)."""
    _follow_verbosity_variable()
    return _switches.verbosity


def run_eagerly(enabled: bool = True) -> None:
    """Makes every function made with `transpiler.jit` run its original Python function,
    unconverted and not compiled, from the next call on (`False` undoes it): for pdb,
    print, and stepping through a model as written.

    Functions made before the call obey it too. `TRANSPILER_RUN_EAGERLY=1` in the environment
    switches it on when `transpiler` is imported. `transpiler.convert` is not affected, and
    neither is `jax.jit` of a converted function.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"run_eagerly takes True or False, got {enabled!r}")
    _switches.run_eagerly = enabled


def running_eagerly() -> bool:
    """Whether `run_eagerly(True)` (or `TRANSPILER_RUN_EAGERLY=1`) is in force."""
    return _switches.run_eagerly


def padded(items):
    """`(buffer, length)` of a list built in converted code, for lists whose length is traced.

    A list appended to under a traced condition (or in a staged loop that may stop early) has a
    length known only when the program runs; stacking it raises a StagingError rather than
    return what Python would not. `padded(out)` gives its items stacked into a buffer with
    zeros after the last one, and the length, so the code can mask the padding itself:

        buffer, n = transpiler.padded(out)
        mean = jnp.sum(buffer) / n

    For a plain Python list it is `(jnp.stack(items), len(items))`.
    """
    from runtime import lists

    return lists.padded(items)


def do_not_convert(fn: Callable) -> Callable:
    """Marks `fn` so that converted code calls it as it is, and `convert(fn)` returns it as is."""
    setattr(fn, _DO_NOT_CONVERT, True)
    return fn


def to_source(fn: Callable, *, recursive: bool = True, source_map: bool = False) -> str:
    """The generated Python source of `fn` (converted or not) as a string.

    Runtime operators are spelled out (`rt__.if_stmt`, `rt__.while_stmt`, `rt__.call`, ...) and
    the user's own names are kept, so the result reads like the `lax` calls it lowers to.

    Args:
      fn: the function (converted, jitted or plain).
      recursive: as for `convert`: calls are rewritten so called user functions convert too.
      source_map: end each generated statement's first line with the user's `file:line` it
        comes from (`x, = rt__.if_stmt(...)  # model.py:12`).

    Returns:
      The source of the converted function.
    """
    if source_map:
        return _mapped_source(fn, recursive=recursive)
    target = inspect.unwrap(fn, stop=lambda f: hasattr(f, "__transpiler_source__"))
    if isinstance(target, types.MethodType):
        target = target.__func__
    source = getattr(target, "__transpiler_source__", None)
    if source is not None:
        return source
    if not isinstance(target, types.FunctionType):
        raise ConversionError(f"cannot show the source of {fn!r}: it is not a Python function")
    options = Options(recursive=recursive)
    cached = _generated.get(target, options)
    if cached is not None:
        return cached.source
    return _transformed(target, recursive=recursive)[1]


def _transformed(target: types.FunctionType, *, recursive: bool) -> tuple[gast.AST, str]:
    """(the converted definition, its source). Transform only: printing the source needs
    neither compiling nor JAX."""
    with _conversion_lock, _deep_recursion(target):
        node = parsing.parse_function(target).node
        converted = pipeline.run(
            node,
            target.__globals__,
            target.__code__.co_freevars,
            recursive=recursive,
            closure=callees.closure_of(target),
        )
        return converted.node, loading.unparse(converted.node)


def _converted_itself(f) -> bool:
    """Whether `f` is what `convert` made: the innermost object with a converted source
    (`functools.wraps` copies `__transpiler_source__` onto what wraps it, `transpiler.jit`'s)."""
    return hasattr(f, "__transpiler_source__") and not hasattr(
        getattr(f, "__wrapped__", None), "__transpiler_source__"
    )


def _mapped_source(fn: Callable, *, recursive: bool) -> str:
    """`to_source(fn, source_map=True)`: the source of the original function, converted again
    (milliseconds), with each statement's user `file:line` as a comment. Of a converted
    function (a model's converted view), the function it was converted from, as it was
    (`recursive` as given to `convert`; a decorator's wrapper, not the function it wraps)."""
    target = inspect.unwrap(fn, stop=_converted_itself)
    if isinstance(target, types.MethodType):
        target = inspect.unwrap(target.__func__, stop=_converted_itself)
    target = getattr(target, "__transpiler_converted_from__", target)  # a model's view
    if hasattr(target, "__transpiler_source__") and hasattr(target, "__wrapped__"):
        recursive = getattr(target, "__transpiler_recursive__", recursive)
        target = target.__wrapped__  # the function `convert` was given
    if not isinstance(target, types.FunctionType):
        raise ConversionError(f"cannot show the source of {fn!r}: it is not a Python function")
    node, source = _transformed(target, recursive=recursive)
    return origins.annotate(gast.Module(body=[node], type_ignores=[]), source)
