"""Random programs about effects: prints, failing asserts, context managers, module state.

`program(seed)` returns the source of a module defining `f(x, y)` over two Python ints, plus
`reset()` (puts the module-level state back: a counter `COUNT`, an object `STATE`, a dict
`CFG`, a list `LOG`) and `snapshot()` (that state, compared exactly on the Python path).

What the programs stress (what recent bugs were about):

- prints (constant text, traced values, f-strings, `sep=`) interleaved with asserts that FAIL on
  some of the harness's inputs: straight-line, in staged branches, in loops (`for i in
  range(k): assert a > i, f"A3 i={i}"`), in helpers that print and assert, in a `while True`
  bounded by `loop_options`. The harness compares the exception (Python's `AssertionError:
  <message>` must appear in the text of the converted run's exception, which JAX wraps as a
  `JaxRuntimeError`) and stdout up to the failure. Each assert has a message of its own
  (`A<n> ...`), so the assert that failed is known; one in ten has none.
- user classes: `with` blocks over context managers (pure: `Guard`, `span`; changing module
  state: `Counted` and `counting` a number, `Tally` an attribute of a module object, `Logged` a
  module list that grows — refused in a staged block), `@property` getters, `__add__`,
  `__call__` that changes its object, static methods (one of them writes `COUNT`);
- module-level state written in staged blocks: `STATE.hits += 1`, `CFG["n"]` incremented, a key
  `CFG["k"]` created in both branches, `COUNT` through `global`, `LOG` appended to (Python
  loops only: a staged block's append is refused, as documented);
- local lists extended by `+= [...]` and `.extend((...))`, built in loops and popped from
  either end (`pop()`, `pop(0)`), `while True:` loops with `loop_options(max_iterations=N)`
  and code after them, early `return`s;
- values that mix Python ints and bools (`flag = a > 40 and b`), returned;
- an object of a registered dataclass (`rec`, held as `rec0` and in `recs` too) whose
  attributes are set in staged blocks, rebound to itself (`rec = rec`: carried as state) or
  to a new one after a change, chosen by a condition (`rec = recs[1] if ... else rec`),
  changed by a helper (`bump`); `rec0.n` and `rec is rec0` show whether every name sees the
  change (or the converted function refuses).

`f` returns a flat tuple of ints (the state it changed included: `COUNT`, `STATE.hits`,
`CFG["n"]`, `len(LOG)`, ...), so results compare under `jax.jit` and `jax.vmap` too. Values stay
small (`% 97`) and every loop is bounded, by its range or a counter its test reads; a `while
True` breaks by its `N - 1`th iteration (by its `N`th where a `continue` skipped that test), so
`loop_options(max_iterations=N)` never cuts it (the plain Python run does not know the bound).

What the programs avoid, because docs/semantics.md and docs/limitations.md document that the
converted function differs there (so a difference would be no bug):

- Functions that print nowhere: their asserts are unordered host callbacks (semantics, "print
  and assert": where two fail in one run the error may name either). `f` always prints first.
- Arithmetic on or text of values that may be traced bools (`flag + flag`, `~flag`,
  `print(flag)`: limitations, "A Python bool or int that becomes traced"); `flag` is only
  returned (compared as an int) or added to an int.
- `try`/`except` around asserts, and `__exit__` methods that return True (suppress the
  exception): a staged assert is a check when the program runs, which nothing inside the
  function can catch (limitations, "try/except around staged code").
- `if`s inside properties and operator methods (`__add__`): they are called as they are, not
  converted (limitations, "Properties and operator methods"); `__call__` and static methods are
  converted and have `if`s.
- Text of traced values anywhere but in `print` and assert messages (limitations, "Text of a
  traced value").
- Module state read after a `jax.jit` call (it holds tracers, as in plain JAX): `f` returns it.
- Prints in `__enter__`/`__exit__` (the `Loud` class) are kept, but rare (one program in
  twenty): whether they are deferred like the prints of converted code is what they check.
"""

from __future__ import annotations

from tests.fuzz.writer import Ctx as _Ctx
from tests.fuzz.writer import ProgramWriter

