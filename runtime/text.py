"""Text made from traced values, rendered with the values the program has when it runs.

`print(f"loss {loss:.3f}")`, `print("loss %.3f" % loss)`, `print("x: " + str(x))`,
`print([x, y])`: while tracing, `loss` is a tracer, and formatting it gives the tracer's text.
Generated code builds such text through the functions here instead (inside `print` arguments
and the exception of a `raise`). With Python values each is exactly the Python operation. With a
traced value somewhere in its arguments it returns a `DeferredText`: a `str` (showing the tracers,
as Python would now) that also knows how to make the text again from the values, which
`print_` and a staged `raise` do when the program runs.
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Callable

import jax
import numpy as np

from runtime import errors, lists, staging


class DeferredText(str):
    """A str made from traced values, with how to make it from their values at run time."""

    values: list
    render: Callable[[list], str]
    error: Exception | None  # what making it now raised (`"%.2f" % x` of a tracer)

    def __new__(cls, now: str, values: list, render: Callable[[list], str], error=None):
        self = super().__new__(cls, now)
        self.values, self.render, self.error = values, render, error
        return self

    def __add__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return _joined(self, other)

    def __radd__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return _joined(other, self)


def _joined(left: str, right: str) -> str:
    joined = deferred(operator.add, str(left) if type(left) is str else left, right)
    failed = [t.error for t in (left, right) if isinstance(t, DeferredText) and t.error]
    if failed and isinstance(joined, DeferredText):
        joined.error = failed[0]  # `"%.2f" % x + "\n"`: what Python's would raise still
    return joined


def deferred(build: Callable, *args, **kwargs):
    """`build(*args, **kwargs)`, a text; a `DeferredText` if a traced value is among the
    arguments (through lists, tuples, dicts, other deferred texts)."""
    # A list built in staged code shows as the Python list of its items.
    args, kwargs = lists.as_python_lists((args, kwargs))
    leaves: list = []
    _collect((args, kwargs), leaves)
    if not leaves:
        return build(*args, **kwargs)
    # Shown when the program runs, but as they are now, as Python's text shows them: the lists,
    # tuples and dicts copied, the other objects' text taken now (`log["phase"] = "main"` after
    # `print(log)` must not show in it).
    args, kwargs = _as_now((args, kwargs))

    exact = frozenset(id(leaf) for leaf in leaves if staging.is_python_float(leaf))

    def render(values):
        values = iter(values)
        args_, kwargs_ = _rebuild((args, kwargs), values, concrete=True, exact=exact)
        return build(*args_, **kwargs_)

    now_args, now_kwargs = _rebuild((args, kwargs), iter(leaves), concrete=False)
    error = None
    try:
        now = build(*now_args, **now_kwargs)
    except (TypeError, ValueError) as e:  # `"%.2f" % x` takes numbers only: no text for it yet
        now, error = f"<text of {len(leaves)} traced values>", e
    return DeferredText(now, leaves, render, error)


def check_made(values) -> None:
    """Raises what making a text among `values` raised while tracing (`"%.2f" % x` of a
    tracer), as Python's formatting does: code other than a print or a host write (a method of
    the user's named `write`) gets them as Python made them."""
    for value in values:
        if isinstance(value, DeferredText) and value.error is not None:
            raise errors.python_error(value.error)


_IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), range, type(Ellipsis), np.generic)


def _as_now(obj):
    """`obj` (walked as `_rebuild` walks it) with its lists, tuples and dicts copied and its
    other objects (but traced values, immutable ones) replaced by their text now."""
    if isinstance(obj, (DeferredText, lists.StagedList)) or staging.is_staged(obj):
        return obj
    if _parts_of(obj) is not None:
        return obj
    if _shown_as_container(obj):
        return _mapped(obj, _as_now)
    if isinstance(obj, _IMMUTABLE) or callable(getattr(obj, "render", None)):
        return obj
    return _TextNow(obj)


class _TextNow:
    """An object's `str`, `repr` and plain `format` as they are when the text is made."""

    def __init__(self, obj):
        self.obj, self.str, self.repr = obj, str(obj), repr(obj)

    def __str__(self):
        return self.str

    def __repr__(self):
        return self.repr

    def __format__(self, spec):
        return self.str if not spec else format(self.obj, spec)


def has_staged(obj) -> bool:
    """Whether a traced value is in `obj` (through lists, tuples, dicts, deferred texts)."""
    leaves: list = []
    _collect(obj, leaves)
    return bool(leaves)


