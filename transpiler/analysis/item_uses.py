"""Whether a `for` loop's body uses its items only as array values.

A `for` over a Python range (or a NumPy array) may be staged as one `lax.scan`, which hands the
body its items as traced arrays: `i` is then an int32 tracer, not a Python int. That is exact
where the body only computes with `i` (arithmetic, comparisons, indexing arrays, JAX functions),
and silently different where it uses `i` as a Python value: `f"w{i}"` and `str(i)` (the text of a
tracer), `2 ** -i` (an int power, not a float), `isinstance(i, int)`, a user function that may do
any of these. `uses_items_as_python(loop)` says whether the body does; such a loop is not staged
as a scan (it runs as Python, unrolled while tracing).

The names bound from the items (`j = i + 1`) are followed through the body's assignments; a use
is fine where its value goes into an array computation.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping

import gast

from transpiler import naming, structure
from transpiler.analysis import activity
from transpiler.naming import RUNTIME

STACKERS = frozenset({"stack", "array", "asarray"})
"""The JAX and NumPy functions (`jnp.stack(rows)`) that stack a list's items into a new array,
keeping no reference to the list."""

# Runtime operators that treat a traced int as Python would (casts, min/max, print).
_ARRAY_SAFE_RUNTIME = frozenset(
    {
        "int_",
        "float_",
        "bool_",
        "min_",
        "max_",
        "sum_",
        "print_",
        "effect",  # jax.debug.print(...) and the like: JAX functions, arrays welcome
        "fstring",
        "ld",
        "and_",
        "and_or",
        "or_",
        "not_",
        "in_",
        "not_in",
        "if_exp",
        "len_",
    }
)


def uses_items_as_python(
    loop: gast.For,
    live_after: frozenset[str] = frozenset(),
    enclosing: frozenset[str] = frozenset(),
    catches: bool = False,
    proven: frozenset[int] = frozenset(),
    scope: gast.AST | None = None,
) -> bool | str:
    """Whether the body of `loop` (or its extra test) uses an item as a Python value; or the
    code after it (`live_after`: names read after the loop) reads the last item, or a list or
    tuple the body builds of items other than to stack it (`jnp.stack(best_i)`; `scope`: the
    function the loop is in, whose code outside it is read for that). `enclosing`:
    the indices of the `for` loops over ranges around it. `catches`: the function has a `try`,
    whose handlers may read the text of an exception the loop raises (as Python text).
    `proven`: the reads of lists at the index shown in range (`counted_reads`). `"items"`: of
    `for i, x in enumerate(xs)`, only `x` is so used (Python's where `xs` is a Python list;
    rows of an array, and arrays either way, where it is one)."""
    index = _index_part(loop)
    context = (live_after, enclosing, catches, proven, scope)
    if index is None:
        return _uses_as_python(loop, loop.target, *context)
    if _uses_as_python(loop, index, *context):
        return True
    if _uses_as_python(loop, loop.target, *context):
        return "items"
    return False


def _uses_as_python(loop, target, live_after, enclosing, catches, proven, scope=None) -> bool:
    """`uses_items_as_python` of the names of `target` (the loop's, or a part of it)."""
    tainted = _names(target)
    if tainted & live_after:
        return True  # read after the loop, where no analysis of ours follows it
    # The index of `range(n)` (or of a range from a constant >= 0) is never negative: `x ** i`
    # is the same power of a Python int and of a traced one.
    counter = None
    if isinstance(loop.target, gast.Name) and _nonnegative_range(loop.iter):
        counter = loop.target.id
    statements = list(structure.walk(loop.body))
    # `if t == u: outs.append(...)` in nested loops over ranges: Python decides it where both
    # loops run unrolled, so each loop whose index it reads does.
    indices = set(enclosing)
    for stmt in statements:
        if isinstance(stmt, gast.For) and range_loop(stmt):
            indices |= index_names(stmt)
    # Of `for i, x in enumerate(xs)` staged, `x` is an array (a row of xs, or an array of a
    # list of them): `x * i` is one either way (not where the body rebinds `x`, nor where the
    # rows are tuples: `enumerate(zip(xs, ys))`).
    rows = _names(loop.target) - tainted if target is not loop.target else set()
    if rows and not isinstance(loop.iter.args[0], gast.Call):
        rows -= {n for stmt in statements for t, _ in _bindings(stmt) for n in _names(t)}
    else:
        rows = set()
    found = _Statements(statements, counter, indices, catches, proven, frozenset(rows))
    if found.used_as_python(tainted):
        return True
    # A list the body builds of items, read after the loop: Python ints there (`str`, a key),
    # arrays after a staged loop; unless only stacked into an array (`jnp.stack(best_i)`).
    built = found.displays & live_after & found.closure(tainted)
    return bool(built) and (scope is None or not _stacked_only(scope, loop, built))


def _stacked_only(scope: gast.AST, loop: gast.For, names: frozenset[str]) -> bool:
    """Whether `scope` reads `names`, outside `loop`, only as what a JAX or NumPy function
    stacks into an array (`jnp.stack(best_i)`, `jnp.array(best_i)`; a `stack_list` of the
    lists pass), or returns (the caller gets arrays, as it gets a loop's variables)."""
    inside = {id(n) for n in structure.walk_nodes(loop)}
    parents = {}
    for node in structure.walk_nodes(scope):
        for child in structure.children(node):
            parents[id(child)] = node
    for node in structure.walk_nodes(scope):
        if (
            isinstance(node, gast.Name)
            and node.id in names
            and isinstance(node.ctx, gast.Load)
            and id(node) not in inside
        ):
            parent = parents.get(id(node))
            if isinstance(parent, gast.Tuple) and isinstance(parents.get(id(parent)), gast.Return):
                parent = parents[id(parent)]
            if isinstance(parent, gast.Return):
                continue  # given back (`return i, j` from nested loops): as a loop's variable is
            stacks = isinstance(parent, gast.Call) and (
                naming.runtime_operator(parent.func) == "stack_list"
                or isinstance(parent.func, gast.Attribute)
                and parent.func.attr in STACKERS
            )
            if not (stacks and any(a is node for a in parent.args)):
                return False
    return True


def _index_part(loop: gast.For) -> gast.expr | None:
    """The index of `for i, x in enumerate(xs)`: a Python int where Python's loop runs,
    whatever `xs` is; None for other loops."""
    target = loop.target
    if (
        isinstance(loop.iter, gast.Call)
        and naming.runtime_operator(loop.iter.func) == "enumerate_"
        and isinstance(target, gast.Tuple)
        and len(target.elts) == 2
    ):
        return target.elts[0]
    return None


def counted_reads(loop: gast.For, sizes: Mapping[str, int]) -> tuple[frozenset[int], tuple]:
    """The reads `rt__.list_item(row, j + c)` in the body of `loop` that are in range in every
    iteration, as the ids of their index nodes, and the names of their lists. `j` is the
    loop's index, over `range(stop)` or `range(start, stop)` (`start` an int literal); `c` an
    int literal; `row` a list of `sizes[row]` items before the loop, which the body appends one
    item to in every iteration (`row.append(...)`, a statement at the top of the body), and
    uses in no other way. At iteration `j` it holds `sizes[row] + j - start` items (one more
    after the append), so one check of the bounds holds for every iteration: the
    dynamic-programming row `row = [i]`, then `row.append(min(prev[j] + 1, row[j - 1] + 1,
    ...))` over `range(1, n)`. Staged, the loop reads such a list at the traced index exactly
    where Python does (a traced index is never out of range there, so never clamped), where
    the staged list holds the items it had before the loop as they are
    (`for_stmt(indexed_lists=...)`: not Python ints made floats by the appends, say). Reads at
    a literal index (`row[-1]`) are the staged list's, checked as it runs."""
    start = _range_start(loop)
    if start is None or not isinstance(loop.target, gast.Name):
        return frozenset(), ()
    index = loop.target.id
    if _rebinds(loop.body, index):
        return frozenset(), ()  # the body rebinds the index: `j` is not the iteration's
    statements = list(structure.walk(loop.body))
    proven: set[int] = set()
    lists: list[str] = []
    for name, size in sizes.items():
        appends = [i for i, stmt in enumerate(loop.body) if _appends_to(stmt, name)]
        if len(appends) != 1 or sum(_appends_to(s, name) for s in statements) != 1:
            continue
        reads = _reads_of(loop.body, name, index, appends[0])
        # (At a literal index, `row[-1]`: the staged list's, checked as it runs.)
        counted = [(call, offset, after) for call, offset, after in reads or () if call]
        if not counted:
            continue
        if all(
            offset < size - start + after and start + offset + size + after >= 0
            for _, offset, after in counted
        ):
            proven.update(id(call.args[1]) for call, _, _ in counted)
            lists.append(name)
    return frozenset(proven), tuple(lists)


def checked_reads(loop: gast.For) -> tuple[frozenset[int], tuple[tuple[str, tuple[int, ...]], ...]]:
    """The reads `rt__.list_item(xs, i + c)` in the body of `loop` (at any depth; `i` its
    index over a range, which the body does not rebind; `c` an int literal) of lists `xs` the
    body uses in no other way than reading items (`xs[-1]`, `xs[k]`) and never binds, in a body
    that tests identity only against None (an item read so is a new array): as
    the ids of their index nodes, and per list its name and the offsets `c`. Whether they are
    in range, the runtime checks as the loop starts, from the range and the list's length
    (`for_stmt(in_range=...)`): Viterbi's backtrace `state = back[t][state]` over `range(T -
    2, -1, -1)` of the `back` an earlier loop built. Where they are, the loop reads the list at
    the traced index exactly as Python reads it at each int, and may be staged."""
    if not _range_call(loop.iter) or not isinstance(loop.target, gast.Name):
        return frozenset(), ()
    index = loop.target.id
    if _rebinds(loop.body, index):
        return frozenset(), ()
    reads: dict[str, list[gast.Call]] = {}
    allowed: set[int] = set()  # the names of lists only read
    for stmt in loop.body:
        for node in gast.walk(stmt):
            if _tests_identity(node):
                return frozenset(), ()
            if isinstance(node, gast.Call) and naming.runtime_operator(node.func) == "list_item":
                if len(node.args) == 2 and isinstance(node.args[0], gast.Name):
                    allowed.add(id(node.args[0]))  # (at another index: not the loop's to check)
                    if not node.keywords and _offset(node.args[1], index) is not None:
                        reads.setdefault(node.args[0].id, []).append(node)
            elif (
                isinstance(node, gast.Subscript)
                and isinstance(node.ctx, gast.Load)
                and isinstance(node.value, gast.Name)
                and _int_literal(node.slice) is not None
            ):
                allowed.add(id(node.value))  # `xs[-1]`, as the lists pass leaves it
    if not reads:
        return frozenset(), ()
    other = {
        node.id
        for stmt in loop.body
        for node in gast.walk(stmt)
        if isinstance(node, gast.Name) and id(node) not in allowed
    }
    checked = {name: calls for name, calls in reads.items() if name not in other}
    ids = frozenset(id(call.args[1]) for calls in checked.values() for call in calls)
    offsets = tuple(
        (name, tuple(sorted({_offset(call.args[1], index) for call in calls})))
        for name, calls in sorted(checked.items())
    )
    return ids, offsets


def _tests_identity(node: gast.AST) -> bool:
    """Whether `node` tests identity other than against None (`xs[t] is xs[0]`, `y = xs[t]`
    then `y is best`): an item read at a traced index is a new array, never the item."""
    if not isinstance(node, gast.Compare):
        return False
    if not any(isinstance(op, (gast.Is, gast.IsNot)) for op in node.ops):
        return False
    operands = (node.left, *node.comparators)
    return not any(isinstance(o, gast.Constant) and o.value is None for o in operands)


def collected(loop: gast.For, names, owned, sizes: Mapping[str, int]) -> tuple:
    """The lists of `names` (those of `owned`) that a scan of `loop` may give as its stacked
    outputs (see runtime.collected), as `(name, depth)`: the body appends one item to the list
    in a statement at its top (`out = rt__.list_append(out, y)`: not under an `if`, nor in a
    nested loop, so in every iteration) and uses it in no other way than reading, before that
    append, one of its last `depth` items: at a negative literal (`hs[-1]`), or at the index
    plus a literal where the list was built just before the loop (`sizes`, see `counted_reads`:
    `best[i - 2]` of `best = [a, b]` over `range(2, n)` is `best[-2]`). Those index reads are
    marked with where they read from the end (`rt__.list_item(best, i - 2, recent=-2)`)."""
    start = _range_start(loop)
    index = loop.target.id if isinstance(loop.target, gast.Name) else None
    bound = activity.of(loop.target).bound
    if index is not None and _rebinds(loop.body, index):
        index = None  # the body rebinds the index: `j` is not the iteration's
    found = []
    for name in names:
        if name not in owned or name in bound:
            continue
        appends = [i for i, stmt in enumerate(loop.body) if _appends_to(stmt, name)]
        if len(appends) != 1:
            continue
        reads = _recent_reads(loop.body, name, appends[0], index, start, sizes.get(name))
        if reads is None:
            continue
        for node, at in reads:
            if node is not None:
                node.keywords.append(gast.keyword(arg="recent", value=gast.Constant(at, None)))
        found.append((name, max((-at for _, at in reads), default=0)))
    return tuple(found)


def _rebinds(body: list[gast.stmt], name: str) -> bool:
    statements = structure.walk(body)
    stores = (n for s in statements for n in structure.own_nodes(s) if isinstance(n, gast.Name))
    return any(not isinstance(n.ctx, gast.Load) and n.id == name for n in stores)


def _recent_reads(body: list[gast.stmt], name: str, appended_at: int, index, start, size):
    """The reads of list `name` in `body` (see `collected`), as (the index read's call to mark
    or None, where it reads from the end: -1 for the last item); None if `body` uses `name` in
    any other way than those reads before its append (statement `appended_at` of `body`).
    Reads at `index` (the loop's; None if it is not the iteration's) plus a literal are proven
    so where the range starts at `start` and the list held `size` items before the loop: at
    iteration `j` it holds `size + j - start`, so `j + c` is `c + start - size` from the end,
    in range in every iteration where that is in [-size, -1]."""
    reads = _reads_of(body, name, index, appended_at)
    found = []
    for call, at, after in reads or ():
        if call is not None:
            if call.keywords or None in (start, size):  # (marked by an enclosing loop)
                return None
            at = at + start - size
            if not -size <= at:
                return None
        if after or at >= 0:
            return None
        found.append((call, at))
    return None if reads is None else found


def _reads_of(body: list[gast.stmt], name: str, index: str | None, appended_at: int):
    """The reads of list `name` in `body`, at a literal index (`row[-1]`, `rt__.list_item(row,
    -1)`) or at `index + c` (`rt__.list_item(row, j - 1)`), as (the call reading at `index + c`
    or None, the literal or `c`, 1 if after the append else 0); None if `body` uses `name` in
    any other way than those reads and the append (statement `appended_at` of `body`), or
    reads it at another index."""
    reads = []
    for position, top in enumerate(body):
        after = int(position > appended_at)
        allowed: set[int] = set()
        if position == appended_at:
            allowed = {id(top.targets[0]), id(top.value.args[0])}
        for node in structure.walk_nodes(top):
            if isinstance(node, gast.Call) and naming.runtime_operator(node.func) == "list_item":
                if len(node.args) == 2 and structure.is_name(node.args[0], name):
                    allowed.add(id(node.args[0]))
                    literal = _int_literal(node.args[1])
                    if literal is not None:
                        reads.append((None, literal, after))
                        continue
                    offset = None if index is None else _offset(node.args[1], index)
                    if offset is None:
                        return None
                    reads.append((node, offset, after))
            elif (
                isinstance(node, gast.Subscript)
                and isinstance(node.ctx, gast.Load)
                and structure.is_name(node.value, name)
                and _int_literal(node.slice) is not None
            ):
                allowed.add(id(node.value))  # `row[-1]`, as the lists pass leaves it
                reads.append((None, _int_literal(node.slice), after))
            elif structure.is_name(node, name) and id(node) not in allowed:
                return None
    return reads


def _range_start(loop: gast.For) -> int | None:
    """Where `loop`'s range starts, if it is `range(stop)` or `range(start, stop[, 1])` with an
    int literal `start`; else None."""
    if not _range_call(loop.iter) or loop.iter.keywords:
        return None
    args = loop.iter.args
    if len(args) == 1:
        return 0
    if len(args) == 3 and _int_literal(args[2]) != 1:
        return None
    return _int_literal(args[0]) if len(args) in (2, 3) else None


def _int_literal(node: gast.AST) -> int | None:
    """The value of an int literal (`3`, `-3`); else None."""
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        value = _int_literal(node.operand)
        return None if value is None else -value
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return node.value
    return None


def _appends_to(stmt: gast.stmt, name: str) -> bool:
    """Whether `stmt` is `name = rt__.list_append(name, item)` (the lists pass's append)."""
    return (
        isinstance(stmt, gast.Assign)
        and len(stmt.targets) == 1
        and structure.is_name(stmt.targets[0], name)
        and isinstance(stmt.value, gast.Call)
        and naming.runtime_operator(stmt.value.func) == "list_append"
        and len(stmt.value.args) == 2
        and structure.is_name(stmt.value.args[0], name)
    )


def _offset(node: gast.AST, index: str) -> int | None:
    """`c` where `node` is `index` plus or minus int literals (`index`, `index - 1`, `-1 +
    index`, `index + 2 - 1`): `index + c`; else None."""
    if structure.is_name(node, index):
        return 0
    if not isinstance(node, gast.BinOp) or not isinstance(node.op, (gast.Add, gast.Sub)):
        return None
    sign = 1 if isinstance(node.op, gast.Add) else -1
    left, right = _offset(node.left, index), _int_literal(node.right)
    if left is not None and right is not None:
        return left + sign * right
    left, right = _int_literal(node.left), _offset(node.right, index)
    if sign == 1 and left is not None and right is not None:
        return left + right
    return None


def list_sizes(block: list[gast.stmt], hidden: frozenset[str]) -> dict[int, dict[str, int]]:
    """Per `for` statement of `block` (by id), the lists the statements before it leave as
    they built them: `{name: length}` for each `name = [a, b, ...]` (no starred item) that no
    statement after it mentions, nor a nested function or lambda (`hidden`: the names those
    read). One pass over the block, however many loops it holds."""
    found: dict[int, dict[str, int]] = {}
    sizes: dict[str, int] = {}
    for stmt in block:
        if isinstance(stmt, gast.For) and sizes:
            found[id(stmt)] = dict(sizes)
        for name in _names(stmt):
            sizes.pop(name, None)
        if (
            isinstance(stmt, gast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], gast.Name)
            and stmt.targets[0].id not in hidden
            and isinstance(stmt.value, gast.List)
            and not any(isinstance(e, gast.Starred) for e in stmt.value.elts)
        ):
            sizes[stmt.targets[0].id] = len(stmt.value.elts)
    return found


