"""Rewrites `break` into a flag that the loop tests, so the loop can be staged.

    while x < n:                       did_break = False
        if x == t:                     while not did_break and x < n:
            break              ->          if x == t:
        x += 1                                 did_break = True
    else:                                  if not did_break:
        found = False                          x += 1
                                       if not did_break:
                                           found = False

A leading `if C: ...; break` of a `for` body (or `if C: break` of a `while` body) stays, marked
EXIT_GUARD: the control-flow pass makes it the loop's exit test (see `runtime.exits`; staged,
`while x < n: if x == t: break` is `while x < n and not x == t:`). Otherwise a `for` loop gets
the flag; its test (`not did_break`) is attached as the EXTRA_TEST annotation, which the
control-flow pass hands to `rt__.for_stmt(..., extra_test=...)`: the loop stops fetching items
once it is false, and a staged loop tests it.
"""

from __future__ import annotations

from collections.abc import Callable

import gast

from transpiler import anno, libraries, structure, templates
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.naming import Namer
from transpiler.passes import guards, truth_tests
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Break,)
ADDS = (gast.If, gast.Assign, gast.UnaryOp, gast.BoolOp)


class _BreakStatements(Transformer):
    def __init__(self, namer: Namer, pure: Callable[[gast.expr], bool]):
        self.namer = namer
        self.pure = pure  # whether an exit test may move into the loop's condition

    def _visit_loop(self, node):
        # The flag is named before inner loops take theirs: names follow source order.
        breaks = list(structure.jumps_out(node.body, (gast.Break,)))
        if not breaks:
            return self.generic_visit(node)
        returns = {
            anno.getanno(b, anno.Static.RETURN_BREAK) if _is_return_break(b) else None
            for b in breaks
        }
        if len(returns) == 1 and None not in returns:
            # Every break leaves because of a return: the return flag is the loop's flag (it
            # is False when the loop starts, True once a break would run). One flag, not two.
            flag = returns.pop()
            node = self.generic_visit(node)
            node.body = _drop_return_breaks(node.body)
            assert not any(structure.jumps_out(node.body, (gast.Break,))), "a break survived"
            init = []
        else:
            flag = self.namer.new("did_break")
            node = self.generic_visit(node)  # inner loops first: their breaks are theirs
            node.body, _ = guards.replace_jumps(
                node.body, gast.Break, lambda _: templates.replace("flag = True", flag=flag)
            )
            init = templates.replace("flag = False", flag=flag)
        node.body = guards.guard_block(node.body, flag, into_loops=False)
        if isinstance(node, gast.While):
            node.test = templates.replace_as_expression(
                "not flag and test", flag=flag, test=node.test
            )
            truth_tests.mark(node.test)
        else:
            not_broken = templates.replace_as_expression("not flag", flag=flag)
            anno.setanno(node, anno.Static.EXTRA_TEST, not_broken)
        orelse = node.orelse
        node.orelse = []
        after = (
            templates.replace("if not flag:\n    orelse", flag=flag, orelse=orelse)
            if orelse
            else []
        )
        return init + [node] + after

    def visit_While(self, node):
        return self._visit_guarded(node, _leading_exit(node, self.pure))

    def visit_For(self, node):
        return self._visit_guarded(node, _exit_guard(node, self.pure))

    def _visit_guarded(self, node, guard: gast.If | None):
        """The loop, its exit `guard` (if any) left first in the body and marked for the
        control-flow pass, which makes it the loop's exit test; the other breaks rewritten."""
        if guard is None:
            return self._visit_loop(node)
        node.body = node.body[1:]
        out = self._visit_loop(node)
        anno.setanno(guard, anno.Static.EXIT_GUARD, True)
        node.body = [guard, *node.body]
        return out


def _leading_exit(node: gast.While, pure) -> gast.If | None:
    """The `if C: break` that starts a `while` body, which the control-flow pass makes the
    loop's exit test: staged, `while T: if C: break; B` is `while T and not C: B`, as written
    by hand (`runtime.loops`). Consecutive ones are one (`if C1 or C2: break`); an `else:` is
    the rest of the body. Only for a `C` that makes no effect (`pure`: staged, the loop's
    condition runs for every element under `jax.vmap`, the body only for those still looping),
    and for a loop without an `else:` clause (the flag tells how the loop ended)."""
    if node.orelse or not node.body or not _is_exit_guard(node.body[0]):
        return None
    guard = node.body[0]
    if not pure(guard.test):
        return None
    rest = guard.orelse + node.body[1:]
    guard.orelse = []
    while rest and _is_exit_guard(rest[0]) and pure(rest[0].test):
        guard.test = templates.replace_as_expression(
            "first or second", first=guard.test, second=rest[0].test
        )
        rest = rest[0].orelse + rest[1:]
    node.body = [guard, *rest]
    return guard


