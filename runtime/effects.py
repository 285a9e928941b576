"""Python state that staged code changes while it is traced: found, undone, carried or refused.

A staged branch or loop body is traced once, but stands for any number of runs, in any branch. So
whatever Python state it changes while it is traced — an attribute of an object, an item of a list
or a dict, a module global, a closure cell — must not simply stay changed. Before tracing it, the
runtime records the state the block can reach (`Snapshot`); after, it compares, puts everything
back, and reports each change. A location that goes from an array (a number, a tree of arrays) to
another array is carried through the `lax` primitive as extra state: `c.value` changed by a method
called in a staged loop simply becomes loop state. Any other change (a list that grows, a new
attribute, a string) raises a StagingError that names it.

What a block can reach: the objects in its state and in the closure cells of its functions,
their module globals, the globals and cells of every user function it calls, and everything
reachable from those through attributes and items of lists, dicts, sets and tuples (not through
library objects: JAX's, NumPy's).
"""

from __future__ import annotations

import array
import collections
import contextvars
import dataclasses
import functools
import io
import os
import random
import re
import sys
import sysconfig
import types
import weakref

import jax
import numpy as np

from runtime import errors, identity, staging
from runtime import lists as lists_
from runtime.errors import StagingError
from runtime.variables import MaybeUnbound, Undefined

_ATOMS = (type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis))
_LIBRARIES = frozenset({"jax", "jaxlib", "numpy", "ml_dtypes", "runtime", "transpiler", "builtins"})
_LEAVES = (jax.Array, jax.core.Tracer, np.generic, types.ModuleType)
_WATCHED_NUMPY_SIZE = 1 << 16  # larger NumPy arrays are not copied to watch them
_ABSENT = object()  # a key or attribute that is not there
_BUILTIN_CONTAINERS = (dict, list, set, tuple, type)
_SIZED = (dict, list, set, tuple, collections.deque, bytearray)
# What shows a dict's values without being the dict: its views, a read-only proxy of it.
_VIEWS = (
    type({}.values()),
    type({}.items()),
    types.MappingProxyType,
)
# Containers whose own builtin method kept in a variable (`push = out.append`) is watched:
# where it is called, conversion cannot tell which container that method changes.
_MUTABLE_CONTAINERS = (list, dict, set, bytearray, collections.deque)
# A module's own globals, which Python keeps (`__warningregistry__` changes when a warning is
# shown): not state of the user's. Other names with underscores (`__calls = [0]`) are.
_MODULE_BOOKKEEPING = frozenset(
    {
        "__builtins__",
        "__loader__",
        "__spec__",
        "__name__",
        "__qualname__",
        "__doc__",
        "__file__",
        "__cached__",
        "__package__",
        "__path__",
        "__annotations__",
        "__warningregistry__",
    }
)
_WATCH_LIMIT = 10_000  # items of one container a `Watch` copies; a larger one is opaque


class NewEffects(staging.Retrace):
    """Internal: tracing changed Python state that the statement does not carry yet."""

    def __init__(self, changes: list[Change]):
        super().__init__(f"{len(changes)} new changes")
        self.changes = changes


@dataclasses.dataclass(eq=False)
class Change:
    """One place whose value tracing changed, and how to put it back."""

    key: tuple  # identifies the place across snapshots: (id(container), kind, item)
    label: str  # how the user reaches it: `c.value`, `LOG`, `self.cache['k']`
    before: object  # the value before (_ABSENT: not there)
    after: object
    container: object
    kind: str  # "item" (dict key, list index), "attribute" (class), "cell", "resize"
    shape: object = None  # a created place's (see `Effects._add`): what it is given

    @property
    def carryable(self) -> bool:
        """Whether the place can be staged: an array (tree) before and after, same place."""
        return (
            self.kind not in ("resize", "reorder", "generator", "iterator", "state")
            and self.before is not _ABSENT
            and self.after is not _ABSENT
            and _array_tree(self.before)
            and _array_tree(self.after)
        )

    @property
    def creation(self) -> bool:
        """Whether the place is created (a dict key, an attribute, a global), given an array."""
        return (
            self.kind in ("item", "attribute")
            and self.before is _ABSENT
            and self.after is not _ABSENT
            and _array_tree(self.after)
        )

    def get(self):
        if self.kind == "generator":
            return _generator_state(self.container)
        if self.kind == "cell":
            return self.container.cell_contents
        if self.kind == "attribute":
            return getattr(self.container, self.key[2])
        return self.container[self.key[2]]

    def set(self, value) -> None:
        if self.kind == "generator":
            _set_generator_state(self.container, value)
        elif self.kind == "cell":
            self.container.cell_contents = value
        elif self.kind == "attribute":
            setattr(self.container, self.key[2], value)
        else:
            self.container[self.key[2]] = value

    def restore(self) -> None:
        if self.kind == "iterator":
            return  # an iterator cannot be moved back: the error that follows says so
        if self.kind == "state":
            _restore_buffer(self.container, self.before)
        elif self.kind == "reorder":
            self.container.clear()
            self.container.update(self.before)
        elif self.kind == "resize":
            _restore_whole(self.container, self.before)
        elif self.before is _ABSENT:
            if self.kind == "attribute":
                delattr(self.container, self.key[2])
            else:
                del self.container[self.key[2]]
        else:
            self.set(self.before)

    def describe(self) -> str:
        """What happened to the place, for an error message."""
        if self.kind == "iterator":
            return (
                f"{self.label} (an iterator: {type(self.container).__name__}) is advanced "
                "(tracing takes its items once, for every run of the code)"
            )
        if self.kind == "generator":
            return (
                f"{self.label} is drawn from (a Python random number generator: draw from "
                "jax.random with a key carried in the state, or before the staged code)"
            )
        if self.kind == "reorder":
            return f"{self.label} (a dict) has its keys put in another order"
        if self.kind == "state":
            kind = type(self.container)
            module = kind.__module__.lstrip("_")  # `_io.StringIO` is io.StringIO
            name = kind.__name__ if module == "builtins" else f"{module}.{kind.__name__}"
            article = "an" if name[0] in "aeiou" else "a"
            return f"{self.label} ({article} {name}) is changed in place"
        if self.kind == "resize":
            before, after = len(self.before), len(self.after)
            what = f"{self.label} (a {type(self.container).__name__})"
            if isinstance(self.container, np.ndarray):
                return f"{self.label} (a NumPy array) is changed in place"
            if isinstance(self.container, (set, frozenset)) or before == after:
                return f"{what} is changed in place"
            verb = "grows" if after > before else "shrinks"
            return f"{what} {verb} from {before} to {after} items"
        if self.before is _ABSENT:
            return f"{self.label} is created"
        if self.after is _ABSENT:
            return f"{self.label} is deleted"
        return (
            f"{self.label} changes from {staging.describe_tree(self.before)} "
            f"to {staging.describe_tree(self.after)}"
        )


def _array_tree(value) -> bool:
    """Whether `value` is a tree of arrays, a list a staged loop's probe stands in for
    (`lists.ProbeList`: a loop's list stored in a dict, `d["prev"] = cur`) as the list it is."""
    if isinstance(value, lists_.ProbeList):
        value = list(value)
    return staging.is_array_tree(value)


def _restore_whole(container, before) -> None:
    if isinstance(container, np.ndarray):
        container[...] = before
    elif isinstance(container, (list, collections.deque, bytearray)):
        container.clear()
        container.extend(before)
    else:  # a set
        container.clear()
        container.update(before)