RET = (
    "a",
    "b",
    "flag",
    "len(acc)",
    "sum(acc) % 97",
    "obj.v",
    "obj.hits",
    "COUNT",
    "STATE.v",
    "STATE.hits",
    'CFG["n"]',
    'CFG.get("k", -1)',
    "len(LOG)",
    "rec.n",
    "rec.m",
    "rec0.n",
    "recs[1].m",
    "(1 if rec is rec0 else 0)",
)


class _Generator(ProgramWriter):
    def __init__(self, seed: int):
        super().__init__(seed)
        self.asserts = 0
        self.loud = self.chance(0.05)
        self.ret = "(" + ", ".join(RET) + ")"

    # -- expressions ----------------------------------------------------------------------

    def atom(self, ctx: _Ctx) -> str:
        atoms = ["a", "b", "a", "b", "x", "y", str(self.rng.randint(0, 9))]
        atoms += list(ctx.names)
        atoms += self.rng.choice([["obj.v"], ["STATE.v"], ["COUNT"], ['CFG["n"]'], []])
        return self.rng.choice(atoms)

    def expr(self, ctx: _Ctx, depth: int = 0) -> str:
        r = self.rng.random()
        if depth > 1 or r < 0.45:
            return self.atom(ctx)
        if r < 0.8:
            op = self.rng.choice(["+", "-", "*"])
            return f"(({self.expr(ctx, depth + 1)} {op} {self.expr(ctx, depth + 1)}) % 97)"
        if r < 0.9:
            body, test = self.expr(ctx, depth + 1), self.cond(ctx, depth + 1)
            return f"({body} if {test} else {self.atom(ctx)})"
        # an object's special methods and properties
        return self.rng.choice(
            [
                "obj.double",
                f"(obj + {self.atom(ctx)})",
                f"Box.mix({self.atom(ctx)}, b)",
                "STATE.double",
            ]
        )

    def cond(self, ctx: _Ctx, depth: int = 0) -> str:
        cmp = self.rng.choice(["<", ">", "<=", ">=", "==", "!="])
        simple = f"{self.expr(ctx, depth + 1)} {cmp} {self.expr(ctx, depth + 1)}"
        r = self.rng.random()
        if depth > 0 or r < 0.7:
            return simple
        if r < 0.85:
            return f"({simple} {self.rng.choice(['and', 'or'])} {self.cond(ctx, 1)})"
        return f"not ({simple})"

    def check_cond(self, ctx: _Ctx) -> str:
        """An assert's test: true on most inputs, false on some."""
        v = self.rng.choice(["a", "b", "a", "b"] + list(ctx.names[-1:]) + ["obj.v", "COUNT"])
        r = self.rng.random()
        if v not in ("a", "b"):
            # A loop index of a loop run as Python, `obj.v` and `COUNT` can be Python values:
            # a test of those alone that is false raises while tracing, before the earlier
            # staged asserts run (limitations, "An `assert` whose test is a Python value").
            w = self.rng.choice(["a", "b"])
            return f"({v} + {w}) % 97 {self.rng.choice(['>', '<'])} {self.rng.randint(1, 95)}"
        if r < 0.35:
            return f"{v} {self.rng.choice(['>', '>=', '!='])} {self.rng.choice([0, 1, 2, 3, 7])}"
        if r < 0.6:
            return f"{v} {self.rng.choice(['<', '<='])} {self.rng.choice([50, 90, 93, 95, 96])}"
        if r < 0.8:
            w = self.rng.choice(["a", "b", "x % 7", "y % 5"])
            return f"({v} + {w}) % 97 {self.rng.choice(['>', '<'])} {self.rng.randint(1, 95)}"
        return f"{v} % {self.rng.choice([2, 3, 5, 7])} != {self.rng.randint(0, 4)}"

    def message(self, ctx: _Ctx) -> str | None:
        self.asserts += 1
        n = self.asserts
        if self.chance(0.1):
            return None
        v = self.rng.choice(["a", "b"] + list(ctx.names))
        return self.rng.choice([f'"A{n}"', f'f"A{n} {v}={{{v}}}"', f'"A{n} " + str({v})'])

    # -- statements -----------------------------------------------------------------------

    def assign(self, indent: int, ctx: _Ctx) -> None:
        v = self.rng.choice("ab")
        self.emit(indent, f"{v} = (({v} + {self.expr(ctx)}) % 97)")

    def block(self, indent: int, ctx: _Ctx, n: tuple[int, int] = (1, 3)) -> None:
        for _ in range(self.rng.randint(*n)):
            self.statement(indent, ctx)

    def statement(self, indent: int, ctx: _Ctx) -> None:
        if ctx.depth >= 3 or self.chance(0.2):
            self.assign(indent, ctx)
            return
        kinds = [
            (self.s_print, 3),
            (self.s_assert, 3),
            (self.s_if, 3 if ctx.depth < 2 else 1),
            (self.s_for, 2 if ctx.depth < 2 else 0),
            (self.s_while, 1 if ctx.depth < 2 else 0),
            (self.s_with, 3),
            (self.s_object, 2),
            (self.s_module, 3),
            (self.s_list, 2),
            (self.s_flag, 1),
            (self.s_helper, 2),
            (self.s_exit, 1),
            (self.s_record, 3),
        ]
        fns, weights = zip(*kinds)
        self.rng.choices(fns, weights)[0](indent, ctx)

    def s_print(self, indent: int, ctx: _Ctx) -> None:
        v = self.rng.choice(["a", "b"] + list(ctx.names) + ["obj.v"])
        r = self.rng.random()
        if r < 0.3:
            self.emit(indent, f'print("p{self.n}")')
            self.n += 1
        elif r < 0.55:
            self.emit(indent, f'print("{v}", {v})')
        elif r < 0.85:
            self.emit(indent, f'print(f"{v}={{{v}}} b={{b}}")')
        else:
            self.emit(indent, 'print("ab", a, b, sep=":")')

    def s_assert(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if r < 0.4 and ctx.depth < 3:
            i = self.fresh("i")
            self.emit(indent, f"for {i} in range({self.rng.choice([2, 3, 4])}):")
            inner = self.loop_ctx(ctx, i, True)
            if self.chance(0.5):
                self.s_print(indent + 1, inner)
            msg = self.message(inner)
            test = self.rng.choice(
                [f"a > {i}", f"b + {i} < 96", f"(a + {i}) % 5 != 4", self.check_cond(inner)]
            )
            self.emit(indent + 1, f"assert {test}" + (f", {msg}" if msg else ""))
            if self.chance(0.5):
                self.assign(indent + 1, inner)
        else:
            msg = self.message(ctx)
            self.emit(indent, f"assert {self.check_cond(ctx)}" + (f", {msg}" if msg else ""))

    def s_if(self, indent: int, ctx: _Ctx) -> None:
        self.if_elif_else(
            indent, lambda: self.cond(ctx), lambda: self.block(indent + 1, ctx.nest())
        )

    def loop_ctx(self, ctx: _Ctx, index: str | None, bounded: bool) -> _Ctx:
        names = ctx.names + ((index,) if index else ())
        return ctx.nest(loop=True, bounded=ctx.bounded and bounded, names=names)

    def s_for(self, indent: int, ctx: _Ctx) -> None:
        i = self.fresh("i")
        bound = self.rng.choice(["2", "3", "4", "b % 3"])
        self.emit(indent, f"for {i} in range({bound}):")
        inner = self.loop_ctx(ctx, i, bound != "b % 3")
        self.block(indent + 1, inner, (1, 3))
        if self.chance(0.3):
            self.emit(indent + 1, f"if {self.cond(inner)}:")
            self.emit(indent + 2, self.rng.choice(["break", "continue"]))
            self.assign(indent + 1, inner)

    def s_while(self, indent: int, ctx: _Ctx) -> None:
        k = self.fresh("k")
        n = self.rng.randint(2, 4)
        self.emit(indent, f"{k} = 0")
        if self.chance(0.6):
            # `while True` ended by a break by its (n - 1)th iteration, or its nth where a
            # `continue` in the body skipped that test (plain Python does not know the bound):
            # max_iterations never cuts
            self.emit(indent, "while True:")
            self.emit(indent + 1, f"transpiler.loop_options(max_iterations={n})")
            self.emit(indent + 1, f"{k} += 1")
            self.emit(indent + 1, f"if {k} >= {n}:")
            self.emit(indent + 2, "break")
            inner = self.loop_ctx(ctx, k, True)
            self.block(indent + 1, inner, (1, 2))
            self.emit(indent + 1, f"if {self.cond(inner)} or {k} >= {n - 1}:")
            if self.chance(0.3):
                self.s_print(indent + 2, inner)
            self.emit(indent + 2, "break")
            if self.chance(0.5):
                self.block(indent + 1, inner, (1, 1))
            # code after the loop
            self.emit(indent, f"a = ((a + {k}) % 97)")
        else:
            bounded = self.chance(0.5)
            self.emit(indent, f"while {self.cond(ctx)} and {k} < {n}:")
            if bounded:
                self.emit(indent + 1, f"transpiler.loop_options(max_iterations={n})")
            self.emit(indent + 1, f"{k} += 1")
            self.block(indent + 1, self.loop_ctx(ctx, k, bounded), (1, 2))

    def s_with(self, indent: int, ctx: _Ctx) -> None:
        g = self.fresh("g")
        options = [
            (f"Guard({self.atom(ctx)}) as {g}", True),
            (f"span({self.atom(ctx)}) as {g}", True),
            (f"Counted({self.rng.randint(1, 5)}) as {g}", False),
            (f"counting({self.atom(ctx)}) as {g}", True),
            (f"Tally() as {g}", False),
        ]
        if self.chance(0.15):
            options.append((f"Logged({self.atom(ctx)}) as {g}", False))
        if self.loud:
            options.append((f"Loud() as {g}", True))
        head, number = self.rng.choice(options)
        wrap = self.chance(0.5) and ctx.depth < 2
        if wrap:
            # in a staged branch or a loop
            if self.chance(0.5):
                self.emit(indent, f"if {self.cond(ctx)}:")
                indent, ctx = indent + 1, ctx.nest()
            else:
                i = self.fresh("i")
                self.emit(indent, f"for {i} in range({self.rng.choice(['2', '3', 'b % 3'])}):")
                indent, ctx = indent + 1, self.loop_ctx(ctx, i, True)
        self.emit(indent, f"with {head}:")
        inner = ctx.nest()
        if number:
            self.emit(indent + 1, f"a = ((a + {g}) % 97)")
        else:
            self.emit(indent + 1, f"b = ((b + {self.expr(ctx)}) % 97)")
        if self.chance(0.6):
            self.block(indent + 1, inner, (1, 2))

    def s_object(self, indent: int, ctx: _Ctx) -> None:
        e = self.expr(ctx)
        self.emit(
            indent,
            self.rng.choice(
                [
                    f"b = ((b + obj({e})) % 97)",
                    f"a = ((a + STATE({e})) % 97)",
                    f"a = ((obj + {e}) + obj.double) % 97",
                    f"b = Box.mix({e}, a)",
                    f"a = ((a + Box.tick({e})) % 97)",
                    "obj.hits += 1",
                    f"obj.v = ({e} + obj.double) % 97",
                ]
            ),
        )

    def s_module(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if r < 0.2:
            self.emit(indent, "STATE.hits += 1")
        elif r < 0.35:
            self.emit(indent, f'CFG["n"] = ((CFG["n"] + {self.expr(ctx)}) % 97)')
        elif r < 0.55:
            # a key created in both branches
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f'CFG["k"] = {self.expr(ctx)}')
            self.emit(indent, "else:")
            self.emit(indent + 1, f'CFG["k"] = {self.expr(ctx)}')
            self.emit(indent, 'a = ((a + CFG["k"]) % 97)')
        elif r < 0.7:
            self.emit(indent, f"COUNT = ((COUNT + {self.expr(ctx)}) % 97)")
        elif r < 0.8:
            self.emit(indent, f"STATE.v = ({self.expr(ctx)} + STATE.hits) % 97")
        elif r < 0.9 and (ctx.depth == 0 or self.chance(0.2)):
            self.emit(indent, f"LOG.append({self.atom(ctx)})")
        else:
            self.emit(indent, f"b = ((b + note({self.expr(ctx)})) % 97)")

    def s_list(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        if r < 0.25 and ctx.bounded:
            self.emit(indent, f"acc += [{self.expr(ctx)}, {self.atom(ctx)}]")
        elif r < 0.45 and ctx.bounded:
            self.emit(indent, f"acc.extend(({self.atom(ctx)}, {self.rng.randint(0, 9)}))")
        elif r < 0.6 and ctx.bounded:
            self.emit(indent, f"if {self.cond(ctx)}:")
            self.emit(indent + 1, f"acc.append({self.expr(ctx)})")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"acc.append({self.atom(ctx)})")
        elif r < 0.75:
            self.emit(indent, "if len(acc) > 0:")
            self.emit(indent + 1, f"a = ((a + acc.pop({self.rng.choice(['', '0'])})) % 97)")
        else:
            # a queue built in a loop, popped from both ends
            q, i = self.fresh("q"), self.fresh("i")
            self.emit(indent, f"{q} = []")
            self.emit(indent, f"for {i} in range({self.rng.choice([2, 3, 4])}):")
            inner = self.loop_ctx(ctx, i, True)
            if self.chance(0.5):
                self.emit(indent + 1, f"if {self.cond(inner)}:")
                self.emit(indent + 2, f"{q}.append({self.expr(inner)})")
                self.emit(indent + 1, "else:")
                self.emit(indent + 2, f"{q}.append(({i} * 7) % 97)")
            else:
                self.emit(indent + 1, f"{q} += [({self.atom(inner)} + {i}) % 97]")
            self.emit(indent, f"a = ((a + {q}.pop(0) * 2 + {q}.pop()) % 97)")
            self.emit(indent, f"b = ((b + len({q})) % 97)")

    def s_flag(self, indent: int, ctx: _Ctx) -> None:
        r = self.rng.random()
        left = f"{self.atom(ctx)} {self.rng.choice(['>', '<'])} {self.rng.randint(0, 60)}"
        if r < 0.4:
            self.emit(indent, f"flag = {left} and {self.rng.choice(['a', 'b'])}")
        elif r < 0.7:
            self.emit(indent, f"flag = {left} or {self.rng.choice(['a', 'b', '0'])}")
        elif r < 0.85:
            self.emit(indent, f"a = ((a + ({left} and b)) % 97)")
        else:
            self.emit(indent, f"flag = (b > 3 and {left}) or flag")

    def s_helper(self, indent: int, ctx: _Ctx) -> None:
        v = self.rng.choice("ab")
        self.emit(indent, f'{v} = check({self.expr(ctx)}, "{self.fresh("c")}")')

    def s_exit(self, indent: int, ctx: _Ctx) -> None:
        options = ["return"] + (["break", "continue"] if ctx.loop else [])
        kind = self.rng.choice(options)
        self.emit(indent, f"if {self.cond(ctx)}:")
        if self.chance(0.5):
            self.s_print(indent + 1, ctx)
        if kind == "return":
            self.emit(indent + 1, f"return {self.ret}")
        else:
            self.emit(indent + 1, kind)

    def s_record(self, indent: int, ctx: _Ctx) -> None:
        """An object of a registered dataclass (`rec`, also held as `rec0` and `recs[0]`)
        changed in place, rebound to itself or to another, chosen by a condition."""
        e = self.expr(ctx)
        index = ctx.names[-1] if ctx.loop and ctx.names else None
        options = [
            f"rec.n = (rec.n + {e}) % 97",
            "rec.m = (rec.m + 1) % 97",
            f"rec.n = (rec.n + {e}) % 97\nrec = rec",
            f"rec = Rec({e}, a)",
            f"rec.m = (rec.m + {e}) % 97\nrec = Rec(rec.m, b)",
            f"rec = recs[1] if {self.cond(ctx)} else rec",
            f"recs[0].m = (recs[0].m + {e}) % 97\nrecs = recs",
            f"a = (a + bump(rec, {e})) % 97",
            f"rec.m = rec.n if {self.cond(ctx)} else rec.m",
        ]
        if index is not None:
            options.append(f"recs[{index} % 2].n = (recs[{index} % 2].n + {e}) % 97")
        for line in self.rng.choice(options).split("\n"):
            self.emit(indent, line)

    # -- the module -------------------------------------------------------------------------

    def program(self) -> str:
        ctx = _Ctx(loop=False, bounded=True, names=(), depth=0)
        body_start = len(self.lines)
        self.emit(1, self.rng.choice(['print("start")', 'print("start", a, b)', 'print(f"x={x}")']))
        for _ in range(self.rng.randint(3, 6)):
            self.statement(1, ctx)
        # at least one assert at the top level
        self.s_assert(1, ctx)
        if self.chance(0.5):
            self.statement(1, ctx)
        body = self.lines[body_start:]
        self.lines = []
        L = self.lines.append
        L(HEADER.rstrip("\n"))
        if self.loud:
            L(LOUD.rstrip("\n"))
        L("")
        L("")
        L("def f(x, y):")
        L("    global COUNT")
        L("    a = x % 97")
        L("    b = y % 97")
        L("    flag = 0")
        L("    acc = []")
        L("    obj = Box(b)")
        L("    rec = Rec(a, b)")
        L("    rec0 = rec")
        L("    recs = [rec, Rec(b, a)]")
        self.lines += body
        L(f"    return {self.ret}")
        return "\n".join(self.lines) + "\n"


HEADER = """\
# effects program
import contextlib
import dataclasses

import jax

import transpiler

COUNT = 0
STATE = None
CFG = None
LOG = None


class Box:
    def __init__(self, v):
        self.v = v % 97
        self.hits = 0

    @property
    def double(self):
        return (self.v * 2) % 97

    def __add__(self, other):
        return (self.v + other) % 97

    def __call__(self, d):
        if d > self.v:
            self.hits = self.hits + 1
        self.v = (self.v + d) % 97
        return self.v

    @staticmethod
    def mix(p, q):
        if p > q:
            return (p - q) % 97
        return (p * 3 + q) % 97

    @staticmethod
    def tick(v):
        global COUNT
        COUNT = (COUNT + v) % 97
        return COUNT


class Guard:
    def __init__(self, k):
        self.k = k

    def __enter__(self):
        return self.k

    def __exit__(self, *exc):
        return False


class Counted:
    def __init__(self, k):
        self.k = k

    def __enter__(self):
        global COUNT
        COUNT = (COUNT + self.k) % 97
        return self.k

    def __exit__(self, *exc):
        global COUNT
        COUNT = (COUNT * 2) % 97
        return False


class Tally:
    def __enter__(self):
        STATE.hits = STATE.hits + 1
        return STATE.hits

    def __exit__(self, *exc):
        STATE.v = (STATE.v + 1) % 97
        return False


class Logged:
    def __init__(self, tag):
        self.tag = tag

    def __enter__(self):
        LOG.append(self.tag)
        return len(LOG)

    def __exit__(self, *exc):
        return False


@contextlib.contextmanager
def span(v):
    yield (v * 2) % 97


@contextlib.contextmanager
def counting(v):
    global COUNT
    COUNT = (COUNT + v) % 97
    yield COUNT


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Rec:
    n: int
    m: int


def bump(r, v):
    if v > 40:
        r.n = (r.n + v) % 97
    return r.n


def check(v, tag):
    print("check", tag, v)
    assert v < 95, f"check {tag}: {v}"
    return (v * 3 + 1) % 97


def note(v):
    global COUNT
    if v > 40:
        COUNT = (COUNT + 1) % 97
        return 1
    return 0


def reset():
    global COUNT, STATE, CFG, LOG
    COUNT = 0
    STATE = Box(5)
    CFG = {"n": 1}
    LOG = []


def snapshot():
    return (COUNT, STATE.v, STATE.hits, dict(CFG), list(LOG))
"""

LOUD = """

class Loud:
    def __enter__(self):
        print("enter")
        return 1

    def __exit__(self, *exc):
        print("exit")
        return False
"""


def program(seed: int) -> str:
    """The source of random effects program number `seed`."""
    return _Generator(seed).program()
