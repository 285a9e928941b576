"""Converting callable objects and the method wrappers of a class body.

A callable object converts to a *view* of it: an instance of a subclass of its class whose only
change is the converted `__call__`, sharing the object's attribute dict. So it passes
`isinstance`, has the object's attributes and methods, flattens to the same pytree leaves (an
Equinox or Flax NNX module stays a module), and attributes set on either are set on both:

    model = MLP(key)                       # an eqx.Module with a traced `if` in `__call__`
    fast = transpiler.convert(model)       # isinstance(fast, MLP); fast.layers is model.layers
    eqx.filter_grad(loss)(fast, x)         # gradients shaped like the model (an `MLP`)

In a class body, `staticmethod`, `classmethod` and `property` objects convert the functions they
hold, so `@transpiler.convert` may stand above or below them.
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable

from transpiler import libraries
from transpiler.errors import ConversionError

_CONVERTED = "__transpiler_converted__"  # set by `transpiler.convert` on what it made
_DO_NOT_CONVERT = "__transpiler_do_not_convert__"  # set by `transpiler.do_not_convert`
_VIEW_CLASSES = "__transpiler_view_classes__"  # on a converted `__call__`: {class: view class}
_lock = threading.Lock()

_METHOD_HINT = (
    "Convert the method instead (transpiler.convert(obj.__call__)), or mark `__call__` with "
    "@transpiler.convert in the class body."
)


def convert_object(obj, convert: Callable[[Callable], Callable]):
    """`obj` converted, or None when it is not callable (nor a method wrapper of a class body).

    Args:
      obj: a callable object, a class, a `functools.partial`, or a `staticmethod`,
        `classmethod` or `property` object.
      convert: converts a function (`transpiler.convert` with the caller's options).

    Returns:
      For a callable object, its view with a converted `__call__` (the object itself if its
      `__call__` is converted already, marked `do_not_convert`, or library code, which converted
      code calls as it is); for a partial, the partial of the converted function; for a method
      wrapper, the same wrapper of converted functions.

    Raises:
      ConversionError: `obj` is a class; or a wrapper of an unconverted function (`jax.jit(f)`,
        `eqx.filter_jit(f)`: it has `__wrapped__`); or a callable object whose class's
        `__call__` is not a Python function, or whose attributes cannot be shared with a view
        (`__slots__`).
    """
    if isinstance(obj, (staticmethod, classmethod)):
        return type(obj)(convert(obj.__func__))
    if isinstance(obj, property):
        fget, fset, fdel = (
            None if f is None else convert(f) for f in (obj.fget, obj.fset, obj.fdel)
        )
        return type(obj)(fget, fset, fdel, obj.__doc__)
    if isinstance(obj, functools.partial):  # jax.tree_util.Partial too: the type is kept
        func = convert(obj.func)
        return obj if func is obj.func else type(obj)(func, *obj.args, **obj.keywords)
    if isinstance(obj, type):
        raise ConversionError(
            f"cannot convert the class {obj.__qualname__}: convert one of its instances, whose "
            "__call__ is converted, or its methods",
            hint=(
                f"transpiler.convert({obj.__name__}(...)), or mark methods with "
                "@transpiler.convert in the class body."
            ),
        )
    if not callable(obj):
        return None
    wrapped = getattr(obj, "__wrapped__", None)
    if isinstance(wrapped, types.FunctionType):
        return wrapper(obj, wrapped)
    cls = type(obj)
    call = _own_call(cls)
    if not isinstance(call, types.FunctionType):
        raise ConversionError(
            f"cannot convert {_describe(obj)}: it is a {cls.__name__}, whose __call__ is a "
            f"{type(call).__name__}, not a Python function",
            hint=(
                "Pass the plain Python function. To combine with jax.jit, convert first: "
                "jax.jit(transpiler.convert(f)), or use @transpiler.jit."
            ),
        )
    if libraries.is_library(call):  # as converted code calls it: `eqx.nn.MLP`'s is JAX's wrapper
        return _library_bound_method(obj, convert)
    converted_call = convert(call)
    if converted_call is call:  # converted already, or do_not_convert
        return obj
    _check_shareable(obj)
    return _view(obj, _view_class(cls, converted_call))


_BOUND_CALL = "__transpiler_bound_call__"  # on a converted function: the view `__call__`


def _library_bound_method(obj, convert):
    """A library's bound method (Equinox's `BoundMethod`, a pytree that `self.method` gives in
    a module) of a user function: its view, whose `__call__` calls the converted function
    on `__self__`, as the library's does with the function. Any other library object: itself."""
    func, owner = getattr(obj, "__func__", None), getattr(obj, "__self__", None)
    if not isinstance(func, types.FunctionType) or owner is None:
        return obj
    converted = convert(func)
    if converted is func:
        return obj
    call = getattr(converted, _BOUND_CALL, None)
    if call is None:

        def call(self, *args, **kwargs):
            return converted(self.__self__, *args, **kwargs)

        call.__transpiler_source__ = converted.__transpiler_source__
        call.__transpiler_converted_from__ = converted  # for `to_source(view, source_map=True)`
        setattr(converted, _BOUND_CALL, call)
    _check_shareable(obj)
    return _view(obj, _view_class(type(obj), call))