class Snapshot:
    """The Python state reachable from some roots, recorded shallowly, container by container."""

    def __init__(self, limit: int | None = None):
        self.limit = limit  # containers with more items are not copied: opaque
        self._added: dict[int, set[str]] = {}  # namespace id -> the names followed in it
        self._seen: set[int] = set()
        # The lists and dicts of the state a traced function is given (fresh copies, whose
        # contents are the state's: see `skip`).
        self._skipped: set[int] = set()
        # Objects of the user's classes the recorded code made (`bx = Box(x)` in a branch):
        # what it does to them is its own; by id, while they live (they are held here).
        self._made: dict[int, object] = {}
        self._records: list[tuple] = []  # (container, kind, copy, label)
        # What it reaches but cannot record: objects whose state lives in C (an iterator, a
        # NumPy array too large to copy); `Watch` needs them, a staged block's check does not.
        # (A random generator's state it reads, and records.)
        self.opaque: list[str] = []
        # The generators behind `random.random()` and `np.random.rand()`, recorded once code
        # that may draw from them is (see `_note_global_generators`).
        self._global_generators: set[int] = set()

    def add(self, label: str, value) -> None:
        """Records what `value` reaches (once per object), calling it `label` in messages.

        Of a user function, what its code can reach without `globals()` or `getattr`: its
        closure cells, its defaults and attributes, and the globals its code names (and the
        attributes it names of the user modules among them), following the functions of the
        user's own modules found there in turn (library code may call one back, and it can
        change what it names)."""
        self._walk([(label, value)])

    def made(self, obj) -> None:
        """`obj` is new, made by the code being recorded (a user class's object, by its
        constructor): changes to it, and to what only it reaches, are not recorded (each trace
        makes one of its own; recorded, every trace would find a new change)."""
        self._made[id(obj)] = obj

    def add_function(self, fn: types.FunctionType) -> None:
        """Records the closure cells and the globals of `fn` (and of functions in its cells)."""
        if id(fn) not in self._seen:
            self._seen.add(id(fn))
            self._walk(self._function(fn))

    def skip(self, value) -> None:
        """Never records the lists and dicts of `value` (the state a traced function is given,
        fresh copies: what happens to them is the state's, given back by the function), even
        where a method reaches them (`st._replace(...)` of a state tuple holds it as `self`)."""
        self._skipped |= identity.containers_within(value)

    def _walk(self, stack: list) -> None:
        while stack:
            label, obj = stack.pop()
            if isinstance(obj, _ATOMS) or isinstance(obj, _LEAVES) or id(obj) in self._seen:
                continue
            if id(obj) in self._skipped:
                continue
            if id(obj) in self._made:
                continue
            if isinstance(obj, types.FunctionType):
                if not (isinstance(label, _CellContents) or _in_user_module(obj)):
                    # A library's function: its state is the library's; but one that wraps a
                    # function of the user's (`contextlib.contextmanager`'s) runs that one.
                    wrapped = getattr(obj, "__wrapped__", None)
                    if isinstance(wrapped, types.FunctionType):
                        stack.append((_CellContents(obj.__name__), wrapped))
                    continue
                self._seen.add(id(obj))
                stack += self._function(obj)
            else:
                self._seen.add(id(obj))
                stack += self._record(label, obj)

    def _function(self, fn: types.FunctionType) -> list:
        """Records the state of `fn` (see `add`); returns (label, value) of what it holds."""
        user = _is_user(fn)
        children = []
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                contents = _ABSENT
            if id(cell) not in self._seen:
                self._seen.add(id(cell))
                self._records.append((cell, "cell", contents, name))
            # The functions in a function's cells are followed, whoever wrote them (a
            # wrapper's wrapped function); other values only in a user function's.
            if isinstance(contents, types.FunctionType):
                children.append((_CellContents(name), contents))
            elif user and contents is not _ABSENT:
                children.append((name, contents))
        if not user:
            return children
        self._note_global_generators(fn)
        children += self._add_namespace(fn.__globals__, "", _names_used(fn.__code__))
        # Its defaults (`def f(memo={})`) and attributes (`f.calls += 1`) are state too.
        defaults = [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]
        children += [(f"a default of {fn.__name__}", value) for value in defaults]
        children += self._add_function_attributes(fn)
        wrapped = getattr(fn, "__wrapped__", None)  # a converted function's original
        if isinstance(wrapped, types.FunctionType):
            children.append((_CellContents(fn.__name__), wrapped))
        return children

    def _note_global_generators(self, fn: types.FunctionType) -> None:
        """Records the global generators `fn` may draw from: one whose module it names
        (`random`, `np`: through `np.random`), or a function of it (`from random import
        gauss`). Their states take 10-80 us to read: not for code that names neither."""
        if len(self._global_generators) == len(_GLOBAL_GENERATORS):
            return
        names = _names_used(fn.__code__)
        for i, (generator, modules, label) in enumerate(_GLOBAL_GENERATORS):
            if i not in self._global_generators and _may_draw(fn, names, generator, modules):
                self._global_generators.add(i)
                self._records.append((generator, "generator", _generator_state(generator), label))

    def _add_namespace(self, namespace: dict, prefix: str, names) -> list:
        """Records module globals (or another module's attributes, `prefix` its name): all of
        them, shallowly; returns (label, value) of what those `names` (None: all) hold."""
        key = id(namespace)
        if key not in self._seen:
            self._seen.add(key)
            self._records.append((namespace, "globals", dict(namespace), prefix))
            self._added[key] = set()
        added = self._added[key]
        if names is None:
            items = list(namespace.items())
        else:
            items = [(name, namespace[name]) for name in names if name in namespace]
        children = []
        for name, value in items:
            if name in added or name in _MODULE_BOOKKEEPING:
                continue  # the module's own: `__builtins__`, `__loader__`, `__spec__`
            added.add(name)
            if isinstance(value, types.ModuleType):
                if _is_user_module(value):
                    children += self._add_namespace(vars(value), f"{prefix}{name}.", names)
            elif not isinstance(value, type) or _is_user(value):
                children.append((f"{prefix}{name}", value))
        return children

    def _add_function_attributes(self, fn: types.FunctionType) -> list:
        own = {k: v for k, v in vars(fn).items() if not k.startswith("__")}
        if not own or id(fn.__dict__) in self._seen:
            return []
        self._seen.add(id(fn.__dict__))
        self._records.append((fn.__dict__, "attributes", dict(fn.__dict__), fn.__name__))
        return [(f"{fn.__name__}.{name}", value) for name, value in own.items()]

    def reaches(self, obj) -> bool:
        """Whether `obj` was reachable when the block started (it is state the block sees)."""
        return id(obj) in self._seen

    def _record(self, label, obj):
        """Records `obj`; yields (label, value) of what it holds."""
        if isinstance(obj, functools.partial):
            return (
                [(f"{label}.func", obj.func)]
                + [(f"{label}.args[{i}]", a) for i, a in enumerate(obj.args)]
                + [(f"{label}.keywords[{k!r}]", v) for k, v in obj.keywords.items()]
            )
        if isinstance(obj, property):  # its functions run on `obj.name`
            functions = (obj.fget, obj.fset, obj.fdel)
            return [(label, f) for f in functions if isinstance(f, types.FunctionType)]
        if isinstance(obj, (staticmethod, classmethod)):
            return [(label, obj.__func__)]
        if isinstance(obj, (types.MethodType, types.BuiltinMethodType)):
            owner = getattr(obj, "__self__", None)
            if _generator_state(owner) is not None:  # `self.draw = random.random`
                return [(label, owner)]
            if isinstance(obj, types.BuiltinMethodType) and isinstance(owner, _MUTABLE_CONTAINERS):
                # `push = stack.append`: a container's own method, kept in a variable and
                # called where conversion does not see which list it changes.
                return [(f"{label}.__self__", owner)]
        if isinstance(obj, np.ndarray):
            if obj.size <= _WATCHED_NUMPY_SIZE and obj.dtype != object:
                self._records.append((obj, "numpy", obj.copy(), label))
                return []
            self.opaque.append(label)
            if obj.dtype == object and obj.size <= _WATCHED_NUMPY_SIZE:
                return [(f"{label}[{i}]", v) for i, v in enumerate(obj.ravel())]  # what it holds
            return []
        if isinstance(obj, _VIEWS):  # `d.values()`, `types.MappingProxyType(d)`: d's values
            values = obj.values() if isinstance(obj, types.MappingProxyType) else obj
            return [(f"{label}[{i}]", v) for i, v in enumerate(list(values))]
        if isinstance(obj, weakref.ref):  # `weakref.ref(n)`: what it refers to
            referent = obj()
            return [] if referent is None else [(f"{label}()", referent)]
        state = _buffer_state(obj)
        if state is not None:
            self._records.append((obj, "state", state, label))
            return []
        if self.limit is not None and isinstance(obj, _SIZED) and len(obj) > self.limit:
            self.opaque.append(label)
            return []
        if type(obj) not in _BUILTIN_CONTAINERS:
            state = _generator_state(obj)
            if state is not None:
                self._records.append((obj, "generator", state, label))
                return []
            # Not `isinstance(obj, Iterator)`: the ABC hashes the class, which a metaclass with
            # an `__eq__` of its own makes unhashable.
            if hasattr(type(obj), "__next__") and _standard_type(type(obj)):
                self.opaque.append(label)  # a generator, itertools.count(), a file
                state = _iterator_state(obj)
                if state is None:
                    return []
                self._records.append((obj, "iterator", state, label))
                inner = [v for v in _flat(state) if hasattr(type(v), "__next__")]
                return [(label, v) for v in inner]  # `zip(it)`, `map(f, it)`: it too
        if type(obj) not in _BUILTIN_CONTAINERS and not _is_user(type(obj)):
            return []  # library objects, and the runtime's own (a list a loop is sizing)
        if isinstance(obj, dict):
            self._records.append((obj, "dict", dict(obj), label))
            return [(f"{label}[{k!r}]", v) for k, v in list(obj.items())]
        if isinstance(obj, (list, collections.deque)):
            self._records.append((obj, "list", list(obj), label))
            return [(f"{label}[{i}]", v) for i, v in enumerate(obj)]
        if isinstance(obj, set):
            self._records.append((obj, "set", set(obj), label))
            return []
        if isinstance(obj, tuple):
            return [(f"{label}[{i}]", v) for i, v in enumerate(obj)]
        if isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
            return [(label, obj.__func__)]  # what the method's code reaches (its self: below)
        if isinstance(obj, (types.MethodType, types.BuiltinFunctionType)):
            return []
        if not _is_user(obj if isinstance(obj, type) else type(obj)):
            return []
        if isinstance(obj, type):
            attributes = {k: v for k, v in vars(obj).items() if not k.startswith("__")}
            self._records.append((obj, "class", attributes, label))
            # Its special methods are not state, but what they reach is: Python calls them
            # (`with Timer():` its __enter__ and __exit__, `a + b` an __add__).
            methods = [
                (f"{label}.{k}", v)
                for k, v in vars(obj).items()
                if k.startswith("__") and isinstance(v, types.FunctionType)
            ]
            return [(f"{label}.{k}", v) for k, v in attributes.items()] + methods
        # Its class's attributes are state it reaches too (`type(self).calls += 1`,
        # `self.history.append(x)` of a class-level list), and those of the user classes the
        # class derives from.
        children = [(c.__qualname__, c) for c in type(obj).__mro__ if _class_in_user_module(c)]
        own = _plain_attribute(obj, "__dict__", None)  # not through a user's __getattr__
        if isinstance(own, dict):
            self._records.append((own, "attributes", dict(own), label))
            children += [(f"{label}.{k}", v) for k, v in list(own.items())]
        for slot in identity.slots(type(obj)):
            value = _plain_attribute(obj, slot, _ABSENT)
            self._records.append((obj, "slot", (slot, value), label))
            if value is not _ABSENT:
                children.append((f"{label}.{slot}", value))
        return children

    def changes(self) -> list[Change]:
        """What differs now from what was recorded."""
        found = []
        for container, kind, before, label in self._records:
            found += _compare(container, kind, before, label)
        return found


