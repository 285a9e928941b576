"""Gives state variables that may be unbound a placeholder, so the runtime can pass them around.

A converted statement passes its state in and out by name, so every state variable must hold a
value when the statement starts, even one Python has not bound yet (`step`, set in both branches
of an `if` inside a loop, is unbound when the first iteration reaches the `if`). Such a variable
starts as `rt__.Undefined('step')` where its function starts; where it may still be unbound, a
read goes through `rt__.ld`, which raises the UnboundLocalError Python would raise (where the
function as written binds it on every path, `rt__.ld(name, checked=False)` only unwraps it):

    def total(xs):                       def total(xs):
        t = 0.0                              step = rt__.Undefined('step')
        for x in xs:                         t = 0.0
            if x > 0:                ->      for x in xs:
                step = 2.0                       if x > 0: ...       (state: step)
            else:                                t = t + step        (bound here for sure)
                step = 1.0
            t = t + step

`del step` becomes `step = rt__.deleted(step, 'step')`, which raises as `del` would if `step` is
unbound, and `step += 1` first reads `step = rt__.ld(step)`. Names declared `global` or
`nonlocal` are left alone.
"""

from __future__ import annotations

import gast

from transpiler import analysis, anno, structure, templates
from transpiler.analysis import activity, reaching_definitions
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.passes import control_flow
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.If, gast.While, gast.For)
ADDS = (gast.Assign, gast.Call)

_A = anno.Static


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Rewrites `fn_node` and the functions nested in it."""
    analysis.analyze(fn_node)
    ctx.analyzed = fn_node  # for the control-flow pass, unless a placeholder goes in
    for scope in activity.function_scopes(fn_node):
        names = _possibly_unbound_state(scope)
        if names:
            ctx.analyzed = None
            _Reads(names).visit_scope(scope)
            # A parameter is bound where the function starts (a `del` may unbind it later).
            looped = _bound_in_loops(scope)
            inits = [
                _placeholder(scope, name, name in looped)
                for name in sorted(names - activity.params_of(scope.args))
            ]
            start = structure.docstring_length(scope.body)
            scope.body[start:start] = inits
    return fn_node


def _placeholder(scope: gast.FunctionDef, name: str, looped: bool) -> gast.stmt:
    """`name = rt__.Undefined('name')`; for a name a loop binds (`looped`), with `like=` the
    literal the function binds it to, where every binding of it is one (`converged = True`,
    `converged = False`): a staged loop then knows the type the variable will have without
    tracing its body first to see it."""
    like = _only_literals(scope, name) if looped else None
    if like is None:
        (stmt,) = templates.replace(
            f"name = {RUNTIME}.Undefined(label)", name=name, label=templates.constant(name)
        )
        return stmt
    (stmt,) = templates.replace(
        f"name = {RUNTIME}.Undefined(label, like=v)",
        name=name,
        label=templates.constant(name),
        v=templates.constant(like),
    )
    return stmt


def _bound_in_loops(scope: gast.FunctionDef) -> frozenset[str]:
    """The names bound in the bodies of the loops of `scope`."""
    return frozenset(
        node.id
        for loop in structure.walk_nodes(scope)
        if isinstance(loop, (gast.For, gast.While))
        for node in structure.walk_nodes(loop)
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store)
    )


def _only_literals(scope: gast.FunctionDef, name: str):
    """The zero of the one type (bool, int or float) of the literals every binding of `name`
    in `scope` (nested functions included) binds it to, each a plain `name = <literal>`; else
    None."""
    kinds = set()
    for stmt in structure.walk_all(scope.body):
        value = getattr(stmt, "value", None)
        plain = isinstance(stmt, gast.Assign) and len(stmt.targets) == 1
        if plain and structure.is_name(stmt.targets[0], name) and isinstance(value, gast.Constant):
            kinds.add(type(value.value))
        elif structure.binds(stmt, {name}):
            return None
    # (the type is what counts: its zero, which every dtype of the kind holds)
    return kinds.pop()() if len(kinds) == 1 and kinds <= {bool, int, float} else None


def _possibly_unbound_state(scope: gast.FunctionDef) -> frozenset[str]:
    """State names of this scope's converted statements that may be unbound when they start,
    or that a `del` in them unbinds (the statement's functions hand them out unbound: `if c:
    del y` leaves `y` unbound after the `if` where `c` holds)."""
    info = anno.getanno(scope, _A.SCOPE)
    declared = info.declared
    names = set()
    for node in structure.walk(scope.body):
        if control_flow.convertible(node):
            bound = anno.getanno(node, _A.DEFINITELY_DEFINED_IN)
            read = control_flow.read_inputs(node, info)
            names |= {n for n in read if n not in bound and n not in declared}
            names |= reaching_definitions.deleted_in([node]) - declared
    return frozenset(names)


class _Reads(Transformer):
    """Reads of the names where they may be unbound go through `rt__.ld`."""

    def __init__(self, names: frozenset[str]):
        self.names = names
        self.bound: frozenset[str] = frozenset()  # bound for sure at the current statement
        self.nested = 0  # inside a nested function, whose annotations are about its own scope

    def visit_scope(self, scope: gast.FunctionDef) -> None:
        scope.body = self.visit_block(scope.body)

    def visit(self, node):
        if (
            not self.nested
            and isinstance(node, gast.stmt)
            and anno.hasanno(node, _A.DEFINITELY_DEFINED_IN)
        ):
            outer, self.bound = self.bound, anno.getanno(node, _A.DEFINITELY_DEFINED_IN)
            try:
                return super().visit(node)
            finally:
                self.bound = outer
        return super().visit(node)

    def _visit_nested(self, node):
        # A nested function may run at any time: every read of the names is checked there.
        outer, self.bound = self.bound, frozenset()
        self.nested += 1
        try:
            return self.generic_visit(node)
        finally:
            self.bound = outer
            self.nested -= 1

    visit_FunctionDef = _visit_nested
    visit_Lambda = _visit_nested
    visit_ClassDef = _visit_nested

    def visit_Name(self, node):
        if isinstance(node.ctx, gast.Load) and node.id in self.names and node.id not in self.bound:
            return templates.replace_as_expression(_read(node), name=node.id)
        return node

    def visit_Delete(self, node):
        node = self.generic_visit(node)
        if not any(isinstance(t, gast.Name) and t.id in self.names for t in node.targets):
            return node
        out = []  # one statement per target, in order: `del a, b` stops at the first failure
        for target in node.targets:
            if isinstance(target, gast.Name) and target.id in self.names:
                out += templates.replace(
                    f"name = {RUNTIME}.deleted(name, label)",
                    name=target.id,
                    label=templates.constant(target.id),
                )
            else:
                out.append(gast.Delete(targets=[target]))
        return out

    def visit_AugAssign(self, node):
        node = self.generic_visit(node)
        name = node.target.id if isinstance(node.target, gast.Name) else None
        if name in self.names and name not in self.bound:
            return templates.replace(f"name = {_read(node.target)}", name=name) + [node]
        return node


def _read(name: gast.Name) -> str:
    """How generated code reads `name` where the converted code may hold it unbound: checked,
    unless Python's own scoping proves it bound there (the early-exit passes hid that)."""
    if anno.hasanno(name, _A.BOUND_IN_SOURCE):
        return f"{RUNTIME}.ld(name, checked=False)"
    return f"{RUNTIME}.ld(name)"