def wrapper(obj, wrapped: types.FunctionType, kind: str | None = None):
    """A wrapper of a function (`eqx.filter_jit(f)`, `nnx.jit(f)`): as it is if `f` is converted.

    Converting the wrapper's `__call__` would not reach `f`: the wrapper hands it to JAX, which
    calls it unconverted.
    """
    if getattr(wrapped, _CONVERTED, False) or getattr(wrapped, _DO_NOT_CONVERT, False):
        return obj
    kind = kind or type(obj).__name__
    raise ConversionError(
        f"cannot convert {_describe(obj)}: it is a {kind} wrapping the function "
        f"{wrapped.__qualname__}, which converting the wrapper would leave unconverted",
        hint=(
            f"Convert the function first, then wrap it: wrap transpiler.convert("
            f"{wrapped.__name__}) instead (jax.jit(transpiler.convert({wrapped.__name__})), "
            f"eqx.filter_jit(transpiler.convert({wrapped.__name__})), ...); in a stack of "
            "decorators, put @transpiler.convert below the one that wraps."
        ),
    )


def _own_call(cls: type):
    """The `__call__` in the class dict nearest `cls` in its MRO, as stored (unbound)."""
    for klass in cls.__mro__:
        if "__call__" in vars(klass):
            return vars(klass)["__call__"]
    return None


def _describe(obj) -> str:
    """`repr(obj)` if it is short, else `<Class object>` (a model's repr can be pages long)."""
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = ""
    if text and len(text) <= 80 and "\n" not in text:
        return text
    return f"<{type(obj).__qualname__} object>"


def _view(obj, view_class: type):
    view = object.__new__(view_class)
    # The same dict, not a copy: the view *is* the object, with another `__call__`.
    object.__setattr__(view, "__dict__", obj.__dict__)
    return view


def _check_shareable(obj) -> None:
    cls = type(obj)
    slots = [
        name
        for klass in cls.__mro__
        for name in _slot_names(klass)
        if name not in ("__dict__", "__weakref__")
    ]
    heap_types = all(k is object or k.__flags__ & _HEAPTYPE for k in cls.__mro__)
    if slots or not heap_types or not hasattr(obj, "__dict__"):
        what = (
            f"keep attributes in __slots__ ({', '.join(slots)})"
            if slots
            else "are built on a type implemented in C"
            if not heap_types
            else "have no __dict__"
        )
        raise ConversionError(
            f"cannot convert {_describe(obj)}: {cls.__name__} objects {what}, which a converted "
            "view of the object cannot share",
            hint=_METHOD_HINT,
        )


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined by a `class` statement


def _slot_names(klass: type) -> tuple[str, ...]:
    slots = vars(klass).get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _view_class(cls: type, converted_call: types.FunctionType) -> type:
    """The subclass of `cls` with `converted_call` as `__call__`, made once per class.

    Cached on the converted function (which the view class holds): the cache lives as long as
    some view class of it does, and dies with them.
    """
    made = converted_call.__dict__.setdefault(_VIEW_CLASSES, {})
    found = made.get(cls)
    if found is not None:
        return found
    namespace = {
        "__call__": converted_call,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        # What `transpiler.to_source(view)` shows.
        "__transpiler_source__": converted_call.__transpiler_source__,
        "__transpiler_converted_from__": getattr(
            converted_call, "__transpiler_converted_from__", converted_call
        ),
    }
    with _lock:
        found = made.get(cls)
        if found is None:
            try:
                found = type(cls)(cls.__name__, (cls,), namespace, **_class_keywords(cls))
            except TypeError as e:  # e.g. an `__init_subclass__` that requires arguments
                raise ConversionError(
                    f"cannot convert a {cls.__qualname__} object: no subclass of "
                    f"{cls.__qualname__} can be made for its converted view ({e})",
                    hint=_METHOD_HINT,
                ) from e
            made[cls] = found
    return found


def _class_keywords(cls: type) -> dict:
    """The keywords of `cls`'s `class` statement that its subclasses do not inherit.

    Python keeps no record of them; Flax NNX keeps its one (`class Net(nnx.Module,
    pytree=False)`), which would otherwise revert to its default in the view class.
    """
    is_pytree = getattr(cls, "_pytree__is_pytree", None)  # flax.nnx.Pytree
    return {} if is_pytree is None else {"pytree": is_pytree}