def _entering(change: Change):
    """A carried place's value as the statement starts: for a place it creates, zeros shaped as
    what it is given (no branch reads them: each starts without the place, see `wrap`)."""
    if change.creation:
        return staging.zeros_like(change.shape)
    return change.get()


def _buffer_state(obj):
    """What a buffer of the standard library holds, for a snapshot: a `bytearray`'s or an
    `array.array`'s items, an `io.StringIO`'s or `io.BytesIO`'s text and position; None for
    other objects. Staged code that changes one is refused: a buffer cannot hold traced values,
    and tracing a branch or a loop body changes it once, whatever runs."""
    if isinstance(obj, (bytearray, array.array)):
        return bytes(obj)
    if isinstance(obj, (io.StringIO, io.BytesIO)) and not obj.closed:
        return obj.getvalue(), obj.tell()
    return None


def _restore_buffer(obj, state) -> None:
    if isinstance(obj, bytearray):
        obj[:] = state
        return
    if isinstance(obj, array.array):
        del obj[:]
        obj.frombytes(state)
        return
    text, position = state
    obj.seek(0)
    obj.truncate()
    obj.write(text)
    obj.seek(position)


def _compare(container, kind, before, label) -> list[Change]:
    if kind == "state":
        if _buffer_state(container) == before:
            return []
        now = _buffer_state(container)
        return [Change((id(container), "state", None), label, before, now, container, kind)]
    if kind == "iterator":
        now = _iterator_state(container)
        if _same_reduced(before, now):
            return []
        return [Change((id(container), "iterator", None), label, before, now, container, kind)]
    if kind == "generator":
        now = _generator_state(container)
        if _same_state(before, now):
            return []
        key = (id(container), "generator", None)
        return [Change(key, label, before, now, container, "generator")]
    if kind == "cell":
        try:
            now = container.cell_contents
        except ValueError:
            now = _ABSENT
        if _same(before, now):
            return []
        return [Change((id(container), "cell", None), label, before, now, container, "cell")]
    if kind == "numpy":
        if np.array_equal(container, before, equal_nan=container.dtype.kind in "fc"):
            return []
        return [
            Change(
                (id(container), "resize", None),
                label,
                before,
                container.copy(),
                container,
                "resize",
            )
        ]
    if kind == "set":
        now = set(container)
        if now == before:
            return []
        return [Change((id(container), "resize", None), label, before, now, container, "resize")]
    if kind == "list":
        now = list(container)
        if len(now) != len(before):
            return [
                Change((id(container), "resize", None), label, before, now, container, "resize")
            ]
        return [
            Change((id(container), "item", i), f"{label}[{i}]", b, a, container, "item")
            for i, (b, a) in enumerate(zip(before, now))
            if not _same(b, a)
        ]
    if kind == "slot":
        slot, value = before
        now = _plain_attribute(container, slot, _ABSENT)
        if _same(value, now):
            return []
        return [
            Change(
                (id(container), "attribute", slot),
                f"{label}.{slot}",
                value,
                now,
                container,
                "attribute",
            )
        ]
    # A dict, an object's __dict__, module globals, a class's attributes.
    now = (
        {k: v for k, v in vars(container).items() if not k.startswith("__")}
        if kind == "class"
        else container
    )
    changes = []
    if kind == "dict" and before.keys() == now.keys() and list(before) != list(now):
        # Same keys, another order (`d["a"] = d.pop("a")`): what iterating it shows changes.
        return [
            Change((id(container), "reorder", None), label, before, dict(now), container, "reorder")
        ]
    # In the order the keys are in now (new ones last, as inserted), then the deleted ones: an
    # `if` whose branches both create keys puts them in that order (see `Effects._add`).
    for key in [*now, *(k for k in before if k not in now)]:
        if kind == "globals" and key in _MODULE_BOOKKEEPING:
            continue
        if kind == "attributes" and isinstance(key, str) and key.startswith("__"):
            continue  # bookkeeping: `__warningregistry__`, a function's cached conversions
        b, a = before.get(key, _ABSENT), now.get(key, _ABSENT)
        if _same(b, a):
            continue
        if kind == "dict":
            where = f"{label}[{key!r}]"
        elif kind == "globals":
            where = f"the global {key!r}" if not label else f"{label}{key}"
        else:
            where = f"{label}.{key}"
        item_kind = "attribute" if kind == "class" else "item"
        changes.append(Change((id(container), item_kind, key), where, b, a, container, item_kind))
    return changes


_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep


@functools.lru_cache(maxsize=1024)
def _is_user_module_named(name: str, file: str | None) -> bool:
    if name.split(".")[0] in _LIBRARIES or file is None:
        return False
    path = os.path.realpath(file)
    if path.startswith(_STDLIB) or "site-packages" in path or "dist-packages" in path:
        return False
    return True


def is_user_generator(generator) -> bool:
    """Whether `generator` runs the user's code (not a library's: `nnx.List.__iter__`)."""
    code = generator.gi_code
    frame = generator.gi_frame
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return _is_user_module_named(name, code.co_filename)


class _CellContents(str):
    """The label of a function held in another function's closure cell (or its `__wrapped__`):
    followed whoever wrote it."""


@functools.lru_cache(maxsize=4096)
def _code_in_user_module(module: str, file: str) -> bool:
    return _is_user_module_named(module, file)


def _in_user_module(fn: types.FunctionType) -> bool:
    """Whether `fn` is defined in a module of the user's (not in an installed package)."""
    return _code_in_user_module(fn.__module__ or "", fn.__code__.co_filename)


def _class_in_user_module(cls: type) -> bool:
    """Whether `cls` is defined in a module of the user's (not a library's: a class of theirs,
    `nnx.Module`, keeps the library's state)."""
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    return module is not None and _is_user_module(module)


def _is_user_module(module: types.ModuleType) -> bool:
    """Whether `module` is the user's (not a library's, not the standard library's)."""
    return _is_user_module_named(module.__name__, getattr(module, "__file__", None))


def _same(a, b) -> bool:
    if a is b:
        return True
    return type(a) is type(b) and isinstance(a, _ATOMS) and a == b


# Builtins that reach globals or attributes by a computed name: code that calls them may reach
# any global, not only those it names.
_DYNAMIC_ACCESS = frozenset(
    {"globals", "vars", "locals", "eval", "exec", "getattr", "setattr", "delattr", "__import__"}
)


