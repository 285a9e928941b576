"""`call`: calls from converted code convert the user functions they reach, once each.

Generated code writes `helper(x)` as `rt__.call(helper, x)`. What is called as it is: functions of
JAX, NumPy and the standard library, builtins, classes, code already converted (and the functions
nested in it), and anything marked with `do_not_convert`. Everything else written in Python —
functions, lambdas, bound methods, `functools.partial` objects, objects with a Python `__call__` —
is converted by the converter that `transpiler` passes to `caller`, which caches. A function whose
source cannot be had runs unconverted, with one warning.
"""

from __future__ import annotations

import functools
import inspect
import types
import warnings
import weakref
from collections.abc import Callable

from runtime import builtins as builtins_
from runtime import effects, errors, staging

_DO_NOT_CONVERT = "__transpiler_do_not_convert__"  # set by transpiler.do_not_convert


class ConversionRefused(Exception):
    """Raised by a converter for a function it cannot convert: it is called as written."""


def caller(converter: Callable) -> Callable:
    """The `call` operator of generated code, converting user functions with `converter`.

    `converter(fn)` returns the function to call (the converted one, or `fn` itself for library
    code), or raises `ConversionRefused` to leave `fn` unconverted (with one warning).
    """
    unconvertible: weakref.WeakSet = weakref.WeakSet()  # functions that failed to convert
    warned: set = set()  # their code objects: one warning each

    def convert_function(fn: types.FunctionType):
        if (
            getattr(fn, _DO_NOT_CONVERT, False)
            or getattr(fn, "__transpiler_converted__", False)
            or errors.is_generated(fn.__code__.co_filename)
            or fn in unconvertible
        ):
            return fn
        try:
            return converter(fn)
        except ConversionRefused as e:
            unconvertible.add(fn)
            if fn.__code__ not in warned:
                warned.add(fn.__code__)
                warnings.warn(
                    f"{fn.__qualname__} is called unconverted: {str(e).splitlines()[0]}",
                    stacklevel=4,
                )
            return fn

    def resolve(fn):
        if isinstance(fn, types.FunctionType):
            return convert_function(fn)  # the converter caches
        if isinstance(fn, types.MethodType):
            func = resolve(fn.__func__)
            return fn if func is fn.__func__ else types.MethodType(func, fn.__self__)
        if isinstance(fn, functools.partial):
            func = resolve(fn.func)
            return fn if func is fn.func else functools.partial(func, *fn.args, **fn.keywords)
        if isinstance(fn, type) or inspect.isbuiltin(fn) or not callable(fn):
            return fn
        call_method = type(fn).__call__
        if isinstance(call_method, types.FunctionType):
            converted = resolve(call_method)
            return fn if converted is call_method else types.MethodType(converted, fn)
        return fn

    def call(fn, /, *args, **kwargs):
        """`fn(*args, **kwargs)`, with `fn` converted first if it is user code."""
        if isinstance(fn, (type, types.BuiltinFunctionType)):
            # A builtin reached under another name (`r = range; r(n)`): its staged version.
            return builtins_.STAGED.get(fn, fn)(*args, **kwargs)
        resolved = resolve(fn)
        if staging.trackers():  # a staged block is being traced: it must watch what fn reaches
            effects.called(resolved)
        return resolved(*args, **kwargs)

    return call


class Runtime(types.SimpleNamespace):
    """What generated code sees as `rt__`: the runtime's operators, by name."""
