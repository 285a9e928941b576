"""Reaching definitions: which names may be bound, and which must be, when a statement starts.

A forward analysis over the structured AST, starting from the function's parameters. It computes
two sets per statement: names that *may* be bound (bound on some path to it) and names that *must*
be (bound on every path). The control-flow pass needs both: a state variable that must be bound
is passed as it is; one that may be unbound is given an `rt__.Undefined` placeholder where the
function starts, and reading it where it may be unbound goes through `rt__.ld`, which raises the
UnboundLocalError Python would raise. `del x` unbinds `x`; `return`, `raise`, `break` and
`continue` end a path (nothing after them is reached along it).

Annotates every statement with DEFINED_IN (may) and DEFINITELY_DEFINED_IN (must).
"""

from __future__ import annotations

import dataclasses

import gast

from transpiler import anno, structure
from transpiler.analysis import activity

_A = anno.Static


@dataclasses.dataclass(frozen=True)
class _Bound:
    """What is bound at a point: `may` and `must`; `must` is None where no path reaches."""

    may: frozenset[str]
    must: frozenset[str] | None

    def __or__(self, other: _Bound) -> _Bound:  # paths that join
        if self.must is None:
            must = other.must
        elif other.must is None:
            must = self.must
        else:
            must = self.must & other.must
        return _Bound(self.may | other.may, must)

    def bind(self, names: frozenset[str]) -> _Bound:
        return _Bound(self.may | names, None if self.must is None else self.must | names)

    def unbind(self, names: frozenset[str]) -> _Bound:
        return _Bound(self.may - names, None if self.must is None else self.must - names)

    def entered(self) -> _Bound:
        """The same names, on a path that is reached (for a block that may run)."""
        return self if self.must is not None else _Bound(self.may, self.may)


_UNREACHED = _Bound(frozenset(), None)


def analyze(fn_node: gast.FunctionDef) -> None:
    """Annotates `fn_node` and its nested functions; needs the activity analysis."""
    scope = anno.getanno(fn_node, _A.SCOPE)
    _Definitions().block(fn_node.body, _Bound(scope.params, scope.params))
    for node in scope.nested:
        analyze(node)


class _Definitions:
    def __init__(self):
        # Per enclosing loop: what reaches each `break`, and each `continue`.
        self.loops: list[tuple[list[_Bound], list[_Bound]]] = []

    def block(self, stmts: list[gast.stmt], bound: _Bound) -> _Bound:
        for stmt in stmts:
            bound = self.stmt(stmt, bound)
        return bound

    def stmt(self, node: gast.stmt, bound: _Bound) -> _Bound:
        reached = bound.entered()  # dead code (after a return) is annotated as if reached
        anno.setanno(node, _A.DEFINED_IN, reached.may)
        anno.setanno(node, _A.DEFINITELY_DEFINED_IN, reached.must)
        visit = getattr(self, f"_{type(node).__name__}", self._simple)
        out = visit(node, reached)
        return out if bound.must is not None else _UNREACHED

    def _simple(self, node, bound):
        return bound.bind(anno.getanno(node, _A.ACTIVITY).bound)

    def _Delete(self, node, bound):
        deleted = frozenset(t.id for t in node.targets if isinstance(t, gast.Name))
        return bound.bind(anno.getanno(node, _A.ACTIVITY).bound - deleted).unbind(deleted)

    def _Return(self, node, bound):
        return _UNREACHED

    _Raise = _Return

    def _Break(self, node, bound):
        if self.loops:
            self.loops[-1][0].append(bound)
        return _UNREACHED

    def _Continue(self, node, bound):
        if self.loops:
            self.loops[-1][1].append(bound)
        return _UNREACHED

    def _If(self, node, bound):
        bound = bound.bind(activity.of(node.test).bound)  # walrus in the test
        return self.block(node.body, bound) | self.block(node.orelse, bound)

    def _loop(self, node, entry, rebound):
        """`entry`: what is bound when the loop starts (its iterable or test evaluated);
        `rebound`: what each iteration binds before its body (a for loop's target, a walrus in
        a while loop's test)."""
        self.loops.append(([], []))
        head = entry.bind(rebound)
        # An iteration starts with what the previous one left (a `del` unbinds, an assignment
        # binds) joined with the entry: the body is walked again until that stops changing,
        # which takes one more walk where an iteration binds or unbinds a name (a loop nested d
        # deep is not walked 2^d times otherwise).
        while True:
            after = self.block(node.body, head)
            for at_continue in self.loops[-1][1]:
                after = after | at_continue
            again = head | after.bind(rebound)
            if again == head:
                break
            head = again
            self.loops[-1] = ([], [])
        breaks, _ = self.loops.pop()
        # The loop ends when its test fails (its iterator is exhausted): at entry, or after any
        # iteration, as the body (or a `continue`) left it.
        if structure.endless(node):
            exhausted = _UNREACHED  # `while True:` is left by `break` (or return, raise) only
        else:
            exhausted = entry | (after.bind(rebound) if isinstance(node, gast.While) else after)
        out = self.block(node.orelse, exhausted)
        for at_break in breaks:
            out = out | at_break
        return out

    def _While(self, node, bound):
        tested = activity.of(node.test).bound
        return self._loop(node, bound.bind(tested), tested)

    def _For(self, node, bound):
        entry = bound.bind(activity.of(node.iter).bound)
        return self._loop(node, entry, activity.of(node.target).bound)

    def _With(self, node, bound):
        for item in node.items:
            bound = bound.bind(activity.of(item).bound)
        return self.block(node.body, bound)

    def _Try(self, node, bound):
        body = self.block(node.body, bound)
        out = self.block(node.orelse, body)
        # Any statement of the body may raise: a handler starts from what may have been bound
        # by then, and from what was bound before the try for sure and not deleted in it.
        deleted = deleted_in(node.body)
        raised = _Bound(bound.may | body.may, None if bound.must is None else bound.must - deleted)
        for handler in node.handlers:
            start = raised
            if handler.name is not None:
                start = start.bind(frozenset({handler.name.id}))
            handled = self.block(handler.body, start)
            if handler.name is not None:  # Python deletes it when the handler ends
                handled = handled.unbind(frozenset({handler.name.id}))
            out = out | handled
        end = self.block(node.finalbody, out)
        # Annotated last: the finally block also runs on the way out of an exception.
        self.block(node.finalbody, (out | raised).entered())
        return end if out.must is not None else _UNREACHED

    _TryStar = _Try

    def _Match(self, node, bound):
        bound = bound.bind(activity.of(node.subject).bound)
        out = bound  # no case may match
        for case in node.cases:
            start = bound.bind(activity.of(case.pattern).bound)
            if case.guard is not None:
                start = start.bind(activity.of(case.guard).bound)
            out = out | self.block(case.body, start)
        return out

    def _FunctionDef(self, node, bound):
        return bound.bind(frozenset({node.name}))

    _ClassDef = _FunctionDef


def deleted_in(stmts: list[gast.stmt]) -> frozenset[str]:
    """The names a `del` in `stmts` (nested blocks included, nested scopes not) unbinds."""
    return frozenset(
        target.id
        for stmt in structure.walk(stmts)
        if isinstance(stmt, gast.Delete)
        for target in stmt.targets
        if isinstance(target, gast.Name)
    )
