"""What the program generators share: a seeded random source and the lines written so far."""

from __future__ import annotations

import random
from typing import NamedTuple


class Ctx(NamedTuple):
    """Where a statement is being written: what it may do there."""

    loop: bool  # break / continue allowed
    bounded: bool  # appends allowed: every enclosing loop has a static bound
    names: tuple  # loop indices readable here
    depth: int

    def nest(self, **kw):
        return self._replace(depth=self.depth + 1, **kw)


class ProgramWriter:
    """Writes a program line by line from `seed` (the same seed, the same program)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.n = 0  # fresh-name counter
        self.lines: list[str] = []

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def if_elif_else(self, indent: int, cond, block) -> None:
        """An `if` (an `elif` three times in ten, an `else` every other time): `cond()` writes a
        test, `block()` a body at `indent + 1`."""
        self.emit(indent, f"if {cond()}:")
        block()
        if self.chance(0.3):
            self.emit(indent, f"elif {cond()}:")
            block()
        if self.chance(0.5):
            self.emit(indent, "else:")
            block()
