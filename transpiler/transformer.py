"""The base classes of the passes and analyses: gast's visitors, fast, and a transformer that
keeps the source map whole."""

from __future__ import annotations

import gast

from transpiler import anno, origins, structure


def _visitor(self, cls: type):
    """The `visit_<Class>` method of `self` for nodes of `cls`, else `generic_visit` (looked up
    once per class and visitor class: the traversal runs for every node of every pass)."""
    table = type(self).__dict__.get("_visitors")
    if table is None:
        table = {}
        type(self)._visitors = table
    name = table.get(cls)
    if name is None:
        name = table[cls] = "visit_" + cls.__name__
        if not hasattr(self, name):
            name = table[cls] = "generic_visit"
    return getattr(self, name)


class Visitor(gast.NodeVisitor):
    """`gast.NodeVisitor`, with each class's visitor looked up once, and no visits of contexts
    and operators (`Load`, `Add`: see `structure.children`), which no analysis visits."""

    _visitor = _visitor

    def visit(self, node):
        return self._visitor(type(node))(node)

    def generic_visit(self, node):
        for child in structure.children(node):
            self.visit(child)


class Rewriter(gast.NodeTransformer):
    """`gast.NodeTransformer`, as fast as `Visitor` (and with `visit_block`)."""

    _visitor = _visitor

    def visit(self, node):
        return self._visitor(type(node))(node)

    def generic_visit(self, node):
        """`ast.NodeTransformer.generic_visit`, minus its per-field generator and the visits of
        contexts and operators (`Load`, `Add`), which no pass rewrites
        (`structure.node_fields`)."""
        for field in structure.node_fields(type(node)):
            old = getattr(node, field, None)
            if type(old) is list:
                if not old:
                    continue
                new = []
                for value in old:
                    if isinstance(value, gast.AST):
                        value = self.visit(value)
                        if value is None:
                            continue
                        if not isinstance(value, gast.AST):
                            new.extend(value)
                            continue
                    new.append(value)
                old[:] = new
            elif isinstance(old, gast.AST):
                value = self.visit(old)
                if value is None:
                    delattr(node, field)
                elif value is not old:
                    setattr(node, field, value)
        return node

    def visit_block(self, stmts: list[gast.stmt]) -> list[gast.stmt]:
        """Visits each statement of a block; a visit may return several statements, or none."""
        out = []
        for stmt in stmts:
            result = self.visit(stmt)
            if result is None:
                continue
            out.extend(result if isinstance(result, list) else [result])
        return out


class Transformer(Rewriter):
    """Copies the origin (user file:line) of each node it replaces onto the nodes that replace it.

    A pass subclasses this and writes `visit_*` methods as usual; every node it creates inherits
    the location of the user's node it stands for, so errors in generated code map back.

    Origins are given when the outermost visit returns, innermost replacements first, each node
    walked once: a new node gets the origin of the innermost replaced node whose replacement
    holds it. (Giving them at each visit would walk every nested block again at every level:
    quadratic in the nesting depth.)
    """

    _pending: list | None = None  # (replacement node, origin), innermost first

    def visit(self, node):
        annos = node.__dict__.get(anno.FIELD)
        if annos is not None and anno.Static.AS_WRITTEN in annos:
            return node  # a nested generator: Python, as written
        outermost = self._pending is None
        if outermost:
            self._pending = []
        try:
            result = self._visitor(type(node))(node)
            if result is not node and anno.hasanno(node, anno.Static.ORIGIN):
                new = result if isinstance(result, list) else [result]
                origin = anno.getanno(node, anno.Static.ORIGIN)
                self._pending += [(n, origin) for n in new if isinstance(n, gast.AST)]
            if outermost:
                seen: set[int] = set()  # the pending nodes keep every walked node alive
                for replacement, origin in self._pending:
                    origins.fill_missing(replacement, origin, seen)
        finally:
            if outermost:
                self._pending = None
        return result