@functools.lru_cache(maxsize=4096)
def _names_used(code: types.CodeType) -> frozenset[str] | None:
    """The global and attribute names `code` (and the code nested in it) refers to; None if it
    calls a builtin that reaches names it computes (`globals()`, `getattr`)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            nested = _names_used(const)
            if nested is None:
                return None
            names |= nested
    return None if names & _DYNAMIC_ACCESS else frozenset(names)


def _standard_type(cls) -> bool:
    """Whether `cls` is Python's own (builtins, the standard library) or a library's."""
    root = (getattr(cls, "__module__", None) or "").split(".")[0]
    return root in _LIBRARIES or root in sys.stdlib_module_names


def _plain_attribute(obj, name: str, default):
    """`getattr(obj, name, default)` without running a `__getattr__` of the user's (one that
    raises KeyError for a missing name would escape)."""
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        return default


def _iterator_state(obj):
    """Where an iterator of Python's or the standard library's stands: what its `__reduce__`
    gives (the list and the index of a list's iterator, the next number of `count()`, the
    iterators a `zip` takes from), or a generator's frame (the instruction it is paused at and
    its locals); None where that cannot be read (a file)."""
    frame = getattr(obj, "gi_frame", None)
    if isinstance(obj, types.GeneratorType):
        return ("generator",) if frame is None else (frame.f_lasti, *frame.f_locals.values())
    try:
        return obj.__reduce__()
    except Exception:  # noqa: BLE001 - "cannot pickle": an iterator whose state is hidden
        return None


def _flat(state) -> list:
    found, todo = [], [state]
    while todo:
        value = todo.pop()
        if type(value) in (tuple, list):
            todo.extend(value)
        else:
            found.append(value)
    return found


def _same_reduced(a, b) -> bool:
    """Whether two `_iterator_state`s are the same: the same objects, equal plain values."""
    if type(a) in (tuple, list) and type(b) is type(a):
        return len(a) == len(b) and all(_same_reduced(x, y) for x, y in zip(a, b))
    if type(a) in (int, float, str, bool, bytes, type(None)) and type(b) is type(a):
        return a == b
    return a is b


def _generator_state(obj):
    """The state of a random number generator (Python's or NumPy's), or None for anything else:
    drawing from one changes it, where no container shows a change."""
    if isinstance(obj, random.SystemRandom):
        return None  # the system's entropy: no state to read (nor to repeat)
    if isinstance(obj, random.Random):
        return obj.getstate()
    if isinstance(obj, np.random.Generator):
        return obj.bit_generator.state
    if isinstance(obj, np.random.RandomState):
        return obj.get_state(legacy=False)
    if obj is np.random:  # the legacy global generator behind np.random.rand()
        return np.random.get_state(legacy=False)
    return None


def _set_generator_state(obj, state) -> None:
    if isinstance(obj, random.Random):
        obj.setstate(state)
    elif isinstance(obj, np.random.Generator):
        obj.bit_generator.state = state
    elif isinstance(obj, np.random.RandomState):
        obj.set_state(state)
    elif obj is np.random:
        np.random.set_state(state)


# `random.random()` draws from the module's own Random instance, which its functions are
# bound methods of; `np.random.rand()` from the global RandomState, likewise. With the modules
# that reach them.
_GLOBAL_GENERATORS = (
    (
        random.random.__self__,
        (random,),
        "Python's global random generator (random.random() and the like)",
    ),
    (np.random, (np, np.random), "NumPy's global random generator (np.random.rand() and the like)"),
)
_GLOBAL_RANDOM_STATE = np.random.random.__self__


def _may_draw(fn: types.FunctionType, names, generator, modules) -> bool:
    """Whether `fn` names one of `modules` (`np` reaches `np.random` by attribute), or a method
    bound to `generator` (`from random import gauss`), among the globals its code uses (None:
    code that reads names it cannot tell: all of them)."""
    namespace = fn.__globals__
    target = _GLOBAL_RANDOM_STATE if generator is np.random else generator
    values = [namespace.get(name) for name in (namespace if names is None else names)]
    return any(
        any(value is m for m in modules) or _bound_to(value, target)
        for value in values + _cell_values(fn)
    )


def _bound_to(value, owner) -> bool:
    """Whether `value` is a method bound to `owner`. Only a method's `__self__` is read: another
    object's attribute lookup may run the user's `__getattr__`, which may change state (or
    raise)."""
    methods = (types.MethodType, types.BuiltinMethodType)
    return isinstance(value, methods) and value.__self__ is owner


def _cell_values(fn: types.FunctionType) -> list:
    values = []
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    return values


def _same_state(a, b) -> bool:
    """`a == b` for generator states: tuples, dicts and NumPy arrays of numbers."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, (tuple, list)):
        if type(a) is not type(b) or len(a) != len(b):
            return False
        if type(a) is tuple and all(type(x) is not np.ndarray for x in a):
            return a == b  # Python's generator: (3, (625 ints), None), compared in C
        nested = (np.ndarray, tuple, list, dict)
        return all(_same_state(x, y) if isinstance(x, nested) else x == y for x, y in zip(a, b))
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
        )
    return a == b


def _is_user(value) -> bool:
    """Whether `value` (a function or a class) is user code: not JAX's, NumPy's or ours."""
    module = getattr(value, "__module__", None) or ""
    return module.split(".")[0] not in _LIBRARIES


_BRANCHING = frozenset({"if statement", "conditional expression"})