def used_as_python(body: list[gast.stmt], names, catches: bool = False) -> frozenset[str]:
    """Those of `names` (variables of a loop's state) whose values `body` uses as Python
    values (`isinstance(n, int)`, `n is 1`, `f"{n}"`, ...), directly or through the names bound
    from them: where a Python number became an array, the body would compute differently.
    `catches`: as `uses_items_as_python`'s."""
    statements = _Statements(list(structure.walk(body)), None, catches=catches)
    return frozenset(n for n in names if statements.used_as_python({n}))


def index_names(loop: gast.For) -> frozenset[str]:
    """The loop's index and the names its body binds from it (`k = t`, `j = t + 1`): what an
    `if` in a nested loop may be decided by (see `uses_items_as_python`'s `enclosing`)."""
    return frozenset(_Statements(list(structure.walk(loop.body))).closure(_names(loop.target)))


class _Statements:
    """A loop body's statements, with what `used_as_python` asks of them found once: the names
    each binding passes values from, and the reads of variables in each statement that do not
    feed an array computation (asked again for each variable of a loop's state)."""

    def __init__(
        self,
        statements,
        counter=None,
        indices=frozenset(),
        catches=False,
        proven=frozenset(),
        rows=frozenset(),
    ):
        self.statements = statements
        self.counter, self.indices, self.catches = counter, indices, catches
        self.proven = proven  # `counted_reads`
        self.rows = rows  # names holding arrays either way (`x` of `enumerate`)
        # (names a binding binds, names its value passes on: `_passed`, the value)
        self.bindings = [
            (_names(target), _passed(value), value)
            for stmt in statements
            for target, value in _bindings(stmt)
            if value is not None
        ]
        self._stmt_reads: dict[int, tuple[list, dict]] = {}  # `_reads_of`
        # Names bound to a tuple, list, set or dict the body builds (`p = (i, 1)`): an item of
        # one is what was put in it, a Python int of the index where Python's loop runs.
        displays: set[str] = set()
        while True:
            grown = set(displays)
            for bound, _, value in self.bindings:
                if _holds_display(value, displays):
                    grown |= bound
            if grown == displays:
                break
            displays = grown
        self.displays = frozenset(displays)

    def closure(self, tainted: set[str]) -> set[str]:
        """`tainted` and the names bound from them, through any number of assignments."""
        tainted = set(tainted)
        while True:
            grown = set(tainted)
            for bound, passed, _ in self.bindings:
                if passed & tainted:
                    grown |= bound
            if grown == tainted:
                return tainted
            tainted = grown

    def floats(self, tainted: set[str]) -> frozenset[str]:
        """The names of `tainted` (a `closure`) that may be bound to a float made from an item
        (`frac = i / n`, `h /= 3`, `t = i * 0.1`, `u = i * scale`), and those bound from them: a
        Python float where the item is Python's, a float32 staged, whose printed digits differ
        (`0.3333333333333333`, `0.33333334`)."""
        found: set[str] = set()
        while True:
            grown = set(found)
            ints = tainted - found
            for bound, passed, value in self.bindings:
                if passed & found or (passed & ints and _makes_float(value, ints)):
                    grown |= bound
            if grown == found:
                return frozenset(found)
            found = grown

    def scalars(self, items: set[str]) -> tuple[frozenset[str], frozenset[str]]:
        """`items` and the names every binding of which makes of them with Python's
        arithmetic only, literals aside (`k = i + 1`, `b = i % 2 == 0`): a Python number or
        bool where Python's loop runs; and those of them that hold bools (`b`). A list or tuple
        every binding in the body makes of such values (`best = [i, best[0]]`) counts as
        `best[]`, for its items (`best[0]`): a scalar where all of them are, a bool where one
        may be."""
        values: dict[str, list] = {}
        for bound, _, value in self.bindings:
            for name in bound:
                values.setdefault(name, []).append(value)
        displays = {
            name: [e for v in vs for e in v.elts]
            for name, vs in values.items()
            if all(_literal_display(v) for v in vs)
        }
        scalars, bools = set(items), set()
        while True:
            grown = {n for n, vs in values.items() if all(_python_scalar(v, scalars) for v in vs)}
            grown |= set(items)
            truths = {n for n in grown if all(_bool_like(v, bools) for v in values.get(n, [None]))}
            # A list made of its own items (`best = [i, best[0]]`) is one of scalars unless an
            # item of another kind goes in: assumed of scalars, until one is found not to be.
            held = set(displays)
            while True:
                known = grown | {f"{n}[]" for n in held}
                kept = {n for n in held if all(_python_scalar(e, known) for e in displays[n])}
                if kept == held:
                    break
                held = kept
            grown |= {f"{n}[]" for n in held}
            truths |= {f"{n}[]" for n in held if any(_bool_like(e, bools) for e in displays[n])}
            if grown == scalars and truths == bools:
                return frozenset(scalars), frozenset(bools)
            scalars, bools = grown, truths

    def used_as_python(self, tainted: set[str]) -> bool:
        """Whether the statements use one of `tainted`, or a name bound from them, as a Python
        value."""
        scalars, bools = self.scalars(tainted)
        tainted = self.closure(tainted)
        floats = self.floats(tainted)
        ints = frozenset(tainted - floats)
        self._known = (scalars, bools, self.displays, self.rows)
        for stmt in self.statements:
            if isinstance(stmt, structure.SCOPES) and _reads(stmt, tainted):
                return True  # a nested function reads an item: it may do anything with it
            if (
                isinstance(stmt, gast.If)
                and _decided_by(stmt.test, tainted, self.indices)
                and _resizes_a_list(stmt)
            ):
                return True  # `if t % 2 == 0: outs.append(h)`: Python knows how long `outs` is
            if self._reads_as_python(stmt, floats, ints, tainted):
                return True
        return False

    def _reads_as_python(self, stmt: gast.stmt, floats, ints, tainted) -> frozenset[str]:
        """The variables of `tainted` that `stmt` itself reads somewhere other than into an
        array computation (`floats`: those holding a float made from an item, whose text is
        Python's only; `ints`: those holding ints made from one)."""
        reads, parents = self._reads_of(stmt)
        return frozenset(
            node.id
            for node in reads
            if node.id in tainted
            and not _array_use(
                node,
                parents,
                self.counter,
                self.catches,
                node.id in floats,
                ints,
                self.proven,
                *self._known,
            )
        )

    def _reads_of(self, stmt: gast.stmt) -> tuple[list, dict]:
        """The variables `stmt` itself reads (its Name nodes), and the parents of its nodes:
        found once per statement, asked for each variable of the state."""
        found = self._stmt_reads.get(id(stmt))
        if found is None:
            reads = [
                node
                for node in structure.own_nodes(stmt)
                if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load)
            ]
            found = self._stmt_reads[id(stmt)] = (reads, _parents(stmt) if reads else {})
        return found