def traced_parts(items, *, arrays: bool = False) -> tuple[list[int], list]:
    """(positions, operands): where in `items` text made from traced values is (with `arrays`,
    traced values themselves too), and what a host callback is given to make them again when
    the program runs (a text's values; a traced value itself). See `made_again`."""
    positions, operands = [], []
    for i, item in enumerate(items):
        if isinstance(item, DeferredText):
            positions.append(i)
            operands.append(item.values)
        elif arrays and staging.is_staged(item):
            positions.append(i)
            operands.append(item)
        elif type(item) in (list, tuple):  # `fh.writelines([f"{x}\n", ...])`: its items
            inner, inner_operands = traced_parts(item, arrays=arrays)
            positions += [(i, j) for j in inner]
            operands += inner_operands
    return positions, operands


def made_again(items, positions: list[int], concrete) -> list:
    """`items` with those at `positions` (see `traced_parts`) made from `concrete`, their
    operands' values when the program runs: a text rendered, a traced value its value."""
    items = list(items)
    for position, value in zip(positions, concrete):
        if isinstance(position, tuple):  # an item of a list or tuple
            i, j = position
            inner = list(items[i])
            inner[j] = inner[j].render(value) if isinstance(inner[j], DeferredText) else value
            items[i] = type(items[i])(inner)
        else:
            item = items[position]
            items[position] = item.render(value) if isinstance(item, DeferredText) else value
    return items


def fstring(*parts) -> str:
    """An f-string: `f"a {x!r:>8} b"` is `fstring("a ", (x, "r", ">8"), " b")`."""
    return deferred(_join_fields, *parts)


def _join_fields(*parts) -> str:
    return "".join(p if isinstance(p, str) else _field(*p) for p in parts)


def _field(value, conversion: str, spec: str) -> str:
    converted = {"s": str, "r": repr, "a": ascii}.get(conversion)
    return format(converted(value) if converted else value, spec)


def str_(*args, **kwargs):
    """`str(...)`, of traced values too."""
    return deferred(str, *args, **kwargs)


def repr_(value):
    """`repr(value)`, of a traced value too."""
    return deferred(repr, value)


def format_(template: str, *args, **kwargs):
    """`template.format(*args, **kwargs)`, of traced values too."""
    return deferred(template.format, *args, **kwargs)


def percent(template, values):
    """`template % values`, of traced values too."""
    return deferred(operator.mod, template, values)


class _Shown:
    """What a traced value looks like in text made while tracing (a tracer has no format)."""

    def __init__(self, value, what: str | None = None):
        self.text = f"Traced<{what or staging.describe(value)}>"

    def __format__(self, spec):
        return self.text

    def __repr__(self):
        return self.text

    __str__ = __repr__


def _collect(obj, leaves: list) -> None:
    """Appends the traced values in `obj` (walked as `_rebuild` walks it) to `leaves`."""
    if isinstance(obj, DeferredText):
        leaves.extend(obj.values)
    elif isinstance(obj, lists.StagedList):  # of traced length: its buffer and its length
        leaves.extend((obj.buffer, obj.length))
    elif staging.is_staged(obj):
        leaves.append(obj)
    elif _parts_of(obj) is not None:
        for part in _parts_of(obj):
            _collect(part, leaves)
    elif not _shown_as_container(obj):
        return  # its own text (see `_shown_as_container`)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _collect(item, leaves)
    elif isinstance(obj, dict):
        for item in obj.values():
            _collect(item, leaves)


def _rebuild(obj, values, concrete: bool, exact: frozenset = frozenset()):
    """`obj` with its traced values taken from `values` in order: concrete values (NumPy's, or
    the Python numbers weakly typed ones stand for: see `_value`; `exact`: the ids of `float(x)`
    results among them), or, while tracing, stand-ins that show their type."""
    if isinstance(obj, DeferredText):
        mine = [next(values) for _ in obj.values]
        return obj.render(mine) if concrete else str(obj)
    if isinstance(obj, lists.StagedList):
        buffer, length = next(values), next(values)
        if not concrete:
            row = jax.ShapeDtypeStruct(buffer.shape[1:], buffer.dtype)
            return _Shown(buffer, f"a list of traced length, of {staging.describe(row)}")
        items = np.asarray(buffer)[: int(np.asarray(length))]
        return [_value(item, obj.weak, exact=False) for item in items]
    if staging.is_staged(obj):
        value = next(values)
        if not concrete:
            return _Shown(value)
        return _value(value, jax.typeof(obj).weak_type, id(obj) in exact)
    if _shown_as_container(obj):
        return _mapped(obj, lambda item: _rebuild(item, values, concrete, exact))
    parts = _parts_of(obj)
    if parts is not None:
        return obj.__with_parts__([_rebuild(p, values, concrete, exact) for p in parts], concrete)
    return obj


