"""Whether a `while` loop's test bounds how many times it runs, through a counter.

    while err > tol and it < max_iter:
        ...
        it += 1

runs at most `max_iter - it` iterations from where it starts, whatever the rest of its test
does: each iteration that the loop goes on from adds one to `it`, and once `it` reaches
`max_iter` the test is false. Where `it` and `max_iter` are Python ints when the loop is staged,
the runtime knows that bound (see `runtime.loops`), as it would from
`loop_options(max_iterations=N)`.

The analysis asks, of the loop as the early-exit passes left it:

- the test is `c < E` or `c <= E` (or `E > c`, `E >= c`), or an `and` of which that is an
  operand: false, it makes the test false;
- `c` is a local variable of the function that the body binds in one statement, a top-level
  statement of the body, `c += 1` (or `c = c + 1`): every iteration that reaches the next test
  ran it (a `continue` or `break` before it puts it under an `if` of the passes' flags);
- `E` is an int literal, or a local variable the body does not bind: the same in every test;
- no nested function or lambda reads or writes either (a closure could change them).
"""

from __future__ import annotations

import gast

from transpiler import structure
from transpiler.analysis.activity import Scope


def counted_bound(loop: gast.While, scope: Scope) -> tuple[str, gast.expr, int] | None:
    """(counter, bound, extra): the loop runs at most `bound - counter + extra` iterations
    from any state it starts in (`extra`: 1 for `<=`, else 0); None where its test bounds no
    counter as the module's docstring says."""
    for test in _conjuncts(loop.test):
        found = _compared(test)
        if found is None:
            continue
        counter, bound, extra = found
        if _counts(loop, counter, bound, scope):
            return counter, bound, extra
    return None


def _conjuncts(test: gast.expr) -> list[gast.expr]:
    """`test` and the operands of its `and`s, at any depth: each false makes it false."""
    if isinstance(test, gast.BoolOp) and isinstance(test.op, gast.And):
        return [c for value in test.values for c in _conjuncts(value)]
    return [test]


def _compared(test: gast.expr) -> tuple[str, gast.expr, int] | None:
    """(counter, bound, extra) of `c < E`, `c <= E`, `E > c` or `E >= c`; else None."""
    if not (isinstance(test, gast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, (gast.Gt, gast.GtE)):
        left, right = right, left
        op = gast.Lt() if isinstance(op, gast.Gt) else gast.LtE()
    if not isinstance(op, (gast.Lt, gast.LtE)) or not isinstance(left, gast.Name):
        return None
    literal = isinstance(right, gast.Constant) and type(right.value) is int
    if not (literal or (isinstance(right, gast.Name) and right.id != left.id)):
        return None
    return left.id, right, int(isinstance(op, gast.LtE))


def _counts(loop: gast.While, counter: str, bound: gast.expr, scope: Scope) -> bool:
    """Whether the body adds one to `counter` in a top-level statement and binds it nowhere
    else, and `bound` is the same in every test; both plain locals of the function."""
    names = {counter} | ({bound.id} if isinstance(bound, gast.Name) else set())
    if not names <= scope.locals or names & (scope.declared | scope.closure_reads):
        return False
    increments = [stmt for stmt in loop.body if _adds_one(stmt, counter)]
    if len(increments) != 1:
        return False
    for stmt in structure.walk_all(loop.body):
        if isinstance(stmt, structure.SCOPES) and _mentions(stmt, names):
            return False  # a nested function or class: it may bind them
        if stmt is increments[0]:
            continue
        if structure.binds(stmt, names):
            return False
    return True


def _adds_one(stmt: gast.stmt, counter: str) -> bool:
    """`counter += 1`, `counter = counter + 1` or `counter = 1 + counter`."""
    one = lambda node: isinstance(node, gast.Constant) and type(node.value) is int  # noqa: E731
    if isinstance(stmt, gast.AugAssign):
        return (
            structure.is_name(stmt.target, counter)
            and isinstance(stmt.op, gast.Add)
            and one(stmt.value)
            and stmt.value.value == 1
        )
    if not (isinstance(stmt, gast.Assign) and len(stmt.targets) == 1):
        return False
    value = stmt.value
    if not (structure.is_name(stmt.targets[0], counter) and isinstance(value, gast.BinOp)):
        return False
    if not isinstance(value.op, gast.Add):
        return False
    pair = (value.left, value.right)
    return any(
        structure.is_name(a, counter) and one(b) and b.value == 1 for a, b in (pair, pair[::-1])
    )


def _mentions(node: gast.AST, names: set[str]) -> bool:
    return any(isinstance(n, gast.Name) and n.id in names for n in structure.walk_nodes(node))
