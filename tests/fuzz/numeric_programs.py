"""Random programs over floats and mixed dtypes, checked against eager JAX (see `harness`).

`program(seed)` returns the source of a module defining `f(x, y)` of two floats (Python floats,
NumPy float32 scalars or `jnp.float32` values, see `harness.NUMERIC_SPEC`). Its local state
mixes Python floats and ints (`t = 0.0`, `z = 0.5`, `acc = 0`, `best = -1`), an input-derived
value `u`, and a list `vals` of floats; statements are assignments through `jnp` functions
(`sin`, `tanh`, `exp(-|.|)`, `log1p(|.|)`, `sqrt(|.| + c)`, `maximum`, `where`), casts
(`int()`, `float()`, `round()`, `.astype(int32)`, float16 / bfloat16 round trips), builtins
(`abs`, `min`, `max`), `//`, `%`, `**`, true division, comparisons with float literals, nested
`if`/`elif`/`else`, `while` loops bounded by a counter, `for` over Python and traced ranges
(`range(int(x) % 4)`), `break`/`continue`/early `return`, ternaries, `and`/`or` (as tests and
as values), conditional appends reduced by `sum`/`len`/`max`, `if`/`else` whose branches
compute one expression of the values before it and use it differently, lists a loop only appends
to and reads at its last items, lists a loop only reads at its index, nested loops whose inner
range reads the outer index, `while` tests Python's True while a counter is low. `f` returns a tuple whose first
item is the float `t` (differentiated in the harness's grad mode).

What the programs avoid, because docs/semantics.md and docs/limitations.md document that the
converted function differs there (so a difference would be no bug):

- Values escaping float32/int32 range: float state updated with the state itself is clamped
  with `min(max(v, -1000.0), 1000.0)` (builtins, so Python numbers stay Python numbers), ints
  are kept `% 97`, `int()` takes bounded values (limitations: a traced int follows int32
  arithmetic, `int()` of a traced float beyond int32 is XLA's cast).
- Literals Python would compute differently in float64: Python-float state is combined with
  dyadic literals (0.5, 1.5, -2.25, ...), exact in float32 and float64 alike, and `int()`,
  `//`, `%`, `round()` are applied to them (limitations: "float32 rounds where a Python float
  would not"); a `/ 3.0` of a Python float is within the harness's tolerance.
- `round()` of a weakly typed value (a Python float under `jit`, or `jnp.tanh(2.0)`, which
  eager JAX rounds as an array): limitations ("`round(x)` of a traced array"): the converted
  round takes it for a Python float, so `round()` is given a float32 array here.
- `round(v, ndigits)` (limitations: JAX rounds `v * 10^n`), non-integer powers of possibly
  negative numbers (Python makes a complex number), `2 ** -k` of ints.
- float16 / bfloat16 values only of literals, cast back to float32 at once: a Python number a
  staged `if` or loop joins with an array takes the array's dtype (semantics: "Branches
  agree"), so mixing a state variable into float16 arithmetic would differ as documented; and
  XLA computes low-precision chains in float32 under jit where eager rounds each step.
- Derivatives that are infinite where a value might be unused (`sqrt` at 0, `log` at 0,
  `1 / x`) outside a branch guarded against them: limitations ("Values computed for a
  condition can give NaN gradients through it", "a value computed before a staged `if` and
  replaced on the path taken"). So `jnp.sqrt(jnp.abs(v) + 0.25)`, `jnp.log1p(jnp.abs(v))`, and
  `jnp.log(x)` / `1.0 / x` / `jnp.exp(y)` only under a guard on the same input (`if x > 0.0:`),
  which must be exact (untaken branches computed masked). An unguarded
  `w = jnp.log(jnp.abs(stop_gradient(x)))` (-inf at 0) is returned and read only in conditions.
- `print` (eager JAX prints `Array(...)`, a staged print NumPy's format: documented).
- Arithmetic on traced bools (`(x > 0) + (y > 0)`: JAX's, documented): bools only in tests,
  `int(...)` of them, or times a float literal.
"""

from __future__ import annotations

from tests.fuzz.writer import Ctx as _Ctx
from tests.fuzz.writer import ProgramWriter

