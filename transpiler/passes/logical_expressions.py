"""Rewrites `and`, `or`, `not` and chained comparisons into `rt__.and_/or_/not_` calls.

The right operand becomes a thunk, so Python values keep Python's short-circuit semantics:

    a or b or c      ->   rt__.or_(a, lambda: rt__.or_(b, lambda: c))
    a and b or c     ->   rt__.and_or(a, lambda: b, lambda: c)  (`b if a and b else c`)
    a and f(x)       ->   rt__.and_(a, lambda: rt__.call(f, x), lazy=True)   (user code: a cond)
    if a and b:      ->   if rt__.and_(a, lambda: b, truth=True):  (only its truth is tested)
    not x            ->   rt__.not_(x)
    0 < x < 1        ->   rt__.and_(0 < x, lambda: x < 1)
    0 < x < f(x)     ->   rt__.and_(0 < x, lambda: x < rt__.call(f, x), lazy=True)
    c in xs          ->   rt__.in_(c, xs)                 (a traced array: jnp.any(xs == c))
    a is b           ->   rt__.is_(a, b)      (`x is None`, with a constant, stays as it is)
    a < f(x) < c     ->   rt__.and_(a < (cmp := f(x)), lambda: cmp < c)

A middle operand of a chain is evaluated once, as in Python: a name or constant is simply
repeated, anything else is bound to a fresh name with `:=` on first use.
"""

from __future__ import annotations

import gast

from transpiler import anno, structure, templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME, Namer
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.BoolOp, gast.UnaryOp, gast.Compare)
ADDS = (gast.Call, gast.Lambda, gast.NamedExpr)


class _LogicalExpressions(Transformer):
    def __init__(self, namer: Namer):
        self.namer = namer

    def visit_BoolOp(self, node):
        tested = anno.hasanno(node, anno.Static.TRUTH_TEST)
        if not tested and conditional_idiom(node):
            return self._conditional(node)
        node = self.generic_visit(node)
        op = "and_" if isinstance(node.op, gast.And) else "or_"
        result = node.values[-1]
        for left in reversed(node.values[:-1]):
            options = []
            if may_have_effects(result):
                # Staged, it is evaluated only where Python would (a cond), not alongside.
                options.append("lazy=True")
            if tested:  # only its truth counts (see the truth-tests pass)
                options.append("truth=True")
            arguments = ", ".join(["left", "lambda: right", *options])
            result = templates.replace_as_expression(
                f"{RUNTIME}.{op}({arguments})", left=left, right=result
            )
        return result

    def _conditional(self, node):
        """`a and b or c` -> `rt__.and_or(a, lambda: b, lambda: c)`: `b` if `a` and `b` are
        true, else `c` (with a traced `a`, one of two values of one type, where `a and b`
        alone would be a bool or `b`)."""
        (a, b), c = [self.visit(v) for v in node.values[0].values], self.visit(node.values[1])
        options = []
        if may_have_effects(b):
            options.append("lazy=True")
        if may_have_effects(c):
            options.append("lazy_else=True")
        arguments = ", ".join(["a", "lambda: b", "lambda: c", *options])
        return templates.replace_as_expression(f"{RUNTIME}.and_or({arguments})", a=a, b=b, c=c)

    def visit_UnaryOp(self, node):
        node = self.generic_visit(node)
        if not isinstance(node.op, gast.Not):
            return node
        return templates.replace_as_expression(f"{RUNTIME}.not_(operand)", operand=node.operand)

    def visit_Compare(self, node):
        node = self.generic_visit(node)
        if len(node.ops) == 1:
            return _comparison(node.left, node.ops[0], node.comparators[0])
        # Python evaluates each middle operand once: bind the non-trivial ones on first use.
        operands = [node.left]
        for middle in node.comparators[:-1]:
            if isinstance(middle, (gast.Name, gast.Constant)):
                operands.append(middle)
            else:
                operands.append(
                    gast.NamedExpr(
                        target=templates.name(self.namer.new("cmp"), gast.Store()), value=middle
                    )
                )
        operands.append(node.comparators[-1])
        comparisons = []
        for i, op in enumerate(node.ops):
            left = operands[i]
            if isinstance(left, gast.NamedExpr):
                left = templates.name(left.target.id)
            comparisons.append(_comparison(left, op, operands[i + 1]))
        result = comparisons[-1]
        for comparison in reversed(comparisons[:-1]):
            template = f"{RUNTIME}.and_(left, lambda: right)"
            if may_have_effects(result):  # `0 < x < f(x)`: f is called only where 0 < x
                template = f"{RUNTIME}.and_(left, lambda: right, lazy=True)"
            result = templates.replace_as_expression(template, left=comparison, right=result)
        return result


def conditional_idiom(node: gast.AST) -> bool:
    """Whether `node` is `a and b or c` (each operand itself any expression)."""
    return (
        isinstance(node, gast.BoolOp)
        and isinstance(node.op, gast.Or)
        and len(node.values) == 2
        and isinstance(node.values[0], gast.BoolOp)
        and isinstance(node.values[0].op, gast.And)
        and len(node.values[0].values) == 2
    )


def may_have_effects(node: gast.expr) -> bool:
    """Whether evaluating `node` may do more than compute a value: it calls user code
    (`rt__.call(...)`, or a plain function name). Library calls (`jnp.any(x)`) do not."""
    for child in structure.walk_nodes(node):
        if isinstance(child, gast.Call):
            func = child.func
            if isinstance(func, gast.Name):
                return True
            if (
                isinstance(func, gast.Attribute)
                and isinstance(func.value, gast.Name)
                and func.value.id == RUNTIME
                and func.attr in ("call", "print_", "assert_")
            ):
                return True
    return False


def _comparison(left: gast.expr, op: gast.cmpop, right: gast.expr) -> gast.expr:
    """`left <op> right`; `in` and `not in` as runtime calls (a traced array is a container)."""
    if isinstance(op, (gast.In, gast.NotIn)):
        function = "in_" if isinstance(op, gast.In) else "not_in"
        return templates.replace_as_expression(
            f"{RUNTIME}.{function}(item, container)", item=left, container=right
        )
    if isinstance(op, (gast.Is, gast.IsNot)) and not (
        isinstance(left, gast.Constant) or isinstance(right, gast.Constant)
    ):
        function = "is_" if isinstance(op, gast.Is) else "is_not"
        return templates.replace_as_expression(f"{RUNTIME}.{function}(a, b)", a=left, b=right)
    return gast.Compare(left=left, ops=[op], comparators=[right])


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _LogicalExpressions(ctx.namer).visit(fn_node)