class Effects:
    """The Python state a staged statement changes while its functions are traced.

    `run` stages the statement (`stage(state, names, wrap)`, which calls `lax` with functions
    made by `wrap`); if tracing changes Python state, the changed places join the state it
    carries and the statement is staged again. Afterwards each place holds its final value.
    """

    def __init__(self, functions, site, aliased=(), stores=(), reads=None, owned=(), unread=()):
        self.functions = [f for f in functions if isinstance(f, types.FunctionType)]
        self.site = site
        # A loop's variables that an iteration may read before binding them (as the one before
        # left them); None: any may be.
        self.reads = None if reads is None else frozenset(reads)
        # The variables a statement takes and does not read (an `if`'s: its branches give
        # them back, or bind them first); those a loop does not read before binding them.
        self.unread = frozenset(unread)
        # A loop's variables whose containers no other name can see (`ownership.owned_names`).
        self.owned = frozenset(owned)
        # Statements of the block that store a list or dict the function changes in place
        # after it into another container (`record["best"] = params`): refused when staged.
        self.stores = tuple(stores)
        # A loop's: the variables whose lists and dicts other names may reach and change in
        # place (see `_check_not_bound_outside`).
        self.aliased = frozenset(aliased)
        self.carried: list[Change] = []
        self.names: tuple[str, ...] = ()
        # The statement's state as it entered, and per output the dicts' key orders the traced
        # functions gave it (`staging.key_orders` -> a value with them): `lax` gives back dicts
        # with their keys sorted, where Python keeps the order they were inserted in.
        self._entered: tuple = ()
        self._orders: dict[int, dict] = {}
        # A loop's variables and carried places an iteration binds to a container from outside
        # its state (not `aliased`): {output index: the containers} (see
        # `_check_not_bound_outside`).
        self._bound_outside: dict[int, list] = {}
        # A loop's: (output, path, output, path) of each list or dict an iteration leaves at
        # two places, one of them an output itself (see `_record_shared`).
        self._shared: set[tuple] = set()
        # Per traced path (a branch, the body) that changed Python state: the variables it
        # leaves holding the container they were given, and the ids of the changed containers.
        self._paths: list[tuple[set[int], set[int]]] = []
        # Per traced path, the order it created the places it creates in (see `wrap`).
        self._creation_orders: set[tuple] = set()

    def run(self, state, names, stage):
        """Stages the statement; returns its outputs (`names` name them)."""
        entered = dict(zip(names, state))
        for store, stored in self.stores:
            if not _holds_containers(self.functions, stored, entered):
                continue  # an array's store (`record["loss"] = loss`), a number's
            raise StagingError(
                f"`{store}` stores '{stored}' in another container in the staged "
                f"{self.site.construct} ({self.site}), and the function changes '{stored}' in "
                f"place after it: Python's container then holds the changed object, the staged "
                f"one a copy of it as it was. Store a copy there (`copy.deepcopy({stored})`), "
                f"or store it outside the {self.site.construct}."
            )
        since = identity.mark()
        if self.site.construct not in _BRANCHING:  # a loop
            token = _LOOP_ALIASED.set(self.aliased)
            try:
                out = self._run(state, names, stage)
            finally:
                _LOOP_ALIASED.reset(token)
        else:
            out = self._run(state, names, stage)
        # The statement has put its changes in place: its variables' objects, and its places'.
        labels = (*names, *(change.label for change in self.carried))
        identity.settle(since, labels, (*out, *(change.get() for change in self.carried)))
        return out

    def _run(self, state, names, stage):
        n = len(names)
        loop = self.site.construct not in _BRANCHING
        self.names = names
        while True:
            extended = (*state, *(_entering(change) for change in self.carried))
            labels = (*names, *(change.label for change in self.carried))
            self._check_places_apart(extended[len(state) :])
            self._entered, self._orders, self._bound_outside = extended, {}, {}
            self._shared = set()
            self._paths, self._creation_orders = [], set()
            try:
                with identity.loop_runs() as runs, lists_.probes_rewound(state):
                    out = stage(extended, labels, self.wrap)
            except NewEffects as e:
                self._add(e.changes)
                continue
            may_skip = loop and not runs  # a loop that may run no iteration
            self._check_copies(out[:n], state)
            out = self._in_key_order(out, extended, labels, len(state))
            for index, (value, before) in enumerate(zip(out, extended)):
                bound = index in self._bound_outside
                watched = [*self._bound_outside[index], value] if bound else []
                entered = None
                if may_skip and identity.is_container(before) and value is not before:
                    watched.append(before)  # Python's, where the loop runs no iteration
                    if not bound and (
                        index >= n
                        or names[index] not in self.owned
                        # Owned, but a list inside the one it entered with is another's too
                        # (`h = s["h"]`): a change through the new one is Python's of it.
                        or identity.inner_held(before)
                    ):
                        # A change through the new object is Python's change of it (`BOX.vals`
                        # rebound in the loop, `BOX.step(x)` after), which other names may see.
                        watched.append(value)
                        entered = before
                elif (
                    may_skip
                    and isinstance(before, (tuple, dict))
                    and value is not before
                    and not _holds_the_same(value, before)
                ):
                    # A tuple (a namedtuple, an OrderedDict) holding lists or dicts: theirs, as
                    # Python's variable holds them on either path, with no exemption.
                    watched += identity.containers_held(before)
                    watched += (
                        identity.containers_held(value) if type(value) is type(before) else []
                    )
                if watched:
                    how = "bound" if bound else "entered"
                    label = f"'{names[index]}'" if index < n else labels[index]
                    identity.detached(label, self.site, value, watched, how=how, entered=entered)
            for i, path_i, j, path_j in self._shared:
                a, b = _at(out[i], path_i), _at(out[j], path_j)
                if a is not b and identity.is_container(a) and type(b) is type(a):
                    label = f"'{names[i]}'" if i < n else labels[i]
                    identity.detached(label, self.site, a, [a, b], how="bound")
            for change, value in zip(self.carried, out[n:]):
                change.set(value)
            return out[:n]

    def _check_not_held_apart(self, given: dict, holders: list) -> None:
        """Refuses a list or dict that two of the statement's variables and places hold as it
        begins (`ref = sto["v"]`, and the place `sto["v"]`), which the trace changed through
        one of them (`ref[1] += 1`, or a method given it): each was given a copy of its own,
        and the change went to one copy only; and one that holds a carried place while a
        variable holds it (`b = a`, `a[0] = x` in the block): the variable's copy does not
        show the place. (`holders`: the variables' names, then the carried places.)"""
        for holder in holders:
            copies = given.get(id(holder.container)) if isinstance(holder, Change) else None
            if copies:
                copies = [c for c in copies if not self._unread(holders[c[2]])]
            if copies:  # `b = a`, then `a[0] = x` where `b` is the block's and `a` is not
                kind = type(copies[0][0]).__name__  # (an object's, not its `__dict__`'s)
                variable = _holder(holders[copies[0][2]])
                raise StagingError(
                    f"{variable} holds the {kind} that {holder.label} is "
                    f"in as the staged {self.site.construct} ({self.site}) begins, and it "
                    f"changes {holder.label}: it gives {variable} a copy "
                    "of its own, which would not show the change, as it does in Python. "
                    f"Change the {kind} through one name only, or give one of them a copy "
                    "(copy.deepcopy)."
                )
        for copies in given.values():
            if len(copies) < 2 or all(isinstance(holders[c[2]], str) for c in copies):
                continue  # (variables alone: see `control_flow._identities`, `Carry`)
            changed = [c for c in copies if identity.changed_since(c[0], c[1])]
            if not changed:
                continue
            first = changed[0]
            second = next(c for c in copies if c is not first)
            one, other = (_holder(holders[c[2]]) for c in (first, second))
            kind = type(first[0]).__name__
            raise StagingError(
                f"{one} and {other} hold one {kind} as the staged {self.site.construct} "
                f"({self.site}) begins, and it changes the {kind} through {one} (or a call "
                f"given it): it gives each its own copy, so the change would not show through "
                f"{other}, as it does in Python. Change the {kind} through one name only, or "
                "give one of them a copy (copy.deepcopy)."
            )

    def _check_place_changes_kept(self, place_copies: list, outputs) -> None:
        """Refuses a list or dict that a carried place held as the trace began, which the trace
        changed (through the place: `best["p"][0][0] += x`) and then let go of (`best["p"][0] =
        5.0`): Python changed the object itself, which other names may hold, and the staged
        statement gives back only what its outputs hold; a copy it dropped takes its change
        with it."""
        if not place_copies:
            return
        reached = set().union(*(identity.containers_within(v) for v in outputs))
        for change, copy_, before in place_copies:
            if id(copy_) in reached or not identity.changed_since(copy_, before):
                continue
            kind = type(copy_).__name__
            raise StagingError(
                f"{change.label} holds a {kind} as the staged {self.site.construct} "
                f"({self.site}) begins, which a path changes in place (or a {kind} inside it) "
                f"and then lets go of (binds {change.label} to another value): Python's {kind}, "
                "which other names may hold, keeps the change, and the staged program can give "
                f"it back only where it stays. Change it where it stays, or bind a copy first "
                f"({change.label} = copy.deepcopy({change.label})) and change that."
            )

    def _unread(self, holder) -> bool:
        """Whether `holder` is a variable the statement takes without reading it (see
        `unread`; a loop's, from `reads`: its variables it does not read before binding)."""
        if not isinstance(holder, str):
            return False
        if holder in self.unread:
            return True
        return self.reads is not None and holder in self.names and holder not in self.reads

    def _check_places_apart(self, values) -> None:
        """Refuses a carried place whose value holds the list or dict of another carried place
        (`sto["v"]` holding the list whose item `sto["v"][1]` is: one path changes the item,
        another rebinds `sto["v"]`): each is carried as arrays of its own, so a change made
        through one would not show through the other, as in Python it does."""
        places = {id(change.container): change for change in self.carried}
        for change, value in zip(self.carried, values):
            inside = identity.containers_within(value) if identity.is_container(value) else ()
            other = next((places[i] for i in inside if places.get(i, change) is not change), None)
            if other is None:
                continue
            kind = type(other.container).__name__
            raise StagingError(
                f"{change.label} holds the {kind} that {other.label} is in, and the staged "
                f"{self.site.construct} ({self.site}) changes both (one may rebind "
                f"{change.label}, another change the {kind} in place): it carries each as "
                f"values of its own, so a change through one would not show through the "
                f"other, as it does in Python. Change the {kind} through one name only, or "
                f"store a copy ({change.label} = copy.deepcopy(...))."
            )

    def _check_copies(self, out, state) -> None:
        """Refuses a variable that held a list or dict whose items the statement changes
        through another name or a call (a carried place: `opt.update(params)` with `best =
        params`), on a path that leaves the variable holding it, where the statement leaves
        the variable holding a new object (another path rebinds it): the staged statement's
        variable was given a copy, which does not show the change, where Python's shows it
        on that path. (Where every path keeps it, the object itself is given back, changed.)"""
        if not self.carried:
            return
        for index, (name, value, before) in enumerate(zip(self.names, out, state)):
            if not identity.is_container(before) or value is before:
                continue
            inside = identity.containers_within(before)
            shown = {
                container
                for kept, changed in self._paths
                if index in kept
                for container in changed & inside
            }
            change = next((c for c in self.carried if id(c.container) in shown), None)
            if change is None:
                continue
            kind = type(before).__name__
            raise StagingError(
                f"{change.label} is changed in place in the staged {self.site.construct} "
                f"({self.site}), through another name or by a call, and '{name}' holds that "
                f"{kind} (or one inside it) as the {self.site.construct} begins but a new "
                f"{kind} after it on some path: Python's '{name}' shows the change where it "
                f"keeps the {kind}, the staged one is a copy that does not. Copy it first "
                f"({name} = copy.deepcopy({name})), or change it through '{name}'."
            )

    def _in_key_order(self, out, entered, labels, n_state: int) -> tuple:
        """The outputs with their dicts' keys in the order Python gives them: the one every
        traced path (a branch, the body) gave, and, for a loop, the one they entered with
        (what zero iterations leave). Paths that disagree are refused, but where one of them
        leaves the dict as it entered: a dict JAX made, sorted, as it handed the program its
        arguments (`jax.jit(f)(params)`), comes out sorted, as `lax` gives it."""
        loop = self.site.construct not in _BRANCHING
        n = len(out) - (len(entered) - n_state)
        # The value each output had as the statement began (None: a conditional expression's).
        before = (*entered[:n_state], *[None] * (n - n_state), *entered[n_state:])
        out = list(out)
        for i, value in enumerate(out):
            orders = dict(self._orders.get(i, {}))
            entered_order = staging.key_orders(before[i]) if i < len(before) else None
            if loop and entered_order is not None:
                orders.setdefault(entered_order, before[i])
            if len(orders) > 1:
                if (
                    entered_order in orders
                    and _sorted_keys(entered_order)
                    and staging.made_by_jax(before[i])
                ):
                    continue  # sorted, as `lax` gives it
                shown = " and ".join(str(list(o[1])) for o in list(orders)[:2])
                raise StagingError(
                    f"{labels[i]!r} is a dict whose keys come in different orders on different "
                    f"paths of the staged {self.site.construct} ({self.site}): {shown} (or those "
                    "of a dict inside it). Python keeps a dict's keys in the order they were "
                    "inserted, which would depend on the condition or the number of "
                    "iterations. Insert the keys in one order on every path."
                )
            if orders:
                out[i] = staging.in_key_order(value, next(iter(orders.values())))
        return tuple(out)

    def _add(self, changes: list[Change]) -> None:
        known = {c.key for c in self.carried}
        places = {(c.label, c.kind, c.key[1:]) for c in self.carried}
        for change in changes:
            if change.key in known:
                continue
            if (change.label, change.kind, change.key[1:]) in places:
                # The same place of another object each trace: an object the statement's own
                # variables hold, which each trace gets a copy of, changed in place and not
                # given back. Carried, the next trace would change its own copy: never settles.
                if type(change.container).__module__.split(".")[0] == "equinox":
                    note = (
                        " (An `equinox.nn.State`'s `.set` marks the state it is called on as "
                        "used so: call it outside the staged statement.)"
                    )
                elif self.site.construct not in _BRANCHING:  # `for layer in layers`
                    note = (
                        " (So is a method's count of its calls, `self.calls += 1`, on an "
                        "object the loop takes from a list, where a traced `break` decides "
                        "whether the call runs: count in a variable of the function instead, "
                        "`n_calls += 1`, which the staged loop carries.)"
                    )
                else:
                    note = ""
                raise StagingError(
                    f"{change.describe()} in place on a copy the staged {self.site.construct} "
                    f"({self.site}) makes of an object its variables hold, which the "
                    "statement does not give back in a variable: where Python changes the "
                    f"object itself, the staged code would lose the change.{note} Give the "
                    "changed object back, or build a new one instead of changing it."
                )
            # A place an `if`'s branch creates (`stats["lr"] = lr`) is carried as created: every
            # branch must create it (see `wrap`); a loop's would not exist after no iteration.
            created = change.creation and self.site.construct in _BRANCHING
            if created:
                change.shape = staging.shapes_of(staging.as_arrays(change.after))
            elif not change.carryable:
                fix = "Return the value instead, or keep the Python object out of the staged code."
                if change.kind == "resize" and type(change.container) is list:
                    fix = (
                        "A list other code can reach (a parameter, an attribute, an item of a "
                        "dict or list, another name) is appended to for real: build a local "
                        "list (out = []; out.append(v)) and put it in place after the "
                        "statement (history['loss'] = out), or return it."
                    )
                raise StagingError(
                    f"{change.describe()} while the {self.site.construct} is traced "
                    f"({self.site}), but the traced code stands for every run of it, in any "
                    "branch, so the change cannot be made. Only arrays (and numbers, and "
                    "tuples, lists and dicts of them) can change in a staged branch or loop, "
                    f"and only where they already have a value of the same structure. {fix}"
                )
            self.carried.append(change)
            known.add(change.key)

    def _parameter_names(self, n: int) -> list[str]:
        """What the user calls the `n` arguments of a traced function (a loop's item, the
        statement's inputs): the generated functions' parameters."""
        for function in self.functions:
            code = function.__code__
            if code.co_argcount == n:
                names = list(code.co_varnames[:n])
                # A global's or a closure's variable is the parameter `G_1` (`global G; G =
                # G_1`): the user's name for it.
                k = min(n, len(self.names))  # the statement's variables: the last k
                for i, name in zip(range(n - k, n), self.names[len(self.names) - k :]):
                    if re.fullmatch(rf"{re.escape(name)}_\d+", names[i]):
                        names[i] = name
                return names
        return [*["an item"] * (n - len(self.names)), *self.names][-n:] if n else []

    def wrap(self, fn, leading: int = 0, returns_state: bool = True):
        """`fn`, taking and giving the carried places' values after the statement's state."""
        carried = list(self.carried)

        def wrapped(*args):
            n = len(args) - len(carried)
            # The state as `lax` gives it, its dicts in the order they entered the statement.
            n_state = len(self._entered) - len(carried)
            entered = (*self._entered[: min(n_state, n - leading)], *self._entered[n_state:])
            n_args = n - leading
            for i, (arg, before) in enumerate(zip((*args[leading:n], *args[n:]), entered)):
                # Where the state had no dict before (bound first by the body), the order
                # the body gave it (its outputs: the state, then the carried places).
                output = i if i < n_args else len(self.names) + i - n_args
                made = self._orders.get(output, {})
                if staging.key_orders(before) is None and made:
                    before = next(iter(made.values()))
                staging.in_key_order(arg, before)
            snapshot = Snapshot()
            for function in self.functions:
                snapshot.add_function(function)
            # The item of a loop, and what the state holds (its containers are fresh copies:
            # only their contents count).
            names = self._parameter_names(n)
            for name, value in zip(names, args[:n]):
                snapshot.skip(value)
                leaves = jax.tree_util.tree_leaves(value)
                for leaf in leaves:
                    if len(leaves) > 1 and callable(leaf) and not staging.is_array_leaf(leaf):
                        # A function held in a model (its activation): library functions
                        # keep caches of their own, which are not the user's effects.
                        continue
                    snapshot.add(name, leaf)
            out = None  # (None: the trace raised)
            values, originals = (), {}
            # The lists and dicts the statement entered with (in its state and places), each
            # with the copies this trace is given (see `_check_not_held_apart`).
            given = _given_copies(entered, (*args[leading:n], *args[n:])) if carried else {}
            # The copies of the lists and dicts the carried places held, with what they held.
            place_copies = _place_copies(carried, self._entered[n_state:], args[n:])
            try:
                with staging.tracking(snapshot):
                    for change, value in zip(carried, args[n:]):
                        if not change.creation:  # (a created place starts absent)
                            change.set(value)
                    out = fn(*args[:n])
                    values = tuple(self._created(change) for change in carried)
                    self._check_creation_order(carried)
                    self._check_not_held_apart(given, [*names[leading:], *carried])
                    if returns_state:
                        self._check_place_changes_kept(place_copies, (*out, *values))
            finally:
                changes = snapshot.changes()
                if returns_state and isinstance(out, tuple):
                    # The places' values too: a place left holding a container the trace
                    # changed (`store["v"] = acc.vals` before `acc.add(x)`) is about to be put
                    # back, as the container is.
                    out, values = _detached(out, changes), _detached(values, changes)
                    originals = {**_originals(out), **_originals(values)}
                    self._check_not_bound_outside(
                        (*out, *values), (*args[leading:n], *args[n:]), originals, snapshot
                    )
                    self._record_shared((*out, *values))
                    if changes:
                        kept = _kept(out, args[leading:n])
                        self._paths.append((kept, {id(c.container) for c in changes}))
                for change in changes:
                    change.restore()
            known = {c.key for c in carried}
            new = [c for c in changes if c.key not in known]
            if returns_state:
                # The cell of one of the statement's own variables that a nested function
                # reads (`lambda: s`), which generated code sets in the branch or body
                # (`nonlocal s; s = s_1; s = x * 2`) and returns, where it held no array
                # before (unbound, None): the statement's outputs set it afterwards, and it
                # cannot be carried. (A cell that held an array is carried: a closure the
                # loop's test calls then reads the body's value of it.)
                state = frozenset(self.names)
                new = [
                    c
                    for c in new
                    if not (c.kind == "cell" and c.label in state and not c.carryable)
                ]
            else:
                # A closure's cell or a module global of a state variable, which generated
                # code sets to the function's own value of it (`nonlocal c; c = c_2`, `global
                # COUNT; COUNT = COUNT_1`): not a change of its own.
                own = dict(zip(self.names[-n:], args[:n])) if n else {}
                changed = [
                    c
                    for c, v, a in zip(carried, values, args[n:])
                    if v is not a and own.get(self._state_name(c), a) is not v
                ]
                self._check_unchanged(new, changed)
            if new:
                raise NewEffects(new)
            if not returns_state:
                return out
            self._check_not_held_across(out, values, carried, changes, originals)
            for i, value in enumerate((*out, *values)):
                order = staging.key_orders(value)
                orders = self._orders.setdefault(i, {}) if order is not None else {}
                if order is not None and order not in orders:
                    # A copy (the same keys, in order): a reference to the value itself would
                    # count as another name's (`control_flow._origins` counts them).
                    orders[order] = staging.fresh(value)
            if originals:
                result = Detached((*out, *values))
                result.originals = originals
                return result
            return (*out, *values)

        # A branch that gives back the state as it is (`control_flow.keeping_state`) gives back
        # the carried places' values as it is given them too; not a created place's (traced,
        # it finds the place not created).
        creates = any(change.creation for change in carried)
        wrapped.keeps_state = getattr(fn, "keeps_state", False) and not creates
        return wrapped

    def _check_creation_order(self, carried: list[Change]) -> None:
        """Refuses places created in one order on one path and in another on another: Python's
        dict (an object's attributes, a module's globals) keeps its keys in the order they
        were inserted, which would depend on the path taken."""
        created = [c for c in carried if c.creation]
        if not created:
            return
        labels = {(id(c.container), c.key[2]): c.label for c in created}
        # (the slots of an object keep their order whatever is assigned first)
        containers = {
            id(c.container): c.container for c in created if isinstance(c.container, (dict, type))
        }
        order = tuple(
            (cid, k)
            for cid, container in containers.items()
            for k in (vars(container) if isinstance(container, type) else container)
            if (cid, k) in labels
        )
        self._creation_orders.add(order)
        if len(self._creation_orders) > 1:
            shown = " and ".join(
                "[" + ", ".join(labels[k] for k in o) + "]" for o in list(self._creation_orders)[:2]
            )
            raise StagingError(
                f"{shown}: these are created in different orders on different paths of the "
                f"staged {self.site.construct} ({self.site}). Python keeps a dict's keys in "
                "the order they were inserted, which would depend on the condition. Create "
                "them in one order on every path."
            )

    def _created(self, change: Change):
        """The value of a carried place after a branch; StagingError where the place is one the
        other branch creates and this one does not."""
        if not change.creation:
            return change.get()
        container, key = change.container, change.key[2]
        if change.kind == "attribute" and not isinstance(container, type):  # a slot's
            present = _plain_attribute(container, key, _ABSENT) is not _ABSENT
        else:  # a dict's key, a class's own attribute (not inherited)
            present = key in (vars(container) if change.kind == "attribute" else container)
        if not present:
            raise StagingError(
                f"{change.label} is created on some paths of the staged {self.site.construct} "
                f"({self.site}) only: Python's has it only where such a path runs, which the "
                f"program decides when it runs. Give {change.label} a value before the "
                f"{self.site.construct}, or on every path."
            )
        return change.get()

    def _state_name(self, change: Change) -> str | None:
        """The state variable whose place `change` is, where generated code keeps the two in
        step: a closure cell (the variable's own), or a module global of the statement's
        functions (a `global` declaration); else None."""
        if change.kind == "cell":
            return change.label
        globals_ = {id(f.__globals__) for f in self.functions}
        if change.kind == "item" and change.key[0] in globals_:
            return change.key[2]
        return None

    def _check_unchanged(self, new: list[Change], changed: list[Change]) -> None:
        """Raises StagingError if a function that gives no state back (a loop's test) changed
        Python state: the staged loop evaluates it where the change cannot be made."""
        if not new and not changed:
            return
        label = new[0].describe() if new else f"{changed[0].label} is changed"
        raise StagingError(
            f"{label} by the test of the {self.site.construct} ({self.site}), which is staged: "
            "the staged loop evaluates its test where Python state cannot change (once more "
            "than the body runs, and not in step with it). Make the change in the loop body "
            "and let the test only read values."
        )

    def _check_not_held_across(
        self, out, values, carried, changes: list[Change], originals: dict
    ) -> None:
        """Refuses a loop body that leaves a variable or a carried place holding a list or dict
        (or one inside it) that the body changes in place through another name or a call
        (`v = acc.vals` with `acc.add(x)` in the body; `_detached` copied it): in Python the
        next iteration sees those changes through it; the staged loop carries it as a copy of
        its own. (A variable each iteration binds before reading it, `self.reads`, holds what
        Python's holds as the loop ends; after it, `identity.detached` follows it.)
        `originals`: the copies `_detached` made, with the containers they copy."""
        if self.site.construct in _BRANCHING or not originals:
            return
        read = [self.reads is None or name in self.reads for name in self.names]
        for label, value in (
            *((f"'{name}'", v) for name, v, r in zip(self.names, out, read) if r),
            *((change.label, v) for change, v in zip(carried, values)),
        ):
            pair = originals.get(id(value))
            if pair is None or pair[0] is not value:
                continue
            inside = identity.containers_within(pair[1])
            change = next((c for c in changes if id(c.container) in inside), None)
            if change is None:
                continue
            kind = type(change.container).__name__
            raise StagingError(
                f"{label} holds a {kind} at the end of an iteration of the staged "
                f"{self.site.construct} ({self.site}) that the loop also changes in place "
                f"({change.label}), through another name or by a call: in Python the next "
                f"iteration sees those changes through {label}; the staged loop carries {label} "
                f"as a copy, which does not. Store a copy (copy.deepcopy(...)), or change the "
                f"{kind} through {label} only."
            )

    def _record_shared(self, outputs) -> None:
        """Records each list or dict a loop's iteration leaves as one of its outputs (a
        variable, a carried place) and at another place of them (`keep = st["h"]` after `st =
        {"h": [x]}`): Python's names hold one object after the loop, the staged loop carries
        two, which a change after the loop tells apart (watched, see `_run`). (Two places inside
        outputs are refused by the carry: `carry._check_no_shared_items`.)"""
        if not self.site.construct.endswith("loop"):
            return
        seen: dict[int, tuple] = {}
        for index in range(len(outputs)):
            stack = [(outputs[index], ())]
            while stack:
                value, path = stack.pop()
                if identity.is_container(value):
                    first = seen.setdefault(id(value), (index, path))
                    if first != (index, path) and (not path or not first[1]):
                        self._shared.add((*first, index, path))
                if type(value) in (list, tuple):
                    stack += [(item, (*path, k)) for k, item in enumerate(value)]
                elif type(value) is dict:
                    stack += [(item, (*path, k)) for k, item in value.items()]

    def _check_not_bound_outside(self, outputs, given, originals: dict, snapshot) -> None:
        """Where a loop body binds a variable or a carried place (`outputs`: the variables',
        then the places'; `given`: what the iteration was given) to a list or dict reached from
        outside the loop's state (`b = p`, `p` a variable the loop does not rebind, or a
        container the loop changes in place, which `_detached` copied): Python's variable is
        that very object after the loop (if it ran), and a later change through one name shows
        through the other; the staged loop's is a copy. Refused where the function may change
        such a container in place after the loop (`aliased`; a place's stores are `stores`);
        elsewhere recorded, for the changes conversion cannot see (`identity.detached`).
        `originals`: the copies `_detached` made, with the containers they copy."""
        if not self.site.construct.endswith("loop"):
            return
        for index, (value, before) in enumerate(zip(outputs, given)):
            name = self.names[index] if index < len(self.names) else None
            pair = originals.get(id(value))
            if pair is not None and pair[0] is value:
                value = pair[1]
            if not identity.is_container(value) or value is before:
                continue
            kind = type(value).__name__
            made = pair is None and not snapshot.reaches(value)  # by the body
            items = identity.containers_held(value) if made else ()
            shared = [i for i in items if snapshot.reaches(i)]
            if name not in self.aliased:
                # Exact while nothing changes them in place: calls conversion cannot follow may
                # (recorded once the loop is staged, with what the variable holds after it).
                if shared or not made:  # (a container the body made, of its own: exact)
                    self._bound_outside[index] = shared if made else [value]
                continue
            if made:
                if not shared:
                    continue
                held = type(shared[0]).__name__
                raise StagingError(
                    f"'{name}' is bound to a new {kind} holding a {held} another name holds "
                    f"too, in an iteration of the staged {self.site.construct} ({self.site}), "
                    f"and the function may change that {held} in place after the loop: in "
                    f"Python the change shows through '{name}' once the loop ran; the staged "
                    f"loop's '{name}' holds a copy. Copy every level ({name} = "
                    "copy.deepcopy(other)), or replace the inner containers instead of changing "
                    "them."
                )
            raise StagingError(
                f"'{name}' is bound to a {kind} another name holds too, in an iteration of the "
                f"staged {self.site.construct} ({self.site}), and the function may change that "
                f"{kind} in place after the loop: in Python '{name}' is that very {kind} once "
                "the loop ran, and what the program changes through one name shows through "
                f"the other; the staged loop cannot follow which object '{name}' holds. Bind a "
                f"copy ({name} = {kind}(other)), or read the {kind} through the other name."
            )


