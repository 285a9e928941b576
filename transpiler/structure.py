"""How statements nest: the one description of every compound statement's blocks.

Every analysis and pass that needs the statements inside a statement asks `blocks(stmt)`, so they
all agree on what a statement holds (a `match` case, a `try` handler, a loop's `else`):

    for block in structure.blocks(node):           # if / while / for / with / try / match
        block.role        # Role.LOOP_BODY, Role.HANDLER, Role.CASE, ...
        block.stmts       # the statements; assignable: block.stmts = new_statements

Nested function and class definitions are scopes of their own: `blocks` does not enter them
(`scope_blocks` does).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator

import gast

from transpiler import anno


class Role(enum.Enum):
    """What a block is to the statement that holds it."""

    BODY = "the body of an if, with or try: runs first, at most once"
    ELSE = "the else block of an if or a try: runs instead of, or after, the body"
    LOOP_BODY = "the body of a for or while loop: runs once per iteration"
    LOOP_ELSE = "the else block of a loop: runs once, after the loop, unless it was left by break"
    HANDLER = "an except clause of a try: runs when the body raised"
    FINALLY = "the finally block of a try: runs on every way out of the try"
    CASE = "the body of a match case: runs when its pattern (and guard) match"
    SCOPE = "the body of a nested function or class definition: a scope of its own"


LOOPS = (gast.For, gast.While, gast.AsyncFor)
SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)
TRY = (gast.Try, gast.TryStar) if hasattr(gast, "TryStar") else (gast.Try,)


@dataclasses.dataclass
class Block:
    """A list of statements held by a compound statement (or by one of its clauses)."""

    role: Role
    owner: gast.AST  # the node whose field holds the list: the statement, a handler or a case
    field: str

    @property
    def stmts(self) -> list[gast.stmt]:
        return getattr(self.owner, self.field)

    @stmts.setter
    def stmts(self, value: list[gast.stmt]) -> None:
        setattr(self.owner, self.field, value)


def blocks(stmt: gast.AST) -> Iterator[Block]:
    """The blocks nested in `stmt`, in source order; none for simple statements and scopes.

    Told by the node's class name, so a tree of the standard library's `ast` (printed
    generated code, parsed again for its line numbers) nests the same way."""
    kind = type(stmt).__name__
    if kind == "If":
        yield Block(Role.BODY, stmt, "body")
        yield Block(Role.ELSE, stmt, "orelse")
    elif kind in _LOOP_NAMES:
        yield Block(Role.LOOP_BODY, stmt, "body")
        yield Block(Role.LOOP_ELSE, stmt, "orelse")
    elif kind in ("With", "AsyncWith"):
        yield Block(Role.BODY, stmt, "body")
    elif kind in ("Try", "TryStar"):
        yield Block(Role.BODY, stmt, "body")
        for handler in stmt.handlers:
            yield Block(Role.HANDLER, handler, "body")
        yield Block(Role.ELSE, stmt, "orelse")
        yield Block(Role.FINALLY, stmt, "finalbody")
    elif kind == "Match":
        for case in stmt.cases:
            yield Block(Role.CASE, case, "body")


_LOOP_NAMES = frozenset(cls.__name__ for cls in LOOPS)
_SCOPE_NAMES = frozenset(cls.__name__ for cls in SCOPES)


def scope_blocks(stmt: gast.AST) -> Iterator[Block]:
    """Like `blocks`, and also the body of a nested function or class (role SCOPE)."""
    if type(stmt).__name__ in _SCOPE_NAMES:
        yield Block(Role.SCOPE, stmt, "body")
    else:
        yield from blocks(stmt)


def children(node: gast.AST) -> list[gast.AST]:
    """The nodes directly under `node`, in field order: `gast.iter_child_nodes` as a list, less
    contexts and operators (`Load`, `Add`, `Lt`: no analysis or pass looks at them but through
    `node.ctx`, `node.op`, `node.ops`), in a third of its time (a generator per node is most
    of a walk's cost)."""
    found = []
    fields = node.__dict__
    for field in node_fields(type(node)):
        value = fields.get(field)
        if type(value) is list:
            found.extend(v for v in value if isinstance(v, gast.AST))
        elif isinstance(value, gast.AST):
            found.append(value)
    return found


def node_fields(cls: type) -> tuple[str, ...]:
    """The fields of node class `cls` that `children` looks in: not its context or operators,
    and not those that always hold a string, a number or None (a Name's `id`, an Attribute's
    `attr`, a Constant's `value`)."""
    fields = _node_fields.get(cls)
    if fields is None:
        never = _NEVER_NODES | ({"value"} if cls is gast.Constant else set())
        fields = _node_fields[cls] = tuple(f for f in cls._fields if f not in never)
    return fields


_node_fields: dict[type, tuple[str, ...]] = {}
_NEVER_NODES = frozenset(
    {"ctx", "op", "ops", "id", "attr", "type_comment", "kind", "arg", "level", "module"}
    | {"conversion", "is_async", "simple"}
)


def walk_nodes(node: gast.AST) -> Iterator[gast.AST]:
    """Every node under `node` (itself first), depth first in field order; `gast.walk`
    (breadth first) where the order does not matter, at half its cost."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        below = children(node)
        below.reverse()
        stack.extend(below)


def own_nodes(stmt: gast.stmt) -> Iterator[gast.AST]:
    """The nodes of `stmt` itself, not of its nested blocks (they are statements of their own);
    less contexts and operators (see `children`)."""
    yield stmt
    stack = []
    fields = stmt.__dict__
    for field in node_fields(type(stmt)):
        value = fields.get(field)
        for child in value if type(value) is list else [value]:
            if isinstance(child, gast.stmt) and field in _BLOCK_FIELDS:
                continue
            if isinstance(child, gast.AST):
                stack.append(child)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def is_name(node: gast.AST, name: str) -> bool:
    """Whether `node` is the name `name`."""
    return isinstance(node, gast.Name) and node.id == name


def binds(stmt: gast.stmt, names: set[str]) -> bool:
    """Whether `stmt` itself (not its nested blocks) binds or deletes one of `names`: any Name
    of them not read (a target, a `:=`, a `del`, a loop's item, an `except ... as`, a
    parameter), a `global` or `nonlocal` of it, a `def` or `class` of that name, an import as
    that name, a match capture (`case c`, `case [*c]`, `case {**c}`)."""
    for node in own_nodes(stmt):
        if isinstance(node, gast.Name) and node.id in names and not isinstance(node.ctx, gast.Load):
            return True
        if isinstance(node, (gast.Global, gast.Nonlocal)) and set(node.names) & names:
            return True
        if isinstance(node, gast.alias):
            if (node.asname or node.name.split(".")[0]) in names:
                return True  # `import c`, `from m import x as c`
        elif getattr(node, "name", None) in names or getattr(node, "rest", None) in names:
            return True  # `def c(): ...`, `class c`, `case c`, `case [*c]`, `case {**c}`
    return False


def walk(stmts: list[gast.stmt]) -> Iterator[gast.stmt]:
    """Every statement of this scope in source order, nested blocks included, nested scopes' not
    (the `def` or `class` statement itself is yielded)."""
    for stmt in stmts:
        yield stmt
        for block in blocks(stmt):
            yield from walk(block.stmts)


def walk_all(stmts: list[gast.stmt]) -> Iterator[gast.stmt]:
    """Every statement in source order, nested scopes included."""
    for stmt in stmts:
        yield stmt
        for block in scope_blocks(stmt):
            yield from walk_all(block.stmts)


def endless(loop: gast.stmt) -> bool:
    """`while True:` (or another true constant): its test never ends the loop; a break, return
    or raise does. Not with `loop_options(max_iterations=N)`, which ends it after N iterations
    as a false test would (its `else` runs, the code after it is reached)."""
    test = getattr(loop, "test", None)
    if not (isinstance(test, gast.Constant) and bool(test.value)):
        return False
    bounded = anno.hasanno(loop, anno.Static.LOOP_OPTIONS)
    return not (bounded and "max_iterations" in anno.getanno(loop, anno.Static.LOOP_OPTIONS))


def jumps_out(stmts: list[gast.stmt], kinds: tuple[type, ...]) -> Iterator[gast.stmt]:
    """The `return`s (if asked for) and the `break`/`continue`s among `kinds` in `stmts` that
    leave `stmts`: a `break` inside an inner loop's body belongs to that loop, not to us."""
    for stmt in stmts:
        if isinstance(stmt, kinds):
            yield stmt
        for block in blocks(stmt):
            inner = kinds
            if block.role is Role.LOOP_BODY:
                inner = tuple(k for k in kinds if k not in (gast.Break, gast.Continue))
            if inner:
                yield from jumps_out(block.stmts, inner)


EXITS = (gast.Return, gast.Break, gast.Continue)


def docstring_length(body: list[gast.stmt]) -> int:
    """1 if `body` opens with a docstring (which must stay first), else 0."""
    first = body[0] if body else None
    return int(
        isinstance(first, gast.Expr)
        and isinstance(first.value, gast.Constant)
        and isinstance(first.value.value, str)
    )


def truth_tested(test: gast.expr) -> list[gast.expr]:
    """The expressions `test` only tests for truth: itself, and the operands of its `and`/`or`
    (`y = out or []` keeps the list; `if out or x:` does not)."""
    found, todo = [], [test]
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, gast.BoolOp):
            todo.extend(node.values)
    return found


def root_name(expr: gast.expr) -> str | None:
    """The name an attribute chain starts from (`jnp` of `jnp.linalg.norm`), or None."""
    while isinstance(expr, gast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, gast.Name) else None
