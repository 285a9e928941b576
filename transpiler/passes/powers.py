"""Rewrites `a ** b` into `rt__.pow_(a, b)`: Python's type of a power of two ints.

A Python int carried into staged code becomes a weakly typed int32 array, and JAX's power of two
ints is an int whatever the exponent's sign, where Python's is a float for a negative one
(`2 ** -3` is 0.125, not 0). `rt__.pow_` is `**` for everything else.

    y = 2 ** -k   ->   y = rt__.pow_(2, -k)
    k **= n       ->   k = rt__.pow_(k, n)
    y = x ** 2    ->   y = x ** 2             (a constant exponent >= 0, or a float: one type)
"""

from __future__ import annotations

import gast

from transpiler import structure, templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Pow,)
ADDS = (gast.Call,)


class _Powers(Transformer):
    def visit_BinOp(self, node):
        node = self.generic_visit(node)
        if not isinstance(node.op, gast.Pow) or typed_alike(node.right):
            return node
        return _power(node.left, node.right)

    def visit_AugAssign(self, node):
        node = self.generic_visit(node)
        if not isinstance(node.op, gast.Pow) or typed_alike(node.value):
            return node
        if not _plain_target(node.target):
            return node  # `f().n **= 2`, `a[g()] **= 2`: the target would be evaluated twice
        load = _as_load(templates.clone(node.target))
        assign = gast.Assign(targets=[node.target], value=_power(load, node.value))
        return gast.copy_location(assign, node)


def _plain_target(target: gast.expr) -> bool:
    """A name, or an attribute or item of one by a name or a constant (`self.scale`, `v[0]`,
    `d[k]`): read again, it is the same place, and reading it has no effect of its own."""
    if isinstance(target, gast.Name):
        return True
    if isinstance(target, gast.Attribute):
        return isinstance(target.value, gast.Name)
    if isinstance(target, gast.Subscript):
        return isinstance(target.value, gast.Name) and isinstance(
            target.slice, (gast.Name, gast.Constant)
        )
    return False


def _as_load(target: gast.expr) -> gast.expr:
    for node in structure.walk_nodes(target):
        if hasattr(node, "ctx"):
            node.ctx = gast.Load()
    return target


def typed_alike(exponent: gast.expr) -> bool:
    """Whether Python and JAX give a power to `exponent` one type whatever the base: a constant
    float, or an int >= 0 (`x ** 2` stays as written)."""
    if not isinstance(exponent, gast.Constant) or type(exponent.value) not in (int, float):
        return False
    return type(exponent.value) is float or exponent.value >= 0


def _power(base: gast.expr, exponent: gast.expr) -> gast.expr:
    return templates.replace_as_expression(
        f"{RUNTIME}.pow_(base, exponent)", base=base, exponent=exponent
    )


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _Powers().visit(fn_node)
