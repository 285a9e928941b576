"""Reading jaxprs: the user's `file:line` of each equation, and the jaxprs nested in it.

Each jaxpr equation keeps the Python traceback of the call that made it. For converted code the
innermost frame worth showing is a line of generated code (a file ending `.astgraph.py`); its
source map gives the user's line. Frames of JAX, NumPy, the standard library, installed packages
and this project (`runtime/`, `transpiler/`) are skipped; other frames are the user's own code.

    for op in jaxprs.walk(closed_jaxpr.jaxpr):
        print("  " * op.depth, op.eqn.primitive.name, op.location)   # reduce_sum model.py:12
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sysconfig
from collections.abc import Iterator

from transpiler.origins import display_path


@dataclasses.dataclass(frozen=True, order=True)
class Location:
    """A line of the user's code."""

    filename: str
    lineno: int

    def __str__(self) -> str:
        return f"{display_path(self.filename)}:{self.lineno}"


@dataclasses.dataclass(frozen=True)
class Op:
    """One equation of a jaxpr, where it sits, and the user's line it comes from."""

    eqn: object  # jax.extend.core.JaxprEqn
    location: Location | None  # its own, or (if its traceback has none) its parent's
    depth: int  # 0 for the equations of the outermost jaxpr
    parent: Op | None


# Wrappers whose one nested jaxpr takes the equation's operands and gives its results as they
# are (a nested `jax.jit`, a custom derivative, a checkpoint): operands map 1:1.
CALLS = frozenset(
    {
        "jit",
        "pjit",
        "closed_call",
        "core_call",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
        "remat",
        "checkpoint",
    }
)

CONTROL_FLOW = ("cond", "while", "scan")

# What a nested jaxpr does for its equation, by parameter name: `while` has a `cond_jaxpr`
# (the loop test) and a `body_jaxpr`.
_ROLES = {"cond_jaxpr": "test", "body_jaxpr": "body", "branches": "branch", "jaxpr": "body"}


def nested(eqn) -> list[tuple[str, object]]:
    """(role, open jaxpr) for each jaxpr in `eqn`'s parameters, in order: `("test", ...)`,
    `("body", ...)` for a `while`; `("branch 0", ...)`, `("branch 1", ...)` for a `cond`."""
    from jax.extend import core

    found = []
    for name, value in eqn.params.items():
        values = value if isinstance(value, (tuple, list)) else (value,)
        jaxprs = [v for v in values if isinstance(v, (core.Jaxpr, core.ClosedJaxpr))]
        for i, sub in enumerate(jaxprs):
            role = _ROLES.get(name, name.removesuffix("_jaxpr"))
            if len(values) > 1 or name == "branches":
                role = f"{role} {i}"
            found.append((role, sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub))
    return found


def live(closed):
    """`closed` (a `ClosedJaxpr`) without the equations whose results nothing uses and that
    make no effect, in the jaxprs nested in it too: the program JAX lowers (it drops them).

    Converted code leaves such equations where it evaluated something to decide how to stage a
    statement and then staged it from before (a loop's first iteration run as Python, a loop
    test evaluated again in the loop's condition: see `runtime.peeling`)."""
    return closed.replace(jaxpr=_live(closed.jaxpr))


def _live(jaxpr):
    from jax.extend import core

    used = {v for v in jaxpr.outvars if isinstance(v, core.Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if not eqn.effects and not any(v in used for v in eqn.outvars):
            continue
        if nested(eqn):
            eqn = eqn.replace(params={k: _live_param(v) for k, v in eqn.params.items()})
        kept.append(eqn)
        used.update(v for v in eqn.invars if isinstance(v, core.Var))
    return jaxpr.replace(eqns=kept[::-1])


def _live_param(value):
    from jax.extend import core

    if isinstance(value, core.ClosedJaxpr):
        return live(value)
    if isinstance(value, core.Jaxpr):
        return _live(value)
    if isinstance(value, tuple) and any(
        isinstance(v, (core.Jaxpr, core.ClosedJaxpr)) for v in value
    ):
        return tuple(_live_param(v) for v in value)
    return value


def is_call(eqn) -> bool:
    """Whether `eqn` wraps one jaxpr whose inputs and outputs are the equation's own."""
    subs = nested(eqn)
    if eqn.primitive.name not in CALLS or len(subs) != 1:
        return False
    sub = subs[0][1]
    return len(sub.invars) == len(eqn.invars) and len(sub.outvars) == len(eqn.outvars)


def is_loop_wrapper(eqn) -> bool:
    """Whether `eqn` is the custom derivative around a staged `while` (the checkpointed loop of
    `runtime/checkpointed.py`): shown as the loop it is, not as an opaque custom_jvp."""
    if eqn.primitive.name != "custom_jvp_call" or not is_call(eqn):
        return False
    return any(inner.primitive.name == "while" for inner in nested(eqn)[0][1].eqns)


def walk(jaxpr, parent: Op | None = None, *, _locations=None) -> Iterator[Op]:
    """Every equation of `jaxpr` (an open jaxpr) and of the jaxprs nested in it, in order,
    each before the equations nested in it."""
    locations = Locations() if _locations is None else _locations
    for eqn in jaxpr.eqns:
        location = locations.of(eqn.source_info)
        if location is None and parent is not None:
            location = parent.location
        op = Op(eqn, location, 0 if parent is None else parent.depth + 1, parent)
        yield op
        for _, sub in nested(eqn):
            yield from walk(sub, op, _locations=locations)


class Locations:
    """User locations of tracebacks, with the source maps read once per generated line."""

    def __init__(self):
        from runtime import errors

        self._errors = errors
        self._generated: dict[tuple[str, int], Location | None] = {}

    def of(self, source_info) -> Location | None:
        traceback = getattr(source_info, "traceback", None)
        if traceback is None:
            return None
        for frame in traceback.frames:  # innermost first
            filename, lineno = frame.file_name, frame.line_num
            if self._errors.is_generated(filename):
                found = self._in_generated(filename, lineno)
                if found is not None:
                    return found
            elif not _is_library_file(filename):
                return Location(filename, lineno)
        return None

    def _in_generated(self, filename: str, lineno: int) -> Location | None:
        key = (filename, lineno)
        if key not in self._generated:
            found = self._errors.user_location(filename, lineno)
            self._generated[key] = None if found is None else Location(*found)
        return self._generated[key]


def location_of(source_info) -> Location | None:
    """The user's line behind one equation's `source_info`, or None."""
    return Locations().of(source_info)


@functools.lru_cache(maxsize=4096)
def _is_library_file(filename: str) -> bool:
    if filename.startswith("<") or not filename:
        return True  # <frozen ...>, <string>: nothing a user can open
    path = os.path.realpath(filename)
    return (
        path.startswith(_library_directories())
        or "site-packages" in path
        or "dist-packages" in path
    )


@functools.cache
def _library_directories() -> tuple[str, ...]:
    import jax
    import jaxlib
    import numpy

    import runtime
    import transpiler

    modules = (jax, jaxlib, numpy, runtime, transpiler)
    found = [os.path.realpath(os.path.dirname(m.__file__)) + os.sep for m in modules]
    found.append(os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep)
    return tuple(found)
