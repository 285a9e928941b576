"""StagingError and the source maps that let runtime errors name the user's file:line.

`transpiler` registers, for each generated module, which user line every generated line came from.
Runtime operators remember the frame that called them and, on error, look its line up here.
"""

from __future__ import annotations

import os
import sys
import types

# generated file name -> {generated line: (user file, user line)}
_SOURCE_MAPS: dict[str, dict[int, tuple[str, int]]] = {}
# generated file name -> {return-value variable: (function name, [where it returns])}
_RETURN_VALUES: dict[str, dict[str, tuple[str, list[str]]]] = {}


class StagingError(Exception):
    """Converted code cannot be staged as written: say which variable, where, and why."""


def register_source_map(
    filename: str,
    lines: dict[int, tuple[str, int]],
    return_values: dict[str, tuple[str, list[str]]] | None = None,
) -> None:
    """Registers a generated file: its line map, and its functions' return-value variables."""
    _SOURCE_MAPS[filename] = lines
    _RETURN_VALUES[filename] = return_values or {}


def is_generated(filename: str) -> bool:
    """Whether `filename` holds code the transpiler generated."""
    return filename in _SOURCE_MAPS


def user_location(filename: str, lineno: int) -> tuple[str, int] | None:
    """The user's (file, line) behind a line of generated code, or None for other code."""
    lines = _SOURCE_MAPS.get(filename)
    if lines is None:
        return None
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
            if frame.f_code.co_filename in _RETURN_VALUES:
                return _RETURN_VALUES[frame.f_code.co_filename].get(name)
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
    import linecache

    text = linecache.getline(filename, lineno).strip()
    return f"while running converted code at {_display(filename)}:{lineno}: {text}"
