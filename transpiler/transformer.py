"""The base class of all passes: a gast.NodeTransformer that keeps the source map whole."""

from __future__ import annotations

import gast

from transpiler import anno, origins


class Transformer(gast.NodeTransformer):
    """Copies the origin (user file:line) of each node it replaces onto the nodes that replace it.

    A pass subclasses this and writes `visit_*` methods as usual; every node it creates inherits
    the location of the user's node it stands for, so errors in generated code map back.
    """

    def visit(self, node):
        if anno.hasanno(node, anno.Static.AS_WRITTEN):
            return node  # a nested generator: Python, as written
        result = super().visit(node)
        if result is not node and anno.hasanno(node, anno.Static.ORIGIN):
            origin = anno.getanno(node, anno.Static.ORIGIN)
            for new in result if isinstance(result, list) else [result]:
                if isinstance(new, gast.AST):
                    origins.fill_missing(new, origin)
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