def _parts_of(obj) -> tuple | None:
    """The parts of an object of the runtime's that shows traced values (a range with a traced
    bound: its start, stop and step), where it is one: `__traced_parts__()`, and
    `__with_parts__(parts, concrete)` to make what its text shows of them (at run time, the
    Python object it stands for)."""
    parts = getattr(type(obj), "__traced_parts__", None)
    return None if parts is None else parts(obj)


def _value(value, weak: bool, exact: bool):
    """A traced value's value when the program runs, as text shows it. A weakly typed scalar
    stands for a Python number, and shows as one (`[3]`, not `[np.int32(3)]`): an int as its
    int; a float made by `float(x)` (`exact`) as Python's float of its value, every digit
    (`2.7111098766326904`, as `float` of a float32 gives); another float (a Python float staged
    code computed, held as a float32) as the float its shortest text reads back as (`0.1`)."""
    value = np.asarray(value)
    if not weak or value.ndim != 0:
        return value.view(_ArrayValue)._weakly(weak)
    value = value[()]
    kind = value.dtype.kind
    if kind == "b":
        return bool(value)  # a comparison of numbers that stand for Python's: Python's bool
    if kind in "iu":
        return int(value)
    if kind == "f":
        return float(value) if exact else float(str(value))
    if kind == "c":
        return complex(value) if exact else complex(str(value))
    return value


class _ArrayValue(np.ndarray):
    """A traced array's value when the program runs, shown as JAX shows an array: `str` and
    `format` as NumPy's (`2.5`), `repr` as JAX's `Array(2.5, dtype=float32)` (in a printed list
    or dict), where NumPy's would be `np.float32(2.5)`. Otherwise the NumPy array it is."""

    weak = False

    def _weakly(self, weak: bool) -> _ArrayValue:
        self.weak = weak
        return self

    def __repr__(self):
        prefix = "Array("
        dtype = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak else "")
        plain = self.view(np.ndarray)
        width = np.get_printoptions()["linewidth"]
        if plain.size == 0:
            shown = f"[], shape={plain.shape}"
        else:
            shown = np.array2string(
                plain, prefix=prefix, suffix=",", separator=", ", max_line_width=width
            )
        last_line = len(shown) - shown.rfind("\n") + 1
        gap = " " * len(prefix) if last_line + len(dtype) + 2 > width else " "
        return f"{prefix}{shown},{gap}{dtype})"

    def __str__(self):
        return str(self.view(np.ndarray))

    def __format__(self, spec):
        plain = self.view(np.ndarray)
        return format(plain if plain.ndim else plain[()], spec)


def _shown_as_container(obj) -> bool:
    """Whether text shows `obj` as the list, tuple or dict of its items, which can be made again
    of their values: those types, a namedtuple, `OrderedDict`, `Counter`, `defaultdict`, and a
    subclass that shows itself as its base does (no `__repr__` or `__str__` of its own). Another
    object shows its own text, as it is when the text is made (tracers included)."""
    kind = type(obj)
    if kind in (list, tuple, dict) or kind in _REMADE:
        return True
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return True  # a namedtuple
    for base in (list, tuple, dict):
        if isinstance(obj, base):
            return kind.__repr__ is base.__repr__ and kind.__str__ in (base.__str__, object.__str__)
    return False


# Library dicts whose constructor takes a mapping of their items (`defaultdict`: after its
# factory).
_REMADE = (collections.OrderedDict, collections.Counter, collections.defaultdict)


def _mapped(obj, fn):
    """A list, tuple or dict `obj` made again of `fn` of each of its items: of its type where it
    can be made so (see `_shown_as_container`), else of its base type, which shows the same."""
    if isinstance(obj, dict):
        made = {key: fn(item) for key, item in obj.items()}
        if type(obj) is collections.defaultdict:
            return collections.defaultdict(obj.default_factory, made)
        return type(obj)(made) if type(obj) in _REMADE else made
    items = [fn(item) for item in obj]
    if isinstance(obj, tuple) and type(obj) is not tuple and hasattr(obj, "_fields"):
        return type(obj)(*items)  # a namedtuple
    return tuple(items) if isinstance(obj, tuple) else items
