"""Rewrites a comprehension with an `if` filter into a nested function that builds its list
with a `for` loop, an `if` and `append`:

    kept = [v * 2 for v in xs if v > 0]
        ->  def comprehension(items):
                kept_items = []
                for v in items:
                    if v > 0:
                        kept_items.append(v * 2)
                return kept_items
            kept = comprehension(xs)

The control-flow and list passes then convert that loop as any other: where the filter is a
Python value the list is Python's, and where it is traced (`v > 0` of an array's items) the `if`
is staged and the list has a traced length (see `runtime.lists`), which `sum`, `len`, `max`,
`min` and a staged loop take. Unconverted, the comprehension would ask Python for the truth of
the traced filter (JAX's `TracerBoolConversionError`).

Exact, because the function is the comprehension's own scope: its first iterable is evaluated
where the comprehension stands (the argument), the rest and every filter and item inside, in
Python's order, the names it reads resolved as the comprehension resolves them (the enclosing
function's, at call time), its variables its own. It is defined just before the statement that
holds the comprehension, in the same block: inside a staged loop or branch it closes over that
block's variables.

Rewritten: a list comprehension with a filter; a generator expression with a filter that is the
one positional argument of the builtin `sum` (a `start` too), `max` or `min` (a `default=`, no
`key=`), `list` or `tuple`, which consume it at once, in order, with nothing between its
items. Left as Python: comprehensions without a filter (their length is known), set and dict
comprehensions, generator expressions anywhere else (lazy: `any` stops early, a consumer may
interleave effects), async ones, those that bind with `:=` (in the enclosing scope), yield, or
call `next`, `super` or the frame readers (`locals`, `vars`, `dir`, `eval`, `exec`), and those
in a lambda, a default value or a decorator.
"""

from __future__ import annotations

import gast

from transpiler import anno, origins, structure, templates
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.transformer import Transformer

APPLIES_TO = (gast.ListComp, gast.GeneratorExp)
ADDS = (gast.FunctionDef, gast.For, gast.If, gast.Call, gast.Return, gast.Assign, "call:.append")

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
    def __init__(self, ctx: PassContext):
        self.ctx = ctx

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
                    new = self._replacement(node, child, helpers)
                    if new is not None:
                        if type(value) is list:
                            value[i] = new
                        else:
                            setattr(node, field, new)
                    elif not isinstance(child, _NOT_OWN):
                        stack.append(child)
        return helpers

    def _replacement(self, parent: gast.AST, node: gast.AST, helpers: list) -> gast.expr | None:
        """The call that stands for `node` (a comprehension this pass rewrites, its helper
        appended to `helpers`), else None."""
        if isinstance(node, gast.ListComp):
            pass
        elif not (isinstance(node, gast.GeneratorExp) and self._consumed(parent, node)):
            return None
        if not self._rewritable(node):
            return None
        function = self.ctx.namer.new("comprehension")
        items, kept = self.ctx.namer.new("items"), self.ctx.namer.new("kept_items")
        first = node.generators[0]
        iterable, first.iter = first.iter, gast.Name(items, gast.Load(), None, None)
        body = templates.replace(f"{kept}.append(elt)", elt=node.elt)
        for generator in reversed(node.generators):
            for test in reversed(generator.ifs):
                body = [gast.If(test=test, body=body, orelse=[])]
            body = [
                gast.For(
                    target=generator.target,
                    iter=generator.iter,
                    body=body,
                    orelse=[],
                    type_comment=None,
                )
            ]
        definition = templates.replace(
            f"""
            def {function}({items}):
                {kept} = []
                loop
                return {kept}
            """,
            loop=body,
        )
        call = templates.replace_as_expression(f"{function}(iterable)", iterable=iterable)
        if anno.hasanno(node, anno.Static.ORIGIN):  # errors in them name the comprehension's
            origin = anno.getanno(node, anno.Static.ORIGIN)
            origins.fill_missing(definition[0], origin)
            origins.fill_missing(call, origin)
        definition[0].body = self._block(definition[0].body)  # comprehensions in the items
        helpers += definition
        return call

    def _consumed(self, parent: gast.AST, node: gast.GeneratorExp) -> bool:
        """Whether `parent` is a call of a builtin that consumes `node` at once (`sum`...)."""
        if not (isinstance(parent, gast.Call) and parent.args and parent.args[0] is node):
            return False
        func = parent.func
        if not activity.reads_builtin(func, self.ctx.globals, _CONSUMERS):
            return False
        keywords = {k.arg for k in parent.keywords}
        extra_args = 1 if func.id == "sum" else 0
        return (
            len(parent.args) <= 1 + extra_args
            and not any(isinstance(a, gast.Starred) for a in parent.args)
            and None not in keywords
            and keywords <= set(_CONSUMERS[func.id])
        )

    def _rewritable(self, node: gast.ListComp | gast.GeneratorExp) -> bool:
        if not any(g.ifs for g in node.generators) or any(g.is_async for g in node.generators):
            return False
        for inner in structure.walk_nodes(node):
            if isinstance(inner, _UNSAFE_NODES):
                return False
            if isinstance(inner, gast.Call) and activity.reads_builtin(
                inner.func, self.ctx.globals, _UNSAFE_CALLS
            ):
                return False
        return True


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _Comprehensions(ctx).visit(fn_node)
