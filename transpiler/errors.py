"""Errors raised while converting code, with the user's file:line."""

from __future__ import annotations

from transpiler.origins import Location


class ConversionError(Exception):
    """The function cannot be converted: its source is unavailable or uses unsupported syntax."""

    def __init__(self, message: str, location: Location | None = None, hint: str = ""):
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.message
        if self.location is not None:
            loc = self.location
            text = f"{loc}:{loc.col_offset + 1}: {text}"
            if loc.source_line:
                text += f"\n    {loc.source_line}"
        if self.hint:
            text += f"\n{self.hint}"
        return text


class ConversionWarning(UserWarning):
    """A function that cannot be converted runs unconverted (`convert(fn, on_error="warn")`)."""
