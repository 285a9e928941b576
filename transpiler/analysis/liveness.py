"""Liveness: which names may still be read after each statement.

A backward analysis over the structured AST (no goto, so no general CFG is needed): `break` jumps
to the loop's exit, `continue` to its header, `return` to the function's end; loops iterate to a
fixed point. Names that a nested function or lambda reads from this scope are treated as live
everywhere, since the nested function may run at any later time, and so are names declared
`global` or `nonlocal`, whose values outlive the call.

Annotates every statement with LIVE_IN and LIVE_OUT, and every loop with LOOP_LIVE_IN (live at
the top of its body, each iteration).
"""

from __future__ import annotations

import gast

from transpiler import anno
from transpiler.analysis import activity

_A = anno.Static


def analyze(fn_node: gast.FunctionDef) -> None:
    """Annotates `fn_node` and its nested functions; needs the activity analysis."""
    scope = anno.getanno(fn_node, _A.SCOPE)
    # Global and nonlocal names outlive the call, like the names closures read.
    _Liveness(scope.closure_reads | scope.declared).block(fn_node.body, frozenset())
    for node in activity.walk_scope(fn_node.body):
        if isinstance(node, gast.FunctionDef):
            analyze(node)


class _Liveness:
    def __init__(self, always_live: frozenset[str]):
        self.always_live = always_live
        self.loops: list[tuple[frozenset[str], frozenset[str]]] = []  # (exit, header) live sets

    def block(self, stmts: list[gast.stmt], live_out: frozenset[str]) -> frozenset[str]:
        live = live_out
        for stmt in reversed(stmts):
            live = self.stmt(stmt, live)
        return live

    def stmt(self, node: gast.stmt, live_out: frozenset[str]) -> frozenset[str]:
        live_out = live_out | self.always_live
        anno.setanno(node, _A.LIVE_OUT, live_out)
        visit = getattr(self, f"_{type(node).__name__}", self._simple)
        live_in = visit(node, live_out) | self.always_live
        anno.setanno(node, _A.LIVE_IN, live_in)
        return live_in

    def _simple(self, node, live_out):
        act = anno.getanno(node, _A.ACTIVITY)
        return (live_out - act.bound) | act.reads

    def _If(self, node, live_out):
        test = activity.of(node.test)  # it may bind (`if (n := len(x)) > 3:`) before the branches
        branches = self.block(node.body, live_out) | self.block(node.orelse, live_out)
        return (branches - test.bound) | test.reads

    def _While(self, node, live_out):
        exit_live = self.block(node.orelse, live_out)
        test = activity.of(node.test).reads
        header = frozenset()
        while True:
            self.loops.append((live_out, header))
            body_in = self.block(node.body, header)
            self.loops.pop()
            new_header = test | exit_live | body_in
            if new_header == header:
                break
            header = new_header
        anno.setanno(node, _A.LOOP_LIVE_IN, body_in | self.always_live)
        return header

    def _For(self, node, live_out):
        exit_live = self.block(node.orelse, live_out)
        target = activity.of(node.target)
        # The break pass's extra test is evaluated before each iteration, like a while test.
        extra = anno.getanno(node, _A.EXTRA_TEST) if anno.hasanno(node, _A.EXTRA_TEST) else None
        extra_reads = activity.of(extra).reads if extra is not None else frozenset()
        header = frozenset()
        while True:
            self.loops.append((live_out, header))
            body_in = self.block(node.body, header)
            self.loops.pop()
            new_header = exit_live | (body_in - target.bound) | target.reads | extra_reads
            if new_header == header:
                break
            header = new_header
        anno.setanno(node, _A.LOOP_LIVE_IN, body_in | self.always_live)
        return activity.of(node.iter).reads | header

    def _Break(self, node, live_out):
        return self.loops[-1][0] if self.loops else live_out

    def _Continue(self, node, live_out):
        return self.loops[-1][1] if self.loops else live_out

    def _Return(self, node, live_out):
        return activity.of(node.value).reads if node.value is not None else frozenset()

    def _With(self, node, live_out):
        items = activity.Activity()
        for item in node.items:
            items = items | activity.of(item)
        return (self.block(node.body, live_out) - items.bound) | items.reads

    def _Try(self, node, live_out):
        # Any statement of the body may raise into a handler: conservatively, whatever a handler
        # or the finally block needs is live throughout the body.
        after = self.block(node.finalbody, live_out)
        handlers = frozenset()
        for handler in node.handlers:
            handlers |= self.block(handler.body, after)
            if handler.type is not None:
                handlers |= activity.of(handler.type).reads
        orelse_in = self.block(node.orelse, after)
        body_in = self.block(node.body, orelse_in | handlers | after)
        return body_in | handlers | after

    _TryStar = _Try

    def _Match(self, node, live_out):
        # No case may match: what is live after the match is live before it too.
        live = live_out | activity.of(node.subject).reads
        for case in node.cases:
            pattern = activity.of(case.pattern)
            guard = activity.of(case.guard).reads if case.guard is not None else frozenset()
            live |= ((self.block(case.body, live_out) | guard) - pattern.bound) | pattern.reads
        return live
