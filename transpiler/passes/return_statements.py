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

from transpiler import anno, origins, templates
from transpiler.naming import RUNTIME, Namer
from transpiler.passes import guards
from transpiler.transformer import Transformer


@dataclasses.dataclass
class ReturnValue:
    """What error messages say about a function's return-value variable."""

    function: str
    returns: list[str]  # "file:line" of each return, or "the end of 'f'" for falling off it


def transform(
    fn_node: gast.FunctionDef, namer: Namer, returns: dict[str, ReturnValue]
) -> gast.FunctionDef:
    """Rewrites `fn_node` and its nested functions; records each return variable in `returns`."""
    return _ReturnStatements(namer, returns).visit(fn_node)


class _ReturnStatements(Transformer):
    def __init__(self, namer: Namer, returns: dict[str, ReturnValue]):
        self.namer = namer
        self.returns = returns

    def visit_FunctionDef(self, node):
        node = self.generic_visit(node)  # nested functions first: their returns are theirs
        if not _needs_rewrite(node.body):
            return node
        do_return, retval = self.namer.new("do_return"), self.namer.new("retval")
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
                    new += [gast.Break()]
                if anno.hasanno(stmt, anno.Static.ORIGIN):
                    for n in new:
                        origins.fill_missing(n, anno.getanno(stmt, anno.Static.ORIGIN))
                out.extend(new)
                return out  # the rest of the block never runs
            if isinstance(stmt, (gast.FunctionDef, gast.ClassDef)):
                out.append(stmt)
                continue
            is_loop = isinstance(stmt, (gast.For, gast.While))
            had_return = any(True for _ in _own_returns([stmt]))
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if block:
                    inner_loop = in_loop or (is_loop and field == "body")
                    setattr(stmt, field, self._block(block, do_return, retval, inner_loop))
            for handler in getattr(stmt, "handlers", None) or []:
                handler.body = self._block(handler.body, do_return, retval, in_loop)
            out.append(stmt)
            if had_return and in_loop and is_loop:
                # The inner loop stopped on the return; leave this loop too.
                out += templates.replace("if do_return:\n    break", do_return=do_return)
        return out


def _own_returns(stmts):
    """The return statements of these statements' function (not of nested functions)."""
    for stmt in stmts:
        if isinstance(stmt, gast.Return):
            yield stmt
        elif not isinstance(stmt, (gast.FunctionDef, gast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                yield from _own_returns(getattr(stmt, field, None) or [])
            for handler in getattr(stmt, "handlers", None) or []:
                yield from _own_returns(handler.body)


def _needs_rewrite(body) -> bool:
    """Whether some return is not simply the function's last top-level statement."""
    returns = list(_own_returns(body))
    return bool(returns) and not (len(returns) == 1 and body[-1] is returns[0])


def _always_exits(stmts) -> bool:
    """Whether every path through `stmts` ends in a return or raise (never falls off the end)."""
    for stmt in stmts:
        if isinstance(stmt, (gast.Return, gast.Raise)):
            return True
        if isinstance(stmt, gast.If) and _always_exits(stmt.body) and _always_exits(stmt.orelse):
            return True
        if isinstance(stmt, gast.With) and _always_exits(stmt.body):
            return True
        if (
            isinstance(stmt, gast.While)
            and isinstance(stmt.test, gast.Constant)
            and stmt.test.value
            and not _has_own_break(stmt.body)
        ):
            return True  # `while True:` without break leaves only through return or raise
    return False


def _has_own_break(stmts) -> bool:
    for stmt in stmts:
        if isinstance(stmt, gast.Break):
            return True
        if isinstance(stmt, (gast.For, gast.While, gast.FunctionDef, gast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            if _has_own_break(getattr(stmt, field, None) or []):
                return True
        for handler in getattr(stmt, "handlers", None) or []:
            if _has_own_break(handler.body):
                return True
    return False