def _holds_the_same(value, before) -> bool:
    """Whether tuple `value` holds the very lists and dicts `before` held, at the same places
    (a loop gave back `st = NT(w, b)` holding `w`: `carry.Carry` restores them)."""
    held = identity.tuple_containers(value)
    if not held:
        return False
    entered = identity.tuple_containers(before)
    return held.keys() == entered.keys() and all(held[p] is entered[p] for p in held)


def _at(value, path: tuple):
    """What `value` holds at `path` (keys and indices), or None where it holds nothing there."""
    for key in path:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _holds_containers(functions, path: str, entered: dict) -> bool:
    """Whether `path` (`"params"`, `"params[*]"`, `"d[*][*]"`, `"self.best"`), as the block
    enters with it (`entered`: its state variables' values) or as the functions read it (a
    closure variable or global), is or holds a list or dict (`[*]`: what a container holds);
    True where it cannot be read."""
    head, steps = _path_steps(path)
    if head in entered:
        value = entered[head]
        if isinstance(value, (lists_.StagedList, MaybeUnbound, Undefined)):
            return True  # not a value Python would hold as it is: refused as it was
        return _is_container(value, steps)
    for function in functions:
        code = function.__code__
        if head in code.co_freevars:
            cell = function.__closure__[code.co_freevars.index(head)]
            try:
                value = cell.cell_contents
            except ValueError:  # not bound yet
                continue
        elif head in function.__globals__ and head not in code.co_varnames:
            value = function.__globals__[head]
        else:
            continue
        return _is_container(value, steps)
    return True


