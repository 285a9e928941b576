"""StagingError and the source maps that let runtime errors name the user's file:line.

Each generated file ends with its source map (`source_map_footer`): which user line every
generated line comes from. Runtime operators remember the frame that called them and, on error,
look its line up there.
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import types


class StagingError(Exception):
    """Converted code cannot be staged as written: say which variable, where, and why."""


def python_error(error: Exception) -> Exception:
    """Marks an exception the runtime raises on purpose, as Python would (`ld` of an unbound
    name, `range(2.5)`): raised while tracing a staged branch, it is the branch's to raise."""
    error._transpiler_python = True
    return error


def is_users(error: Exception) -> bool:
    """Whether `error`, raised while tracing, is what the user's code raises as Python would (a
    `raise`, an IndexError, a shape error in a JAX call) rather than a fault of this project:
    the innermost frame it passed through that is not JAX's or NumPy's is the user's (or
    generated code), or the runtime raised it on purpose (`python_error`)."""
    if getattr(error, "_transpiler_python", False):
        return True
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    for filename in reversed(frames):
        if filename.startswith(_LIBRARY_DIRECTORIES):
            continue
        return not filename.startswith(_OWN_DIRECTORIES)
    return True


def _directory_of(module) -> str:
    return os.path.dirname(os.path.realpath(module.__file__)) + os.sep


_OWN_DIRECTORIES = (
    _directory_of(sys.modules[__name__]),
    os.path.join(os.path.dirname(_directory_of(sys.modules[__name__]).rstrip(os.sep)), "transpiler")
    + os.sep,
)
_LIBRARY_DIRECTORIES = tuple(_directory_of(__import__(name)) for name in ("jax", "jaxlib", "numpy"))


GENERATED_SUFFIX = ".astgraph.py"
"""How the names of generated files end: `model_step_3.astgraph.py`."""

_MAP_MARK = "# astgraph source map: "


def source_map_footer(
    lines: dict[int, tuple[str, int]], return_values: dict[str, tuple[str, list[str]]]
) -> str:
    """The last line of a generated file: which user line each generated line comes from, and
    what error messages say about its functions' return-value variables. The runtime reads it
    back through `linecache` when it needs to name the user's line."""
    data = {"lines": {str(k): list(v) for k, v in lines.items()}, "returns": return_values}
    return _MAP_MARK + json.dumps(data, separators=(",", ":")) + "\n"


def is_generated(filename: str) -> bool:
    """Whether `filename` holds code the transpiler generated."""
    return filename.endswith(GENERATED_SUFFIX)


def _source_map(filename: str) -> dict | None:
    if not is_generated(filename):
        return None
    lines = linecache.getlines(filename)
    if not lines or not lines[-1].startswith(_MAP_MARK):
        return None
    return json.loads(lines[-1][len(_MAP_MARK) :])


def user_location(filename: str, lineno: int) -> tuple[str, int] | None:
    """The user's (file, line) behind a line of generated code, or None for other code."""
    found = _source_map(filename)
    if found is None:
        return None
    lines = {int(k): tuple(v) for k, v in found["lines"].items()}
    best = max((line for line in lines if line <= lineno), default=None)
    return lines[best] if best is not None else None


def _display(filename: str) -> str:
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith(os.pardir) else rel


class Site:
    """Where a runtime operator was called from, and what construct it stands for."""

    __slots__ = ("construct", "_frame")

    def __init__(self, construct: str, depth: int = 2):
        self.construct = construct
        self._frame: types.FrameType | None = sys._getframe(depth)

    def return_value(self, name: str) -> tuple[str, list[str]] | None:
        """(function, [its returns]) if `name` is the return-value variable of generated code."""
        frame = self._frame
        while frame is not None:
            found = _source_map(frame.f_code.co_filename)
            if found is not None:
                returned = found["returns"].get(name)
                return None if returned is None else tuple(returned)
            frame = frame.f_back
        return None

    def location(self) -> str | None:
        """The user's `file:line` of the construct, if it is in converted code."""
        frame = self._frame
        while frame is not None:
            found = user_location(frame.f_code.co_filename, frame.f_lineno)
            if found is not None:
                return f"{_display(found[0])}:{found[1]}"
            frame = frame.f_back
        return None

    def __str__(self) -> str:
        location = self.location()
        return f"{location}, {self.construct}" if location else self.construct


def user_frames_note(tb: types.TracebackType | None) -> str | None:
    """For an exception from converted code: the user's line it was raised at, as a note."""
    found = None
    while tb is not None:
        loc = user_location(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        if loc is not None:
            found = loc
        tb = tb.tb_next
    if found is None:
        return None
    filename, lineno = found
    text = linecache.getline(filename, lineno).strip()
    return f"while running converted code at {_display(filename)}:{lineno}: {text}"


_REVERSE_WHILE = "Reverse-mode differentiation does not work for lax.while_loop"


def fix_note(error: BaseException) -> str | None:
    """What to do about a JAX error that converted code can avoid, as a note; None otherwise."""
    if _REVERSE_WHILE in str(error):
        return (
            "the lax.while_loop without a reverse-mode derivative is in code called as it is "
            "(a library function, or one marked do_not_convert): converted code's own loops, "
            "Python `while`s and the `lax.while_loop`/`fori_loop` it calls, are "
            "reverse-differentiable. Write that loop in the converted function, or call it "
            "through converted code, or use jax.jvp/jax.jacfwd (forward mode) for it."
        )
    return None