def _reads(node: gast.AST, names: set[str]) -> bool:
    return any(isinstance(n, gast.Name) and n.id in names for n in structure.walk_nodes(node))


def _decided_by(test: gast.expr, names: set[str], indices: set[str]) -> bool:
    """Whether `test` reads some of `names` and no other variable but `indices` (`t % 2 == 0`,
    `t == u` of two loop indices; not `i >= n`, which may be traced whatever the loop does)."""
    read = {n.id for n in structure.walk_nodes(test) if isinstance(n, gast.Name)}
    return bool(read & names) and read <= names | indices


def range_loop(loop: gast.For) -> bool:
    """Whether `loop` is a `for` over `range(...)` (as written, or as the builtins pass wrote)."""
    return _range_call(loop.iter)


def _range_call(node: gast.expr) -> bool:
    if not isinstance(node, gast.Call):
        return False
    return naming.runtime_operator(node.func) == "range_" or (
        isinstance(node.func, gast.Name)
        and node.func.id == "range"
        and activity.reads_module(node.func)  # not a `range` of the user's
    )


def _resizes_a_list(stmt: gast.If) -> bool:
    """Whether the branches of `stmt` append to or pop from a list (as the lists pass wrote)."""
    return any(
        isinstance(node, gast.Call) and naming.runtime_operator(node.func) in _RESIZING
        for branch in (stmt.body, stmt.orelse)
        for child in branch
        for node in structure.walk_nodes(child)
    )


