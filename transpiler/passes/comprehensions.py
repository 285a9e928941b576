"""Rewrites a comprehension with an `if` filter into a nested function that builds its list
with a `for` loop, an `if` and `append`:

    kept = [v * 2 for v in xs if v > 0]
        ->  def comprehension(items):
                kept_items = []
                for v in items:
                    if v > 0:
                        kept_items.append(v * 2)
                return rt__.handed_list(kept_items, 'list comprehension', built=True)
            kept = comprehension(xs)

The control-flow and list passes then convert that loop as any other: where the filter is a
Python value the list is Python's, and where it is traced (`v > 0` of an array's items) the `if`
is staged and the list has a traced length (see `runtime.lists`), which `sum`, `len`, `max`,
`min`, `any`, `all` and a staged loop take. A list of known length comes back as the Python
list of its items (`handed_list`), as the comprehension's. Unconverted, the comprehension would
ask Python for the truth of the traced filter (JAX's `TracerBoolConversionError`).

Exact, because the function is the comprehension's own scope: its first iterable is evaluated
where the comprehension stands (the argument), the rest and every filter and item inside, in
Python's order, the names it reads resolved as the comprehension resolves them (the enclosing
function's, at call time), its variables its own. It is defined just before the statement that
holds the comprehension, in the same block: inside a staged loop or branch it closes over that
block's variables. Every analysis sees it as the nested function it is (the names it reads may
keep references); its call is marked (`NEW_LIST`): it makes a new list and only iterates its
argument. A generator's function turns a `StopIteration` raised in it into a `RuntimeError`,
as Python's generators do (PEP 479).

Rewritten: a list comprehension with a filter, or whose first iterable reads a list the function
appends to or binds to a filtered comprehension (`pos`, `zip(pos, x)`: it may have a traced
length, which only a staged `for` can loop over); a generator expression of either kind that is
the one positional argument of the builtin `sum` (a `start` too), `max` or `min` (a `default=`,
no `key=`), `list` or `tuple`, which consume it at once, in order, with nothing between its
items, where that other argument is a constant or a name of the function's own (Python evaluates
it before the first item). Left as Python: other comprehensions without a filter (their length
is known), set and dict comprehensions, generator expressions anywhere else (lazy: `any` stops
early, a consumer may interleave effects), async ones, those that bind with `:=` (in the
enclosing scope), yield, or call `next`, `super` or the frame readers (`locals`, `vars`, `dir`,
`eval`, `exec`), and those in a lambda, a default value or a decorator.
"""

from __future__ import annotations

import gast

from transpiler import anno, origins, structure, templates
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.passes.lists import method_call
from transpiler.transformer import Transformer

APPLIES_TO = (gast.ListComp, gast.GeneratorExp)
ADDS = (
    gast.FunctionDef,
    gast.For,
    gast.If,
    gast.Call,
    gast.Return,
    gast.Assign,
    gast.Try,  # a generator expression's: its StopIteration made a RuntimeError
    gast.ExceptHandler,
    gast.Raise,
    "call:.append",
    "call:RuntimeError",
)

# Builtins that consume a generator expression at once, in order (their keywords: those that
# change nothing about how the items are taken).
_CONSUMERS = {"sum": ("start",), "max": ("default",), "min": ("default",), "list": (), "tuple": ()}
_UNSAFE_CALLS = frozenset({"next", "super", "locals", "vars", "dir", "eval", "exec"})
_UNSAFE_NODES = (gast.NamedExpr, gast.Yield, gast.YieldFrom, gast.Await)
# What a statement holds that is not its own expressions: nested scopes, and its blocks.
_NOT_OWN = (
    gast.Lambda,
    gast.ListComp,
    gast.SetComp,
    gast.DictComp,
    gast.GeneratorExp,
    gast.stmt,
    gast.excepthandler,
    gast.match_case,
)


