"""Adds `rt__.let_go()` checks to a function that picks with `min`, `max` or `sorted` (or
`.sort`): before each store into an item or attribute, each `return`, and each statement after
which a variable a pick was assigned to is never read again.

With traced keys such a pick is a new object, made by selects, where Python's is one of the
items; the runtime watches the items and the new object (`runtime.identity`) and refuses a
change that could show through one but not the other. It looks at them at every call and
staged statement; these checks are the places in straight-line code where what it finds is
exact:

- before a store, a pick nothing holds any more (a temporary: `min(ps, key=f)["w"]`, or `del
  best`) is let go of, so that the store may change the items; and a change made and undone
  with the very object it replaced (`old = p["w"]; p["w"] = 2 * old; ...; p["w"] = old`) is
  found before it is undone;
- before a return, while the function's names still count, a pick whose items nothing else
  holds may have been changed (`best = min(cands, key=f); best["w"] += 1; return best`);
- where a pick's variable is read for the last time (liveness), the check is given its value,
  which then does not count as a holder (`best = min(ps, key=f); bw = best["w"]`, then every
  item moved: exact). Only where the statement before read or bound the variable: it is bound.

    best = min(ps, key=f)   ->   best = min(ps, key=f)
    bw = best["w"]               bw = best["w"]
    ps[0]["w"] = bw              rt__.let_go(best)
                                 ps[0]["w"] = bw
"""

from __future__ import annotations

import gast

from transpiler import anno, structure, templates
from transpiler.analysis import activity, liveness
from transpiler.context import PassContext
from transpiler.naming import RUNTIME

# What the pipeline looks for before running this pass (features.py; `_picks` tells more).
APPLIES_TO = ("call:min", "call:max", "call:sorted", "call:.sort")
ADDS = (gast.Call,)

_A = anno.Static
_STORES = (gast.Subscript, gast.Attribute)
_PICKERS = frozenset({"min", "max", "sorted"})


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    if not any(_picks(node) for node in structure.walk_nodes(fn_node)):
        return fn_node  # (what `APPLIES_TO` tells the pipeline, for a run of every pass)
    activity.analyze(fn_node)
    liveness.analyze(fn_node)
    _function(fn_node)
    return fn_node


def _function(fn: gast.FunctionDef) -> None:
    picked = frozenset(_picked_names(fn))
    fn.body = _block(fn.body, picked)
    if not isinstance(fn.body[-1], gast.Return):
        fn.body.append(_check(fn.body[-1], ()))


def _block(stmts: list[gast.stmt], picked: frozenset[str]) -> list[gast.stmt]:
    out: list[gast.stmt] = []
    previous = None
    for stmt in stmts:
        if isinstance(stmt, gast.FunctionDef):
            _function(stmt)
        for block in structure.blocks(stmt):
            block.stmts = _block(block.stmts, picked)
        if isinstance(stmt, gast.For) and _a_store(stmt.target):
            stmt.body.insert(0, _check(stmt, ()))  # `for ps[0]["w"] in ...`: each iteration
        unread = _unread_after(previous, stmt, picked)
        if unread or _stores(stmt) or isinstance(stmt, gast.Return):
            out.append(_check(stmt, unread))
        out.append(stmt)
        previous = stmt
    return out


def _unread_after(previous: gast.stmt | None, stmt: gast.stmt, picked) -> tuple[str, ...]:
    """The variables of `picked` that `previous`, a simple statement, read or bound, and that
    are never read from `stmt` on: bound, and dead."""
    if previous is None or not picked or any(structure.blocks(previous)):
        return ()
    if isinstance(previous, (gast.Delete, gast.FunctionDef, gast.ClassDef)):
        return ()
    act = anno.getanno(previous, _A.ACTIVITY)
    live = anno.getanno(stmt, _A.LIVE_IN)
    touched = (act.reads | act.bound) & picked
    return tuple(sorted(name for name in touched if name not in live))


def _picked_names(fn: gast.FunctionDef) -> set[str]:
    """The names `fn`'s own statements assign a pick to (`best = min(...)`, `top =
    sorted(...)[0]`)."""
    found = set()
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (gast.FunctionDef, gast.ClassDef, gast.Lambda)):
            continue  # a scope of its own
        if isinstance(node, gast.Assign) and _a_pick(node.value):
            found.update(t.id for t in node.targets if isinstance(t, gast.Name))
        stack.extend(structure.children(node))
    return found


def _a_pick(value: gast.expr) -> bool:
    while isinstance(value, gast.Subscript):
        value = value.value
    return _picks(value)


def _picks(node: gast.AST) -> bool:
    """Whether `node` is a call of `min`, `max`, `sorted` or a list's `.sort` (keywords only:
    not `jnp.sort(x)`)."""
    if not isinstance(node, gast.Call):
        return False
    func = node.func
    if isinstance(func, gast.Name):
        return func.id in _PICKERS
    return isinstance(func, gast.Attribute) and func.attr == "sort" and not node.args


def _stores(stmt: gast.stmt) -> bool:
    """Whether `stmt` changes an object in place by assigning to (or deleting) an item or an
    attribute, or by an augmented assignment."""
    if isinstance(stmt, (gast.Assign, gast.Delete)):
        return any(_a_store(t) for t in stmt.targets)
    if isinstance(stmt, gast.AugAssign):
        return True  # `p0 |= {...}`, `xs += [v]`: a name's list or dict, changed in place
    if isinstance(stmt, gast.AnnAssign):
        return stmt.value is not None and _a_store(stmt.target)
    return False


def _a_store(target: gast.expr) -> bool:
    if isinstance(target, (gast.Tuple, gast.List)):
        return any(_a_store(t) for t in target.elts)
    if isinstance(target, gast.Starred):
        return _a_store(target.value)
    return isinstance(target, _STORES)


def _check(at: gast.stmt, unread: tuple[str, ...]) -> gast.stmt:
    (stmt,) = templates.replace(f"{RUNTIME}.let_go({', '.join(unread)})")
    gast.copy_location(stmt, at)
    if anno.hasanno(at, _A.ORIGIN):
        anno.setanno(stmt, _A.ORIGIN, anno.getanno(at, _A.ORIGIN))
    return stmt
