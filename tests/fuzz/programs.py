"""Random programs mixing every converted construct, over integers so results compare exactly.

Each program is a function `f(x, y)` of two ints: nested `if`/`elif`/`else`, `for` over small
ranges, `while` loops (each bounded by its own counter, incremented first so `continue` cannot
skip it, some also by `loop_options(max_iterations=...)`), `break`, `continue`, `return` under
conditions, ternaries, `and`/`or`/`not`, chained comparisons, calls of a helper with early
returns, `append`s to a list inside loops whose length is part of the result, and a boolean
flag `c` (set from conditions, read in them, part of the result), and dynamic-programming rows
(a list built before a loop over a range, appended to once an iteration, read at the index plus
or minus a literal, in range or not), lists only read in a loop at its index, nested loops
whose inner range reads the outer index, and `while` tests Python's `True` while a counter is
low (`(c or k < 2) and k < 4`). Values stay small (`% 97`),
so int32 under `jax.jit` equals Python's ints.
"""

from __future__ import annotations

import random


class _Generator:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.counters = 0
        self.lines: list[str] = []

    def expr(self, depth=0) -> str:
        r = self.rng.random()
        atoms = ["a", "b", "x", "y", str(self.rng.randint(0, 9))]
        if depth > 1 or r < 0.4:
            return self.rng.choice(atoms)
        if r < 0.75:
            op = self.rng.choice(["+", "-", "*"])
            return f"(({self.expr(depth + 1)} {op} {self.expr(depth + 1)}) % 97)"
        if r < 0.85:
            return f"helper({self.expr(depth + 1)})"
        return f"({self.expr(depth + 1)} if {self.cond(depth + 1)} else {self.expr(depth + 1)})"

    def cond(self, depth=0) -> str:
        r = self.rng.random()
        cmp = self.rng.choice(["<", ">", "<=", ">=", "==", "!="])
        simple = f"{self.expr(depth + 1)} {cmp} {self.expr(depth + 1)}"
        if self.rng.random() < 0.12:
            return self.rng.choice(["c", "not c", f"(c or {simple})", f"(c and {simple})"])
        if depth > 1 or r < 0.5:
            return simple
        if r < 0.65:
            return f"{self.expr(depth + 1)} < {self.expr(depth + 1)} < {self.expr(depth + 1)}"
        if r < 0.8:
            op = self.rng.choice(["and", "or"])
            return f"({simple} {op} {self.cond(depth + 1)})"
        return f"not ({simple})"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def block(self, indent: int, depth: int, in_loop: bool, can_append: bool = False) -> None:
        for _ in range(self.rng.randint(1, 3)):
            self.statement(indent, depth, in_loop, can_append)

    def statement(self, indent: int, depth: int, in_loop: bool, can_append: bool) -> None:
        # Appends only where every enclosing loop has a known bound (a staged list needs one).
        if depth < 3 and self.rng.random() < 0.07:
            self.row_loop(indent, depth, can_append)
            return
        if depth < 3 and self.rng.random() < 0.05:
            self.table_loop(indent, depth, can_append)
            return
        if depth < 2 and self.rng.random() < 0.05:
            self.triangle(indent, depth, can_append)
            return
        r = self.rng.random()
        if can_append and self.rng.random() < 0.15:
            self.emit(indent, f"acc.append({self.expr()})")
        if self.rng.random() < 0.1:
            self.emit(indent, self.rng.choice([f"c = {self.cond()}", "c = not c", "c = True"]))
        if depth >= 3 or r < 0.35:
            self.emit(indent, f"{self.rng.choice('ab')} = {self.expr()}")
        elif r < 0.55:
            self.emit(indent, f"if {self.cond()}:")
            self.block(indent + 1, depth + 1, in_loop, can_append)
            if self.rng.random() < 0.3:
                self.emit(indent, f"elif {self.cond()}:")
                self.block(indent + 1, depth + 1, in_loop, can_append)
            if self.rng.random() < 0.5:
                self.emit(indent, "else:")
                self.block(indent + 1, depth + 1, in_loop, can_append)
        elif r < 0.7:
            self.emit(indent, f"for i{depth} in range({self.rng.randint(0, 4)}):")
            self.emit(indent + 1, f"a = (a + i{depth}) % 97")
            self.block(indent + 1, depth + 1, True, can_append or depth == 0)
            if self.rng.random() < 0.2:
                self.emit(indent, "else:")
                self.emit(indent + 1, "b = (b + 1) % 97")
        elif r < 0.8:
            k = f"k{self.counters}"
            self.counters += 1
            self.emit(indent, f"{k} = 0")
            if self.rng.random() < 0.3:  # Python's True while the counter is low
                least = self.rng.randint(0, 3)
                self.emit(indent, f"while ({self.cond()} or {k} < {least}) and {k} < 4:")
            else:
                self.emit(indent, f"while {self.cond()} and {k} < 4:")
            bounded = self.rng.random() < 0.5
            if bounded:
                self.emit(indent + 1, "transpiler.loop_options(max_iterations=4)")
            self.emit(indent + 1, f"{k} += 1")
            self.block(indent + 1, depth + 1, True, bounded and (can_append or depth == 0))
            if self.rng.random() < 0.2:
                self.emit(indent, "else:")
                self.emit(indent + 1, "a = (a * 2) % 97")
        elif r < 0.9 and in_loop:
            self.emit(indent, f"if {self.cond()}:")
            self.emit(indent + 1, self.rng.choice(["break", "continue"]))
        else:
            self.emit(indent, f"if {self.cond()}:")
            self.emit(indent + 1, f"return {self.expr()}")

    def row_loop(self, indent: int, depth: int, can_append: bool) -> None:
        """A dynamic-programming row: a list built just before a loop over a range, one item
        appended in every iteration, read at the index plus or minus a literal (in range or
        not: Python's IndexError then), before the append and after it."""
        j, row = f"j{depth}", f"row{self.counters}"
        self.counters += 1
        start, stop = self.rng.randint(0, 2), self.rng.randint(0, 6)
        items = ", ".join(self.expr(2) for _ in range(self.rng.randint(1, 3)))
        self.emit(indent, f"{row} = [{items}]")
        self.emit(indent, f"for {j} in range({start}, {stop}):")
        if self.rng.random() < 0.4:
            self.block(indent + 1, depth + 1, True, can_append)
        self.emit(indent + 1, f"{row}.append(({row}[{self.offset(j)}] + {self.expr()}) % 97)")
        if self.rng.random() < 0.4:
            self.emit(indent + 1, f"a = (a + {row}[{self.offset(j)}]) % 97")
        self.emit(indent, f"b = (b + {row}[-1] + len({row})) % 97")

    def table_loop(self, indent: int, depth: int, can_append: bool) -> None:
        """A list built before a loop over a range (forward, backward or stepped) and only
        read in it, at the index plus or minus a literal (in range or not) and at a literal."""
        j, tab = f"j{depth}", f"tab{self.counters}"
        self.counters += 1
        items = ", ".join(self.expr(2) for _ in range(self.rng.randint(1, 4)))
        self.emit(indent, f"{tab} = [{items}]")
        start, stop = self.rng.randint(-1, 3), self.rng.randint(-1, 5)
        step = self.rng.choice(["", "", ", 2", ", -1", ", -2"])
        if step.startswith(", -"):
            start, stop = stop, start
        self.emit(indent, f"for {j} in range({start}, {stop}{step}):")
        if self.rng.random() < 0.4:
            self.block(indent + 1, depth + 1, True, can_append)
        self.emit(indent + 1, f"a = (a + {tab}[{self.offset(j)}] * {j}) % 97")
        if self.rng.random() < 0.3:
            self.emit(indent + 1, f"b = (b + {tab}[-1]) % 97")

    def triangle(self, indent: int, depth: int, can_append: bool) -> None:
        """Nested loops whose inner range reads the outer index."""
        i, j = f"i{depth}", f"j{depth}"
        n = self.rng.randint(0, 4)
        self.emit(indent, f"for {i} in range({n}):")
        inner = self.rng.choice(
            [f"{i}", f"{n} - 1 - {i}", f"{i}, {n}", f"{n}, {i}, -1", f"{i} + 1"]
        )
        self.emit(indent + 1, f"for {j} in range({inner}):")
        self.emit(indent + 2, f"a = (a + {j} * {i} + b) % 97")
        if self.rng.random() < 0.5:
            self.block(indent + 2, depth + 2, True, can_append)
        if self.rng.random() < 0.3:
            self.emit(indent + 1, "b = (b + a) % 97")

    def offset(self, j: str) -> str:
        c = self.rng.choice([-3, -2, -1, -1, 0, 1, 2])
        return j if c == 0 else f"{j} {'+' if c > 0 else '-'} {abs(c)}"

    def program(self) -> str:
        self.lines += [
            "import transpiler",
            "",
            "",
            "def helper(v):",
            "    if v > 50:",
            "        return v - 50",
            "    return (v * 3) % 97",
            "",
            "",
            "def f(x, y):",
            "    a = x % 97",
            "    b = y % 97",
            "    acc = []",
            "    c = False",
        ]
        self.block(1, 0, False)
        self.emit(1, "return (a + b + len(acc) + (1 if c else 0)) % 97")
        return "\n".join(self.lines) + "\n"


def program(seed: int) -> str:
    """The source of random program number `seed`."""
    return _Generator(seed).program()
