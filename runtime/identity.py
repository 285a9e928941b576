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
them in place (`held`, `check_unchanged`), or any change found as that call returns
(`check_recorded`), is refused.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools

import jax

from runtime.errors import Site, StagingError


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


def update_in_place(target, value) -> None:
    """`target` (a list or dict) given the contents of `value` (alike), nested lists and dicts
    updated in place too."""
    if type(target) is list and type(value) is list and len(target) == len(value):
        for i, item in enumerate(value):
            if type(target[i]) in (list, dict) and type(item) is type(target[i]):
                update_in_place(target[i], item)
            else:
                target[i] = item
    elif type(target) is dict and type(value) is dict and target.keys() == value.keys():
        for key, item in value.items():
            if type(target[key]) in (list, dict) and type(item) is type(target[key]):
                update_in_place(target[key], item)
            else:
                target[key] = item
    elif type(target) is list:
        target[:] = value
    else:
        target.clear()
        target.update(value)


@dataclasses.dataclass(frozen=True, eq=False)
class _Detached:
    """A variable a staged statement left holding a new object where Python's holds one of
    `objects` (the new one is among them): changing any of them in place is not exact."""

    label: str  # how messages call the variable: `'best'`, `the value`
    kind: str  # what it holds: `dict`, `list`
    site: Site
    objects: tuple
    bound: bool  # bound in an iteration of a loop (else chosen by a condition)
    held: list  # what the objects held once the statement ended (`contents`; `settle`)


# The detached objects of the converted call being traced (None: no call opened a record).
_DETACHED: contextvars.ContextVar[list | None] = contextvars.ContextVar("detached", default=None)


def recording():
    """Opens the record of detached objects for a converted call being traced, unless one is
    open (the outermost call's lasts until it returns): a token for `stop_recording`, or None."""
    return _DETACHED.set([]) if _DETACHED.get() is None else None


def stop_recording(token) -> None:
    if token is not None:
        _DETACHED.reset(token)


def check_recorded() -> None:
    """Refuses, as the converted call that opened the record returns, an object a staged
    statement detached a variable from that was changed in place since, by code whose change
    conversion could not tell apart from another object's (`first = itemgetter(0)(layers);
    first["w"] = 0`, an item of another container)."""
    for entry in _DETACHED.get() or ():
        if entry.held and any(changed_since(o, c) for o, c in zip(entry.objects, entry.held)):
            raise StagingError(_changed_message(entry, None))


def detached(label: str, kind: str, site: Site, objects, *, bound: bool = False) -> None:
    """Records that a staged statement (at `site`) left a variable (`label`) holding a new
    list or dict (`kind`) where Python's holds one of two others, or (`bound`) the one an
    iteration of a loop bound it to: `objects`, the lists and dicts whose change in place
    would show (see `runtime.control_flow._record_detached`)."""
    record = _DETACHED.get()
    kept = tuple({id(o): o for o in objects if type(o) in (list, dict)}.values())
    if record is None or not kept:
        return
    ids = {id(o) for o in kept}
    if any({id(o) for o in entry.objects} == ids for entry in record):
        return  # watched already (the statement traced again: a retrace)
    record.append(_Detached(label, kind, site, kept, bound, []))


def settle() -> None:
    """Takes what the objects recorded while a staged statement was traced hold, now that it
    has ended (it may still have put its own changes in place after recording them)."""
    for entry in _DETACHED.get() or ():
        if not entry.held:
            entry.held.extend(contents(o) for o in entry.objects)


def recorded() -> bool:
    """Whether staged statements detached objects in the converted call being traced."""
    return bool(_DETACHED.get())


def held() -> list:
    """What the detached objects hold now (see `detached`), to check after a call made from
    converted code (`check_unchanged`)."""
    return [(entry, [contents(o) for o in entry.objects]) for entry in _DETACHED.get() or ()]


def check_unchanged(held_before: list, fn) -> None:
    """Refuses a call, of `fn`, that changed in place an object a staged statement detached a
    variable from: the staged variable would not show the change (or show it where Python's
    does not)."""
    for entry, before in held_before:
        if any(changed_since(o, c) for o, c in zip(entry.objects, before)):
            raise StagingError(_changed_message(entry, fn))


def _changed_message(entry: _Detached, fn) -> str:
    kind = entry.kind
    if fn is None:
        how = "the function changed it in place after the statement, through a name"
    else:
        where = Site("call", depth=3).location()
        how = f"the call of {_name(fn)}{f' ({where})' if where else ''} changed it in place"
    if entry.bound:
        what = (
            f"is bound to a {kind} another name holds in an iteration of the staged "
            f"{entry.site.construct} ({entry.site})"
        )
        python = f"Python's {entry.label} is that very {kind} once the loop ran"
    else:
        what = (
            f"is a different {kind} depending on the condition of a staged "
            f"{entry.site.construct} ({entry.site})"
        )
        python = f"Python's {entry.label} is that very {kind} on one path"
    return (
        f"{entry.label} {what}, and {how}, which conversion could not follow: {python}, "
        f"and shows the change there, where the staged "
        f"one is a copy (or the other way round). Copy the {kind} into a local name of its "
        f"own first (mine = {kind}(theirs), copy.deepcopy where it nests) and change that "
        "one, or leave the same object on every path."
    )


def _name(fn) -> str:
    """How a message names a callable: `Opt.update`, `dict.update`, `Opt.__call__`."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else f"{type(fn).__qualname__}.__call__"