def resizes_a_list(stmts: list[gast.stmt]) -> bool:
    """Whether `stmts` append to or pop from a list (as the lists pass wrote), or call a method
    that may (`xs.extend(ys)`, `queue.pop()` of a list it does not follow)."""
    for stmt in stmts:
        for node in structure.walk_nodes(stmt):
            if not isinstance(node, gast.Call):
                continue
            if naming.runtime_operator(node.func) in _RESIZING:
                return True
            if isinstance(node.func, gast.Attribute) and node.func.attr in _RESIZING_METHODS:
                return True
    return False


_RESIZING = frozenset({"list_append", "list_pop", "list_delete", "list_clear"})
_RESIZING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear"})


def _nonnegative_range(iterable: gast.expr) -> bool:
    """Whether `iterable` is `range(n)`, or a range from a constant >= 0 by a constant > 0."""
    if not _range_call(iterable) or iterable.keywords:
        return False
    args = iterable.args
    if not 1 <= len(args) <= 3:
        return False
    if len(args) == 1:
        return True
    constants = [a.value if isinstance(a, gast.Constant) else None for a in args]
    start, step = constants[0], constants[2] if len(args) == 3 else 1
    return isinstance(start, int) and start >= 0 and isinstance(step, int) and step > 0


def _names(target: gast.AST) -> set[str]:
    return {n.id for n in structure.walk_nodes(target) if isinstance(n, gast.Name)}