class _Comprehensions(Transformer):
    def __init__(self, ctx: PassContext, fn_node: gast.FunctionDef):
        self.ctx = ctx
        # The names an argument of `sum`/`max` may read (`sum(..., start)`): the function's
        # own, which nothing the items run can rebind (no `global` or `nonlocal` of them).
        declared = {
            name
            for node in structure.walk_nodes(fn_node)
            if isinstance(node, (gast.Global, gast.Nonlocal))
            for name in node.names
        }
        own = activity.local_names(fn_node) | activity.params_of(fn_node.args)
        self.stable = frozenset(own - declared)
        self.built = _built_lists(fn_node) & self.stable

    def visit_FunctionDef(self, node):
        node.body = self._block(node.body)
        return node

    def _block(self, stmts: list[gast.stmt]) -> list[gast.stmt]:
        out = []
        for stmt in stmts:
            if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef)):
                stmt.body = self._block(stmt.body)  # its defaults and decorators: left as they are
            elif not isinstance(stmt, gast.ClassDef):
                out += self._helpers(stmt)
                for block in structure.blocks(stmt):
                    block.stmts = self._block(block.stmts)
            out.append(stmt)
        return out

    def _helpers(self, stmt: gast.stmt) -> list[gast.stmt]:
        """The helper definitions for the comprehensions in `stmt`'s own expressions (not in
        its blocks), each replaced by a call of its helper."""
        helpers = []
        stack = [stmt]
        while stack:
            node = stack.pop()
            for field in structure.node_fields(type(node)):
                value = getattr(node, field, None)
                items = value if type(value) is list else [value]
                for i, child in enumerate(items):
                    if not isinstance(child, gast.AST):
                        continue
                    new = self._replacement(stmt, node, child, helpers)
                    if new is not None:
                        if type(value) is list:
                            value[i] = new
                        else:
                            setattr(node, field, new)
                        stack.append(new)  # its first iterable, evaluated where it stands
                    elif not isinstance(child, _NOT_OWN):
                        stack.append(child)
        return helpers

    def _replacement(
        self, stmt: gast.stmt, parent: gast.AST, node: gast.AST, helpers: list, whole=None
    ) -> gast.expr | None:
        """The call that stands for `node` (a comprehension this pass rewrites, its helper
        appended to `helpers`), else None. `whole`: the expression the call stands for where
        it is more than the comprehension (`list(<generator>)`)."""
        if _copies_a_generator(node) and self._consumed(node, node.args[0]):
            # `list(v for v in xs if p(v))` is the list the rewritten generator builds (a new
            # one, as `list` makes): one of traced length stays staged, as a comprehension's.
            return self._replacement(stmt, node, node.args[0], helpers, whole=node)
        generator = isinstance(node, gast.GeneratorExp)
        if not (isinstance(node, gast.ListComp) or generator and self._consumed(parent, node)):
            return None
        if not self._rewritable(node):
            return None
        function = self.ctx.namer.new("comprehension")
        items = self.ctx.namer.new("items")
        # Named after the user's list (`kept = [...]`: `kept_items`), so that errors say which
        # (as `kept`: see `runtime.carry`). Not `kept` itself: the analyses of the enclosing
        # function are by name, and would see its `kept` read by a nested function.
        target = (
            stmt.targets[0] if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 else None
        )
        named = isinstance(target, gast.Name) and stmt.value in (node, whole, _copy_of(parent))
        kept = self.ctx.namer.new(f"{target.id}_items" if named else "kept_items")
        first = node.generators[0]
        iterable, first.iter = first.iter, gast.Name(items, gast.Load(), None, None)
        body = templates.replace(f"{kept}.append(elt)", elt=node.elt)
        construct = "generator expression" if generator else "list comprehension"
        for generator_node in reversed(node.generators):
            for test in reversed(generator_node.ifs):
                body = [gast.If(test=test, body=body, orelse=[])]
            loop = gast.For(
                target=generator_node.target,
                iter=generator_node.iter,
                body=body,
                orelse=[],
                type_comment=None,
            )
            anno.setanno(loop, anno.Static.COMPREHENSION, construct)
            body = [loop]
        if generator:  # which turns a StopIteration raised in it into a RuntimeError (PEP 479)
            stopped = self.ctx.namer.new("stopped")  # a name of its own: the items may read one
            body = templates.replace(
                f"""
                try:
                    loop
                except StopIteration as {stopped}:
                    raise RuntimeError("generator raised StopIteration") from {stopped}
                """,
                loop=body,
            )
        # A list of known length is the Python list of its items, as the comprehension's.
        definition = templates.replace(
            f"""
            def {function}({items}):
                {kept} = []
                loop
                return {RUNTIME}.handed_list({kept}, '{construct}', built=True)
            """,
            loop=body,
        )
        call = templates.replace_as_expression(f"{function}(iterable)", iterable=iterable)
        anno.setanno(call, anno.Static.NEW_LIST, True)
        if anno.hasanno(node, anno.Static.ORIGIN):  # errors in them name the comprehension's
            origin = anno.getanno(node, anno.Static.ORIGIN)
            origins.fill_missing(definition[0], origin)
            origins.fill_missing(call, origin)
        definition[0].body = self._block(definition[0].body)  # comprehensions in the items
        helpers += definition
        return call

    def _consumed(self, parent: gast.AST, node: gast.AST) -> bool:
        """Whether `parent` is a call of a builtin that consumes `node` at once (`sum`...), its
        other arguments constants or the function's own names (Python evaluates them before it
        takes the first item, the function's call after)."""
        if not (isinstance(parent, gast.Call) and parent.args and parent.args[0] is node):
            return False
        func = parent.func
        if not activity.reads_builtin(func, self.ctx.globals, _CONSUMERS):
            return False
        keywords = {k.arg for k in parent.keywords}
        extra_args = 1 if func.id == "sum" else 0
        return (
            len(parent.args) <= 1 + extra_args
            and None not in keywords
            and keywords <= set(_CONSUMERS[func.id])
            and all(
                _constant(a) or isinstance(a, gast.Name) and a.id in self.stable
                for a in [*parent.args[1:], *(k.value for k in parent.keywords)]
            )
        )

    def _rewritable(self, node: gast.ListComp | gast.GeneratorExp) -> bool:
        first = node.generators[0].iter  # `pos`, `zip(pos, x)`, `enumerate(pos)`
        over_built = any(
            isinstance(n, gast.Name) and n.id in self.built for n in structure.walk_nodes(first)
        )
        if not (over_built or any(g.ifs for g in node.generators)):
            return False
        if any(g.is_async for g in node.generators):
            return False
        for inner in structure.walk_nodes(node):
            if isinstance(inner, _UNSAFE_NODES):
                return False
            if isinstance(inner, gast.Call) and activity.reads_builtin(
                inner.func, self.ctx.globals, _UNSAFE_CALLS
            ):
                return False
        return True