def _path_steps(path: str) -> tuple[str, list[str]]:
    """The variable of an analysis path and its steps: attribute names, and `[*]`s."""
    head, _, rest = path.partition("[*]")
    name, *attributes = head.split(".")
    steps = list(attributes)
    if _ or rest:
        steps.append("[*]")
        while rest:
            step, _, rest = rest.partition("[*]")
            steps += [a for a in step.split(".") if a]
            if _:
                steps.append("[*]")
    return name, steps


def _is_container(value, steps: list[str]) -> bool:
    """Whether what `value` holds along `steps` (see `_path_steps`) is a list or dict."""
    values = [value]
    for step in steps:
        if step == "[*]":
            values = [
                item
                for v in values
                if type(v) in (list, dict, tuple)
                for item in (v.values() if type(v) is dict else v)
            ]
        else:
            values = [getattr(v, step, None) for v in values]
    return any(type(v) in (list, dict) for v in values)


# The `aliased` of the loop being staged: its masked iterations' `if`s refuse those variables
# coming out holding different lists or dicts (`b = p` in the body, kept where masked).
_LOOP_ALIASED: contextvars.ContextVar[frozenset] = contextvars.ContextVar(
    "loop_aliased", default=frozenset()
)


def loop_aliased() -> frozenset:
    """The `aliased` variables of the loop being staged (see `Effects`)."""
    return _LOOP_ALIASED.get()


class Detached(tuple):
    """A traced function's outputs, some of them copies (see `_detached`): `originals` maps
    the id of each copy to (the copy, the list or dict it copies), for the statement's check of
    which object a variable holds afterwards (`control_flow._origins`)."""

    originals: dict[int, tuple] = {}


def _detached(out, changes: list[Change]):
    """The outputs of a traced function, where one holds a list or dict that the function
    changed and that is about to be put back (`b = a` after `a[0] = 2 * x`, `a` reached from
    outside the statement's state): a copy of its containers, holding the values it has now."""
    changed = {id(change.container) for change in changes}
    if not changed:
        return out

    def reaches(value) -> bool:
        if id(value) in changed:
            return True
        if isinstance(value, (list, tuple)):
            return any(reaches(v) for v in value)
        if isinstance(value, dict):
            return any(reaches(v) for v in value.values())
        if identity.attribute_node(value):  # (its attributes are changed as its `__dict__`'s)
            held = identity.attributes(value).values()
            return id(getattr(value, "__dict__", None)) in changed or any(map(reaches, held))
        return False

    if not any(reaches(v) for v in out):
        return out
    copies = [staging.fresh(v) if reaches(v) else v for v in out]
    detached = Detached(copies)
    detached.originals = {
        id(new): (new, old)
        for new, old in zip(copies, out)
        if new is not old and identity.is_container(old)
    }
    return detached


