"""Liveness: which names may still be read after each statement.

A backward analysis over the structured AST (no goto, so no general CFG is needed): `break` jumps
to the loop's exit, `continue` to its header, `return` to the function's end; loops iterate to a
fixed point. Names that a nested function or lambda reads from this scope are treated as live
everywhere, since the nested function may run at any later time, and so are names declared
`global` or `nonlocal`, whose values outlive the call.

Annotates every statement with LIVE_IN and LIVE_OUT, and every loop with LOOP_LIVE_IN (live at
the top of its body, each iteration).

A loop's header (what is live at the top of each iteration) is a fixed point. Iterating the body
to find it would visit a loop nested d deep 2^d times; instead each statement is summarised
once, bottom-up, as a gen/kill transfer function (`_Transfer`), from which the fixed point is
computed directly, and the body is then annotated in one pass. Conversion time stays linear in
the size of the function, whatever its nesting depth.
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
    for node in scope.nested:
        analyze(node)


class _Liveness:
    def __init__(self, always_live: frozenset[str]):
        self.always_live = always_live
        self.loops: list[tuple[frozenset[str], frozenset[str]]] = []  # (exit, header) live sets
        self.summaries = _Summaries(always_live)

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
        body = self.summaries.block(node.body)
        header = test | exit_live | body.gen | _minus(live_out, body.kill_exit)
        while True:  # one pass: `header` is the fixed point already
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
        before_each = target.reads | _extra_test_reads(node)
        body = self.summaries.block(node.body)
        reached = (body.gen | _minus(live_out, body.kill_exit)) - target.bound
        header = exit_live | reached | before_each
        while True:  # one pass: `header` is the fixed point already
            self.loops.append((live_out, header))
            body_in = self.block(node.body, header)
            self.loops.pop()
            new_header = exit_live | (body_in - target.bound) | before_each
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
            # `except E as err`: bound as the handler starts, unbound as it ends.
            caught = _caught(handler)
            handlers |= self.block(handler.body, after - caught) - caught
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


def _extra_test_reads(node: gast.For) -> frozenset[str]:
    """What the break pass's extra test reads: it is evaluated before each iteration, like a
    while test."""
    if not anno.hasanno(node, _A.EXTRA_TEST):
        return frozenset()
    return activity.of(anno.getanno(node, _A.EXTRA_TEST)).reads


class _All:
    """The kill set of a path that does not go on: nothing flows through it."""

    def __repr__(self):
        return "ALL"


ALL = _All()


def _minus(names: frozenset[str], kill) -> frozenset[str]:
    return frozenset() if kill is ALL else names - kill


def _kill_both(a, b):  # through one, then the other: either kills
    return ALL if a is ALL or b is ALL else a | b


def _kill_either(a, b):  # along one path or the other: killed only if both kill
    if a is ALL:
        return b
    if b is ALL:
        return a
    return a & b


def _caught(handler: gast.ExceptHandler) -> frozenset[str]:
    """The name `except E as name` binds, if any."""
    return frozenset() if handler.name is None else frozenset({handler.name.id})


class _Transfer:
    """Liveness through a statement or block, as a function of what is live after it:

        live_in = gen | (out - kill) | (exit - kill_exit) | (header - kill_header)

    `out`: live where the block falls through; `exit` and `header`: live at the exit and at the
    header of the innermost loop around it (where `break` and `continue` go). A kill set `ALL`
    means the path does not exist (after a `return`, nothing falls through)."""

    __slots__ = ("gen", "kill", "kill_exit", "kill_header")

    def __init__(self, gen=frozenset(), kill=ALL, kill_exit=ALL, kill_header=ALL):
        self.gen, self.kill, self.kill_exit, self.kill_header = gen, kill, kill_exit, kill_header

    def then(self, after: _Transfer) -> _Transfer:
        """This block followed by `after`: `after`'s live-in is this one's `out`."""
        return _Transfer(
            self.gen | _minus(after.gen, self.kill),
            _kill_both(self.kill, after.kill),
            _kill_either(self.kill_exit, _kill_both(self.kill, after.kill_exit)),
            _kill_either(self.kill_header, _kill_both(self.kill, after.kill_header)),
        )

    def __or__(self, other: _Transfer) -> _Transfer:  # either path may be taken
        return _Transfer(
            self.gen | other.gen,
            _kill_either(self.kill, other.kill),
            _kill_either(self.kill_exit, other.kill_exit),
            _kill_either(self.kill_header, other.kill_header),
        )


_IDENTITY = _Transfer(kill=frozenset())


def _reads(names: frozenset[str]) -> _Transfer:
    """Reads `names`, then goes on (nothing bound)."""
    return _Transfer(names, frozenset())


def _act(act: activity.Activity) -> _Transfer:
    """Reads `act.reads`, then binds `act.bound`."""
    return _Transfer(act.reads, act.bound)


class _Summaries:
    """Each statement's `_Transfer`, computed once (mirrors `_Liveness`'s rules)."""

    def __init__(self, always_live: frozenset[str]):
        self.always_live = always_live
        self.memo: dict[int, _Transfer] = {}

    def block(self, stmts: list[gast.stmt]) -> _Transfer:
        out = _IDENTITY
        for stmt in stmts:
            out = out.then(self.stmt(stmt))
        return out

    def stmt(self, node: gast.stmt) -> _Transfer:
        found = self.memo.get(id(node))
        if found is None:
            visit = getattr(self, f"_{type(node).__name__}", None)
            found = visit(node) if visit else _act(anno.getanno(node, _A.ACTIVITY))
            found = _Transfer(found.gen | self.always_live, *_kills(found))
            self.memo[id(node)] = found
        return found

    def _If(self, node):
        return _act(activity.of(node.test)).then(self.block(node.body) | self.block(node.orelse))

    def _While(self, node):
        body = self.block(node.body)
        test = activity.of(node.test).reads
        return self.block(node.orelse) | _Transfer(test | body.gen, body.kill_exit)

    def _For(self, node):
        body = self.block(node.body)
        target = activity.of(node.target)
        gen = activity.of(node.iter).reads | target.reads | _extra_test_reads(node)
        gen |= body.gen - target.bound
        return self.block(node.orelse) | _Transfer(gen, _kill_both(body.kill_exit, target.bound))

    def _Break(self, node):
        return _Transfer(kill_exit=frozenset())

    def _Continue(self, node):
        return _Transfer(kill_header=frozenset())

    def _Return(self, node):
        return _Transfer(activity.of(node.value).reads if node.value is not None else frozenset())

    def _With(self, node):
        items = activity.Activity()
        for item in node.items:
            items = items | activity.of(item)
        return _act(items).then(self.block(node.body))

    def _Try(self, node):
        after = self.block(node.finalbody)
        handlers = _Transfer()
        for handler in node.handlers:
            # `except E as err`: bound as the handler starts, unbound as it ends.
            caught = _Transfer(kill=_caught(handler))
            handlers |= caught.then(self.block(handler.body)).then(caught).then(after)
            if handler.type is not None:
                handlers |= _Transfer(activity.of(handler.type).reads)
        orelse = self.block(node.orelse).then(after)
        body = self.block(node.body).then(orelse | handlers | after)
        return body | handlers | after

    _TryStar = _Try

    def _Match(self, node):
        out = _reads(activity.of(node.subject).reads)
        for case in node.cases:
            guard = activity.of(case.guard).reads if case.guard is not None else frozenset()
            out |= _act(activity.of(case.pattern)).then(self.block(case.body) | _Transfer(guard))
        return out


def _kills(t: _Transfer) -> tuple:
    return t.kill, t.kill_exit, t.kill_header
