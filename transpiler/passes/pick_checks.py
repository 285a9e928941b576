"""Adds `rt__.let_go()` before the stores and returns of a function that picks with `min`,
`max` or `sorted` (or `.sort`).

With traced keys such a pick is a new object, made by selects, where Python's is one of the
items; the runtime watches the items and the new object (`runtime.identity`) and refuses a
change that could show through one but not the other. It looks at them at every call and
staged statement; these checks are the places in straight-line code where what it finds is
exact: before a store, a pick nothing holds any more (a temporary: `min(ps, key=f)["w"]`, or
`del best`) is let go of, so the store may change the items; before a return, while the
function's names still count, a pick whose items nothing else holds may have been changed
(`best = min(cands, key=f); best["w"] += 1; return best`), and a change made and undone with the
very object it replaced (`old = p["w"]; p["w"] = 2 * old; ...; p["w"] = old`) is found before
it is undone.

    best["w"] = v     ->   rt__.let_go()
                           best["w"] = v
    return best       ->   rt__.let_go()
                           return best
"""

from __future__ import annotations

import gast

from transpiler import structure, templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass (features.py).
APPLIES_TO = ("call:min", "call:max", "call:sorted", "call:.sort")  # (`_picks` tells more)
ADDS = (gast.Call,)

_STORES = (gast.Subscript, gast.Attribute)


class _PickChecks(Transformer):
    def visit_FunctionDef(self, node):
        node = self.generic_visit(node)
        if not isinstance(node.body[-1], gast.Return):
            node.body.append(_check(node.body[-1]))
        return node

    def visit_Return(self, node):
        return [_check(node), node]

    def visit_Assign(self, node):
        return [_check(node), node] if any(_stores(t) for t in node.targets) else node

    def visit_AugAssign(self, node):
        return [_check(node), node] if _stores(node.target) else node

    def visit_AnnAssign(self, node):
        return [_check(node), node] if node.value is not None and _stores(node.target) else node

    def visit_Delete(self, node):
        return [_check(node), node] if any(_stores(t) for t in node.targets) else node


def _stores(target: gast.expr) -> bool:
    """Whether assigning to `target` changes an object in place (an item, an attribute)."""
    if isinstance(target, (gast.Tuple, gast.List)):
        return any(_stores(t) for t in target.elts)
    if isinstance(target, gast.Starred):
        return _stores(target.value)
    return isinstance(target, _STORES)


def _check(at: gast.stmt) -> gast.stmt:
    (stmt,) = templates.replace(f"{RUNTIME}.let_go()")
    return gast.copy_location(stmt, at)


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    if not any(_picks(node) for node in structure.walk_nodes(fn_node)):
        return fn_node  # (what `APPLIES_TO` tells the pipeline, for a run of every pass)
    return _PickChecks().visit(fn_node)


def _picks(node: gast.AST) -> bool:
    """Whether `node` is a call of `min`, `max`, `sorted` or a list's `.sort` (keywords only:
    not `jnp.sort(x)`)."""
    if not isinstance(node, gast.Call):
        return False
    func = node.func
    if isinstance(func, gast.Name):
        return func.id in _PICKERS
    return isinstance(func, gast.Attribute) and func.attr == "sort" and not node.args


_PICKERS = frozenset({"min", "max", "sorted"})
