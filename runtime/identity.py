"""Lists and dicts that staged state hands back as new objects, given back their identity.

A staged branch or loop carries a list or dict as the arrays in it, and hands back a new object
built from them. Where Python's variable still holds the object it held before (both branches,
every iteration leave it there), the object is updated in place and handed back instead, so
other names that reach it see the change, as in Python.

Where the branches leave it holding different objects (`best = params` on one path only), the
staged variable is a new object that stands for either, which is exact only while nothing
changes them in place. Conversion refuses the changes it can see (`transpiler.analysis.
ownership`); the rest, made by a call it cannot follow (a method of an object,
`opt.update(params)`; a function kept in a container) or through a name it cannot link to the
container (`first = operator.itemgetter(0)(layers)`), are caught here: the detached objects are
recorded (`detached`) until the converted call being traced returns, what they hold is taken
when the statement ends (`settle`), and a call made from converted code that changes one of
them in place (`held`, `check_unchanged`), or any change found as a converted call returns
(`stop_recording`) or as a staged statement ends, of the objects of a variable that lived in it
(`settle`: a branch's, read before it went), is refused.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import sys

import jax

from runtime.errors import Site, StagingError
from runtime.variables import MaybeUnbound


def changed(copy_, original) -> bool:
    """Whether the branch changed `copy_`, a copy of `original` (its nested containers too)."""
    return changed_since(copy_, contents(original))


def contents(value) -> tuple:
    """What `value` holds now, to compare with later (`changed_since`)."""
    return jax.tree_util.tree_flatten(value)


def changed_since(value, before: tuple) -> bool:
    """Whether `value` holds other objects, or a different structure, than `before`."""
    leaves, tree = jax.tree_util.tree_flatten(value)
    return tree != before[1] or any(a is not b for a, b in zip(leaves, before[0]))


def is_container(value) -> bool:
    """Whether `value` is an object staged state copies that the program may change in place:
    a list, a dict, or an object of the user's registered pytree class that holds its children
    as attributes it can set (`attribute_node`)."""
    return type(value) in (list, dict) or attribute_node(value)


# Libraries whose registered pytree classes keep their own state (Flax NNX's graph, the
# runtime's own lists and markers): staged state does not give those their identity back.
_LIBRARY_NODES = frozenset({"runtime", "jax", "jaxlib", "flax", "equinox", "optax"})


def owning(owned, names, values) -> frozenset:
    """`owned` (the names conversion found own their objects: bound only to new ones, never
    handed on) less those whose value (of `values`, named by `names`) is an attribute node
    holding lists, dicts or attribute nodes: conversion follows what a list or dict a name
    owns holds (`best[*]`), not the attributes of an object (`h = Holder(p)`: `h.items` is
    `p`'s list)."""
    if not owned:
        return frozenset()
    held = {
        name
        for name, value in zip(names, values)
        if name in owned and attribute_node(value) and containers_held(value)
    }
    return frozenset(owned) - held


def copied(kind: str, name: str) -> str:
    """How a message writes a shallow copy of `name`, which holds a `kind` (`list(best)`, or
    `copy.copy(state)` of an attribute node)."""
    return f"{kind}({name})" if kind in ("list", "dict") else f"copy.copy({name})"


def slots(cls) -> list[str]:
    """The names of the slots `cls` and its bases declare (not `__dict__`, `__weakref__`)."""
    try:
        return _cached_slots(cls)
    except TypeError:  # a class a metaclass made unhashable (its own `__eq__`)
        return _cached_slots.__wrapped__(cls)


@functools.lru_cache(maxsize=1024)
def _cached_slots(cls) -> list[str]:
    names = []
    for klass in cls.__mro__:
        declared = vars(klass).get("__slots__", ())
        declared = [declared] if isinstance(declared, str) else declared
        names += [s for s in declared if s != "__dict__"]
    return [n for n in names if n != "__weakref__"]


_UNSET = object()


def attributes(node) -> dict:
    """{name: value} of the attributes an attribute node holds now (its `__dict__`'s, and its
    slots that are set)."""
    found = dict(getattr(node, "__dict__", {}))
    for name in slots(type(node)):
        value = getattr(node, name, _UNSET)
        if value is not _UNSET:
            found[name] = value
    return found


def attribute_node(value) -> bool:
    """Whether `value` is an object of a registered pytree class of the user's whose
    attributes the program may set (`s.n += 1`): a dataclass `jax.tree_util.register_dataclass`
    registers, not frozen, or a class `register_pytree_node_class` registers. A staged
    statement copies it as it copies lists and dicts (rebuilt from its children), and gives it
    back its identity as it gives theirs (`update_in_place` sets its attributes)."""
    if value is None or isinstance(value, (jax.Array, tuple, dict, list, str, int, float)):
        return False
    kind = type(value)
    if not hasattr(value, "__dict__") and not slots(kind):
        return False
    params = getattr(kind, "__dataclass_params__", None)
    if params is not None and params.frozen:
        return False
    if any(klass.__module__.partition(".")[0] in _LIBRARY_NODES for klass in kind.__mro__):
        return False  # (a user's subclass of `equinox.Module`, `nnx.Module` too)
    return not jax.tree_util.all_leaves([value])


def container_pairs(original, copy_):
    """(original, copy) of each list, dict and attribute node of `copy_` (a copy of `original`:
    the same structure, through lists, dicts, tuples and attribute nodes) and the one of
    `original` at its place, outer ones first; none below a place where the two differ in
    type, length, keys or attributes."""
    stack = [(original, copy_)]
    while stack:
        original, copy_ = stack.pop()
        if type(original) is not type(copy_):
            continue
        if type(original) is list and len(original) == len(copy_):
            yield original, copy_
            stack.extend(zip(original, copy_))
        elif type(original) is dict and original.keys() == copy_.keys():
            yield original, copy_
            stack.extend((original[key], copy_[key]) for key in original)
        elif isinstance(original, tuple) and len(original) == len(copy_):  # namedtuples too
            stack.extend(zip(original, copy_))
        elif attribute_node(original):
            mine, held = attributes(original), attributes(copy_)
            if mine.keys() == held.keys():
                yield original, copy_
                stack.extend((a, held[key]) for key, a in mine.items() if a is not held[key])


def plain_tuple(value) -> bool:
    """Whether `value` is a tuple or a namedtuple (which JAX takes apart and makes again)."""
    return type(value) is tuple or (isinstance(value, tuple) and hasattr(type(value), "_make"))


def tuple_containers(value) -> dict[tuple, object]:
    """{path: the list or dict there} inside `value`, a tuple or namedtuple, through the tuples
    in it (empty for anything else)."""
    found: dict[tuple, object] = {}
    stack = [((), value)] if plain_tuple(value) else []
    while stack:
        path, item = stack.pop()
        if plain_tuple(item):
            stack += [((*path, i), inner) for i, inner in enumerate(item)]
        elif is_container(item):
            found[path] = item
    return found


def containers_within(value) -> set[int]:
    """The ids of the lists, dicts and attribute nodes `value` is or holds (through lists,
    dicts, tuples, namedtuples and attribute nodes)."""
    found: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if is_container(item) and id(item) not in found:
            found.add(id(item))
            stack.extend(_held(item))
        elif plain_tuple(item):
            stack.extend(item)
    return found


def item_at(value, path: tuple):
    """What nested tuples `value` hold at `path` (None where their structure differs)."""
    for i in path:
        if not plain_tuple(value) or i >= len(value):
            return None
        value = value[i]
    return value


def holding_again(value: tuple, path: tuple, original, changed: bool) -> tuple:
    """`value` (a tuple a staged statement gave back: new lists in it) holding `original` at
    `path` again, as Python's does; `original` first given the staged contents there where a
    path changed its copy."""
    if changed:
        update_in_place(original, item_at(value, path))
    return replaced(value, path, original)


def replaced(value: tuple, path: tuple, item) -> tuple:
    """`value` (a tuple or namedtuple, nested ones in it) holding `item` at `path`."""
    items = list(value)
    items[path[0]] = replaced(items[path[0]], path[1:], item) if path[1:] else item
    return tuple(items) if type(value) is tuple else type(value)._make(items)


def containers_held(container) -> list:
    """The lists, dicts and attribute nodes `container` (one of those) holds (through tuples,
    namedtuples included, and the values of dicts of other types: an `OrderedDict`)."""
    items = list(_held(container))
    found = []
    while items:
        item = items.pop()
        if isinstance(item, tuple) or isinstance(item, dict) and type(item) is not dict:
            items.extend(item.values() if isinstance(item, dict) else item)
        elif is_container(item):
            found.append(item)
    return found


def _held(container):
    """What a list, dict or attribute node holds: its items, values or attributes."""
    if isinstance(container, dict):
        return container.values()
    return attributes(container).values() if attribute_node(container) else container


def update_in_place(target, value, kept=None, replaced=None) -> None:
    """`target` (a list, dict or attribute node) given the contents of `value` (alike), nested
    lists, dicts and attribute nodes updated in place too: those `kept` (ids: the ones the
    staged statement left at their places, see `kept_at_their_places`; None, every one of
    the same type). At another place the staged statement put a new object (`b.inner =
    S(...)`): Python's old one is not changed, and `value`'s is put there; `replaced`, where
    given, gets (the old one, the new one) of each such list, dict and attribute node."""

    def put(now, item, store) -> None:
        if now is item:
            return
        if is_container(now) and type(item) is type(now) and (kept is None or id(now) in kept):
            update_in_place(now, item, kept, replaced)
            return
        if replaced is not None and is_container(now):
            replaced.append((now, item))
        store(item)

    if type(target) is list and type(value) is list and len(target) == len(value):
        for i, item in enumerate(value):
            put(target[i], item, functools.partial(target.__setitem__, i))
    elif type(target) is dict and type(value) is dict and target.keys() == value.keys():
        for key, item in value.items():
            put(target[key], item, functools.partial(target.__setitem__, key))
    elif attribute_node(target):
        held = attributes(target)
        for key, item in attributes(value).items():
            # (Past a `__setattr__` of the class's own: the object is set to what the staged
            # one holds, as a copy made from its children is.)
            put(held.get(key), item, functools.partial(object.__setattr__, target, key))
    elif type(target) is list:
        target[:] = value
    else:
        target.clear()
        target.update(value)


def kept_at_their_places(original, now, copies) -> set[int]:
    """The ids of the lists, dicts and attribute nodes inside `original` (itself included)
    whose copies a staged trace was given (`copies`: {id(copy): (copy, original)}) are at the
    same places in `now` (what the trace gave back for it) after it: those `update_in_place`
    may update; the others the trace replaced, or moved."""
    return {
        id(o) for o, c in container_pairs(original, now) if copies.get(id(c), (None, None))[1] is o
    }


# Per staged trace in progress (a branch, a loop's iteration), innermost last: the copies its
# state was given of lists, dicts and attribute nodes, {id(copy): (copy, original)}, and
# whether they are a loop's (see `original_of`).
_GIVEN: contextvars.ContextVar[tuple] = contextvars.ContextVar("given", default=())


@contextlib.contextmanager
def given_copies(pairs: dict, in_loop: bool):
    """While a staged trace runs: the copies its state was given (`pairs`: {id(copy): (copy,
    original)}), for `original_of`."""
    token = _GIVEN.set((*_GIVEN.get(), (pairs, in_loop)))
    try:
        yield
    finally:
        _GIVEN.reset(token)


def original_of(value) -> tuple[object, bool]:
    """The object `value` stands for, through the copies staged traces in progress were given
    (a branch's copy is the object itself, as Python has it), and whether a loop's iteration
    copy stands between: that stands for what the variable held as the iteration began,
    which an earlier iteration may have rebound."""
    in_loop = False
    for pairs, loop in reversed(_GIVEN.get()):
        pair = pairs.get(id(value))
        if pair is not None and pair[0] is value:
            value, in_loop = pair[1], in_loop or loop
    return value, in_loop


def record_replaced(replaced: list, label: str, site: Site) -> None:
    """Watches each list, dict or attribute node a staged statement replaced inside the object
    of a variable (`label`) on some path (`b.inner = S(...)` under a traced `if`; see
    `update_in_place`), with the new one the object holds now: Python's holds the new one or
    the old one, as the path went, so a change in place to either is not exact while both may
    be seen: where something else holds the old one (nothing else reaching it, no change
    through the new one can show)."""
    for old, new in replaced:
        if sys.getrefcount(old) > _REPLACED_REFERENCES:
            detached(f"an item of {label}", site, new, [old, new])


# The references `record_replaced` finds to an old object nothing else holds: its pair's in
# the list, the loop's name, `sys.getrefcount`'s argument.
_REPLACED_REFERENCES = 3


@dataclasses.dataclass(eq=False)
class _Detached:
    """A variable a staged statement left holding a new object where Python's holds one of
    two others: changing any of `objects` in place is not exact while the variable lives."""

    label: str  # how messages call the variable: `'best'`, `the value`
    kind: str  # what it holds: `dict`, `list`, `tuple`
    site: Site
    objects: tuple
    how: str  # "chosen" by a condition, "bound" in a loop's iteration, "entered" a loop with
    held: list  # what the objects held once the statement ended (`contents`; `settle`)
    value: object  # the new object the variable holds (see `settle`)
    # The object Python's variable holds where the loop ran no iteration, where a change
    # through `value` counts only while something else holds it (see `detached`).
    entered: object = None
    # The ids of the objects Python's variable is one of (the items a pick chose among, an
    # `if`'s two originals; `objects` holds them), where it is one of them on every path:
    # `value in those` is True. (Ids: a reference more would count as a holder of theirs.)
    among: tuple | None = None

    def alive(self, unread: int = 0) -> bool:
        """Whether anything but this record holds the new object, or a list or dict inside it
        (`inner = best["l"]`; `a, b = (p, q) if c else (q, p)`): once nothing does (the
        variable was rebound, the helper returned, the expression was used), no change shows
        through it. `unread`: references that do not count, those of variables the program
        never reads again (see `let_go`). (`sys.getrefcount` counts its argument, this
        record's references, and an inner container's own.)"""
        mine = 2 + any(o is self.value for o in self.objects) + unread
        return sys.getrefcount(self.value) > mine or inner_held(self.value, self.objects)

    def changed(self, before=None, entered_seen: bool = True) -> bool:
        """Whether any of `objects` holds other than `before` (default: `held`) now; a change of
        `value` does not count where `entered_seen` is False (see `entered_unseen`)."""
        held = self.held if before is None else before
        return any(
            changed_since(o, c) and (entered_seen or o is not self.value)
            for o, c in zip(self.objects, held)
        )

    def entered_unseen(self) -> bool:
        """Whether nothing but this record holds `entered` now: a change through `value`,
        which Python makes to it where the loop ran no iteration, then shows nowhere else. Asked
        before a call (`held`): what the call does with the object cannot be told after it (it
        may hand it on, or drop it after reading it); where the change is found as the
        converted call returns, its names are gone, and it counts. (`sys.getrefcount` counts
        its argument and this record's two references.) Of a pick: whether nothing but the
        records reaches any of the items it chose among (`pop.sort(key=...)`, where `pop` was
        their only holder), so that nothing shows a change through the new object."""
        if self.how == "picked":
            if self.among is None or len(set(self.among)) < len(self.among):
                return False  # one item at two places (`[d] * 2`): its copies are one object
            return not any(self._reachable(o) for o in self.objects if o is not self.value)
        if self.entered is None or sys.getrefcount(self.entered) > _ENTERED_REFERENCES:
            return False
        # Nor a list, dict or tuple inside it (`h = s["h"]` before the loop): a change through
        # `value` of what stands for it shows through that name.
        return not inner_held(self.entered)

    @staticmethod
    def _reachable(item) -> bool:
        """Whether anything but the records holds `item`, one of the items a pick chose among
        (`pop.sort(key=...)` leaves none: the list holds the copies), or a list or dict inside
        it. (`sys.getrefcount` counts its argument, this parameter and the caller's loop
        variable.)"""
        mine = 3 + recorded_references(item)
        return sys.getrefcount(item) > mine or inner_held(item)


def recorded_references(obj) -> int:
    """How many references to `obj` the detached entries of the calls being traced hold (their
    new objects, watched objects, entered objects): what `sys.getrefcount` finds of the
    runtime's own, beyond its holders'."""
    count = 0
    for record in _DETACHED.get():
        for entry in record:
            count += (entry.value is obj) + (entry.entered is obj)
            count += sum(o is obj for o in entry.objects)
    return count


def inner_held(container, known=()) -> bool:
    """Whether something other than `container` (and the objects `known` holds, a record's)
    holds a list, dict or tuple inside it (`h = s["h"]`). (`sys.getrefcount` counts its
    argument, the walk's name, and the container.)"""
    inner = list(_items(container))
    while inner:
        item = inner.pop()
        if isinstance(item, (list, dict, tuple)) or _pytree_node(item):
            if sys.getrefcount(item) > _INNER_REFERENCES + any(o is item for o in known):
                return True
            inner.extend(_items(item))
    return False


def _items(container):
    """The items of a list, tuple or dict (a namedtuple's, an OrderedDict's too), the children
    of an object of a registered pytree class (a dataclass's fields); none of any other object
    (a staged list of traced length, iterated, would raise)."""
    if isinstance(container, dict):
        return container.values()
    if isinstance(container, (list, tuple)):
        return container
    if _pytree_node(container):
        return jax.tree_util.tree_flatten(container, is_leaf=lambda x: x is not container)[0]
    return ()


def _pytree_node(value) -> bool:
    """Whether `value` is an object of a registered pytree class other than a list, tuple or
    dict (`jax.tree_util.register_dataclass`): it holds its children as attributes."""
    if value is None or isinstance(value, (list, tuple, dict, str, jax.Array, bool, int, float)):
        return False
    return not jax.tree_util.all_leaves([value])


# Per converted call being traced, outermost first: what its staged statements detached. An
# entry lasts while its new object (or a container in it) lives: found dead at a call it is
# dropped; as the call returns it is checked (its variables die then), and goes on in the
# caller's record if the call handed the object on.
_DETACHED: contextvars.ContextVar[tuple[list, ...]] = contextvars.ContextVar("detached", default=())


def recording():
    """Opens the record of a converted call being traced: a token for `stop_recording`."""
    return _DETACHED.set((*_DETACHED.get(), []))


def stop_recording(token, returned: bool) -> None:
    """Closes the record `recording` opened; where the call `returned`, refuses a change made
    since a statement detached an object (`_check`), and hands the entries whose new
    objects it gave back (or stored) to the caller's record."""
    mine = _DETACHED.get()[-1]
    _DETACHED.reset(token)
    if not (returned and mine):
        return
    _check(mine)
    outer = _DETACHED.get()
    if outer:
        outer[-1].extend(entry for entry in mine if entry.alive())


def _check(entries) -> None:
    """Refuses an object a staged statement detached a variable from that was changed in place
    since, by code whose change conversion could not tell apart from another object's (`first
    = itemgetter(0)(layers); first["w"] = 0`, an item of another container)."""
    for entry in entries:
        if entry.held and entry.changed():
            raise StagingError(_changed_message(entry, None, "as the function returned"))


# The references `_Detached.entered_unseen` finds to an object nothing else holds.
_ENTERED_REFERENCES = 3
# ... to a list or dict inside it that nothing else holds: its container's, the argument's, the
# loop's variable's.
_INNER_REFERENCES = 3


def detached(
    label: str,
    site: Site,
    value,
    objects,
    *,
    how: str = "chosen",
    entered=None,
    now=False,
    among=None,
) -> None:
    """Records that a staged statement (at `site`) left a variable (`label`) holding a new
    list, dict or tuple (`value`) where Python's holds one of two others (`how`: "chosen"), the
    one an iteration of a loop bound it to ("bound"), or the one it held before a loop that
    may run no iteration ("entered"): `objects`, the lists and dicts whose change in place
    would show (see `runtime.control_flow._record_detached`), while `value` lives. `entered`:
    of `objects`, the one Python's variable holds where the loop ran no iteration, `value`
    among `objects` for it: a change through `value` is refused only while another name holds
    `entered` (nothing else can show it). "picked": `value` is the item a staged `min`, `max`
    or `sorted` chose by traced keys, and its objects hold now what they are told from (`now`:
    no statement settles them, see `settle`). `among`: the objects Python's variable is one
    of on every path, where it is (see `one_of`)."""
    stack = _DETACHED.get()
    watched = _picked if how == "picked" else is_container
    # With the objects the copies among them stand for (a loop iteration's copy of what the
    # variable held: the object it entered the loop with, on the first iteration).
    objects = [*objects, *(original_of(o)[0] for o in objects)]
    kept = tuple({id(o): o for o in objects if watched(o)}.values())
    if not stack or not kept:
        return
    ids = {id(o) for o in kept}
    if any({id(o) for o in entry.objects} == ids for record in stack for entry in record):
        return  # watched already (the statement traced again: a retrace)
    # (Of a variable bound on some paths only, what it holds where bound.)
    kind = type(value.value if isinstance(value, MaybeUnbound) else value).__name__
    held = [contents(o) for o in kept] if now else []
    if among is not None:
        among = tuple(id(o) for o in among)
        if not set(among) <= ids:
            among = None  # (an item not watched: a number)
    stack[-1].append(_Detached(label, kind, site, kept, how, held, value, entered, among))


def _picked(value) -> bool:
    """What a pick watches (see `detached`): any object a staged choice copies, but numbers and
    arrays (immutable, and `is` of arrays is not followed): lists and dicts (an `OrderedDict`,
    a `defaultdict`), tuples (`is`, and the lists in them), registered pytree classes (a
    dataclass whose attribute is set)."""
    return not (value is None or isinstance(value, jax.Array | bool | int | float | complex))


def standing_for(value) -> _Detached | None:
    """The entry of the staged statement that made `value` in place of one of several objects
    (see `detached`), or None."""
    return next(_made(value), None)


def one_of(value) -> frozenset | None:
    """The ids of the objects Python's `value` is one of, where a staged statement made
    `value` in place of one of them (the items a `min`/`max`/`sorted` picked it among, an
    `if`'s originals on its two paths), or None."""
    among = next((entry.among for entry in _made(value) if entry.among is not None), None)
    return None if among is None else frozenset(among)


# Per staged loop being traced: whether it runs at least once (a scan of a known, non-zero
# length), so that Python's variables cannot be left as they entered it (see `loop_runs`).
_RUNS: contextvars.ContextVar[list | None] = contextvars.ContextVar("runs", default=None)


@contextlib.contextmanager
def loop_runs():
    """Around staging a loop: yields a list that `runs_at_least_once` fills if it does."""
    found: list = []
    token = _RUNS.set(found)
    try:
        yield found
    finally:
        _RUNS.reset(token)


def runs_at_least_once() -> None:
    """Tells the loop being staged (`loop_runs`) that it runs at least once."""
    found = _RUNS.get()
    if found is not None:
        found.append(True)


def _made(value):
    """The entries whose new object is `value`, in the order they were made (a statement hands
    those made inside it its variable's object: several may have one)."""
    return (entry for record in _DETACHED.get() for entry in record if entry.value is value)


def stands_for(value, original) -> bool:
    """Whether `value` is the new object a staged statement left a variable holding where
    Python's holds `original` on some path (see `detached`)."""
    return any(any(o is original for o in entry.objects) for entry in _made(value))


def chosen_between(value, other):
    """The entry of a staged statement that left `value` (or a container holding it: `st[0]` of
    a tuple, `d["a"]` of a dict it chose) where Python's holds one of several objects, `other`
    among them or inside one of them, through chains of such statements (two staged `if`s in a
    row): whether `value is other` is decided by the conditions. None where there is none, and
    where `value` is `other` (the same object on every path)."""
    if value is other or value is None or other is None or type(value) is bool:
        return None
    entries = [entry for record in _DETACHED.get() for entry in record]
    found, holders, seen = None, [value], set()
    while holders:  # `value`, and the objects it stands for, entry by entry
        held = holders.pop()
        for entry in entries:
            if id(entry) in seen:
                continue
            if entry.value is not held and id(held) not in containers_within(entry.value):
                continue
            seen.add(id(entry))
            for o in entry.objects:
                # (A branch's copy of `other` is `other`: see `original_of`.)
                if o is other or original_of(o)[0] is other or id(other) in containers_within(o):
                    return entry if found is None else found
                if o is not entry.value:
                    holders.append(o)
            found = found or entry
    return None


def relabel(since: int, label: str, name: str) -> None:
    """Calls the variable of the entries the statement being traced recorded (from `since`,
    see `mark`) under `label` by `name` (a conditional expression's value, by the name it is
    assigned to)."""
    stack = _DETACHED.get()
    for entry in stack[-1][since:] if stack else ():
        if entry.label == label:
            entry.label = name


def mark() -> int:
    """Where the record of the converted call being traced stands (for `settle`)."""
    stack = _DETACHED.get()
    return len(stack[-1]) if stack else 0


def settle(since: int, names, out) -> None:
    """A staged statement (whose variables `names` it leaves holding `out`) has ended: takes
    what the objects recorded while it was traced hold (it may have put its own changes in
    place after recording them), and gives the entries made inside it (from `since`) whose
    new object it did not hand on (a branch's, an iteration's) the variable's object after
    it: the variable of an `if` inside a loop is the loop's."""
    stack = _DETACHED.get()
    if not stack:
        return
    outs = dict(zip(names, out))
    for entry in stack[-1][since:]:
        name = entry.label.strip("'")
        if name in outs and not entry.alive():
            # (The object the statement's trace made stands for what its variable holds after
            # it: a change through that is watched too.)
            swapped = [o is entry.value for o in entry.objects]
            entry.objects = tuple(outs[name] if s else o for o, s in zip(entry.objects, swapped))
            if entry.held:  # (what it holds as the statement ends, as of the others)
                entry.held[:] = [
                    contents(outs[name]) if s else c for c, s in zip(entry.held, swapped)
                ]
            entry.value = outs[name]
        elif entry.held and not entry.alive() and entry.changed():
            # Its variable lived in this statement (a branch's, an iteration's) and is gone
            # with it; its objects changed in place since, by code in it that conversion could
            # not follow (`with holding(params) as p: p[0] = 0`): the variable may have been
            # read stale before it went.
            raise StagingError(_changed_message(entry, None))
    for record in stack:
        for entry in record:
            if not entry.held:
                entry.held.extend(contents(o) for o in entry.objects)


def recorded() -> bool:
    """Whether staged statements detached objects in the converted calls being traced."""
    return any(_DETACHED.get())


def held() -> list:
    """What the detached objects whose variables still hold the new object (see `detached`)
    hold now, and whether another name holds the object a loop entered with (`entered_seen`),
    to check after a call made from converted code (`check_unchanged`). The
    entries whose new objects nothing holds any more (the variable was rebound) are dropped,
    but for those of a statement still being traced (`settle` may hand them its variable's)."""
    seen_by = _look(())
    found = []
    for record in _DETACHED.get():
        for entry in record:
            if id(entry) in seen_by:  # (what `_look` found of it stands: nothing ran since)
                seen = seen_by[id(entry)]
            elif not entry.held and entry.alive():
                seen = not entry.entered_unseen()
            else:
                continue
            found.append((entry, [contents(o) for o in entry.objects], seen))
    return found


def letting_go(statement):
    """`statement` (the runtime's `while_stmt`; `for_stmt` and a staged `if_stmt` call
    `let_go` themselves: a wrapper's arguments would count as holders, and a Python `if` must
    cost nothing more) with `let_go` before and after it: a change its body made to what a
    pick or an earlier statement left is found as it ends, while the names it may show
    through are there to count."""

    @functools.wraps(statement)
    def run(*args, **kwargs):
        let_go()
        out = statement(*args, **kwargs)
        let_go()
        return out

    return run


def let_go(*unread) -> None:
    """Drops the entries whose new objects nothing holds any more (the variable was rebound,
    the value was used in an expression: `min(layers, key=loss)["w"]`), but for those of a
    statement still being traced (`settle` may hand them its variable's), and refuses those
    whose objects changed since (by a statement: a call's change is found as it returns), as
    `_check` would: a new object gone may have been read stale before it went, and one that
    lives may be read so yet, or the change undone (`p["w"] = old`) before `_check` could see
    it. A change only through a new object nothing else shows (`_Detached.entered_unseen`)
    is taken as its new base. Called before each call from converted code, around each staged
    statement and, in a function that picks, before each store and return (see
    `transpiler.passes.pick_checks`), so that a change made after the new object is gone is
    not refused. `unread`: the values of variables the program never reads again from here
    (what conversion found a pick's variable holds once its last read is done: `best =
    min(...); bw = best["w"]`), which hold a new object as if they did not (each counted twice:
    the variable, and this call's argument)."""
    _look(unread)


def _look(unread) -> dict[int, bool]:
    """`let_go`'s work; returns, for each live entry it looked at, whether another name holds
    what it entered with (`_Detached.entered_unseen`, by the entry's id)."""
    seen_by = {}
    for record in _DETACHED.get():
        kept = []
        for entry in record:
            if not entry.held:
                kept.append(entry)
            elif not entry.alive(2 * sum(v is entry.value for v in unread)):
                if entry.changed():
                    raise StagingError(_changed_message(entry, None, _here()))
            else:
                # A change while the new object lives is refused now, not only as the function
                # returns: the change may be undone by then (`m["w"] = old`), after a read.
                seen = not entry.entered_unseen()
                if entry.changed(None, seen):
                    raise StagingError(_changed_message(entry, None, _here()))
                if not seen:  # the new object changed, which nothing else shows: the new base
                    entry.held[:] = [contents(o) for o in entry.objects]
                seen_by[id(entry)] = seen
                kept.append(entry)
        record[:] = kept
    return seen_by


def check_unchanged(held_before: list, fn) -> None:
    """Refuses a call, of `fn`, that changed in place an object a staged statement detached a
    variable from: the staged variable would not show the change (or show it where Python's
    does not)."""
    for entry, before, entered_seen in held_before:
        if entry.changed(before, entered_seen):
            raise StagingError(_changed_message(entry, fn))
        if not entered_seen and entry.held:
            # The call changed only the new object, which nothing else shows: what it holds
            # now is what later changes are told from (`_check`, `settle`).
            entry.held[:] = [contents(o) for o in entry.objects]


def _here() -> str | None:
    """`before file:line`: the user's line the check being made runs at (a statement, a
    call), where known."""
    where = Site("check", depth=3).location()
    return f"before {where}" if where else None


def _changed_message(entry: _Detached, fn, found: str | None = None) -> str:
    """The refusal of a change to what `entry` watches: made by a call of `fn`, or (None) by
    the function's own code, found where `found` says (`before file:line`)."""
    kind = entry.kind
    if fn is None:
        after = "the pick" if entry.how == "picked" else "the statement"
        at = f" (found {found})" if found else ""
        how = f"the function changed it in place after {after}, through a name{at}"
    else:
        where = Site("call", depth=3).location()
        how = f"the call of {_name(fn)}{f' ({where})' if where else ''} changed it in place"
    if kind == "tuple":
        return (
            f"{entry.label} is a tuple of lists or dicts that a staged {entry.site.construct} "
            f"({entry.site}) gives, and {how}, which conversion could not follow: Python's "
            "tuple holds those very objects, and shows the change, where the staged one holds "
            "copies. Put copies in the tuple (copy.deepcopy), or read the lists and dicts "
            "through their own names."
        )
    if entry.how == "entered":
        what = (
            f"holds a new {kind} after the staged {entry.site.construct} ({entry.site}), "
            f"which binds it to another in its iterations"
        )
        python = (
            f"{_pythons(entry.label)} is the {kind} it held before where the loop runs no iteration"
        )
    elif entry.how == "picked":
        what = f"is the {kind} a staged {entry.site.construct} picks by traced keys ({entry.site})"
        python = f"{_pythons(entry.label)} is that very {kind}, one of the items"
    elif entry.how == "bound":
        what = (
            f"is bound to a {kind} another name holds in an iteration of the staged "
            f"{entry.site.construct} ({entry.site})"
        )
        python = f"{_pythons(entry.label)} is that very {kind} once the loop ran"
    else:
        what = (
            f"is a different {kind} depending on the condition of a staged "
            f"{entry.site.construct} ({entry.site})"
        )
        python = f"{_pythons(entry.label)} is that very {kind} on one path"
    if entry.how == "picked":
        fix = (
            f"Pick among copies ({entry.site.construct[:-2]}(copy.deepcopy(items), key=...)) "
            f"and change the one picked, or take what you need from it and let go of it "
            f"(`del`) before changing the items"
        )
    else:
        fix = (
            f"Copy the {kind} into a local name of its own first (mine = "
            f"{copied(kind, 'theirs')}, copy.deepcopy where it nests) and change that one, or "
            "leave the same object on every path (where a path binds a new one, set the items "
            "of the one it holds instead)"
        )
    return (
        f"{entry.label} {what}, and {how}, which conversion could not follow: {python}, "
        f"and shows the change there, where the staged one is a copy (or the other way "
        f"round). {fix}."
    )


def _name(fn) -> str:
    """How a message names a callable: `Opt.update`, `dict.update`, `Opt.__call__`."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else f"{type(fn).__qualname__}.__call__"


def _pythons(label: str) -> str:
    """`Python's 'best'`, `Python's value`."""
    return f"Python's {label.removeprefix('the ')}"
