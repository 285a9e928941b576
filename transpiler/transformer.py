"""The base class of all passes: a gast.NodeTransformer that keeps the source map whole."""

from __future__ import annotations

import gast

from transpiler import anno


class Transformer(gast.NodeTransformer):
    """Copies the origin (user file:line) of each node it replaces onto the nodes that replace it.

    A pass subclasses this and writes `visit_*` methods as usual; every node it creates inherits
    the location of the user's node it stands for, so errors in generated code map back.

    Origins are given when the outermost visit returns, innermost replacements first, each node
    walked once: a new node gets the origin of the innermost replaced node whose replacement
    holds it. (Giving them at each visit would walk every nested block again at every level:
    quadratic in the nesting depth.)
    """

    _pending: list | None = None  # (replacement nodes, origin), innermost first

    def visit(self, node):
        if anno.hasanno(node, anno.Static.AS_WRITTEN):
            return node  # a nested generator: Python, as written
        outermost = self._pending is None
        if outermost:
            self._pending = []
        try:
            result = super().visit(node)
            if result is not node and anno.hasanno(node, anno.Static.ORIGIN):
                origin = anno.getanno(node, anno.Static.ORIGIN)
                new = [n for n in (result if isinstance(result, list) else [result])]
                self._pending.append(([n for n in new if isinstance(n, gast.AST)], origin))
            if outermost:
                _give_origins(self._pending)
        finally:
            if outermost:
                self._pending = None
        return result

    def visit_block(self, stmts: list[gast.stmt]) -> list[gast.stmt]:
        """Visits each statement of a block; a visit may return several statements, or none."""
        out = []
        for stmt in stmts:
            result = self.visit(stmt)
            if result is None:
                continue
            out.extend(result if isinstance(result, list) else [result])
        return out


def _give_origins(pending: list) -> None:
    seen: set[int] = set()  # nodes already walked; all stay alive in `pending` meanwhile
    for nodes, origin in pending:
        todo = list(nodes)
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if not anno.hasanno(node, anno.Static.ORIGIN):
                anno.setanno(node, anno.Static.ORIGIN, origin)
            todo.extend(gast.iter_child_nodes(node))