def _passed(value: gast.AST) -> frozenset[str]:
    """The names `value` is, or is made from by arithmetic, a cast, a tuple...: a value a tracer
    of one of them would stand for (`xs[i]` is an item of `xs`, not made from `i`)."""
    if isinstance(value, gast.Name):
        return frozenset((value.id,))
    if isinstance(value, gast.AugAssign):  # `h /= 3`: made from `h` and `3`
        return _passed(value.target) | _passed(value.value)
    if isinstance(value, gast.Call):
        if naming.runtime_operator(value.func) not in _PASSING_RUNTIME:
            return frozenset()
        return frozenset().union(*(_passed(a) for a in value.args))
    if isinstance(value, gast.IfExp):
        return _passed(value.body) | _passed(value.orelse)
    if isinstance(value, gast.Subscript):  # `pair[0]`: an item of what `pair` is made from
        return _passed(value.value)
    if isinstance(value, _VALUE_PASSING):
        return frozenset().union(*(_passed(c) for c in structure.children(value)))
    return frozenset()


def _bindings(stmt: gast.stmt):
    """(target, value) pairs a statement binds, walrus included: a tuple of names bound from a
    tuple of values pairwise (`a, b = i / 3, i`); `h /= 3` bound from itself (`_passed` and
    `_made_of_ints` read it as `h / 3`)."""
    if isinstance(stmt, gast.Assign):
        for target in stmt.targets:
            yield from _pairs(target, stmt.value)
    elif isinstance(stmt, gast.AugAssign):
        yield stmt.target, stmt if isinstance(stmt.target, gast.Name) else stmt.value
    elif isinstance(stmt, gast.AnnAssign):
        yield stmt.target, stmt.value
    elif isinstance(stmt, gast.For):
        yield stmt.target, stmt.iter
    for node in structure.own_nodes(stmt):
        if isinstance(node, gast.NamedExpr):
            yield node.target, node.value


def _pairs(target: gast.AST, value: gast.AST):
    sequences = (gast.Tuple, gast.List)
    if (
        isinstance(target, sequences)
        and isinstance(value, sequences)
        and len(target.elts) == len(value.elts)
        and not any(isinstance(e, gast.Starred) for e in (*target.elts, *value.elts))
    ):
        for t, v in zip(target.elts, value.elts):
            yield from _pairs(t, v)
    else:
        yield target, value


