"""Rewrites list mutation into assignments, so a list a loop appends to becomes loop state.

    out.append(tok)         ->   out = rt__.list_append(out, tok)
    last = out.pop()        ->   out, last = rt__.list_pop(out)
    out.pop()               ->   out, _ = rt__.list_pop(out)
    y = jnp.stack(out)      ->   y = rt__.stack_list(jnp.stack, out)   (out is appended to here)

Only local names are rewritten: an assignment would make a global or closure variable local
(`self.items.append(x)` and `log.append(x)` for a global `log` are left alone). `stack`/`array`/
`asarray` calls are rewritten only for names this function appends to: a list built in a staged
loop is stacked at once instead of item by item. List comprehensions stay Python.
"""

from __future__ import annotations

import gast

from transpiler import templates
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.naming import RUNTIME, Namer
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = ("call:.append", "call:.pop")
ADDS = (gast.Assign, gast.Call)

_STACKERS = frozenset({"stack", "array", "asarray"})


def _method_call(node: gast.AST, method: str) -> gast.Call | None:
    """`node` if it is `<name>.<method>(...)`, else None."""
    if (
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, gast.Name)
        and not node.keywords
    ):
        return node
    return None


class _Lists(Transformer):
    def __init__(self, namer: Namer):
        self.namer = namer
        self.scopes: list[frozenset[str]] = []  # local names of the functions being visited
        self.appended: list[frozenset[str]] = []  # the local names they append to

    def visit_FunctionDef(self, node):
        self.scopes.append(activity.local_names(node))
        self.appended.append(
            frozenset(
                call.func.value.id
                for call in activity.walk_scope(node.body)
                if _method_call(call, "append") is not None
            )
            & self.scopes[-1]
        )
        node.body = [s for stmt in node.body for s in _as_list(self.visit(stmt))]
        self.scopes.pop()
        self.appended.pop()
        return node

    def _local(self, call: gast.Call | None) -> gast.Call | None:
        return call if call is not None and call.func.value.id in self.scopes[-1] else None

    def visit_Expr(self, node):
        node = self.generic_visit(node)
        append = self._local(_method_call(node.value, "append"))
        if append is not None and len(append.args) == 1:
            return templates.replace(
                f"target = {RUNTIME}.list_append(target, item)",
                target=append.func.value.id,
                item=append.args[0],
            )
        pop = self._local(_method_call(node.value, "pop"))
        if pop is not None:
            return self._pop(pop, self.namer.new("_"))
        return node

    def visit_Assign(self, node):
        node = self.generic_visit(node)
        pop = self._local(_method_call(node.value, "pop"))
        if pop is not None and len(node.targets) == 1:
            return self._pop(pop, node.targets[0])
        return node

    def _pop(self, call, item_target):
        stmt = templates.replace(
            f"target, item = {RUNTIME}.list_pop(target)",
            target=call.func.value.id,
            item=item_target,
        )
        stmt[0].value.args += call.args
        return stmt

    def visit_Call(self, node):
        node = self.generic_visit(node)
        func = node.func
        if (
            isinstance(func, gast.Attribute)
            and func.attr in _STACKERS
            and node.args
            and isinstance(node.args[0], gast.Name)
            and node.args[0].id in self.appended[-1]
        ):
            call = templates.replace_as_expression(
                f"{RUNTIME}.stack_list(stack, target)", stack=func, target=node.args[0]
            )
            call.args += node.args[1:]
            call.keywords = node.keywords
            return call
        return node


def _as_list(result) -> list:
    return result if isinstance(result, list) else [result]


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _Lists(ctx.namer).visit(fn_node)
