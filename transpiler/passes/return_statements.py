"""Rewrites the returns of a function into flags, so it has a single exit at its end.

    def f(x):                          def f(x):
        for v in x:                        do_return = False
            if v > 0:                      retval = rt__.UndefinedReturnValue()
                return v          ->       for v in x:
        return -1                              if v > 0:
                                                   retval = v
                                                   do_return = True
                                                   break
                                           if not do_return:
                                               retval = -1
                                               do_return = True
                                           return retval

A `return` inside a loop also leaves the loop (through a `break`, which the break pass then
rewrites), and the loops around it are left as soon as `do_return` is set. A function that can
fall off its end gets an explicit `return None` there first, so every path assigns `retval`.
Functions whose only `return` is their last statement are left alone.
"""

from __future__ import annotations

import dataclasses

import gast

from transpiler import anno, features, origins, structure, templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME, Namer
from transpiler.passes import guards
from transpiler.structure import Role
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (features.EARLY_RETURN,)
ADDS = (gast.Break, gast.If, gast.Assign, gast.UnaryOp, gast.Return, gast.Call)


@dataclasses.dataclass
class ReturnValue:
    """What error messages say about a function's return-value variable."""

    function: str
    returns: list[str]  # "file:line" of each return, or "the end of 'f'" for falling off it


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Rewrites `fn_node` and its nested functions; records each return variable in
    `ctx.return_values`."""
    return _ReturnStatements(ctx.namer, ctx.return_values).visit(fn_node)


class _ReturnStatements(Transformer):
    def __init__(self, namer: Namer, returns: dict[str, ReturnValue]):
        self.namer = namer
        self.returns = returns

    def visit_FunctionDef(self, node):
        if not _needs_rewrite(node.body):
            return self.generic_visit(node)
        # Named before nested functions take theirs: names follow source order.
        do_return, retval = self.namer.new("do_return"), self.namer.new("retval")
        node = self.generic_visit(node)  # nested functions first: their returns are theirs
        lines = [
            str(anno.getanno(r, anno.Static.ORIGIN))
            for r in _own_returns(node.body)
            if anno.hasanno(r, anno.Static.ORIGIN)
        ]
        body = node.body
        if not _always_exits(body):
            end = gast.Return(value=None)
            if anno.hasanno(node, anno.Static.ORIGIN):
                anno.setanno(end, anno.Static.ORIGIN, anno.getanno(node, anno.Static.ORIGIN))
            body = body + [end]
            lines.append(f"the end of '{node.name}' (an implicit 'return None')")
        self.returns[retval] = ReturnValue(node.name, lines)
        body = self._block(body, do_return, retval, in_loop=False)
        node.body = (
            templates.replace(
                f"do_return = False\nretval = {RUNTIME}.UndefinedReturnValue()",
                do_return=do_return,
                retval=retval,
            )
            # Inside loops the `break` after each return guards the rest (break pass).
            + guards.guard_block(body, do_return, into_loops=False)
            + templates.replace("return retval", retval=retval)
        )
        return node

    def _block(self, stmts, do_return, retval, in_loop):
        out = []
        for stmt in stmts:
            if isinstance(stmt, gast.Return):
                value = stmt.value if stmt.value is not None else templates.constant(None)
                # The flag last: the guards wrap whatever follows an assignment of it.
                new = templates.replace(
                    "retval = value\ndo_return = True",
                    do_return=do_return,
                    retval=retval,
                    value=value,
                )
                if in_loop:
                    new += [_return_break(do_return)]
                if anno.hasanno(stmt, anno.Static.ORIGIN):
                    for n in new:
                        origins.fill_missing(n, anno.getanno(stmt, anno.Static.ORIGIN))
                out.extend(new)
                return out  # the rest of the block never runs
            is_loop = isinstance(stmt, structure.LOOPS)
            had_return = any(True for _ in _own_returns([stmt]))
            for block in structure.blocks(stmt):
                inner_loop = in_loop or block.role is Role.LOOP_BODY
                block.stmts = self._block(block.stmts, do_return, retval, inner_loop)
            out.append(stmt)
            if had_return and in_loop and is_loop:
                # The inner loop stopped on the return; leave this loop too.
                leave = templates.replace("if do_return:\n    break", do_return=do_return)
                leave[0].body = [_return_break(do_return)]
                out += leave
        return out


def _return_break(do_return: str) -> gast.Break:
    """A `break` that leaves a loop because `do_return` is set (the break pass may then use
    `do_return` as the loop's own flag)."""
    node = gast.Break()
    anno.setanno(node, anno.Static.RETURN_BREAK, do_return)
    return node


def _own_returns(stmts):
    """The return statements of these statements' function (not of nested functions)."""
    return structure.jumps_out(stmts, (gast.Return,))


def _needs_rewrite(body) -> bool:
    """Whether some return is not simply the function's last top-level statement."""
    returns = list(_own_returns(body))
    return bool(returns) and not (len(returns) == 1 and body[-1] is returns[0])


def _always_exits(stmts) -> bool:
    """Whether every path through `stmts` ends in a return or raise (never falls off the end)."""
    return any(_exits(stmt) for stmt in stmts)


def _exits(stmt) -> bool:
    if isinstance(stmt, (gast.Return, gast.Raise)):
        return True
    if isinstance(stmt, gast.If):
        return _always_exits(stmt.body) and _always_exits(stmt.orelse)
    if isinstance(stmt, gast.With):
        return _always_exits(stmt.body)
    if isinstance(stmt, structure.TRY):
        if _always_exits(stmt.finalbody):
            return True
        completes = not (_always_exits(stmt.body) or _always_exits(stmt.orelse))
        return not completes and all(_always_exits(h.body) for h in stmt.handlers)
    if isinstance(stmt, gast.Match):
        last = stmt.cases[-1] if stmt.cases else None
        irrefutable = (
            last is not None
            and last.guard is None
            and isinstance(last.pattern, gast.MatchAs)
            and last.pattern.pattern is None
        )
        return irrefutable and all(_always_exits(case.body) for case in stmt.cases)
    if not isinstance(stmt, structure.LOOPS) or any(structure.jumps_out(stmt.body, (gast.Break,))):
        return False
    # With no break, a loop ends only through its `else` (`for ...: ... else: return -1`), or,
    # `while True:`, never: it leaves through a return or raise.
    return structure.endless(stmt) or _always_exits(stmt.orelse)