def _parents(stmt: gast.stmt) -> dict[int, gast.AST]:
    parents = {}
    for node in structure.own_nodes(stmt):
        for child in structure.children(node):
            parents[id(child)] = node
    return parents


def _array_use(
    name: gast.Name,
    parents: dict[int, gast.AST],
    counter: str | None,
    catches: bool,
    floated: bool,
    ints: frozenset[str],
    proven: frozenset[int] = frozenset(),
    scalars: frozenset[str] = frozenset(),
    bools: frozenset[str] = frozenset(),
    displays: frozenset[str] = frozenset(),
    rows: frozenset[str] = frozenset(),
) -> bool:
    """Whether this read of an item feeds an array computation, where a tracer is exact: its
    value (or what arithmetic makes of it) is compared, indexes an array, goes into a JAX
    function or into an assignment (followed as a binding); not into text, a type test, an
    exponent, or user code. `floated`: the name holds a float made from an item, which is
    printed with Python's digits only where the item is Python's (and so is one made here:
    `print(i / 3)`, `print(i * scale)`; `ints`: the names holding ints made from items, which
    arithmetic with it keeps ints). `proven`: the index nodes of reads of lists that are in
    range in every iteration (`counted_reads`), an array's index there. `scalars`: the names
    that hold Python numbers or bools made of items, `bools` those of them that hold bools
    (`_Statements.scalars`), whose arithmetic is not an array's (`~b` of a Python bool is -2,
    of a traced one False; `i * 10**9` wraps around in int32); `displays`: those
    holding tuples, lists, sets or dicts the body builds, whose items are what was put in;
    `rows`: names holding arrays either way (the items of `enumerate` over an array)."""
    node, parent = name, parents.get(id(name))
    sliced = False  # passed through a slice bound: `m[:, :i]` needs a static bound
    while parent is not None:
        held_float = floated  # what `node` holds, before `parent` computes with it
        floated = floated or _makes_float(parent, ints)
        if _python_scalar(node, scalars) and not _as_arrays(parent, node, bools):
            return False  # Python's arithmetic of a number or bool, not an array's
        power = isinstance(parent, gast.BinOp) and isinstance(parent.op, gast.Pow)
        if power and parent.left is node:
            # `i ** -1` is a float in Python, an error for an int32; `i ** 2` and `i ** i` (the
            # counter of a range from 0 up: never negative) are the same.
            exponent = parent.right
            counted = isinstance(exponent, gast.Name) and exponent.id == counter
            constant = isinstance(exponent, gast.Constant) and type(exponent.value) is int
            if not (counted or (constant and exponent.value >= 0)):
                return False
        if isinstance(parent, gast.BinOp) and _an_array(
            parent.left if parent.right is node else parent.right, ints | {name.id}, rows
        ):
            # `xs[i] * i`: with an item of what the index read (an array: a Python list, tuple
            # or dict read at a tracer raises, and the loop runs as Python), an array either
            # way, whatever is done with it.
            return not held_float and not isinstance(parent.op, (gast.Div, gast.FloorDiv, gast.Mod))
        if isinstance(parent, gast.BinOp) and parent.right is node:
            if isinstance(parent.op, gast.Pow):
                # `2 ** -i` is a float in Python, an int power staged; `10 ** i` grows past
                # int32. `x ** i` (x not an int literal, i >= 0) is the same either way.
                int_base = isinstance(parent.left, gast.Constant) and type(parent.left.value) is int
                if node is not name or name.id != counter or int_base:
                    return False
            if isinstance(parent.op, (gast.Div, gast.FloorDiv, gast.Mod)):
                return False  # `1 / i` raises ZeroDivisionError in Python; `"w%d" % i` is text
        elif isinstance(parent, gast.Compare) and any(
            isinstance(op, (gast.Is, gast.IsNot)) for op in parent.ops
        ):
            return False  # `i is 0`: the identity of a Python int, never of a tracer
        elif isinstance(parent, gast.IfExp) and parent.test is node:
            return True
        elif isinstance(parent, gast.Subscript) and parent.value is node:
            # `members[:, None]` of `members = labels == j`: an item of what the read makes,
            # followed up as it is (`_passed`), where that is an array in Python too, or
            # raises there (`k[:, None]` of a Python int, an IndexError staged: under a `try`,
            # no). Not an item of a tuple the body built (`p[0]` of `p = (i, 1)`: the Python
            # int), nor `k[None]` of a Python number (an error in Python only).
            if catches or _python_scalar(node, scalars):
                return False
            if _holds_display(node, displays) and not _python_scalar(parent, scalars):
                return False  # (an item of one of Python scalars: followed on, as one)
        elif isinstance(parent, gast.Subscript):
            if sliced or isinstance(node, gast.Slice):
                return False  # `x[:i]`, `m[:, :i]` need a static bound
            # `(a, b)[i > 0]` indexes a Python tuple: it needs a Python int.
            return not isinstance(parent.value, (gast.Tuple, gast.List, gast.Dict, gast.Constant))
        elif isinstance(parent, gast.Call):
            if node is parent.func:
                return False
            if naming.runtime_operator(parent.func) == "fstring":
                # Text shows the value where it is printed, raised or asserted; made for
                # anything else (`f"layer{i}" in frozen`), it is the text of a tracer.
                return _printed(parent, parents, catches) and not floated
            if naming.runtime_operator(parent.func) == "print_":
                return not floated  # an int prints as Python's, a float32 with its digits
            if id(node) in proven and naming.runtime_operator(parent.func) == "list_item":
                return parent.args[1] is node
            if id(node) in proven and _range_call(parent):
                return True  # the bound of a nested loop exact over a traced range
            if naming.runtime_operator(parent.func) not in _PASSING_RUNTIME:
                return _array_function(parent.func)
        elif isinstance(parent, gast.If) and parent.test is node and catches:
            # `if i == 1: raise KeyError` under a `try`: staged, the raise would be a check
            # the program makes as it runs, which no handler catches; Python's, it is caught.
            raises = structure.walk(parent.body + parent.orelse)
            return not any(isinstance(s, gast.Raise) for s in raises)
        elif isinstance(parent, gast.stmt):
            return not isinstance(parent, gast.Expr)
        elif not isinstance(parent, _VALUE_PASSING):
            return False  # an f-string, an attribute of the item, a dict key, a lambda, ...
        sliced = sliced or isinstance(parent, gast.Slice)
        node, parent = parent, parents.get(id(parent))
    return True


