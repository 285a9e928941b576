"""Random "model code" programs: objects, globals, containers, prints, match, try, walrus, ...

`program(seed)` returns the source of a module defining `f(x, y)` over two Python ints plus:

- `reset()`: puts every module-level value (globals, module-level objects, a list, a dict) back
  to its start value; the harness calls it before each run;
- `snapshot()`: the module-level state after a run (compared exactly on the Python path);
- `CLASSES`: the construct classes (numbers of `CLASS_NAMES`) the program contains.

`f` always returns a flat tuple of ints: `a`, `b` and whatever state the program exposes
(`len(acc)`, object attributes, the items of an object's list attributes, the global counter,
dict entries, list lengths), so results
compare exactly under `jax.jit` and `jax.vmap` too. Values stay small (`% 97`, loops of at
most 4 iterations), so int32 under jit equals Python's ints. Every program runs under plain
Python without an exception on any input: temporaries are bound on every path that reads them,
`pop()`/`max()` are guarded, `while` loops have counters, and no `break`/`continue`/`return`
leaves a `finally` block (PEP 765; the converter refuses those, see `harness.PEP765_SNIPPETS`).

Each seed enables a random subset of the construct classes (each with probability 1/2, at least
three); every enabled class is emitted at least once at the top level of `f` and then again at
random inside nested blocks.
"""

from __future__ import annotations

from typing import NamedTuple

from tests.fuzz.writer import ProgramWriter

CLASS_NAMES = {
    1: "temporaries bound in both branches / del + rebind",
    2: "walrus := (if, while, and/or, ternary)",
    3: "try/finally with return/break, loop in finally",
    4: "match on ints (literals, guards, captures)",
    5: "methods mutating objects",
    6: "helpers writing module globals",
    7: "list.pop() and dict writes",
    8: "prints (constant, values, f-strings)",
    9: "conditional appends + reductions",
    10: "jax.grad / jax.vmap of user helpers",
    11: "and/or with a static Python bool operand",
    12: "reversed(range), range alias, `in` containers",
    13: "nested if/while/for/break/continue/return",
    14: "loops on Python values that the first iteration makes traced",
    15: "Python ints as Python: int powers, enumerate's index, replaced lists, ranges",
    16: "lists and dicts a staged branch or loop rebinds: aliases, swaps, choices",
    17: "text made before it is printed, names a lambda reads, a float against an int",
    18: "lists a staged branch or loop chooses, changed where conversion cannot see it",
    19: "list surgery under traced conditions: pop, swaps, loops, comprehensions",
    20: "ranges and iterators as objects: truth, ==, sum/min/max, reuse, the index after",
    21: "tables and stacks: items set by staged ifs read at traced indices, pops pushed back",
    22: "lists of an object stored into attributes or dict items in staged code, changed by methods",
    23: "tuples and namedtuples holding lists through staged ifs and loops, changed after",
    24: "lists and dicts min/max/sorted pick by traced keys: read, changed, compared, let go of",
}


class _Ctx(NamedTuple):
    loop: bool  # break/continue allowed (the innermost loop is inside the current finally, if any)
    bounded: bool  # appends allowed: every enclosing loop has a static bound
    in_finally: bool  # no return
    names: tuple  # loop indices / captures readable here
    depth: int

    def nest(self, **kw):
        return self._replace(depth=self.depth + 1, **kw)


class _Lst:
    """A list class 19 builds: its length where Python knows it (`None` where traced) and the
    least length it has in Python on any input (what a pop or an index may rely on)."""

    def __init__(self, name: str):
        self.name = name
        self.known: int | None = 0
        self.least = 0


