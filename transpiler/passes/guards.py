"""Shared by the early-exit passes: run the rest of a block only while a flag is not set.

    a                          a
    flag = True     (was a     flag = True
    b                break)    if not flag:
    c                              b
                                   c

Applied to every block of a loop (or function) body, innermost first, so a flag set deep inside an
`if` also guards what follows that `if`. Nested functions and classes are left alone; nested
loops are left alone unless `into_loops` (a `return` flag must also guard code in inner loops).
"""

from __future__ import annotations

import gast

from transpiler import structure, templates
from transpiler.structure import Role


def sets_flag(node: gast.AST, flag: str) -> bool:
    """Whether `node` assigns `flag` anywhere (outside nested function definitions)."""
    return any(
        isinstance(n, gast.Name) and n.id == flag and isinstance(n.ctx, gast.Store)
        for n in structure.walk_nodes(node)
    )


def guard_block(stmts: list[gast.stmt], flag: str, *, into_loops: bool) -> list[gast.stmt]:
    """`stmts` with every statement after a possible `flag = True` wrapped in `if not flag:`."""
    for stmt in stmts:
        _guard_children(stmt, flag, into_loops)
    for i, stmt in enumerate(stmts):
        if sets_flag(stmt, flag) and i + 1 < len(stmts):
            rest = guard_block(stmts[i + 1 :], flag, into_loops=into_loops)
            if isinstance(stmt, gast.If) and _sink(stmt, rest, flag):
                return stmts[: i + 1]
            guarded = templates.replace("if not flag:\n    rest", flag=flag, rest=rest)
            return stmts[: i + 1] + guarded
    return stmts


# At most this many nodes copied where the rest of a block goes into more than one path of an
# `if` (`_sink`): each copy is traced, and compiled, again.
MAX_COPIED_NODES = 300


def _sink(stmt: gast.If, rest: list[gast.stmt], flag: str) -> bool:
    """Puts `rest` (what follows `stmt` in its block) at the end of each path through `stmt` that
    never sets `flag`, where every path either never sets it or ends by setting it: one `if`
    instead of two, and each path's state as Python leaves it. `if p: ...; flag = True` puts it
    in the else; `if a: pass / elif b: out.append(v); flag = True` in the `pass` branch and the
    inner else, where the flag guard would append to `out` under two staged `if`s, a list of
    traced length, where on every path it grows by one. False (nothing changed) otherwise, or
    where the copies would exceed `MAX_COPIED_NODES`."""
    ends = _open_ends([stmt], flag)
    if not ends:  # a path sets the flag and goes on, or every path sets it
        return False
    size = sum(1 for s in rest for _ in structure.walk_nodes(s))
    if (len(ends) - 1) * size > MAX_COPIED_NODES:
        return False
    for k, block in enumerate(ends):
        block.extend(rest if k == 0 else templates.clone(rest))
    return True


def _open_ends(stmts: list[gast.stmt], flag: str) -> list[list[gast.stmt]] | None:
    """The blocks (lists of statements, at the ends of the paths through `stmts`) where a path
    ends without setting `flag`; None where some path sets it and goes on."""
    if not sets_flag_in(stmts, flag):
        return [stmts]
    if _always_sets(stmts, flag):
        return []
    last = stmts[-1]
    if isinstance(last, gast.If) and not sets_flag_in(stmts[:-1], flag):
        body, orelse = _open_ends(last.body, flag), _open_ends(last.orelse, flag)
        return None if body is None or orelse is None else body + orelse
    return None


def sets_flag_in(stmts: list[gast.stmt], flag: str) -> bool:
    return any(sets_flag(s, flag) for s in stmts)


def _always_sets(stmts: list[gast.stmt], flag: str) -> bool:
    """Whether every path through `stmts` ends with `flag` set (nothing follows the jump)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, gast.Assign) and sets_flag(last, flag):
        return True
    if isinstance(last, gast.If):
        return _always_sets(last.body, flag) and _always_sets(last.orelse, flag)
    return False


def _guard_children(stmt: gast.stmt, flag: str, into_loops: bool) -> None:
    for block in structure.blocks(stmt):
        # A loop's else block runs in the enclosing iteration; its body is its own unless asked.
        if block.role is not Role.LOOP_BODY or into_loops:
            block.stmts = guard_block(block.stmts, flag, into_loops=into_loops)
    if isinstance(stmt, structure.TRY) and stmt.orelse and sets_flag_in(stmt.body, flag):
        # A `try`'s else runs where its body ran to its end: not after a `return`, `break` or
        # `continue` in it (its `finally` runs either way).
        stmt.orelse = templates.replace("if not flag:\n    rest", flag=flag, rest=stmt.orelse)


def replace_jumps(
    stmts: list[gast.stmt], jump: type, replacement: callable
) -> tuple[list[gast.stmt], bool]:
    """Replaces each `jump` statement (Break or Continue) that belongs to the enclosing loop.

    Statements after a jump in the same block never run, so they are dropped. Returns the new
    block and whether anything was replaced.
    """
    out: list[gast.stmt] = []
    found = False
    for stmt in stmts:
        if isinstance(stmt, jump):
            out.extend(replacement(stmt))
            return out, True
        for block in structure.blocks(stmt):
            # A jump inside an inner loop's body belongs to that loop; in its else, to ours.
            if block.role is not Role.LOOP_BODY:
                block.stmts, hit = replace_jumps(block.stmts, jump, replacement)
                found |= hit
        out.append(stmt)
    return out, found
