"""What the program generators share: a seeded random source and the lines written so far."""

from __future__ import annotations

import random


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