DYADIC = ["0.5", "1.5", "-2.25", "0.25", "3.0", "-0.75", "2.0", "10.0", "-1.0", "0.125"]
FACTORS = ["0.5", "0.25", "-0.75", "1.5", "-1.0", "0.125"]  # |factor| <= 1.5
POSITIVE = ["3.0", "2.5", "0.75", "4.0"]
COMPARE = ["0.0", "0.5", "1.5", "-2.25", "3.0", "10.0", "-0.5", "50.0", "2.0"]
FLOATS = ["t", "z", "u"]
INTS = ["acc", "best"]
CLAMP = 1000.0


class _Generator(ProgramWriter):
    def __init__(self, seed: int):
        super().__init__(seed)
        self.has_w = self.rng.random() < 0.3
        self.has_max = self.rng.random() < 0.5

    # -- helpers --------------------------------------------------------------------------------

    def pick(self, items):
        return self.rng.choice(items)

    # -- expressions ----------------------------------------------------------------------------

    def fatom(self, ctx: _Ctx) -> str:
        atoms = ["x", "y", "t", "z", "u", "t", "z", self.pick(DYADIC)]
        if ctx.names:
            atoms.append(f"({self.pick(ctx.names)} * {self.pick(FACTORS)})")
        if self.chance(0.15):
            atoms.append(f"({self.pick(INTS)} * {self.pick(FACTORS)})")
        if self.chance(0.1):
            atoms.append(self.pick([f"(n * {self.pick(FACTORS)})", f"(c * {self.pick(FACTORS)})"]))
        return self.pick(atoms)

    def fexpr(self, ctx: _Ctx, d: int = 0) -> str:
        """A float-valued expression (a Python float or a float32 array), bounded by about
        |atoms| * 4."""
        if d >= 2 or self.chance(0.3):
            return self.fatom(ctx)
        a = lambda: self.fexpr(ctx, d + 1)  # noqa: E731
        r = self.rng.randrange(24)
        if r == 0:
            return f"({a()} + {a()})"
        if r == 1:
            return f"({a()} - {a()})"
        if r == 2:
            return f"({a()} * {self.pick(FACTORS)})"
        if r == 3:
            fn = self.pick(["jnp.sin", "jnp.cos", "jnp.tanh"])
            return f"{fn}({a()})"
        if r == 4:
            return self.pick(
                [
                    f"jnp.exp(-jnp.abs({a()}))",
                    f"jnp.log1p(jnp.abs({a()}))",
                    f"jnp.sqrt(jnp.abs({a()}) + 0.25)",
                ]
            )
        if r == 5:
            return f"{self.pick(['jnp.maximum', 'jnp.minimum'])}({a()}, {a()})"
        if r == 6:
            return f"jnp.where({self.cond(ctx, d + 1)}, {a()}, {a()})"
        if r == 7:
            return f"abs({a()})"
        if r == 8:
            return f"{self.pick(['min', 'max'])}({a()}, {a()})"
        if r == 9:
            return f"({a()} % {self.pick(POSITIVE)})"
        if r == 10:
            return f"({a()} // {self.pick(POSITIVE)})"
        if r == 11:
            return self.pick(
                [
                    f"jnp.tanh({a()}) ** 2",
                    f"(jnp.abs({a()}) + 1.0) ** 0.5",
                    f"(jnp.sin({a()}) * 2.0) ** 3",
                    f"2.0 ** ({self.iexpr(ctx, d + 1)} % 4)",
                ]
            )
        if r == 12:
            return self.pick(
                [
                    f"({a()} / {self.pick(POSITIVE)})",
                    f"({a()} / (1.0 + jnp.abs({a()})))",
                    f"({a()} / 3.0)",
                ]
            )
        if r == 13:
            return f"({a()} if {self.cond(ctx, d + 1)} else {a()})"
        if r == 14:
            # float16 / bfloat16 only of literals, exact in every dtype used: XLA computes a
            # chain of low-precision operations in float32 and drops a convert pair
            # (float32 -> bfloat16 -> float32) where eager JAX rounds each step, so jit and
            # eager differ there whatever the converter does (seen: `jnp.sin` of a bfloat16,
            # `(bf16(y) * 0.125 + 0.5).astype(float32)`)
            dt = self.pick(["jnp.float16", "jnp.bfloat16"])
            lit = self.pick(DYADIC)
            return self.pick(
                [
                    f"jnp.asarray({lit}, {dt}).astype(jnp.float32)",
                    f"({a()} + jnp.asarray({lit}, {dt}).astype(jnp.float32))",
                ]
            )
        if r == 15:
            return self.pick(
                [
                    f"({self.iexpr(ctx, d + 1)} * {self.pick(FACTORS)})",
                    f"({self.iexpr(ctx, d + 1)} / 4)",
                    f"float({self.iexpr(ctx, d + 1)})",
                ]
            )
        if r == 16:
            return f"(({self.simple_cond(ctx, d + 1)}) * {self.pick(FACTORS)})"
        if r == 17:
            # and/or as values: an operand, selected (a bool operand and a float one, `c and v
            # or w`, is refused staged: their dtypes differ; rarer)
            if self.chance(0.2):
                return f"({self.simple_cond(ctx, d + 1)} and {a()} or {a()})"
            return self.pick([f"({a()} or {self.pick(DYADIC)})", f"({a()} and {a()})"])
        if r == 18:
            return f"jnp.clip({a()}, -2.0, {self.pick(['1.5', '3.0', '10.0'])})"
        if r == 19:
            # an int32 cast of a bounded value, used as a float
            return f"(jnp.asarray(jnp.tanh({a()}) * 8.0).astype(jnp.int32) * 0.5)"
        if r == 20:
            return f"float({a()})"
        if r == 21:
            return f"({a()} * {a()} * 0.01)"
        if r == 22:
            return f"(-{a()})"
        return f"jnp.sin({a()}) * {self.pick(['3.0', '10.0', '0.5'])}"

    def iatom(self, ctx: _Ctx) -> str:
        atoms = ["acc", "best", "acc", str(self.rng.randint(0, 9)), "len(vals)", "(n % 7)"]
        atoms += list(ctx.names) * 2
        return self.pick(atoms)

    def bounded_fexpr(self, ctx: _Ctx, d: int) -> str:
        """A float expression for `int()` / `round()`: bounded so the int fits int32."""
        e = self.fexpr(ctx, d + 1)
        return self.pick([e, f"jnp.clip({e}, -1e4, 1e4)", f"jnp.tanh({e}) * 10.0"])

    def iexpr(self, ctx: _Ctx, d: int = 0) -> str:
        """An int-valued expression (a Python int or an int32 array), in -97..97 roughly."""
        if d >= 2 or self.chance(0.35):
            return self.iatom(ctx)
        b = lambda: self.iexpr(ctx, d + 1)  # noqa: E731
        r = self.rng.randrange(10)
        if r == 0:
            return f"(({b()} {self.pick(['+', '-', '*'])} {b()}) % 97)"
        if r == 1:
            return f"(int({self.bounded_fexpr(ctx, d)}) % {self.pick(['5', '7', '97'])})"
        if r == 2:
            return f"(round(jnp.float32({self.bounded_fexpr(ctx, d)})) % 7)"
        if r == 3:
            return f"{self.pick(['min', 'max'])}({b()}, {b()})"
        if r == 4:
            return f"abs({b()})"
        if r == 5:
            return f"({b()} // {self.pick(['2', '3'])})"
        if r == 6:
            return f"(1 if {self.cond(ctx, d + 1)} else {self.pick(['0', '-1', '2'])})"
        if r == 7:
            return f"int({self.simple_cond(ctx, d + 1)})"
        if r == 8:
            if self.chance(0.2):
                return f"({self.simple_cond(ctx, d + 1)} and {b()} or 3)"
            return self.pick([f"({b()} or 1)", f"({b()} and {b()})"])
        return f"({b()} % 4)"

    def simple_cond(self, ctx: _Ctx, d: int) -> str:
        r = self.rng.randrange(9)
        cmp = self.pick(["<", ">", "<=", ">="])
        if r <= 3:
            return f"{self.fexpr(ctx, d + 1)} {cmp} {self.pick(COMPARE)}"
        if r == 4:
            return f"{self.fexpr(ctx, d + 1)} {cmp} {self.fexpr(ctx, d + 1)}"
        if r == 5:
            return f"{self.iexpr(ctx, d + 1)} % 2 == {self.pick(['0', '1'])}"
        if r == 6:
            return f"{self.iexpr(ctx, d + 1)} {cmp} {self.rng.randint(-1, 5)}"
        if r == 7 and self.has_w:
            return self.pick(["jnp.isfinite(w)", "w > -1.0", "w < 0.5"])
        if r == 7:
            return self.pick(["c", "not c", f"(c or {self.fexpr(ctx, d + 1)} > 0.5)"])
        return f"-1.0 < {self.fexpr(ctx, d + 1)} < 2.5"

    def cond(self, ctx: _Ctx, d: int = 0) -> str:
        if d >= 2 or self.chance(0.6):
            return self.simple_cond(ctx, d)
        r = self.rng.randrange(3)
        if r == 0:
            return f"({self.simple_cond(ctx, d)} and {self.cond(ctx, d + 1)})"
        if r == 1:
            return f"({self.simple_cond(ctx, d)} or {self.cond(ctx, d + 1)})"
        return f"not ({self.simple_cond(ctx, d)})"

    # -- statements -----------------------------------------------------------------------------

    def block(self, indent: int, ctx: _Ctx) -> None:
        for _ in range(self.rng.randint(1, 2)):
            self.statement(indent, ctx)

    def assign(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.randrange(10)
        v = self.pick(FLOATS)
        e = self.fexpr(ctx)
        if r <= 2:
            self.emit(indent, f"{v} = min(max({v} + {e}, -{CLAMP}), {CLAMP})")
        elif r == 3:
            self.emit(indent, f"{v} = {self.fexpr(ctx, 1)}")
        elif r == 4:
            self.emit(
                indent, f"{v} = min(max({v} * {self.pick(FACTORS)} + {e}, -{CLAMP}), {CLAMP})"
            )
        elif r == 5:
            self.emit(indent, f"acc = (acc + {self.iexpr(ctx)}) % 97")
        elif r == 6:
            self.emit(indent, self.pick(["acc += 1", f"best = {self.iexpr(ctx)}"]))
        elif r == 7:
            # a Python number replaced by a value of another kind (int <-> float)
            self.emit(
                indent,
                self.pick(
                    [
                        f"z = {self.iexpr(ctx)}",
                        f"best = int({self.bounded_fexpr(ctx, 0)}) % 9",
                        f"z = round(jnp.float32({self.bounded_fexpr(ctx, 0)}))",
                        f"acc = (acc + int({self.simple_cond(ctx, 1)})) % 97",
                    ]
                ),
            )
        elif r == 8:
            if self.chance(0.3):
                self.emit(indent, self.pick([f"c = {self.simple_cond(ctx, 1)}", "c = not c"]))
            else:
                self.emit(indent, f"{v} = {e} if {self.cond(ctx)} else {v}")
        else:
            self.emit(indent, f"{v} += {self.fexpr(ctx, 1)} * 0.5")

    def risky(self, indent: int, ctx: _Ctx) -> None:
        """A value that is inf/NaN (or has an infinite derivative) where the guard is false."""
        v = self.pick(["t", "z", "u"])
        guard, body = self.pick(
            [
                ("x > 0.0", f"{v} = {v} + jnp.log(x)"),
                ("y > 0.0", f"{v} = {v} * 0.5 + jnp.log(y)"),
                ("x + y > 0.0", f"{v} = {v} + jnp.log(x + y) * 0.5"),
                ("y < 20.0", f"{v} = {v} + jnp.exp(y) * 0.001"),
                ("x < 20.0", f"{v} = jnp.exp(x) * 0.5"),
                ("x != 0.0", f"{v} = {v} + 1.0 / x"),
                ("abs(y) > 0.01", f"{v} = {v} + 0.5 / y"),
                ("x > 0.0", f"{v} = {v} + jnp.sqrt(x)"),
                ("y >= 1.0", f"{v} = {v} + jnp.sqrt(y - 1.0)"),
                ("x < 80.0", f"{v} = {v} + jnp.exp(x * 2.0) * 1e-30"),
                ("abs(x) > 1000.0", f"{v} = {v} + x * 1e30 * 1e10"),
                ("abs(y) > 1000.0", f"{v} = {v} * 1e20 * 1e20 + y"),
                ("x * 1e30 * 1e10 < 0.0", f"{v} = {v} - 1.5"),
            ]
        )
        if self.chance(0.3):
            guard = f"{guard} and {self.simple_cond(ctx, 1)}"
        self.emit(indent, f"if {guard}:")
        self.emit(indent + 1, body)
        if self.chance(0.3):
            self.emit(indent, "else:")
            self.emit(indent + 1, f"{v} = {v} - 1.0")

    def shared(self, indent: int, ctx: _Ctx) -> None:
        """An `if` whose branches compute one expression of the values before it and use it
        differently (computed once, before the `if`: `runtime/shared.py`), some with a steep
        derivative (`sqrt` near 0), which the path taken computes either way."""
        v = self.pick(FLOATS)
        e = self.pick(
            [
                f"jnp.tanh({self.fexpr(ctx, 1)})",
                f"jnp.exp(-jnp.abs({self.fexpr(ctx, 1)}))",
                "jnp.log(jnp.abs(x) + 0.5)",
                # steep at 0, not unbounded: a later statement may replace what it went into on
                # the path taken (limitations: 0 * inf is NaN there; tests/runtime/test_shared.py
                # has the unbounded case)
                "jnp.sqrt(jnp.abs(y) + 1e-3)",
                f"jnp.sqrt(jnp.abs({self.fexpr(ctx, 1)}) + 0.25) * {self.pick(FACTORS)}",
            ]
        )

        def uses(v):
            return [
                f"{v} = min(max({v} + {e} * {self.pick(FACTORS)}, -{CLAMP}), {CLAMP})",
                f"{v} = {e} * {self.pick(FACTORS)}",
                f"{v} = {e}",
                f"{v} = {v} * 0.5 - {e}",
                f"{v} = {e} * {e}",
                f"{v} = {v} + jnp.floor({e})",  # no derivative through it on this path
                f"{v} = {v} * {e} * 0.5",
            ]

        # the other branch sends it to the same variable, or to another (an output of the
        # `if` that may be differentiated where this one is not)
        other = v if self.chance(0.6) else self.pick([f for f in FLOATS if f != v])
        first, second = self.pick(uses(v)), self.pick(uses(other))
        self.emit(indent, f"if {self.cond(ctx)}:")
        self.emit(indent + 1, first)
        self.emit(indent, "else:")
        self.emit(indent + 1, second)

    def collect(self, indent: int, ctx: _Ctx) -> None:
        """A list a loop only appends to, one item an iteration at the top of its body, read
        before the append at its last items (`hs[-1]`, `hs[-2]`) or, after a range from a
        literal start, at the index (`hs[i - 1]`): a staged scan gives its items as stacked
        outputs and carries the items read (runtime/collected.py). Items before the loop are
        arrays, Python floats, ints or bools; the list is read after the loop."""
        hs, e = self.fresh("hs"), self.fresh("e")
        before = ["x", "jnp.sin(y)", "0.5", "1", "True", "u", "jnp.float32(0.25)", "t"]
        items = [self.pick(before) for _ in range(self.rng.randint(1, 3))]
        self.emit(indent, f"{hs} = [{', '.join(items)}]")
        counted = self.chance(0.35)
        if counted:
            start = len(items)
            self.emit(indent, f"for {e} in range({start}, {start + self.rng.randint(0, 4)}):")
            reads = [f"{hs}[{e} - {k}]" for k in range(1, len(items) + 1)]
        else:
            over = self.pick(["jnp.stack([x, y, x * y * 0.25])", "range(3)", "jnp.zeros(0)"])
            self.emit(indent, f"for {e} in {over}:")
            reads = [f"{hs}[-{k}]" for k in range(1, len(items) + 1)]
        inner = ctx.nest(loop=False, bounded=False, names=ctx.names)
        if self.chance(0.4):
            self.assign(indent + 1, inner)
        read = self.pick(reads + [self.pick(DYADIC)])
        value = f"{read} * {self.pick(FACTORS)} + {e} * {self.pick(FACTORS)}"
        if self.chance(0.5):
            value += f" + {self.fexpr(inner, 1)}"
        self.emit(indent + 1, f"{hs}.append(min(max({value}, -{CLAMP}), {CLAMP}))")
        after = self.pick([f"{hs}[-1]", f"sum({hs})", f"{hs}[0]", f"len({hs})"])
        self.emit(indent, f"t = min(max(t + {after} * 0.5, -{CLAMP}), {CLAMP})")

    def table(self, indent: int, ctx: _Ctx) -> None:
        """A list built before a loop over a range and only read in it, at the index plus or
        minus a literal (in range: plain Python returns; the int programs read out of range
        too) and at a literal: staged where the runtime finds the reads in range and the items
        traced arrays of one type."""
        tb, e = self.fresh("tb"), self.fresh("e")
        before = ["x", "jnp.sin(y)", "u * 0.5", "jnp.float32(0.25)", "0.5", "t", "x * y"]
        items = [self.pick(before) for _ in range(self.rng.randint(1, 4))]
        self.emit(indent, f"{tb} = [{', '.join(items)}]")
        # In range for every index (plain Python must return): `e + c` in [-len, len).
        c = self.pick([0, 0, -1, 1, -2])
        low, high = -len(items) - c, len(items) - 1 - c
        start = self.rng.randint(low, high)
        bound = self.pick(
            [
                f"{start}, {self.rng.randint(start, high + 1)}",
                f"{start}, {self.rng.randint(low - 1, start)}, -1",
                f"{start}, {self.rng.randint(start, high + 1)}, 2",
            ]
        )
        self.emit(indent, f"for {e} in range({bound}):")
        read = f"{tb}[{e}]" if c == 0 else f"{tb}[{e} {'+' if c > 0 else '-'} {abs(c)}]"
        inner = ctx.nest(loop=True, bounded=False, names=ctx.names + (e,))
        if self.chance(0.3):
            self.assign(indent + 1, inner)
        value = f"t * 0.5 + {read} * {self.pick(FACTORS)}"
        if self.chance(0.3):
            value += f" - {tb}[-1] * {self.pick(FACTORS)}"
        self.emit(indent + 1, f"t = min(max({value}, -{CLAMP}), {CLAMP})")

    def triangle(self, indent: int, ctx: _Ctx) -> None:
        """Nested loops whose inner range reads the outer index."""
        i, j = self.fresh("i"), self.fresh("j")
        n = self.rng.randint(0, 4)
        self.emit(indent, f"for {i} in range({n}):")
        inner = self.pick([i, f"{n} - 1 - {i}", f"{i}, {n}", f"{n}, {i}, -1", f"{i} + 1"])
        self.emit(indent + 1, f"for {j} in range({inner}):")
        value = f"t * 0.5 + {self.fexpr(ctx, 1)} * {self.pick(FACTORS)} + {j} * 0.25"
        self.emit(indent + 2, f"t = min(max({value}, -{CLAMP}), {CLAMP})")
        if self.chance(0.4):
            self.block(indent + 2, ctx.nest(loop=True, bounded=False, names=ctx.names + (i, j)))

    def counted_or(self, indent: int, ctx: _Ctx) -> None:
        """A `while` whose test is Python's True while its counter is low (`(t > 0.5 or k <
        2) and k < 4`): staged from its start where those iterations only count."""
        k = self.fresh("k")
        self.emit(indent, f"{k} = 0")
        least, most = self.rng.randint(0, 3), self.rng.randint(1, 5)
        self.emit(indent, f"while ({self.cond(ctx)} or {k} < {least}) and {k} < {most}:")
        self.emit(indent + 1, f"{k} += 1")
        self.block(indent + 1, ctx.nest(loop=True, bounded=False))

    def ret(self) -> str:
        items = self.return_items[:]
        items[0] = self.pick(["t + 1.0", "t * 0.5", "-t", "t"])
        return f"return ({', '.join(items)})"

    def statement(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if ctx.depth == 0 and self.chance(0.2):
            self.collect(indent, ctx)
        if ctx.depth <= 1 and self.chance(0.08):
            self.table(indent, ctx)
        if ctx.depth == 0 and self.chance(0.08):
            self.triangle(indent, ctx)
        if ctx.depth <= 1 and self.chance(0.08):
            self.counted_or(indent, ctx)
        if ctx.bounded and self.chance(0.15):
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"vals.append({self.fexpr(ctx)})")
        if ctx.depth >= 2 or r < 0.35:
            self.assign(indent, ctx)
        elif r < 0.42:
            if self.chance(0.4):
                self.shared(indent, ctx)
            else:
                self.risky(indent, ctx)
        elif r < 0.6:
            self.if_elif_else(
                indent, lambda: self.cond(ctx), lambda: self.block(indent + 1, ctx.nest())
            )
        elif r < 0.73:
            i = f"i{ctx.depth}"
            bound = self.pick(
                [
                    str(self.rng.randint(0, 4)),
                    str(self.rng.randint(1, 4)),
                    "int(x) % 4",
                    "int(jnp.abs(y)) % 3",
                    "acc % 4",
                    f"int({self.simple_cond(ctx, 1)}) + 1",
                    # traced starts and steps other than 1 (items tested against the bound)
                    "acc % 3, int(jnp.abs(y)) % 5",
                    "int(x) % 4, 7, 2",
                    "6, acc % 4, -1",
                    "5, int(x) % 3 - 1, -2",
                ]
            )
            static = bound.isdigit()
            self.emit(indent, f"for {i} in range({bound}):")
            self.block(
                indent + 1,
                ctx.nest(loop=True, bounded=ctx.bounded and static, names=ctx.names + (i,)),
            )
        elif r < 0.78 and self.chance(0.5):
            # a loop Python starts (its test reads Python state only) that its first iteration
            # stages (the body mixes in the inputs): the staged loop may restart from before it
            k = self.fresh("k")
            v = self.pick(FLOATS[:2])
            self.emit(indent, f"{k} = 0")
            test = self.pick([f"{v} < {self.pick(['3.0', '10.0', '50.0'])}", "acc < 5", "not c"])
            self.emit(indent, f"while {test} and {k} < {self.rng.randint(1, 4)}:")
            self.emit(indent + 1, f"{k} += 1")
            self.emit(
                indent + 1,
                self.pick(
                    [
                        f"{v} = {v} + {self.pick(['x', 'y', 'jnp.abs(x)', 'u'])} * {self.pick(FACTORS)}",
                        f"{v} = {v} * 0.5 + {self.fexpr(ctx, 1)}",
                        f"acc = (acc + int({self.bounded_fexpr(ctx, 1)})) % 97",
                        f"c = {self.simple_cond(ctx, 1)}",
                    ]
                ),
            )
            self.block(indent + 1, ctx.nest(loop=True, bounded=False))
        elif r < 0.83:
            k = self.fresh("k")
            self.emit(indent, f"{k} = 0")
            self.emit(indent, f"while {self.cond(ctx)} and {k} < {self.rng.randint(1, 4)}:")
            bounded = self.chance(0.5)
            if bounded:
                self.emit(indent + 1, "transpiler.loop_options(max_iterations=4)")
            self.emit(indent + 1, f"{k} += 1")
            self.block(indent + 1, ctx.nest(loop=True, bounded=ctx.bounded and bounded))
        elif r < 0.93 and ctx.loop:
            self.emit(indent, f"if {self.cond(ctx)}:")
            if self.chance(0.5):
                self.assign(indent + 1, ctx)
            self.emit(indent + 1, self.pick(["break", "continue"]))
        else:
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, self.ret())

    def program(self) -> str:
        self.return_items = ["t", "z", "u", "acc", "best", "len(vals)", "sum(vals)", "c"]
        if self.has_max:
            self.return_items.append("max(vals) if vals else -1.0")
        if self.has_w:
            self.return_items.append("w")
        self.lines += [
            "import jax",
            "import jax.numpy as jnp",
            "",
            "import transpiler",
            "",
            "",
            "def f(x, y):",
            "    t = 0.0",
            f"    z = {self.pick(['0.5', '1.5', '-0.25', '2.0'])}",
            f"    u = {self.pick(['x * 0.5', 'y - x', 'jnp.sin(x) + y * 0.25', '0.0'])}",
            f"    acc = {self.pick(['0', '1'])}",
            "    best = -1",
            "    vals = []",
            f"    c = {self.pick(['False', 'True', 'x > y'])}",
            "    n = jnp.asarray(x).astype(jnp.int32)",
        ]
        if self.has_w:
            # no derivative: a staged loop or return carries w, and its zero cotangent times
            # log's infinite derivative at 0 is NaN (limitations: NaN gradients through values
            # a staged statement passes on; eager never differentiates through w)
            self.emit(1, "w = jnp.log(jnp.abs(jax.lax.stop_gradient(x)))")
        ctx = _Ctx(loop=False, bounded=True, names=(), depth=0)
        for _ in range(self.rng.randint(2, 3)):
            self.statement(1, ctx)
        if self.chance(0.5):
            self.emit(1, f"t = t + jnp.sin(x) * {self.pick(FACTORS)} + y * {self.pick(FACTORS)}")
        self.emit(1, f"return ({', '.join(self.return_items)})")
        return "\n".join(self.lines) + "\n"


def program(seed: int) -> str:
    """The source of random float program number `seed`."""
    return _Generator(seed).program()