def _built_lists(fn_node: gast.FunctionDef) -> frozenset[str]:
    """The names `fn_node` appends to (`out.append(v)`) or binds to a filtered comprehension
    (`kept = [v for v in x if v > 0]`, `kept = list(v for v in x if v > 0)`): lists that may
    have a traced length, which a comprehension over them, filtered or not, must loop over as a
    staged `for` does."""
    built = set()
    for node in structure.walk_nodes(fn_node):
        if method_call(node, "append") is not None:
            built.add(node.func.value.id)
        elif (
            isinstance(node, gast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], gast.Name)
        ):
            value = node.value.args[0] if _copies_a_generator(node.value) else node.value
            listed = isinstance(value, gast.ListComp) or value is not node.value
            if listed and any(g.ifs for g in value.generators):
                built.add(node.targets[0].id)
    return frozenset(built)


def _constant(node: gast.expr) -> bool:
    """A constant, or one negated (`-1.0`)."""
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, (gast.USub, gast.UAdd)):
        node = node.operand
    return isinstance(node, gast.Constant)


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _Comprehensions(ctx, fn_node).visit(fn_node)


def _copies_a_generator(node: gast.AST) -> bool:
    """Whether `node` is `list(<generator expression>)` (a call of `list`, that builtin or not:
    see `_consumed`)."""
    return (
        _copy_of(node) is not None
        and node.func.id == "list"
        and isinstance(node.args[0], gast.GeneratorExp)
        and not node.keywords
    )


def _copy_of(call: gast.AST) -> gast.AST | None:
    """`call` where it is `tuple(...)` or `list(...)` of one argument (its items are the
    argument's: errors about them may name the variable it is bound to), else None."""
    if (
        isinstance(call, gast.Call)
        and isinstance(call.func, gast.Name)
        and call.func.id in ("list", "tuple")
        and len(call.args) == 1
    ):
        return call
    return None