# What the exit of a `for` may do before it breaks: it runs once, after the loop.
_EXIT_STATEMENTS = (gast.Assign, gast.AugAssign, gast.AnnAssign, gast.Expr, gast.Pass)


def _exit_guard(node: gast.For, pure) -> gast.If | None:
    """The `if C: <assignments>; break` that starts a `for` body (a `return` there is one, after
    the return pass), if there is one, `C` makes no effect (`pure`: it moves into the staged
    loop's condition) and the loop has no `else:` (which the flag tells)."""
    if node.orelse or not node.body:
        return None
    guard = node.body[0]
    if not (isinstance(guard, gast.If) and not guard.orelse and guard.body):
        return None
    if not pure(guard.test):
        return None
    *effects, last = guard.body
    if not isinstance(last, gast.Break):
        return None
    if not all(isinstance(stmt, _EXIT_STATEMENTS) for stmt in effects):
        return None
    if any(isinstance(n, gast.NamedExpr) for n in structure.walk_nodes(guard)):
        return None
    return guard


def _is_exit_guard(stmt: gast.stmt) -> bool:
    """`if C: break` (with or without an `else:`), the break a plain one (not a return's), and
    C without a `:=`, which binds in the function's scope: in the loop's test (a function of
    its own, once converted) it would bind there (the walrus pass turns `while (n := n - 1):`
    into `while True: if not (n := n - 1): break` for that reason)."""
    return (
        isinstance(stmt, gast.If)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], gast.Break)
        and not _is_return_break(stmt.body[0])
        and not any(isinstance(n, gast.NamedExpr) for n in structure.walk_nodes(stmt.test))
    )


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _BreakStatements(ctx.namer, lambda test: _pure(test, ctx.globals)).visit(fn_node)


# Builtins that compute a value from their arguments and do nothing else.
_PURE_BUILTINS = frozenset(
    {"abs", "len", "min", "max", "int", "float", "bool", "round", "sum", "any", "all"}
    | {"isinstance", "divmod", "pow", "complex"}
)


def _pure(test: gast.expr, globals_: dict) -> bool:
    """Whether evaluating `test` can make no effect: it calls only pure builtins and library
    functions that make none and take no function (JAX's, NumPy's: `jnp.abs(x)`), named
    through globals (`activity.reads_global`: not a local of the same name); no `:=`."""
    for node in structure.walk_nodes(test):
        if isinstance(node, gast.NamedExpr):
            return False
        if not isinstance(node, gast.Call):
            continue
        path, func = [], node.func
        while isinstance(func, gast.Attribute):
            path.append(func.attr)
            func = func.value
        if activity.reads_builtin(func, globals_, _PURE_BUILTINS):
            if path:
                return False
            continue
        if not activity.reads_global(func, globals_):
            return False  # a method of a value (`x.sum()`), a local function
        value = globals_[func.id]
        for attr in reversed(path):
            if not libraries.is_library(value) or not hasattr(value, attr):
                return False
            value = getattr(value, attr)
        if not libraries.is_library(value) or libraries.makes_effects(value):
            return False
        if libraries.takes_functions(value) is not False:
            return False  # `jax.tree.map(f, x)` runs what it is given
    return True


def _drop_return_breaks(stmts: list[gast.stmt]) -> list[gast.stmt]:
    """`stmts` without the loop's return breaks: each follows `do_return = True` in its block,
    or is the body of an `if do_return:` after an inner loop, which goes with it."""
    out = []
    for stmt in stmts:
        if _is_return_break(stmt):
            continue
        if (
            isinstance(stmt, gast.If)
            and not stmt.orelse
            and len(stmt.body) == 1
            and _is_return_break(stmt.body[0])
        ):
            continue
        for block in structure.blocks(stmt):
            if block.role is not structure.Role.LOOP_BODY:
                block.stmts = _drop_return_breaks(block.stmts)
        out.append(stmt)
    return out


def _is_return_break(stmt) -> bool:
    return isinstance(stmt, gast.Break) and anno.hasanno(stmt, anno.Static.RETURN_BREAK)
