"""Marks the `and`/`or` expressions whose value is only tested for truth.

    if x > 0 and mask:        ->   rt__.if_stmt(rt__.and_(x > 0, lambda: mask, truth=True), ...)
    while i < 10 and not done ...

Python's `a and b` gives one of its operands, so with a traced `a` the staged result is one of
two arrays chosen in the graph, which must then share a shape and a dtype. Where the result is
only tested (the test of an `if`, a `while`, a ternary or an `assert`, the operand of `not`, a
comprehension's filter, an operand of such an `and`/`or`), its truth is all that counts, and
that is the `and`/`or` of its operands' truths whatever they are (a `bool[1]` counter test, a
float, `None`): marked TRUTH_TEST, the logical-expressions pass asks the runtime for only that.
The break pass marks the loop tests it writes (`not did_break and test`) itself.
"""

from __future__ import annotations

import gast

from transpiler import anno, structure
from transpiler.context import PassContext

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.BoolOp,)
ADDS = ()


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Annotates the tested `and`/`or` expressions of `fn_node`; changes nothing."""
    for node in structure.walk_nodes(fn_node):
        if isinstance(node, (gast.If, gast.While, gast.IfExp, gast.Assert)):
            mark(node.test)
        elif isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not):
            mark(node.operand)
        elif isinstance(node, gast.comprehension):
            for test in node.ifs:
                mark(test)
    return fn_node


def mark(test: gast.expr) -> None:
    """Marks `test`, if it is an `and`/`or`, and the `and`/`or` operands inside it."""
    todo = [test]
    while todo:
        node = todo.pop()
        if isinstance(node, gast.BoolOp):
            anno.setanno(node, anno.Static.TRUTH_TEST, True)
            todo.extend(node.values)