class _Generator(ProgramWriter):
    def __init__(self, seed: int):
        super().__init__(seed)
        classes = [c for c in CLASS_NAMES if self.rng.random() < 0.5]
        while len(classes) < 3:
            c = self.rng.choice(list(CLASS_NAMES))
            if c not in classes:
                classes.append(c)
        self.enabled = sorted(classes)
        self.used: set[int] = set()
        self.kind = self.rng.randint(0, 4)  # a static int some `match` statements look at

    # -- helpers ------------------------------------------------------------------------------

    def on(self, c: int) -> bool:
        return c in self.enabled

    def atom(self, ctx: _Ctx) -> str:
        atoms = ["a", "b", "a", "b", "x", "y", str(self.rng.randint(0, 9))]
        atoms += list(ctx.names)
        if self.on(5):
            atoms.append("obj.total")
        if self.on(6):
            atoms.append("COUNT")
        if self.on(7):
            atoms.append('d["k"]')
        return self.rng.choice(atoms)

    def expr(self, ctx: _Ctx, depth: int = 0) -> str:
        r = self.rng.random()
        if depth > 1 or r < 0.4:
            return self.atom(ctx)
        if r < 0.8:
            op = self.rng.choice(["+", "-", "*"])
            return f"(({self.expr(ctx, depth + 1)} {op} {self.expr(ctx, depth + 1)}) % 97)"
        if r < 0.88:
            return f"helper({self.expr(ctx, depth + 1)})"
        if r < 0.94:  # Python's conditional idiom: b where a and b are true, else c
            return (
                f"({self.cond(ctx, depth + 1)} and {self.expr(ctx, depth + 1)} "
                f"or {self.expr(ctx, depth + 1)})"
            )
        return (
            f"({self.expr(ctx, depth + 1)} if {self.cond(ctx, depth + 1)} "
            f"else {self.expr(ctx, depth + 1)})"
        )

    def cond(self, ctx: _Ctx, depth: int = 0) -> str:
        r = self.rng.random()
        cmp = self.rng.choice(["<", ">", "<=", ">=", "==", "!="])
        simple = f"{self.expr(ctx, depth + 1)} {cmp} {self.expr(ctx, depth + 1)}"
        if depth > 1 or r < 0.6:
            return simple
        if r < 0.7:
            return f"{self.atom(ctx)} < {self.atom(ctx)} < {self.atom(ctx)}"
        if r < 0.85:
            op = self.rng.choice(["and", "or"])
            return f"({simple} {op} {self.cond(ctx, depth + 1)})"
        return f"not ({simple})"

    def assign(self, indent: int, ctx: _Ctx) -> None:
        v = self.rng.choice("ab")
        self.emit(indent, f"{v} = (({v} + {self.expr(ctx)}) % 97)")

    def block(self, indent: int, ctx: _Ctx, n: tuple[int, int] = (1, 3)) -> None:
        for _ in range(self.rng.randint(*n)):
            self.statement(indent, ctx)

    def statement(self, indent: int, ctx: _Ctx, cls: int | None = None) -> None:
        if cls is None:
            if ctx.depth >= 3 or self.chance(0.3):
                self.assign(indent, ctx)
                return
            cls = self.rng.choice(self.enabled)
        self.used.add(cls)
        getattr(self, f"c{cls}")(indent, ctx)

    def loop_ctx(self, ctx: _Ctx, index: str | None, bounded: bool) -> _Ctx:
        names = ctx.names + ((index,) if index else ())
        return ctx.nest(loop=True, bounded=ctx.bounded and bounded, names=names)

    def for_header(self, indent: int, index: str) -> None:
        self.emit(indent, f"for {index} in range({self.rng.choice([0, 1, 2, 3, 3, 4])}):")

    def exit_statement(self, indent: int, ctx: _Ctx) -> None:
        """`break`/`continue`/`return` under a condition, where each is allowed."""
        options = []
        if ctx.loop:
            options += ["break", "continue"]
        if not ctx.in_finally:
            options.append("return")
        if not options:
            self.assign(indent, ctx)
            return
        kind = self.rng.choice(options)
        self.emit(indent, f"if {self.cond(ctx)}:")
        if kind == "return":
            self.emit(indent + 1, f"a = {self.expr(ctx)}")
            self.emit(indent + 1, f"return {self.ret}")
        else:
            self.emit(indent + 1, kind)

    # -- 1: temporaries bound in both branches; del + rebind ----------------------------------

    def c1(self, indent: int, ctx: _Ctx) -> None:
        if not ctx.loop or self.chance(0.3):
            i = self.fresh("i")
            self.for_header(indent, i)
            indent, ctx = indent + 1, self.loop_ctx(ctx, i, True)
        t = self.fresh("t")
        r = self.rng.random()
        if r < 0.6:
            self.emit(indent, f"if {self.cond(ctx)}:")
            if ctx.loop and self.chance(0.2):
                self.emit(indent + 1, f"if {self.cond(ctx)}:")
                self.emit(indent + 2, self.rng.choice(["continue", "break"]))
            self.emit(indent + 1, f"{t} = {self.expr(ctx)}")
            if ctx.depth < 2 and self.chance(0.3):
                self.block(indent + 1, ctx.nest(), (1, 1))
            self.emit(indent, "else:")
            self.emit(indent + 1, f"{t} = {self.expr(ctx)}")
        elif r < 0.8:
            self.emit(indent, f"{t} = {self.expr(ctx)}")
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"del {t}")
            self.emit(indent + 1, f"{t} = {self.expr(ctx)}")
        else:
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"{t} = {self.expr(ctx)}")
            self.emit(indent + 1, f"a = ((a + {t}) % 97)")
            self.emit(indent + 1, f"del {t}")
            self.emit(indent, f"{t} = {self.expr(ctx)}")
        self.emit(indent, f"{self.rng.choice('ab')} = (({self.rng.choice('ab')} + {t}) % 97)")

    # -- 2: walrus ----------------------------------------------------------------------------

    def c2(self, indent: int, ctx: _Ctx) -> None:
        t = self.fresh("w")
        r = self.rng.random()
        if r < 0.3:
            self.emit(indent, f"if ({t} := {self.expr(ctx)}) > {self.rng.randint(0, 60)}:")
            self.block(indent + 1, ctx.nest(names=ctx.names + (t,)), (1, 2))
            if self.chance(0.5):
                self.emit(indent, "else:")
                self.emit(indent + 1, f"b = ((b + {t}) % 97)")
        elif r < 0.55:
            self.emit(indent, f"{t} = {self.rng.choice(['x', 'y', 'a', 'b'])} % 3 + 2")
            self.emit(indent, f"while ({t} := {t} - 1) > 0:")
            bounded = self.chance(0.4)
            if bounded:
                self.emit(indent + 1, "transpiler.loop_options(max_iterations=4)")
            self.block(indent + 1, self.loop_ctx(ctx, t, bounded), (1, 2))
        elif r < 0.8:
            self.emit(indent, f"{t} = {self.rng.randint(0, 5)}")
            op = self.rng.choice(["and", "or"])
            cmp = self.rng.choice([">", "<", "!="])
            self.emit(
                indent,
                f"if {self.cond(ctx, 1)} {op} ({t} := {self.expr(ctx)}) {cmp} "
                f"{self.rng.randint(0, 60)}:",
            )
            self.block(indent + 1, ctx.nest(names=ctx.names + (t,)), (1, 2))
        else:
            self.emit(indent, f"{t} = {self.rng.randint(0, 5)}")
            self.emit(
                indent,
                f"a = ({t} := {self.expr(ctx)}) if {self.cond(ctx)} else {self.expr(ctx)}",
            )
        self.emit(indent, f"{self.rng.choice('ab')} = (({self.rng.choice('ab')} + {t}) % 97)")

    # -- 3: try/finally -----------------------------------------------------------------------

    def c3(self, indent: int, ctx: _Ctx) -> None:
        if not ctx.loop and not ctx.in_finally and self.chance(0.3):
            # return inside the try body, state changed in finally
            self.emit(indent, "try:")
            self.block(indent + 1, ctx.nest(), (0, 1))
            self.exit_statement(indent + 1, ctx.nest())
            self.assign(indent + 1, ctx)
        else:
            if not ctx.loop or self.chance(0.4):
                i = self.fresh("i")
                self.for_header(indent, i)
                indent, ctx = indent + 1, self.loop_ctx(ctx, i, True)
            self.emit(indent, "try:")
            inner = ctx.nest()
            if self.chance(0.5):
                self.block(indent + 1, inner, (1, 1))
            self.exit_statement(indent + 1, inner)
            self.assign(indent + 1, inner)
        self.emit(indent, "finally:")
        fin = ctx.nest(loop=False, in_finally=True)
        self.assign(indent + 1, fin)
        if self.chance(0.5):
            j = self.fresh("j")
            self.emit(indent + 1, f"for {j} in range({self.rng.randint(1, 4)}):")
            body = self.loop_ctx(fin, j, True)
            self.emit(indent + 2, f"if {self.cond(body)}:")
            self.emit(indent + 3, self.rng.choice(["break", "continue"]))
            self.assign(indent + 2, body)
        elif self.chance(0.5) and fin.depth < 3:
            self.block(indent + 1, fin, (1, 1))

    # -- 4: match -----------------------------------------------------------------------------

    def c4(self, indent: int, ctx: _Ctx) -> None:
        # traced under jit (a, b, a loop index) or a Python int even then (`kind`, a constant)
        subjects = ["a % 5", "b % 4", "(a + b) % 6", "kind", "kind", "kind"]
        subjects += [f"{n} % 4" for n in ctx.names[-1:]]
        self.emit(indent, f"match {self.rng.choice(subjects)}:")
        inner = ctx.nest()
        for lit in sorted(self.rng.sample(range(5), self.rng.randint(1, 2))):
            pattern = str(lit) if self.chance(0.7) else f"{lit} | {lit + 5}"
            self.emit(indent + 1, f"case {pattern}:")
            self.block(indent + 2, inner, (1, 2))
        if self.chance(0.6):
            v = self.fresh("v")
            self.emit(indent + 1, f"case {v} if {v} > {self.rng.randint(1, 3)}:")
            self.emit(indent + 2, f"b = ((b + {v}) % 97)")
            if self.chance(0.5):
                self.block(indent + 2, inner.nest(names=inner.names + (v,)), (1, 1))
        last = self.rng.random()
        if last < 0.4:
            v = self.fresh("v")
            self.emit(indent + 1, f"case {v}:")
            self.emit(indent + 2, f"a = ((a * 2 + {v}) % 97)")
        elif last < 0.8:
            self.emit(indent + 1, "case _:")
            self.block(indent + 2, inner, (1, 2))

    # -- 5: methods mutating objects ----------------------------------------------------------

    def c5(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        e = self.expr(ctx)
        if r < 0.3:
            self.emit(indent, f"obj.add({e})")
        elif r < 0.5:
            self.emit(indent, f"a = ((a + obj.bump({e})) % 97)")
        elif r < 0.65:
            self.emit(indent, f"push(obj, {e})")
        elif r < 0.8:
            self.emit(indent, f"STATE.add({e})")
        else:
            n = self.rng.choice(["2", "b % 3", "x % 3"])
            self.emit(indent, f"obj.spin({n})")

    # -- 6: helpers writing module globals ----------------------------------------------------

    def c6(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if r < 0.5:
            self.emit(indent, f"record({self.expr(ctx)})")
        elif r < 0.8:
            self.emit(indent, f"b = ((b + note({self.expr(ctx)})) % 97)")
        else:
            self.emit(indent, "a = ((a + COUNT) % 97)")

    # -- 7: list.pop() and dict writes --------------------------------------------------------

    def c7(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if r < 0.2:
            self.emit(indent, f"if {self.rng.choice(['lst', 'len(lst) > 0'])}:")
            self.emit(indent + 1, "a = ((a + lst.pop()) % 97)")
        elif r < 0.3:
            self.emit(indent, "if len(LST) > 1:")
            self.emit(indent + 1, "b = ((b * LST.pop()) % 97)")
        elif r < 0.45:
            self.emit(indent, f'd["{self.rng.choice("km")}"] = {self.expr(ctx)}')
        elif r < 0.6:
            self.emit(indent, f'd["m"] += {self.expr(ctx)}')
            self.emit(indent, 'd["m"] %= 97')
        elif r < 0.75:
            key = self.fresh("key")
            self.emit(indent, f'for {key} in ("k", "m"):')
            if self.chance(0.5):
                self.emit(indent + 1, f"d[{key}] += {self.expr(ctx)}")
                self.emit(indent + 1, f"d[{key}] %= 97")
            else:
                self.emit(indent + 1, f"d[{key}] = ((d[{key}] + {self.expr(ctx)}) % 97)")
        elif r < 0.85:
            self.emit(indent, f'D["n"] = ((D["n"] + {self.expr(ctx)}) % 97)')
        elif ctx.bounded:
            self.emit(indent, f"lst.append({self.expr(ctx)})")
        else:
            self.emit(indent, 'a = ((a + d["m"]) % 97)')

    # -- 8: prints ----------------------------------------------------------------------------

    def c8(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if r < 0.35:
            self.emit(indent, f'print("hit", {self.n})')
            self.n += 1
        elif r < 0.65:
            v = self.rng.choice(["a", "b"] + list(ctx.names))
            self.emit(indent, f'print("{v}", {v})')
        elif r < 0.85:
            v = self.rng.choice(["a", "b"] + list(ctx.names))
            self.emit(indent, f'print(f"{v}={{{v}}}")')
        else:
            self.emit(indent, 'print("ab", a, b, sep=":")')

    # -- 9: conditional appends + reductions --------------------------------------------------

    def c9(self, indent: int, ctx: _Ctx) -> None:
        if self.chance(0.25):
            self.filtered_comprehension(indent, ctx)
            return
        if ctx.bounded and ctx.loop and self.chance(0.4):
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"acc.append({self.expr(ctx)})")
            return
        if ctx.bounded:
            i = self.fresh("i")
            self.for_header(indent, i)
            body = self.loop_ctx(ctx, i, True)
            if self.chance(0.3) and ctx.depth < 2:
                self.block(indent + 1, body, (1, 1))
            self.emit(indent + 1, f"if {self.cond(body)}:")
            self.emit(indent + 2, f"acc.append({self.expr(body)})")
        r = self.rng.random()
        if r < 0.2:
            self.emit(indent, "a = ((a + len(acc)) % 97)")
        elif r < 0.4:
            self.emit(indent, "b = ((b + sum(acc)) % 97)")
        elif r < 0.6:
            self.emit(indent, "if len(acc) > 0:")
            self.emit(indent + 1, "a = ((a + int(jnp.sum(jnp.array(acc)))) % 97)")
        elif r < 0.8:
            self.emit(indent, f"if {self.rng.choice(['acc', 'len(acc) > 0'])}:")
            self.emit(indent + 1, "b = ((b + max(acc)) % 97)")
        else:
            self.emit(indent, "for item in acc:")
            self.emit(indent + 1, "a = ((a * 3 + item) % 97)")

    def filtered_comprehension(self, indent: int, ctx: _Ctx) -> None:
        """A comprehension whose filter reads the item and `a`/`b` (traced under jit): a list
        of traced length, reduced; or a filtered generator that `sum`/`max`/`min` consume."""
        v = self.fresh("v")
        items = self.rng.choice(["[a, b, x, y]", "range(4)", "[a, x + 1]", "range(n0)"])
        if items == "range(n0)":
            self.emit(indent, f"n0 = {self.rng.randint(0, 3)}")
        inner = ctx.nest(names=ctx.names + (v,))
        test = self.rng.choice(
            [f"{v} {self.rng.choice(['<', '>', '!='])} {self.expr(ctx)}", self.cond(inner)]
        )
        if self.rng.random() < 0.3:  # two filters: the second read only where the first holds
            test = f"{test} if {v} % {self.rng.choice([2, 3])} != 0"
        elt = self.rng.choice([v, f"(({v} + {self.atom(ctx)}) % 97)", f"({v} * 2)"])
        r = self.rng.random()
        if r < 0.25:
            self.emit(indent, f"b = ((b + sum({elt} for {v} in {items} if {test})) % 97)")
        elif r < 0.4:
            how = self.rng.choice(["max", "min"])
            self.emit(
                indent, f"a = ((a + {how}(({elt} for {v} in {items} if {test}), default=3)) % 97)"
            )
        else:
            kept = self.fresh("kept")
            self.emit(indent, f"{kept} = [{elt} for {v} in {items} if {test}]")
            use = self.rng.choice(
                [
                    f"a = ((a + len({kept})) % 97)",
                    f"b = ((b + sum({kept}, 1)) % 97)",
                    f"a = ((a + max({kept}, default=0)) % 97)",
                    "b = ((b + any([k > 50 for k in [a, b, x] if k % 2 == 0])) % 97)",
                    f"b = ((b + all([k > 5 for k in {kept}])) % 97)",
                ]
            )
            self.emit(indent, use)

    # -- 10: jax.grad / jax.vmap of user helpers ----------------------------------------------

    def c10(self, indent: int, ctx: _Ctx) -> None:
        v = self.rng.choice("ab")
        w = self.rng.choice(["a", "b", "x", "y"] + list(ctx.names))
        options = [
            f"int(jax.grad(lambda v: v * v * 3.0)(float({w} % 5)))",
            f"int(jax.grad(sq)(float({w} % 7)))",
            f"int(jax.grad(transpiler.convert(gsel))(float({w} % 4)))",
            f"int(jnp.sum(jax.vmap(vh)(jnp.arange(3) + {w})))",
            f"int(jnp.sum(jax.vmap(transpiler.convert(helper))(jnp.arange(3) + {w})))",
        ]
        self.emit(indent, f"{v} = (({v} + {self.rng.choice(options)}) % 97)")

    # -- 11: and/or with a static Python bool -------------------------------------------------

    def c11(self, indent: int, ctx: _Ctx) -> None:
        static = self.rng.choice(
            ["len(acc) >= 0", "n > 2", "jnp.ndim(a) == 0", "jnp.shape(b) == ()", "n < 2"]
        )
        op = self.rng.choice(["and", "or"])
        if self.chance(0.7):
            left, right = self.cond(ctx, 1), static
            if self.chance(0.3):
                left, right = right, left
            self.emit(indent, f"if {left} {op} {right}:")
            self.block(indent + 1, ctx.nest(), (1, 2))
            if self.chance(0.3):
                self.emit(indent, "else:")
                self.block(indent + 1, ctx.nest(), (1, 1))
        else:
            c = self.fresh("c")
            self.emit(indent, f"{c} = {self.cond(ctx, 1)} {op} {static}")
            self.emit(indent, f"a = ((a + int({c})) % 97)")

    # -- 12: reversed(range), range alias, `in` -----------------------------------------------

    def c12(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if r < 0.5:
            i = self.fresh("i")
            bound = str(self.rng.randint(0, 4))
            static = True
            if self.chance(0.3):
                bound, static = self.rng.choice(["b % 4", "x % 3"]), False
            it = self.rng.choice([f"reversed(range({bound}))", f"r({bound})"])
            self.emit(indent, f"for {i} in {it}:")
            body = self.loop_ctx(ctx, i, static)
            self.emit(indent + 1, f"a = ((a * 2 + {i}) % 97)")
            if ctx.depth < 3:
                self.block(indent + 1, body, (0, 2))
        else:
            lhs = self.rng.choice(["a", "b", "a % 5"] + list(ctx.names))
            container = self.rng.choice(["(1, 2, 5, 30)", "[0, 3, 7]", "{1, 4, 9}"])
            if self.on(9) and self.chance(0.2):
                container = "acc"
            if self.on(7) and self.chance(0.2):
                container = "lst"
            neg = self.rng.choice(["in", "not in"])
            if self.chance(0.3):
                self.emit(indent, f"b = ((b + (1 if {lhs} {neg} {container} else 2)) % 97)")
            else:
                self.emit(indent, f"if {lhs} {neg} {container}:")
                self.block(indent + 1, ctx.nest(), (1, 2))

    # -- 13: nested if/while/for/break/continue/return ----------------------------------------

    def c13(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if r < 0.3:
            self.if_elif_else(
                indent, lambda: self.cond(ctx), lambda: self.block(indent + 1, ctx.nest())
            )
        elif r < 0.55:
            i = self.fresh("i")
            self.for_header(indent, i)
            self.emit(indent + 1, f"a = ((a + {i}) % 97)")
            self.block(indent + 1, self.loop_ctx(ctx, i, True))
            if self.chance(0.2):
                self.emit(indent, "else:")
                self.emit(indent + 1, "b = ((b + 1) % 97)")
        elif r < 0.75:
            k = self.fresh("k")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"while {self.cond(ctx)} and {k} < 4:")
            bounded = self.chance(0.5)
            if bounded:
                self.emit(indent + 1, "transpiler.loop_options(max_iterations=4)")
            self.emit(indent + 1, f"{k} += 1")
            self.block(indent + 1, self.loop_ctx(ctx, None, bounded))
        else:
            self.exit_statement(indent, ctx)

    # -- 14: loops on Python values that their first iteration makes traced ---------------------

    def c14(self, indent: int, ctx: _Ctx) -> None:
        """`s = 0; while k < 3 and s <= 60: ...` or `done = False; while not done:` or `for i in
        range(n): s = s + ...`: Python at first, traced after one iteration (under jit), with
        now and then an effect in the first iteration only, or an exit at the top of the body."""
        s, k = self.fresh("s"), self.fresh("k")
        r = self.rng.random()
        # `1 << 20` (in a loop Python starts, below): Python's int arithmetic on it differs from
        # int32's; a loop staged before it starts computes with int32 from its start, which a
        # program of small ints must not meet.
        start = self.rng.choice(["0", "1", "5"] + (["1 << 20"] if r < 0.3 else []))
        self.emit(indent, f"{s} = {start}")
        if r < 0.6:
            self.emit(indent, f"{k} = 0")
            if r < 0.3:
                done = self.fresh("dn")
                self.emit(indent, f"{done} = False")
                self.emit(indent, f"while not {done}:")
            else:
                self.emit(indent, f"while {k} < 3 and {s} <= 60:")
            inner = self.loop_ctx(ctx, None, False)
            if self.chance(0.3):
                self.emit(indent + 1, f"if {self.cond(inner)}:")
                self.emit(indent + 2, "break")
            first = f"{k} == 0"
        else:
            i = self.fresh("i")
            self.emit(indent, f"for {i} in range({self.rng.choice([1, 2, 3, 4])}):")
            inner = self.loop_ctx(ctx, i, True)
            if self.chance(0.3):
                self.exit_statement(indent + 1, inner)
            first = f"{i} == 0"
        if self.chance(0.5):
            self.emit(indent + 1, f"if {first}:")
            self.first_iteration_effect(indent + 2, inner)
        if start == "1 << 20":
            self.emit(indent + 1, f"{s} = ((({s} * 4096) % 1009 + {self.expr(inner)}) % 97)")
        else:
            self.emit(indent + 1, f"{s} = (({s} + {self.expr(inner)}) % 97)")
        if r < 0.6:
            self.emit(indent + 1, f"{k} += 1")
        if r < 0.3:
            self.emit(indent + 1, f"{done} = {s} > {self.atom(inner)} or {k} >= 3")
        self.emit(indent, f"a = ((a + {s}) % 97)")

    # -- 15: Python ints used as Python ints ---------------------------------------------------

    def c15(self, indent: int, ctx: _Ctx) -> None:
        """A counter's negative power (a float in Python), the index of `enumerate` over an array
        used as text, a list a staged branch replaces in a loop that appends, a `for ... else`
        that returns, an `if` on two range indices that appends, `len`/`in` of a range whose
        bound may be traced, `max` of a generator."""
        r = self.rng.random()
        if r < 0.2:
            k = self.fresh("k")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"while {k} < 3 and {self.cond(ctx)}:")
            self.emit(indent + 1, f"{k} += 1")
            power = self.rng.choice([f"2 ** -{k}", f"{k} ** -1", f"pow(2, -{k})"])
            self.emit(indent + 1, f"a = ((a + int(64 * {power})) % 97)")
        elif r < 0.35:
            j, v = self.fresh("j"), self.fresh("v")
            self.emit(indent, f"for {j}, {v} in enumerate(jnp.array([a, b, 7])):")
            test = self.rng.choice([f'str({j}) == "1"', f"isinstance({j}, int) and {j} > 0"])
            self.emit(indent + 1, f"if {test}:")
            self.emit(indent + 2, f"a = ((a + int({v})) % 97)")
        elif r < 0.5 and ctx.bounded:
            best, k = self.fresh("best"), self.fresh("k")
            self.emit(indent, f"{best} = [a, 0]")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"while {k} < 3 and {self.cond(ctx)}:")
            self.emit(indent + 1, "transpiler.loop_options(max_iterations=3)")
            self.emit(indent + 1, f"{k} += 1")
            self.emit(indent + 1, f"if {self.cond(ctx)}:")
            self.emit(indent + 2, f"{best} = [{self.expr(ctx)}, {k}]")
            self.emit(indent + 1, f"acc.append({best}[0])")
            self.emit(indent, f"b = (({best}[0] + {best}[1] + b) % 97)")
        elif r < 0.6 and not ctx.in_finally:
            i = self.fresh("i")
            self.emit(indent, f"for {i} in range({self.rng.choice([0, 2, 3])}):")
            self.emit(indent + 1, f"if {self.cond(ctx.nest(names=ctx.names + (i,)))}:")
            self.emit(indent + 2, f"a = (a + {i}) % 97")
            self.emit(indent + 2, "break")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"return {self.ret}")
        elif r < 0.75 and ctx.bounded:
            t, u = self.fresh("t"), self.fresh("u")
            self.emit(indent, f"for {t} in range(3):")
            self.emit(indent + 1, f"for {u} in range({self.rng.choice(['3', t])}):")
            self.emit(indent + 2, f"if {t} {self.rng.choice(['==', '>', '!='])} {u}:")
            self.emit(indent + 3, f"acc.append((a + {t} * {u}) % 97)")
            self.emit(indent + 2, f"a = ((a + {u}) % 97)")
        elif r < 0.9:
            bound = self.rng.choice(["x % 5", "b % 4", "3"])
            self.emit(indent, f"a = ((a + len(range(1, {bound}, 2)) + (2 in range({bound}))) % 97)")
        else:
            self.emit(indent, f"b = ((b + max(v % 11 for v in [a, b, {self.atom(ctx)}])) % 97)")

    def c16(self, indent: int, ctx: _Ctx) -> None:
        """A list or dict that two names reach, one of them rebound in a staged branch (to the
        same object, another one, or a new one) and written through; a conditional expression
        that chooses a list to write; two lists swapped by the iterations of a staged loop."""
        pa, pb, cur = self.fresh("pa"), self.fresh("pb"), self.fresh("cur")
        self.emit(indent, f"{pa}, {pb} = [a, 1], [b, 2]")
        r = self.rng.random()
        if r < 0.45:
            self.emit(indent, f"{cur} = {pa}")
            self.emit(indent, f"if {self.cond(ctx)}:")
            other = self.rng.choice([pa, pb, f"[{self.expr(ctx)}, 3]", f"list({pa})"])
            self.emit(indent + 1, f"{cur} = {other}")
            if self.chance(0.5):
                self.emit(indent, "else:")
                self.emit(indent + 1, f"{cur} = {self.rng.choice([pa, pb, '[b, 4]'])}")
        elif r < 0.65:
            self.emit(indent, f"{cur} = {pa} if {self.cond(ctx)} else {self.rng.choice([pa, pb])}")
        elif r < 0.8:
            self.emit(indent, f"{cur} = {{'lr': a}}")
            self.emit(indent, f"{pa} = {cur}")
            self.emit(indent, f"if {self.cond(ctx)}:")
            other = self.rng.choice([pa, '{"lr": b}'])
            self.emit(indent + 1, f"{cur} = {other}")
            self.emit(indent, f'{cur}["lr"] = ({cur}["lr"] + {self.expr(ctx)}) % 97')
            self.emit(indent, f'a = (a + {pa}["lr"]) % 97')
            return
        else:
            nxt, k = self.fresh("nxt"), self.fresh("k")
            self.emit(indent, f"{cur}, {nxt} = {pa}, {pb}")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"while {k} < 3 and {self.cond(ctx)}:")
            self.emit(indent + 1, f"{nxt}[0] = ({cur}[0] + {k}) % 97")
            self.emit(indent + 1, f"{cur}, {nxt} = {nxt}, {cur}")
            self.emit(indent + 1, f"{k} += 1")
        self.emit(indent, f"{cur}[0] = ({cur}[0] + {self.expr(ctx)}) % 97")
        self.emit(indent, f"a = (a + {pa}[0] + 2 * {pb}[0] + {cur}[1]) % 97")

    def c18(self, indent: int, ctx: _Ctx) -> None:
        """A list two names may reach (one of them rebound in a staged branch or loop), then
        changed where conversion cannot follow the change: by a method of an object, a function
        kept in a list, a bound method in a variable, through `operator.itemgetter`, a `with`
        or `match` capture; then read through every name."""
        pa, pb, cur, q = self.fresh("pa"), self.fresh("pb"), self.fresh("cur"), self.fresh("q")
        self.emit(indent, f"{pa}, {pb} = [a, 1], [b, 2]")
        self.emit(indent, f"{cur} = {self.rng.choice([pa, '[5, 6]'])}")
        if self.chance(0.7):
            self.emit(indent, f"if {self.cond(ctx)}:")
            other = self.rng.choice([pa, pb, f"[{self.expr(ctx)}, 3]", f"list({pa})"])
            self.emit(indent + 1, f"{cur} = {other}")
            if self.chance(0.4):
                self.emit(indent, "else:")
                self.emit(indent + 1, f"{cur} = {self.rng.choice([pa, pb, '[b, 4]'])}")
        else:
            k = self.fresh("k")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"while {k} < 2 and {self.cond(ctx)}:")
            self.emit(indent + 1, f"{cur} = {self.rng.choice([pa, pb])}")
            self.emit(indent + 1, f"{k} += 1")
        target = self.rng.choice([pa, pb, cur])
        v = self.expr(ctx)
        change = self.rng.choice(
            [
                f"UPD.bump({target}, {v})",
                f"FNS[0]({target}, {v})",
                f"{q} = {target}.__setitem__\n{q}(0, ({target}[0] + {v}) % 97)",
                f"{q} = operator.itemgetter(0)([{target}])\n{q}[0] = ({q}[0] + {v}) % 97",
                f"with holding({target}) as {q}:\n    {q}[0] = ({q}[0] + {v}) % 97",
                f"match {target}:\n    case [_, _] as {q}:\n        {q}[0] = ({q}[0] + {v}) % 97",
            ]
        )
        for line in change.split("\n"):
            self.emit(indent, line)
        self.emit(indent, f"a = (a + {pa}[0] + 2 * {pb}[0] + 3 * {cur}[0] + {cur}[1]) % 97")

    def c17(self, indent: int, ctx: _Ctx) -> None:
        """Text made (f-string, str(), +, .format) and printed later; a variable first bound in
        both branches of an `if` and read by a lambda; a Python float against an int in a
        branch (refused where the condition is traced)."""
        r = self.rng.random()
        v = self.rng.choice(["a", "b"] + list(ctx.names))
        if r < 0.4:
            msg = self.fresh("msg")
            text = self.rng.choice(
                [f'f"{v}={{{v}}}"', f'"{v}:" + str({v})', f'"<{{}}>".format({v})', f"str({v})"]
            )
            self.emit(indent, f"{msg} = {text}")
            if self.chance(0.5):
                self.emit(indent, f"if {self.cond(ctx)}:")
                self.emit(indent + 1, f"print({msg})")
            else:
                self.emit(indent, f'print("m", {msg} + "!")')
        elif r < 0.85:
            s_ = self.fresh("s")
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"{s_} = {self.expr(ctx)}")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"{s_} = {self.expr(ctx)}")
            self.emit(indent, f"{v if v in 'ab' else 'a'} = ((lambda: {s_})() + a) % 97")
        else:
            w = self.fresh("w")
            self.emit(indent, f"{w} = 0.5")
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"{w} = {v}")
            self.emit(indent, f"a = (a + int({w} * 2)) % 97")

    # -- 19: list surgery under traced conditions --------------------------------------------

    def c19(self, indent: int, ctx: _Ctx) -> None:
        """A list of ints built in the program (appends under traced `if`s in a `for` over a
        small range), then changed under traced conditions: `pop()` / `pop(0)` (guarded: never
        of an empty list in Python), tuple swaps of items, `k, out[k] = ...` targets, a `for`
        over it (or `enumerate`, `zip`) appending to another list, comprehensions with and
        without a filter that may replace it; with prints of it, its length and `float(a)` in
        branches and loops; its length, sum and first item folded into `a`/`b`."""
        out = _Lst(self.fresh("out"))
        self.build_list(indent, ctx, out)
        for _ in range(self.rng.randint(1, 3)):
            op = self.rng.choice(
                [self.list_pop, self.list_pop, self.list_swap, self.list_loop, self.list_comp]
            )
            op(indent, ctx, out)
        self.list_fold(indent, ctx, out)

    # -- 20: ranges and iterators as objects -----------------------------------------------

    def c20(self, indent: int, ctx: _Ctx) -> None:
        """A range of bounds from the inputs (traced under jit) used as an object (its truth,
        `==`, `in`, `len`, `sum`, `min`/`max`, `any`/`all`, `count`, `index`, printed); an
        `enumerate`/`zip`/`reversed` of an array of the values taken by `next` and by two loops
        (the second gets what the first left: nothing, after a loop without a break); a loop's
        index read after it."""
        r = self.rng.random()
        if r < 0.45:
            rng = self.fresh("r")
            lo = self.rng.choice(["0", "1", "a % 4", "x % 3"])
            hi = self.rng.choice(["(b % 7)", "(y % 6) + 1", "4", "(a % 5) - 1"])
            step = self.rng.choice(["", "", ", 2", ", -1", ", 3"])
            if step == ", -1":
                lo, hi = hi, lo
            self.emit(indent, f"{rng} = range({lo}, {hi}{step})")
            uses = [
                f"b = ((b + (1 if {rng} else 2)) % 97)",
                f"a = ((a + len({rng}) + sum({rng})) % 97)",
                f"a = ((a + max({rng}, default=5) - min({rng}, default=3)) % 97)",
                f"b = ((b + ({rng} == range(3)) + (2 in {rng}) + {rng}.count(2)) % 97)",
                f"b = ((b + any({rng}) + 2 * all({rng})) % 97)",
                f"b = ((b + ({rng}.index(1) if 1 in {rng} else 7)) % 97)",
                f"print('range', {rng}, not {rng})",
            ]
            for use in self.rng.sample(uses, self.rng.randint(1, 3)):
                self.emit(indent, use)
            if self.chance(0.4):
                self.emit(indent, f"if {rng} and {self.cond(ctx)}:")
                self.block(indent + 1, ctx.nest(), (1, 1))
        elif r < 0.8:
            it, arr = self.fresh("it"), self.fresh("arr")
            self.emit(indent, f"{arr} = jnp.array([a % 11, b % 13, 3])")
            kind = self.rng.choice(["enumerate", "zip", "reversed"])
            made = {
                "enumerate": f"enumerate({arr})",
                "zip": f"zip({arr}, {arr} * 2)",
                "reversed": f"reversed({arr})",
            }[kind]
            self.emit(indent, f"{it} = {made}")
            first = self.fresh("v")
            fold = {
                "enumerate": lambda v: f"({v}[0] + int({v}[1]))",
                "zip": lambda v: f"int({v}[0] + {v}[1])",
                "reversed": lambda v: f"int({v})",
            }[kind]
            if self.chance(0.5):
                self.emit(indent, f"{first} = next({it})")
                self.emit(indent, f"a = ((a + {fold(first)}) % 97)")
            for n in range(2):
                v = self.fresh("v")
                self.emit(indent, f"for {v} in {it}:")
                self.emit(indent + 1, f"b = ((b * 2 + {fold(v)}) % 97)")
                if n == 0 and self.chance(0.3):  # Python's break, or a traced one (refused)
                    self.emit(indent + 1, f"if {self.rng.choice(['a > 200', self.cond(ctx)])}:")
                    self.emit(indent + 2, "break")
        else:
            t = self.fresh("t")
            self.emit(indent, f"{t} = 0")
            self.for_header(indent, t)
            self.emit(indent + 1, f"a = ((a * 3 + {t}) % 97)")
            if self.chance(0.5):
                self.emit(indent + 1, f"if {self.cond(ctx)}:")
                self.emit(indent + 2, "break")
            self.emit(indent, f"b = ((b + {t} * 5) % 97)")

    # -- 21: tables and stacks ---------------------------------------------------------------

    def c21(self, indent: int, ctx: _Ctx) -> None:
        """A table of Python ints (`[0] * n`) whose items staged `if`s set, read and updated at
        indices computed from the inputs (traced under jit), as a dynamic program fills its
        table; a stack popped in a bounded `while` and pushed to under traced conditions (a
        depth-first search); a row popped from a list of lists, changed under a traced
        condition and pushed back."""
        r = self.rng.random()
        if r < 0.5 or not ctx.bounded:
            n = self.rng.choice([3, 4, 5])
            t, c = self.fresh("tab"), self.fresh("c")
            self.emit(indent, f"{t} = [0] * {self.rng.choice([str(n), f'({n - 1} + 1)'])}")
            self.emit(indent, f"for {c} in range({self.rng.choice([n, n - 1])}):")
            inner = self.loop_ctx(ctx, c, True)
            self.emit(indent + 1, f"if {self.cond(inner)}:")
            picked = f"{t}[({self.atom(inner)} + {c}) % {n}]"
            value = self.rng.choice([self.expr(inner), f"({picked} + {self.atom(inner)}) % 97"])
            self.emit(indent + 2, f"{t}[{c}] = {value}")
            idx = self.rng.choice([f"a % {n}", f"b % {n}", f"-1 - (x % {n})", f"(y + 1) % {n}"])
            use = self.rng.choice(
                [
                    f"a = ((a + {t}[{idx}]) % 97)",
                    f"{t}[{idx}] = ({t}[{idx}] + b) % 97",
                    f"{t}[{idx}] += 1",
                    f"b = ((b + max({t}[{idx}], {t}[-1])) % 97)",
                ]
            )
            self.emit(indent, use)
            self.emit(indent, f"a = ((a + sum({t}) + {t}[0]) % 97)")
        elif r < 0.8:
            st, k, v, u = self.fresh("st"), self.fresh("k"), self.fresh("v"), self.fresh("u")
            self.emit(indent, f"{st} = [a % 5, b % 5]")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"while {st} and {k} < 6:")
            self.emit(indent + 1, "transpiler.loop_options(max_iterations=6)")
            self.emit(indent + 1, f"{k} += 1")
            self.emit(indent + 1, f"{v} = {st}.pop()")
            if self.chance(0.5):
                self.emit(indent + 1, f"if {v} > {self.rng.choice([2, 3])}:")
                self.emit(indent + 2, "continue")
            self.emit(indent + 1, f"a = ((a + {v}) % 97)")
            self.emit(indent + 1, f"for {u} in range(2):")
            self.emit(indent + 2, f"if ({v} + {u} + {self.atom(ctx)}) % 3 == 0:")
            self.emit(indent + 3, f"{st}.append(({v} + {u}) % 5)")
            self.emit(indent, f"b = ((b + len({st}) + {k}) % 97)")
        else:
            rows, row = self.fresh("rows"), self.fresh("row")
            self.emit(indent, f"{rows} = [[a % 7, 1], [b % 7, 2]]")
            self.emit(indent, f"{row} = {rows}.pop({self.rng.choice(['', '0'])})")
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"{row}[0] = {self.expr(ctx)}")
            self.emit(indent, f"{rows}.append({row})")
            self.emit(indent, f"a = ((a + {rows}[0][0] + 2 * {rows}[-1][0] + {row}[1]) % 97)")

    # -- 22: containers stored into attributes or dict items, changed by methods -------------

    def c22(self, indent: int, ctx: _Ctx) -> None:
        """A `Box` (the local `box`, the module-level `BOX`, or one made here) whose list
        attributes (`vals`, `prev`, `hist["last"]`) its methods change in place, rebind or store
        into one another (`step`: `prev = vals`, then `vals[1]` changed; `snap`: `hist["last"] =
        vals`; `roll`: `prev = vals`, then `vals` a new list; `tick`: a branch on its argument);
        a local dict whose item and a local variable are bound to those lists (or another box's
        attribute bound to them) in a staged `while` with a counter, a `for` over a small range
        or an `if` on a traced condition, the box changed in the same iteration, a later one
        (`if i == 1:`) or after; every alias read into `a`/`b` inside and after."""
        o = self.rng.choice(["box", "box", "BOX"])
        st, ref = self.fresh("sto"), self.fresh("ref")
        two = None
        if self.chance(0.35):
            two = self.fresh("bx")
            self.emit(indent, f"{two} = Box({self.atom(ctx)})")
        start = self.rng.choice(["[a, 1]", "[0, 0]", f"{o}.prev", f"{o}.vals"])
        self.emit(indent, f'{st} = {{"v": {start}, "n": 0}}')
        first = self.rng.choice([f"{o}.vals", "[b, 2]", f'{st}["v"]', f"{o}.hist['last']"])
        self.emit(indent, f"{ref} = {first}")
        r = self.rng.random()
        if r < 0.4:
            k = self.fresh("k")
            self.emit(indent, f"{k} = 0")
            n = self.rng.randint(1, 3)
            if self.chance(0.6):
                self.emit(indent, f"while {k} < {n} and {self.cond(ctx)}:")
            else:
                self.emit(indent, f"while {k} < {n}:")
            self.emit(indent + 1, f"{k} += 1")
            body = self.loop_ctx(ctx, k, True)
            self.box_ops(indent + 1, body, o, st, ref, two, k, self.rng.randint(2, 4))
        elif r < 0.75:
            i = self.fresh("i")
            self.for_header(indent, i)
            body = self.loop_ctx(ctx, i, True)
            self.box_ops(indent + 1, body, o, st, ref, two, i, self.rng.randint(2, 4))
        else:
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.box_ops(indent + 1, ctx.nest(), o, st, ref, two, None, self.rng.randint(1, 3))
            if self.chance(0.6):
                self.emit(indent, "else:")
                self.box_ops(indent + 1, ctx.nest(), o, st, ref, two, None, self.rng.randint(1, 2))
        if self.chance(0.5):
            self.box_ops(indent, ctx, o, st, ref, two, None, self.rng.randint(1, 2))
        self.emit(indent, f'a = (a + {st}["v"][0] + 2 * {st}["v"][1] + {st}["n"]) % 97')
        tail = f" + {two}.vals[0] + {two}.prev[1]" if two else ""
        self.emit(
            indent,
            f"b = (b + {ref}[0] + 3 * {ref}[1] + {o}.prev[0] + {o}.hist['last'][1]{tail}) % 97",
        )

    # -- 23: tuples and namedtuples holding lists -----------------------------------------------

    def c23(self, indent: int, ctx: _Ctx) -> None:
        """A list `w` held by a tuple or a `Pair` namedtuple (a variable, a dict item, or the
        module-level `PAIR`), which a staged `if`, `while` or `for` rebinds keeping `w`
        (`t = t._replace(n=...)`, `t = (t[0], ...)`), rebinds to a new list, or changes through
        the tuple or through `w`; `w` changed after; the tuple's items, `w` and whether the
        tuple still holds `w` read into `a`/`b`."""
        w, t = self.fresh("w"), self.fresh("t")
        self.emit(indent, f"{w} = [{self.atom(ctx)}, {self.rng.randint(0, 9)}]")
        named = self.chance(0.6)
        make = (lambda lst, n: f"Pair({lst}, {n})") if named else (lambda lst, n: f"({lst}, {n})")
        where = self.rng.random()
        if where < 0.6:
            place = t
        elif where < 0.85:
            place = f'{self.fresh("h")}["t"]'
            self.emit(indent, f"{place.split('[')[0]} = {{}}")
        else:  # an item of a module-level list
            place, make = "PAIR_BOX[0]", (lambda lst, n: f"Pair({lst}, {n})")
        self.emit(indent, f"{place} = {make(w, 0)}")

        def ops(ind: int, body: _Ctx, count: int) -> None:
            for _ in range(count):
                e = self.expr(body)
                r = self.rng.random()
                if r < 0.35:  # rebound, keeping the list
                    self.emit(ind, f"{place} = {make(f'{place}[0]', f'({place}[1] + {e}) % 97')}")
                elif r < 0.5:
                    self.emit(ind, f"{place} = {make(w, f'{e} % 97')}")
                elif r < 0.6:  # rebound to a new list
                    self.emit(ind, f"{place} = {make(f'[{e} % 97, 1]', f'{place}[1]')}")
                elif r < 0.8:  # changed through the tuple or the name
                    self.emit(ind, f"{place}[0][0] = ({place}[0][0] + {e}) % 97")
                elif r < 0.9:
                    self.emit(ind, f"{w}[1] = ({w}[1] + {e}) % 97")
                else:
                    self.emit(ind, f"a = (a + {place}[0][1] + {place}[1]) % 97")

        r = self.rng.random()
        if r < 0.4:
            self.emit(indent, f"if {self.cond(ctx)}:")
            ops(indent + 1, ctx.nest(), self.rng.randint(1, 2))
            if self.chance(0.5):
                self.emit(indent, "else:")
                ops(indent + 1, ctx.nest(), self.rng.randint(1, 2))
        elif r < 0.7:
            k = self.fresh("k")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"while {k} < {self.rng.randint(1, 3)} and {self.cond(ctx)}:")
            self.emit(indent + 1, f"{k} += 1")
            ops(indent + 1, self.loop_ctx(ctx, k, True), self.rng.randint(1, 3))
        else:
            i = self.fresh("i")
            self.for_header(indent, i)
            ops(indent + 1, self.loop_ctx(ctx, i, True), self.rng.randint(1, 3))
        if self.chance(0.7):
            self.emit(indent, f"{w}[0] = ({w}[0] + {self.expr(ctx)}) % 97")
        self.emit(indent, f"a = (a + {place}[0][0] + 2 * {place}[0][1] + {place}[1]) % 97")
        self.emit(indent, f"b = (b + {w}[0] + 3 * {w}[1] + ({place}[0] is {w}) * 5) % 97")

    # -- 24: min/max picks of lists and dicts ---------------------------------------------------

    def c24(self, indent: int, ctx: _Ctx) -> None:
        """Two or three lists (or dicts) that `min`/`max`/`sorted` (or `.sort`) picks among by
        keys that may be traced (`key=lambda c: ...`, or no key: lists compared item by item); the pick read,
        changed through, compared with `is`, or let go of (`del`, a temporary) before the items
        change; the items read after into `a`/`b`."""
        dicts = self.chance(0.4)
        names = [self.fresh("c") for _ in range(self.rng.randint(2, 3))]
        for name in names:
            first, second = self.atom(ctx), self.rng.randint(0, 9)
            value = f'{{"v": {first}, "n": [{second}]}}' if dicts else f"[{first}, {second}]"
            self.emit(indent, f"{name} = {value}")
        head = (lambda c: f'{c}["v"]') if dicts else (lambda c: f"{c}[0]")
        inner = (lambda c: f'{c}["n"][0]') if dicts else (lambda c: f"{c}[1]")
        fn = self.rng.choice(["min", "max", "sorted"])
        listed = fn == "sorted" or self.chance(0.6)
        items = f"[{', '.join(names)}]" if listed else ", ".join(names)
        keyed = f"{self.rng.choice(['', '-', '2 * '])}{head('q')} + {self.atom(ctx)} % 3"
        if dicts or self.chance(0.7):
            pick = f"{fn}({items}, key=lambda q: {keyed})"
        else:
            pick = f"{fn}({items})"
        if fn == "sorted":
            place = self.rng.randint(0, len(names) - 1)
            if self.chance(0.3):  # sorted in place: the list holds the picks
                ranked = self.fresh("pop")
                self.emit(indent, f"{ranked} = {items}")
                self.emit(indent, f"{ranked}.sort(key=lambda q: {keyed})")
                pick = f"{ranked}[{place}]"
            else:
                pick = f"{pick}[{place}]"
        best = self.fresh("best")
        e = self.expr(ctx)
        r = self.rng.random()
        if r < 0.2:  # a temporary: read and gone
            self.emit(indent, f"a = (a + {head(pick)}) % 97")
        else:
            self.emit(indent, f"{best} = {pick}")
            if r < 0.35:  # read
                self.emit(indent, f"b = (b + {head(best)} + {inner(best)}) % 97")
            elif r < 0.5:  # changed through it
                self.emit(indent, f"{inner(best)} = ({inner(best)} + {e}) % 97")
            elif r < 0.6:
                self.emit(indent, f"a = (a + ({best} is {names[0]}) * 3) % 97")
            elif r < 0.75:  # read, let go of (or never read again), then the items changed
                self.emit(indent, f"b = (b + {head(best)}) % 97")
                if self.chance(0.5):
                    self.emit(indent, f"del {best}")
            else:  # an item changed while the pick lives, the pick read after
                self.emit(indent, f"{inner(names[0])} = ({inner(names[0])} + {e}) % 97")
                self.emit(indent, f"b = (b + {inner(best)}) % 97")
        if self.chance(0.5):
            target = self.rng.choice(names)
            self.emit(indent, f"{inner(target)} = ({inner(target)} + {self.expr(ctx)}) % 97")
        total = " + ".join(f"{head(c)} + {inner(c)}" for c in names)
        self.emit(indent, f"a = (a + {total}) % 97")

    def box_ops(self, indent, ctx, o, st, ref, two, idx, count) -> None:
        """`count` statements (of class 22) on box `o`, dict `st`, variable `ref` and the other
        box `two` (or None), in a loop whose counter or index is `idx` (or None)."""
        for _ in range(count):
            self.box_op(indent, ctx, o, st, ref, two, idx)
        if idx is not None and ctx.depth < 2 and self.chance(0.15):
            self.block(indent, ctx, (1, 1))

    def box_op(self, indent, ctx, o, st, ref, two, idx, nested: bool = False) -> None:
        lists = [f"{o}.vals", f"{o}.vals", f"{o}.prev", f"{o}.hist['last']"]
        if two:
            lists.append(f"{two}.vals")
        e = self.expr(ctx)
        r = self.rng.random()
        if r < 0.2:  # a dict item bound to a list of the box
            self.emit(indent, f'{st}["v"] = {self.rng.choice(lists)}')
        elif r < 0.3:
            item = f'{st}["v"]'
            self.emit(indent, f"{ref} = {self.rng.choice(lists + [item])}")
        elif r < 0.5:  # a method changing the box
            self.emit(
                indent,
                self.rng.choice(
                    [
                        f"{o}.add({e})",
                        f"{o}.add({e})",
                        f"{o}.step({e})",
                        f"{o}.snap()",
                        f"{o}.roll({e})",
                        f"{o}.tick({e})",
                        f"keep({st}, {o})",
                    ]
                    + ([f"{two}.add({e})", f"{two}.step({e})"] if two else [])
                ),
            )
        elif r < 0.58:  # an attribute bound to another object's list
            if two:
                self.emit(
                    indent,
                    self.rng.choice(
                        [f"{two}.vals = {o}.vals", f"{two}.prev = {ref}", f"{o}.prev = {two}.vals"]
                    ),
                )
            else:
                self.emit(indent, self.rng.choice([f'{o}.prev = {st}["v"]', f"{o}.prev = {ref}"]))
        elif r < 0.68:  # written through an alias
            self.emit(
                indent,
                self.rng.choice(
                    [
                        f'{st}["v"][1] = ({st}["v"][1] + {e}) % 97',
                        f"{ref}[0] = ({ref}[0] + {e}) % 97",
                    ]
                ),
            )
        elif r < 0.74:
            self.emit(indent, f'{st}["n"] = ({st}["n"] + {idx if idx else 1}) % 97')
        elif r < 0.86:  # reads
            self.emit(
                indent,
                self.rng.choice(
                    [
                        f'a = (a + {st}["v"][0]) % 97',
                        f"b = (b + {ref}[1] * 2) % 97",
                        f"a = (a + {o}.prev[0] + {o}.vals[1]) % 97",
                        f"b = (b + {o}.hist['last'][0]) % 97",
                    ]
                ),
            )
        elif nested:
            self.emit(indent, f"{o}.add({e})")
        elif idx is not None and self.chance(0.5):  # the same, a later or an earlier iteration
            self.emit(indent, f"if {idx} {self.rng.choice(['==', '>', '<'])} 1:")
            self.box_op(indent + 1, ctx.nest(), o, st, ref, two, idx, True)
        else:
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.box_op(indent + 1, ctx.nest(), o, st, ref, two, idx, True)
            if self.chance(0.5):
                self.emit(indent, "else:")
                self.box_op(indent + 1, ctx.nest(), o, st, ref, two, idx, True)

    def list_print(self, indent: int, ctx: _Ctx, out: _Lst, extra: tuple = ()) -> None:
        v = self.rng.choice(["a", "b"] + list(ctx.names) + list(extra))
        self.emit(
            indent,
            self.rng.choice(
                [
                    f'print("{out.name}", {out.name})',
                    f'print("len", len({out.name}))',
                    f'print("fa", float({v}))',
                    f'print("i", int({v}), len({out.name}))',
                    f'print(f"{{len({out.name})}}:{{{v}}}")',
                ]
            ),
        )

    def build_list(self, indent: int, ctx: _Ctx, out: _Lst) -> None:
        start = self.rng.choice(["[]", "[a % 7]", "[b, 5]", "[x % 11, a, 3]"])
        out.known = out.least = start.count(",") + (start != "[]")
        self.emit(indent, f"{out.name} = {start}")
        i = self.fresh("i")
        k = self.rng.choice([1, 2, 3, 3, 4])
        self.emit(indent, f"for {i} in range({k}):")
        body = self.loop_ctx(ctx, i, True)
        r = self.rng.random()
        if r < 0.35:  # both branches append: the length stays known
            self.emit(indent + 1, f"if {self.cond(body)}:")
            self.emit(indent + 2, f"{out.name}.append({self.expr(body)})")
            if self.chance(0.3):
                self.list_print(indent + 2, body, out)
            self.emit(indent + 1, "else:")
            self.emit(indent + 2, f"{out.name}.append(({self.expr(body)} + {i}) % 97)")
            out.known += k
            out.least += k
        elif r < 0.7:  # one branch appends: a traced length
            self.emit(indent + 1, f"if {self.cond(body)}:")
            self.emit(indent + 2, f"{out.name}.append({self.expr(body)})")
            if self.chance(0.3):
                self.list_print(indent + 2, body, out)
            out.known = None
        else:  # an append every iteration, another one under a traced `if`
            self.emit(indent + 1, f"{out.name}.append(({self.atom(body)} * 3 + {i}) % 97)")
            out.least += k
            if self.chance(0.6):
                self.emit(indent + 1, f"if {self.cond(body)}:")
                self.emit(indent + 2, f"{out.name}.append({i})")
                out.known = None
            else:
                out.known += k
        if self.chance(0.25):
            self.list_print(indent + 1, body, out)
        if ctx.depth < 2 and self.chance(0.2):  # no break/continue: `least` counts every pass
            self.block(indent + 1, body._replace(loop=False), (1, 1))

    def list_pop(self, indent: int, ctx: _Ctx, out: _Lst) -> None:
        n = out.name
        r = self.rng.random()
        pop = self.rng.choice([f"{n}.pop()", f"{n}.pop(0)", f"{n}.pop(-1)"])
        if r < 0.3:  # one branch pops, guarded
            guard = self.rng.choice([f"{n} and", f"len({n}) > 0 and", f"len({n}) >= 1 and"])
            self.emit(indent, f"if {guard} ({self.cond(ctx)}):")
            if self.chance(0.5):
                v = self.fresh("v")
                self.emit(indent + 1, f"{v} = {pop}")
                self.emit(indent + 1, f"a = ((a + {v} * 2) % 97)")
            else:
                self.emit(indent + 1, pop)
            if self.chance(0.3):
                self.list_print(indent + 1, ctx, out)
            out.known = None
            out.least = max(out.least - 1, 0)
        elif r < 0.6 and out.least >= 1:  # both branches pop: the list is never empty here
            self.emit(indent, f"if {self.cond(ctx)}:")
            v = self.fresh("v")  # `v = out.pop()`: a pop inside an expression is refused
            self.emit(indent + 1, f"{v} = {pop}")
            self.emit(indent + 1, f"b = ((b + {v}) % 97)")
            self.emit(indent, "else:")
            self.emit(indent + 1, self.rng.choice([f"{n}.pop()", f"{n}.pop(0)"]))
            if self.chance(0.3):
                self.list_print(indent + 1, ctx, out)
            out.least -= 1
            if out.known is not None:
                out.known -= 1
        elif r < 0.85:  # an append in one branch, a guarded pop in the other
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"{n}.append({self.expr(ctx)})")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"if {n}:")
            v = self.fresh("v")
            self.emit(indent + 2, f"{v} = {pop}")
            self.emit(indent + 2, f"a = ((a + {v}) % 97)")
            if self.chance(0.3):
                self.list_print(indent + 2, ctx, out)
            out.known = None
            out.least = max(out.least - 1, 0)
        else:  # pops in a loop, each guarded, mixed with appends
            i = self.fresh("i")
            self.emit(indent, f"for {i} in range({self.rng.randint(1, 3)}):")
            body = self.loop_ctx(ctx, i, True)
            self.emit(indent + 1, f"if len({n}) > {i} and ({self.cond(body)}):")
            v = self.fresh("v")
            self.emit(indent + 2, f"{v} = {pop}")
            self.emit(indent + 2, f"b = ((b + {v} * {i}) % 97)")
            self.emit(indent + 1, f"elif {self.cond(body)}:")
            self.emit(indent + 2, f"{n}.append(({self.expr(body)} + {i}) % 97)")
            if self.chance(0.3):
                self.list_print(indent + 1, body, out)
            out.known = None
            out.least = 0

    def list_swap(self, indent: int, ctx: _Ctx, out: _Lst) -> None:
        n = out.name
        r = self.rng.random()
        if r < 0.4:  # Python indices: in range where the list is long enough
            i, j = self.rng.sample(range(-3, 3), 2)
            need = max(i if i >= 0 else -i - 1, j if j >= 0 else -j - 1) + 1
            if out.least >= need and self.chance(0.6):
                self.emit(indent, f"if {self.cond(ctx)}:")
            else:
                self.emit(indent, f"if len({n}) >= {need} and {self.cond(ctx)}:")
            self.emit(indent + 1, f"{n}[{i}], {n}[{j}] = {n}[{j}], {n}[{i}]")
        elif r < 0.6:  # an index from the length (traced where the length is)
            self.emit(indent, f"if len({n}) > 1:")
            last = self.rng.choice([f"len({n}) - 1", f"len({n}) // 2"])
            self.emit(indent + 1, f"{n}[0], {n}[{last}] = {n}[{last}], {n}[0]")
        elif r < 0.8:  # `k, out[k] = ...`: k assigned first, then the item at the new k
            k = self.fresh("k")
            self.emit(indent, f"if {n}:")
            idx = self.rng.choice([f"a % len({n})", f"len({n}) - 1", "0", f"b % len({n})"])
            self.emit(indent + 1, f"{k}, {n}[{k}] = {idx}, {self.expr(ctx)}")
            self.emit(indent + 1, f"a = ((a + {k}) % 97)")
        else:  # `out[k], k = ...`: the item at the old k, then k
            k = self.fresh("k")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"if len({n}) > 1 and {self.cond(ctx)}:")
            self.emit(indent + 1, f"{n}[{k}], {k} = {n}[1], 1")
            self.emit(indent, f"b = ((b + {k}) % 97)")

    def list_loop(self, indent: int, ctx: _Ctx, out: _Lst) -> None:
        n = out.name
        v = self.fresh("v")
        inner = ctx.nest(names=ctx.names + (v,))
        r = self.rng.random()
        if r < 0.4:  # a `for` over the list appending to another one under a traced condition
            other = self.fresh("oth")
            self.emit(indent, f"{other} = []")
            self.emit(indent, f"for {v} in {n}:")
            self.emit(indent + 1, f"if {v} {self.rng.choice(['>', '<', '!='])} {self.atom(ctx)}:")
            self.emit(indent + 2, f"{other}.append(({v} * 2 + {self.atom(ctx)}) % 97)")
            if self.chance(0.3):
                self.list_print(indent + 2, inner, out, (v,))
            self.emit(indent, f"a = ((a + len({other}) + sum({other})) % 97)")
            if self.chance(0.4):
                self.emit(indent, f"if {other}:")
                self.emit(indent + 1, f"b = ((b + {other}[-1]) % 97)")
        elif r < 0.7:  # enumerate
            j = self.fresh("j")
            self.emit(indent, f"for {j}, {v} in enumerate({n}):")
            body = ctx.nest(names=ctx.names + (v, j))
            self.emit(indent + 1, f"if {v} > {self.atom(ctx)}:")
            self.emit(indent + 2, f"b = ((b + {j} * {v}) % 97)")
            if self.chance(0.3):
                self.list_print(indent + 2, body, out, (v, j))
        else:  # zip with another list
            w = self.fresh("w")
            other = self.rng.choice(["[a, b, 3]", "[7, x % 5]", "range(3)"])
            self.emit(indent, f"for {v}, {w} in zip({n}, {other}):")
            self.emit(indent + 1, f"a = ((a + {v} * {w}) % 97)")
            if self.chance(0.3):
                self.emit(indent + 1, f"if {v} > {w}:")
                self.emit(indent + 2, f'print("z", {v}, {w})')

    def list_comp(self, indent: int, ctx: _Ctx, out: _Lst) -> None:
        n = out.name
        v = self.fresh("v")
        test = f"{v} {self.rng.choice(['>', '<', '!=', '>='])} {self.atom(ctx)}"
        if self.chance(0.3):
            test = f"{v} % 2 == 0"
        r = self.rng.random()
        if r < 0.3:  # the list replaced by a comprehension of it
            elt = self.rng.choice([f"{v} * 2", f"({v} + a) % 97", v])
            if self.chance(0.5):
                self.emit(indent, f"{n} = [{elt} for {v} in {n} if {test}]")
                out.known, out.least = None, 0
            else:
                self.emit(indent, f"{n} = [{elt} for {v} in {n}]")
        elif r < 0.55:
            c = self.fresh("c")
            self.emit(indent, f"{c} = [{v} for {v} in {n} if {test}]")
            self.emit(indent, f"a = ((a + len({c}) + sum({c}, 1)) % 97)")
        elif r < 0.75:
            self.emit(indent, f"b = ((b + sum({v} for {v} in {n} if {test})) % 97)")
        else:
            how = self.rng.choice(["max", "min"])
            self.emit(indent, f"a = ((a + {how}(({v} for {v} in {n}), default=0)) % 97)")

    def list_fold(self, indent: int, ctx: _Ctx, out: _Lst) -> None:
        n = out.name
        self.emit(indent, f"a = ((a + len({n})) % 97)")
        self.emit(indent, f"b = ((b + sum({n}) % 97) % 97)")
        r = self.rng.random()
        if r < 0.3:
            self.emit(indent, f"if {n}:")
            self.emit(indent + 1, f"a = ((a + {n}[{self.rng.choice([0, -1])}]) % 97)")
        elif r < 0.5:
            self.emit(indent, f"if len({n}) > 1:")
            self.emit(indent + 1, f"b = ((b + {n}[1] * 3) % 97)")
        elif r < 0.7 and out.known:  # a length Python knows: stacked
            self.emit(indent, f"{n} = jnp.stack({n})")
            self.emit(indent, f"a = ((a + int(jnp.sum({n})) + {n}.shape[0]) % 97)")
            return
        elif r < 0.8:
            self.emit(indent, f"b = ((b + max({n}, default=4)) % 97)")
        if self.chance(0.3):
            self.list_print(indent, ctx, out)

    def first_iteration_effect(self, indent: int, ctx: _Ctx) -> None:
        options = [
            'print("first", a)',
            'print("first")',
            'jax.debug.print("dbg {}", b, ordered=True)',
        ]
        if self.on(6):
            options += ["record(a)", "b = ((b + note(a)) % 97)"]
        if self.on(5):
            options += ["obj.add(a)"]
        if ctx.bounded:
            options += ["acc.append(a)"]
        self.emit(indent, self.rng.choice(options))

    # -- the module ---------------------------------------------------------------------------

    def program(self) -> str:
        on = self.on
        ret = ["a", "b", "len(acc)"]
        if on(5):
            ret += ["obj.total", "obj.hits", "STATE.total"]
        if on(6):
            ret += ["COUNT"]
        if on(7):
            ret += ['d["k"]', 'd["m"]', "len(lst)", "len(LST)", 'D["n"]']
        if on(22):
            ret += ["box.vals[0]", "box.vals[1]", "box.prev[0]", "box.prev[1]"]
            ret += ["box.hist['last'][0]", "box.hist['n']", "BOX.vals[0]", "BOX.vals[1]"]
            ret += ["BOX.prev[0]", "BOX.hist['last'][1]", "BOX.hist['n']"]
        self.ret = "(" + ", ".join(ret) + ")"

        body_start = len(self.lines)
        ctx = _Ctx(loop=False, bounded=True, in_finally=False, names=(), depth=0)
        todo = list(self.enabled)
        self.rng.shuffle(todo)
        for c in todo:
            if self.chance(0.3):
                self.statement(1, ctx)
            self.statement(1, ctx, c)
        body = self.lines[body_start:]
        self.lines = []

        L = self.lines.append
        L(f"# classes: {', '.join(str(c) for c in sorted(self.used))}")
        if on(18) or on(23):
            if on(23):
                L("import collections")
            if on(18):
                L("import contextlib")
                L("import operator")
            L("")
        L("import jax")
        L("import jax.numpy as jnp")
        L("")
        L("import transpiler")
        L("")
        L(f"CLASSES = {tuple(sorted(self.used))!r}")
        if on(6):
            L("COUNT = 0")
        if on(5):
            L("STATE = None")
        if on(7):
            L("LST = []")
            L("D = {}")
        if on(22):
            L("BOX = None")
        if on(23):
            L('Pair = collections.namedtuple("Pair", "w n")')
            L("PAIR_BOX = [None]")
        L("")
        L("")
        if on(22):
            L("class Box:")
            L("    def __init__(self, v):")
            L("        self.vals = [v % 97, 1]")
            L("        self.prev = [0, 0]")
            L('        self.hist = {"last": [0, 0], "n": 0}')
            L("")
            L("    def add(self, v):")
            L("        self.vals[0] = (self.vals[0] + v) % 97")
            L("")
            L("    def step(self, v):")
            L("        self.prev = self.vals")
            L("        self.vals[1] = (self.vals[1] + v) % 97")
            L("")
            L("    def snap(self):")
            L('        self.hist["last"] = self.vals')
            L('        self.hist["n"] = (self.hist["n"] + 1) % 97')
            L("")
            L("    def roll(self, v):")
            L("        self.prev = self.vals")
            L("        self.vals = [self.vals[1], v % 97]")
            L("")
            L("    def tick(self, v):")
            L("        if v > self.vals[0]:")
            L("            self.vals[0] = v % 97")
            L("        else:")
            L("            self.prev[1] = (self.prev[1] + 1) % 97")
            L("")
            L("")
            L("def keep(d, o):")
            L('    d["v"] = o.vals')
            L("    o.add(1)")
            L("")
            L("")
        if on(5):
            L("class Acc:")
            L("    def __init__(self, start):")
            L("        self.total = start % 97")
            L("        self.hits = 0")
            L("")
            L("    def add(self, d):")
            L("        self.total = (self.total + d) % 97")
            L("")
            L("    def bump(self, d):")
            L("        if d > self.total:")
            L("            self.hits = self.hits + 1")
            L("            return self.total")
            L("        self.total = (self.total * 2 + d) % 97")
            L("        return self.hits")
            L("")
            L("    def spin(self, n):")
            L("        for _ in range(n):")
            L("            self.total = (self.total + 3) % 97")
            L("            if self.total > 90:")
            L("                break")
            L("")
            L("")
            L("def push(o, v):")
            L("    o.add(v)")
            L("    if v % 2 == 0:")
            L("        o.hits = (o.hits + 1) % 97")
            L("")
            L("")
        if on(6):
            L("def record(v):")
            L("    global COUNT")
            L("    COUNT = (COUNT + v) % 97")
            L("")
            L("")
            L("def note(v):")
            L("    global COUNT")
            L("    if v > 40:")
            L("        COUNT = (COUNT * 2) % 97")
            L("        return 1")
            L("    COUNT = (COUNT + 1) % 97")
            L("    return 0")
            L("")
            L("")
        if on(10):
            L("def sq(v):")
            L("    return v * v * 2.0 + v")
            L("")
            L("")
            L("def gsel(v):")
            L("    if v > 2.0:")
            L("        return v * v")
            L("    return 3.0 * v")
            L("")
            L("")
            L("def vh(v):")
            L("    return (v * 3 + 1) % 97")
            L("")
            L("")
        if on(18):
            L("class Upd:")
            L("    def bump(self, lst, v):")
            L("        lst[0] = (lst[0] + v) % 97")
            L("")
            L("")
            L("UPD = Upd()")
            L("FNS = [UPD.bump]")
            L("")
            L("")
            L("@contextlib.contextmanager")
            L("def holding(v):")
            L("    yield v")
            L("")
            L("")
        L("def helper(v):")
        L("    if v > 50:")
        L("        return v - 50")
        L("    return (v * 3) % 97")
        L("")
        L("")
        L("def reset():")
        names = [n for c, n in ((6, "COUNT"), (5, "STATE"), (7, "LST, D"), (22, "BOX")) if on(c)]
        if names:
            L(f"    global {', '.join(names)}")
        if on(6):
            L("    COUNT = 0")
        if on(5):
            L("    STATE = Acc(11)")
        if on(7):
            L("    LST = [4, 5, 6]")
            L('    D = {"n": 3}')
        if on(22):
            L("    BOX = Box(5)")
        if on(23):
            L("    PAIR_BOX[0] = None")
        if not names and not on(23):
            L("    pass")
        L("")
        L("")
        L("def snapshot():")
        snap = []
        if on(6):
            snap.append("COUNT")
        if on(5):
            snap += ["STATE.total", "STATE.hits"]
        if on(7):
            snap += ["list(LST)", "dict(D)"]
        if on(22):
            snap += ["list(BOX.vals)", "list(BOX.prev)", "list(BOX.hist['last'])"]
            snap += ["BOX.hist['n']", "BOX.prev is BOX.vals", "BOX.hist['last'] is BOX.vals"]
        L(f"    return ({', '.join(snap)}{',' if len(snap) == 1 else ''})")
        L("")
        L("")
        L("def f(x, y):")
        L("    a = x % 97")
        L("    b = y % 97")
        L("    acc = []")
        if on(5):
            L("    obj = Acc(b)")
        if on(7):
            L('    d = {"k": 1, "m": 2}')
            L("    lst = [x % 5, 7, y % 11]")
        if on(22):
            L("    box = Box(b)")
        if on(4):
            L(f"    kind = {self.kind}")
        if on(11):
            L("    n = 3")
        if on(12):
            L("    r = range")
        self.lines += body
        L(f"    return {self.ret}")
        return "\n".join(self.lines) + "\n"


def program(seed: int) -> str:
    """The source of random model program number `seed`."""
    return _Generator(seed).program()


def classes_of(source: str) -> tuple[int, ...]:
    """The construct classes a generated program contains (from its first line)."""
    first = source.split("\n", 1)[0]
    if not first.startswith("# classes:"):
        return ()
    return tuple(int(c) for c in first.split(":", 1)[1].split(",") if c.strip())