def _an_array(node: gast.AST, names, rows) -> bool:
    """Whether `node` is an array where Python's loop runs too: an item read at an index made
    of `names` (`_read_at`), or a name of `rows`."""
    return _read_at(node, names) or (isinstance(node, gast.Name) and node.id in rows)


def _read_at(node: gast.AST, names) -> bool:
    """Whether `node` is an item read at an index that reads one of `names` (`xs[i]`,
    `m[i, 0]`), of an array (not of a list, tuple or dict the code writes out)."""
    if not isinstance(node, gast.Subscript) or isinstance(node.slice, gast.Slice):
        return False
    if isinstance(node.value, (gast.Tuple, gast.List, gast.Dict, gast.Constant)):
        return False
    return any(isinstance(n, gast.Name) and n.id in names for n in structure.walk_nodes(node.slice))


def _python_scalar(node: gast.AST | None, scalars) -> bool:
    """Whether `node` is a Python number or bool made of `scalars` and literals only, as
    Python computes it (the names `scalars` hold them): arithmetic, comparisons, boolean
    operations and casts of them, an item of a list or tuple of them (`p[0]`, `p[]` in
    `scalars`: see `_Statements.scalars`)."""
    if isinstance(node, gast.Name):
        return node.id in scalars
    if isinstance(node, gast.Subscript):
        return _display_item(node) in scalars
    if isinstance(node, gast.Constant):
        return type(node.value) in (bool, int, float, complex)
    if isinstance(node, gast.UnaryOp):
        return _python_scalar(node.operand, scalars)
    if isinstance(node, gast.AugAssign):
        return _python_scalar(node.target, scalars) and _python_scalar(node.value, scalars)
    if isinstance(node, gast.BinOp):
        return _python_scalar(node.left, scalars) and _python_scalar(node.right, scalars)
    if isinstance(node, gast.Compare):
        return all(_python_scalar(x, scalars) for x in (node.left, *node.comparators))
    if isinstance(node, gast.BoolOp):
        return all(_python_scalar(x, scalars) for x in node.values)
    if isinstance(node, gast.IfExp):
        return _python_scalar(node.body, scalars) and _python_scalar(node.orelse, scalars)
    if isinstance(node, gast.Call) and naming.runtime_operator(node.func) in _SCALAR_CASTS:
        return bool(node.args) and all(_python_scalar(a, scalars) for a in node.args)
    return False


def _literal_display(value: gast.AST) -> bool:
    """Whether `value` is a list or tuple written out item by item (`[i, p[0]]`, no `*`)."""
    return isinstance(value, (gast.List, gast.Tuple)) and not any(
        isinstance(e, gast.Starred) for e in value.elts
    )


def _display_item(node: gast.Subscript) -> str | None:
    """`"p[]"` for an item of the name `p` at one index (`p[0]`, `p[k]`; not a slice)."""
    if isinstance(node.value, gast.Name) and not isinstance(node.slice, gast.Slice):
        return f"{node.value.id}[]"
    return None


_SCALAR_CASTS = frozenset({"int_", "float_", "bool_", "min_", "max_", "abs_"})


def _bool_like(node: gast.AST | None, bools) -> bool:
    """Whether `node` gives a bool (where it gives a Python scalar): a comparison, a `not`, an
    `and`/`or` of bools, a name `bools` holds, an item of a list or tuple that may hold one."""
    if isinstance(node, gast.Name):
        return node.id in bools
    if isinstance(node, gast.Subscript):
        return _display_item(node) in bools
    if isinstance(node, gast.Constant):
        return type(node.value) is bool
    if isinstance(node, gast.Compare) or (
        isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not)
    ):
        return True
    if isinstance(node, gast.BoolOp):
        return all(_bool_like(x, bools) for x in node.values)
    if isinstance(node, gast.IfExp):
        return _bool_like(node.body, bools) or _bool_like(node.orelse, bools)
    if isinstance(node, gast.Call) and naming.runtime_operator(node.func) == "bool_":
        return True
    return False


def _as_arrays(parent: gast.AST, node: gast.AST, bools) -> bool:
    """Whether `parent` computes on `node`, a Python scalar made of items, as on an array of
    it (int32, float32, bool): not `~b`, `-b` or `b + b` of a bool (-2, -1 and 2 in Python: ints;
    a bool, or JAX's error, staged), a product with an int literal of
    2**16 or more or a shift by 16 or more (past int32 in Python's unbounded ints)."""
    if isinstance(parent, gast.UnaryOp):
        return isinstance(parent.op, gast.Not) or not _bool_like(node, bools)
    if isinstance(parent, gast.BinOp):
        if isinstance(parent.op, (gast.BitAnd, gast.BitOr, gast.BitXor)):
            return True  # of two bools a bool, of ints an int: the same either way
        if _bool_like(parent.left, bools) or _bool_like(parent.right, bools):
            return False
        other = parent.right if parent.left is node else parent.left
        big = {gast.Mult: 1 << 16, gast.LShift: 16}.get(type(parent.op))
        value = _folded_int(other)
        if big is not None and value is not None and abs(value) >= big:
            return False
    return True