def _kept(out, given) -> set[int]:
    """The indices of the outputs of a traced path that are the container it was given (or,
    where `_detached` copied them, were), or, on some path of a staged `if` inside it, stand
    for it (`identity.stands_for`)."""
    originals = _originals(out)
    kept = set()
    for index, (value, arg) in enumerate(zip(out, given)):
        pair = originals.get(id(value))
        if pair is not None and pair[0] is value:
            value = pair[1]
        if identity.is_container(arg) and (value is arg or identity.stands_for(value, arg)):
            kept.add(index)
    return kept


def _originals(out) -> dict:
    """The copies `_detached` made of a traced function's outputs, with what they copy."""
    return getattr(out, "originals", {})


def _holder(holder) -> str:
    """How a message names a variable (`'ref'`) or a carried place (`sto['v']`)."""
    return f"'{holder}'" if isinstance(holder, str) else holder.label


def _given_copies(originals, copies) -> dict[int, list]:
    """{id of a list or dict in `originals`: [(its copy in `copies`, what the copy holds now,
    the index of the variable or place), ...]}, through lists, dicts and tuples of the same
    structure."""
    found: dict[int, list] = {}
    for index, (original, copy_) in enumerate(zip(originals, copies)):
        for a, b in identity.container_pairs(original, copy_):
            if a is not b:  # (not a copy: nor is anything in it)
                entry = (b, identity.contents(b), index)
                found.setdefault(id(a), []).append(entry)
                if identity.attribute_node(a) and hasattr(a, "__dict__"):
                    # (An attribute set on it is followed as an item of its `__dict__`.)
                    found.setdefault(id(vars(a)), []).append(entry)
    return found


def _place_copies(carried: list[Change], originals, copies) -> list[tuple]:
    """(place, copy, what the copy holds now) of each list and dict copied from what a carried
    place held as the statement began (`Effects._check_place_changes_kept`)."""
    found = []
    for change, original, copy_ in zip(carried, originals, copies):
        if not identity.is_container(original) and not isinstance(original, tuple):
            continue
        for a, b in identity.container_pairs(original, copy_):
            if a is not b:
                found.append((change, b, identity.contents(b)))
    return found


def _sorted_keys(order) -> bool:
    """Whether every dict of a `staging.key_orders` value has its keys sorted."""
    if order is None:
        return True
    kind, keys, inner = order
    if kind == "dict":
        try:
            if list(keys) != sorted(keys):
                return False
        except TypeError:  # keys of kinds that do not compare
            return False
    return all(_sorted_keys(o) for o in inner)


class Watch:
    """What Python code did, run once as Python, that staging it from before would do again.

    A loop whose first iteration, run as Python, makes its state traced can start staged from
    before that iteration (see `runtime.peeling`), leaving the Python run dead; that is exact
    only if the run changed no Python state (it would stay changed, and the staged loop would
    change it again), made no effect of the program (a print or a check, which dead code still
    makes), called no library code that may make one unseen, and advanced no iterator. The
    watch records the state the code can reach before it runs (the roots, the functions' cells
    and globals, and those of every user function it calls) and, while it runs (under
    `staging.watching`), whether anything else happened.
    """

    def __init__(self, functions, roots):
        self.snapshot = Snapshot(limit=_WATCH_LIMIT)
        self.effects = False  # set by staging.made_effect
        self.made_effect = False  # one seen (a print, a check), not library code's maybe
        for function in functions:
            if isinstance(function, types.FunctionType):
                self.snapshot.add_function(function)
        for label, value in roots:
            self.snapshot.add(label, value)

    def clean(self, ignoring=frozenset()) -> bool:
        """Whether the code did nothing that running it again, staged, would repeat; changes
        to the containers `ignoring` (ids) aside."""
        return (
            not self.effects
            and not self.snapshot.opaque  # it might have advanced one of those
            and all(id(c.container) in ignoring for c in self.snapshot.changes())
        )


class EffectSeen:
    """A watch (see `staging.watching`) that records only whether the code made an effect of
    the program (a print, a check, a `jax.debug` call) or called code that may make one unseen
    (library code outside JAX, NumPy and the standard library): nothing of the Python state it
    reaches. A loop's exit test is traced under one: with an effect, it is not the loop's
    condition (`runtime.exits`)."""

    def __init__(self):
        self.effects = False  # set by staging.made_effect
        self.made_effect = False
        self.snapshot = _Unwatched()


class _Unwatched:
    """The Python state an `EffectSeen` follows: none."""

    opaque = ()

    def add(self, label: str, value) -> None:
        pass

    def add_function(self, fn) -> None:
        pass

    def made(self, obj) -> None:
        pass

    def reaches(self, obj) -> bool:
        return False


class StateBehindCall(StagingError):
    """A callable that converted code calls as it is, with state of its own the runtime cannot
    record or put back (a `functools.lru_cache`), changed Python state while a staged block was
    traced. Final: the statement is not staged another way (unrolled, traced again), as that
    would meet the callable's state as this tracing left it (a cache hit, where the first call
    made the change)."""


def call_with_state_of_its_own(fn, args, kwargs):
    """`fn(*args, **kwargs)` for a callable whose own state no snapshot records (an object of a
    user's module that is not a function: `functools.lru_cache` of a user function), while a
    staged block is traced: raises StateBehindCall if the call changed the Python state being
    watched (the snapshot puts that back; not the callable's own)."""
    trackers = staging.trackers()
    wrapped = getattr(fn, "__wrapped__", None)
    for snapshot in trackers:
        if isinstance(wrapped, types.FunctionType):
            snapshot.add_function(wrapped)
    before = [{c.key: c.after for c in snapshot.changes()} for snapshot in trackers]
    out = fn(*args, **kwargs)
    for snapshot, seen in zip(trackers, before):
        for change in snapshot.changes():
            if change.key in seen and _same(seen[change.key], change.after):
                continue
            name = getattr(fn, "__qualname__", None) or type(fn).__name__
            where = errors.calling_line()
            raise StateBehindCall(
                f"{change.describe()} by a call of {name} ({type(fn).__name__}"
                f"{', ' + where if where else ''}) while staged code is traced. The call cannot "
                "be staged: the change depends on the run, and "
                f"{name} keeps state of its own (a cache) that tracing changes and that cannot "
                "be put back. Call it outside the staged if or loop, or drop the cache."
            )
    return out


def called_as_is(known: bool, makes_effects: bool) -> None:
    """Converted code calls a function as it is (not converted) while code is watched: one that
    `makes_effects` of the program (`jax.debug.print`, `io_callback`, checkify's checks), or one
    whose effects are not `known` (not JAX's, NumPy's, the standard library's or a user class:
    an installed package's, a user function left unconverted), makes the watched code unfit to
    run again (see `Watch`)."""
    if makes_effects or not known:
        staging.made_effect(unseen=not makes_effects)


def check_consumed(iterator, what: str, *, is_iterator: bool = False) -> None:
    """Raises StagingError if `iterator`, reachable before the staged block being traced now,
    is advanced in it: tracing would advance it once, for every run and any branch.
    (`is_iterator`: it is one, though `iter()` refuses it: one of traced length.)"""
    if not is_iterator and iter(iterator) is not iterator:
        return  # a list, a range...: iterating it changes nothing
    for watch in staging.watches():
        if watch.snapshot.reaches(iterator):
            watch.effects = True  # running the code again would advance it again
    for snapshot in staging.trackers():
        if snapshot.reaches(iterator):
            raise StagingError(
                f"{what} advances a Python iterator ({_type_name(iterator)}) in staged code "
                f"({errors.Site(what)}: a branch or loop body under a traced condition, an "
                "operand of `and`/`or` after a traced one), where tracing would advance it once "
                "for every run of the code and whichever branch runs. Take the items out of it "
                "before (`items = list(it)`), or keep the iterator out of staged code."
            )


def _type_name(iterator) -> str:
    """What Python calls the type of `iterator`: the runtime's iterators say (`enumerate`)."""
    return getattr(iterator, "type_name", None) or type(iterator).__name__


def made(obj) -> None:
    """Converted code made `obj` (called a user class) while blocks are traced or code is
    watched: it is theirs (see `Snapshot.made`)."""
    for snapshot in (*staging.trackers(), *(watch.snapshot for watch in staging.watches())):
        snapshot.made(obj)


def called(fn) -> None:
    """Converted code calls `fn` (a user function or method): the blocks being traced now must
    also watch what it can reach, before it runs (and so must the code run as Python under a
    `Watch`)."""
    for snapshot in (*staging.trackers(), *(watch.snapshot for watch in staging.watches())):
        target = fn
        if isinstance(target, functools.partial):
            snapshot.add("a partial's arguments", target)
            target = target.func
        if isinstance(target, types.MethodType):
            snapshot.add("self", target.__self__)
            target = target.__func__
        if isinstance(target, types.FunctionType):
            snapshot.add_function(target)
