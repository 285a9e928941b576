"""Code that computes nothing and has no effect: what a staged choice may select without
tracing it (`runtime.control_flow`: `if_exp(..., plain=True)`, `if_stmt(..., plain=True)`).

    1 if hit else 0                 plain: a number literal each side
    hi = mid / converged = True     a plain binding: a name (or a tuple of names) to plain values
    -x, f(x), x.w, x[0]             not plain: each calls Python code of some object
"""

from __future__ import annotations

import gast


def expression(node: gast.expr) -> bool:
    """Whether `node` is a name or a number literal (`0.0`, `-1`, `True`)."""
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, (gast.USub, gast.UAdd)):
        return isinstance(node.operand, gast.Constant) and expression(node.operand)
    if isinstance(node, gast.Constant):
        return type(node.value) in (int, float, bool)
    return isinstance(node, gast.Name)


def bindings(stmts: list[gast.stmt]) -> bool:
    """Whether `stmts` only bind names to plain expressions (`lo = mid`, `a, b = b, 0.0`) or
    `pass`. (A name declared global or nonlocal is for the caller to rule out.)"""
    return all(isinstance(s, gast.Pass) or _binding(s) for s in stmts)


def _binding(stmt: gast.stmt) -> bool:
    if not isinstance(stmt, gast.Assign):
        return False
    for target in stmt.targets:
        if isinstance(target, gast.Name):
            if not expression(stmt.value):
                return False
        elif isinstance(target, gast.Tuple) and isinstance(stmt.value, gast.Tuple):
            names = all(isinstance(t, gast.Name) for t in target.elts)
            if not names or len(target.elts) != len(stmt.value.elts):
                return False
            if not all(expression(v) for v in stmt.value.elts):
                return False
        else:
            return False
    return True