def _folded_int(node: gast.AST, depth: int = 0) -> int | None:
    """The value of an int literal, or of arithmetic of them (`10**9`, `1 << 20`, `-3 * 7`);
    else None."""
    if isinstance(node, gast.Constant):
        return node.value if type(node.value) is int else None
    if depth > 8:
        return None
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        value = _folded_int(node.operand, depth + 1)
        return None if value is None else -value
    if isinstance(node, gast.BinOp):
        left, right = _folded_int(node.left, depth + 1), _folded_int(node.right, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(node.op, gast.Add):
            return left + right
        if isinstance(node.op, gast.Sub):
            return left - right
        if isinstance(node.op, gast.Mult):
            return left * right
        if isinstance(node.op, gast.Pow) and 0 <= right <= 64:
            return left**right
        if isinstance(node.op, gast.LShift) and 0 <= right <= 64:
            return left << right
    return None


def _holds_display(node: gast.AST | None, displays) -> bool:
    """Whether `node` is (or may give) a tuple, list, set or dict the code builds: a display, a
    comprehension, a name `displays` holds, an item or a sum of them (`p + (i,)`), a call given
    one (`max((i, 1), (0, 0))`)."""
    if isinstance(node, (gast.Tuple, gast.List, gast.Set, gast.Dict)):
        return True
    if isinstance(node, (gast.ListComp, gast.SetComp, gast.DictComp)):
        return True
    if isinstance(node, gast.Name):
        return node.id in displays
    if isinstance(node, gast.Subscript):
        return _holds_display(node.value, displays)
    if isinstance(node, gast.BinOp):
        return _holds_display(node.left, displays) or _holds_display(node.right, displays)
    if isinstance(node, gast.IfExp):
        return _holds_display(node.body, displays) or _holds_display(node.orelse, displays)
    if isinstance(node, gast.BoolOp):
        return any(_holds_display(v, displays) for v in node.values)
    if isinstance(node, gast.AugAssign):
        return _holds_display(node.target, displays) or _holds_display(node.value, displays)
    if isinstance(node, gast.Call):  # `max((i, 1), (0, 0))`: one of them, maybe
        return any(_holds_display(a, displays) for a in node.args)
    if isinstance(node, gast.Starred):
        return _holds_display(node.value, displays)
    return False


def _makes_float(value: gast.AST, ints: frozenset[str]) -> bool:
    """Whether `value` is a float made from the ints `ints` hold (see `_made_of_ints`)."""
    return _made_of_ints(value, ints) == "float"


def _made_of_ints(node: gast.AST, ints: frozenset[str]) -> str | None:
    """What `node` is made of ints `ints` hold (the items of a loop over a range, and the ints
    made from them), as Python computes it: `"int"` (`i + 1`, `2 * j`, `int(i)`), `"float"`
    (`i / 3`, `i * 0.1`, `float(i)`, `i * scale` and `math.pi * i`, whose other operand may be
    a Python float); None where not made of them, or made with an array (`xs[i] * i`,
    `jnp.sin(i)`: an array in Python too)."""
    if isinstance(node, gast.Name):
        return "int" if node.id in ints else None
    if isinstance(node, gast.Subscript) and _display_item(node) is not None:
        # `hist[0]` of `hist = [i, hist[0]]`: an item of ints (one holding a float is one of
        # the floats, not of `ints`)
        return "int" if node.value.id in ints else None
    if isinstance(node, gast.Constant):
        return {int: "int", float: "float"}.get(type(node.value))
    if isinstance(node, gast.UnaryOp):
        return _made_of_ints(node.operand, ints)
    operator = naming.runtime_operator(node.func) if isinstance(node, gast.Call) else None
    if operator in ("int_", "float_"):
        inner = [_made_of_ints(a, ints) for a in node.args]
        if "int" in inner or "float" in inner:
            return "int" if operator == "int_" else "float"
        return None
    # what a choice gives, a tuple holds: one of its parts (`max(i, 0.5)`, `0.5 if c else i`,
    # `i or 0.5`: 1 in Python, where a staged join is 1.0)
    if operator in ("min_", "max_") or isinstance(node, (gast.Tuple, gast.List)):
        parts = node.args if operator else node.elts
    elif isinstance(node, gast.IfExp):
        parts = [node.body, node.orelse]
    elif isinstance(node, gast.BoolOp):
        parts = node.values
    else:
        parts = None
    if parts is not None:
        kinds = {_made_of_ints(part, ints) for part in parts}
        return "float" if "float" in kinds else "int" if "int" in kinds else None
    if isinstance(node, gast.AugAssign):  # `h /= 3`: `h / 3`
        operands, op = (node.target, node.value), node.op
    elif isinstance(node, gast.BinOp):
        operands, op = (node.left, node.right), node.op
    else:
        return None
    sides = [_made_of_ints(side, ints) for side in operands]
    if "float" in sides:
        return "float"
    if "int" not in sides:
        return None
    if isinstance(op, gast.Div):
        return "float"
    if sides == ["int", "int"]:
        return "int"
    other = operands[1] if sides[0] == "int" else operands[0]
    if isinstance(other, (gast.Name, gast.Attribute)):
        return "float"  # `i * scale`, `math.pi * i`: maybe a Python float
    return None


# Runtime operators whose result is made from their arguments: followed up like arithmetic.
_PASSING_RUNTIME = frozenset({"ld", "int_", "float_", "bool_", "min_", "max_", "sum_"})

# Expressions whose value is made from their operands: follow them up.
_VALUE_PASSING = (
    gast.BinOp,
    gast.Compare,
    gast.UnaryOp,
    gast.BoolOp,
    gast.IfExp,
    gast.keyword,
    gast.Tuple,
    gast.List,
    gast.Slice,
    gast.Starred,
    gast.NamedExpr,
)


def _printed(text: gast.Call, parents: dict[int, gast.AST], catches: bool) -> bool:
    """Whether the text `text` makes is an argument of a print, or in a raise or an assert
    that nothing in the function catches (`catches`: a handler may read it as Python text)."""
    parent = parents.get(id(text))
    if isinstance(parent, gast.Call) and naming.runtime_operator(parent.func) == "print_":
        return text in parent.args
    while parent is not None and not isinstance(parent, gast.stmt):
        parent = parents.get(id(parent))
    return not catches and isinstance(parent, (gast.Raise, gast.Assert))


def _array_function(func: gast.expr) -> bool:
    """Whether a call of `func` treats a traced int as an array: a JAX/NumPy-style function
    (`jnp.where`, `x.at[i].set`), or a runtime operator that does; not a user function
    (`rt__.call`), nor a builtin that reads the Python value (`str`, `isinstance`, `range`)."""
    if isinstance(func, gast.Attribute):
        root = func
        while isinstance(root, gast.Attribute):
            root = root.value
        if isinstance(root, gast.Name) and root.id == RUNTIME:
            return func.attr in _ARRAY_SAFE_RUNTIME
        return True
    if isinstance(func, gast.Name):
        return not hasattr(builtins, func.id)
    return False
