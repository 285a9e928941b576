"""Rewrites `:=` that is evaluated lazily, or in a loop test, into statements.

Later passes move lazy operands into thunks (`rt__.and_(a, lambda: b)`) and loop tests into
functions, where a `:=` would bind in the thunk, not in the user's function. So an `and`/`or`
operand, a branch of `a if p else b` or a later comparison of a chain that holds a `:=` becomes an
`if` statement, and what is evaluated before it in the same statement is evaluated first, into
temporaries, as Python would; a `while` whose test holds a `:=` tests it in its body:

    z = x > 0 and (y := x * 2) > 1        and_value = x > 0
                                    ->    if and_value:
                                              and_value = (y := x * 2) > 1
                                          z = and_value

    while (n := n - 1) > 0:               while True:
        c += 1                      ->        if not (n := n - 1) > 0:
                                                  break
                                              c += 1

Staged, the `if` is a `lax.cond`: `y` is assigned on the paths that assign it, and nowhere else.
"""

from __future__ import annotations

import gast

from transpiler import anno, structure, templates
from transpiler.context import PassContext
from transpiler.errors import ConversionError
from transpiler.passes import logical_expressions
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.NamedExpr,)
ADDS = (gast.If, gast.While, gast.Break, gast.Assign, gast.UnaryOp, gast.BoolOp, gast.Compare)


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _AssignmentExpressions(ctx).visit(fn_node)


def _binds(node: gast.AST) -> bool:
    """Whether `node` holds a `:=` (lambdas included: the pass refuses those)."""
    return any(isinstance(n, gast.NamedExpr) for n in structure.walk_nodes(node))


def _lazy_parts(node: gast.AST) -> list[gast.expr]:
    """The operands of `node` that Python may not evaluate."""
    if logical_expressions.conditional_idiom(node):
        return [node.values[0].values[1], node.values[1]]
    if isinstance(node, gast.BoolOp):
        return node.values[1:]
    if isinstance(node, gast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, gast.Compare):
        return node.comparators[1:]
    return []


def _is_lazy_binding(node: gast.AST) -> bool:
    return any(_binds(part) for part in _lazy_parts(node))


def _evaluation_order(node: gast.expr) -> list[gast.expr]:
    """The sub-expressions of `node` that Python evaluates before `node` itself, in order."""
    if isinstance(node, gast.Call):
        return [node.func, *node.args, *(k.value for k in node.keywords)]
    if isinstance(node, gast.Dict):
        pairs = zip(node.keys, node.values)
        return [e for key, value in pairs for e in (key, value) if e is not None]
    if isinstance(node, gast.Compare):
        return [node.left, *node.comparators]
    fields = {
        gast.BinOp: ("left", "right"),
        gast.UnaryOp: ("operand",),
        gast.BoolOp: ("values",),
        gast.IfExp: ("test", "body", "orelse"),
        gast.Attribute: ("value",),
        gast.Subscript: ("value", "slice"),
        gast.Slice: ("lower", "upper", "step"),
        gast.Starred: ("value",),
        gast.NamedExpr: ("value",),
        gast.Tuple: ("elts",),
        gast.List: ("elts",),
        gast.Set: ("elts",),
        gast.JoinedStr: ("values",),
        gast.FormattedValue: ("value", "format_spec"),
    }.get(type(node), ())
    out = []
    for field in fields:
        value = getattr(node, field)
        out += value if isinstance(value, list) else [value] if value is not None else []
    return out


class _AssignmentExpressions(Transformer):
    def __init__(self, ctx: PassContext):
        self.namer = ctx.namer

    def generic_visit(self, node):
        if isinstance(node, gast.stmt):
            for block in structure.scope_blocks(node):
                block.stmts = self.visit_block(block.stmts)
            return self._statement(node)
        return node

    def visit_While(self, node):
        if _binds(node.test):
            # Tested in the body, where `:=` binds in the function like any statement.
            test = templates.replace("if not test:\n    break", test=node.test)
            node.test = templates.constant(True)
            node.body = test + node.body
            if node.orelse:
                # The else block runs when the test fails, not when the body breaks.
                exhausted = self.namer.new("test_failed")
                test[0].body = templates.replace("flag = True", flag=exhausted) + test[0].body
                after = templates.replace(
                    "if flag:\n    orelse", flag=exhausted, orelse=node.orelse
                )
                node.orelse = []
                return self.visit_block(
                    templates.replace("flag = False", flag=exhausted) + [node] + after
                )
        return self.generic_visit(node)

    # Statement by statement: the expressions it evaluates, in order, and where each goes back.

    def _statement(self, node: gast.stmt):
        for field in _EAGER_FIELDS.get(type(node), ()):
            value = getattr(node, field)
            if value is not None and any(_is_lazy_binding(n) for n in structure.walk_nodes(value)):
                if isinstance(node, gast.AugAssign) and _rebinds_target(node):
                    self._refuse(node, f"that rebinds {node.target.id!r} in its own += value")
                before, value = self._linearize(value)
                setattr(node, field, value)
                # The statements may hold more of the same (`a and (b or (y := c))`), and so may
                # what is left of this one.
                return self.visit_block(before) + _as_list(self._statement(node))
        if isinstance(node, gast.Assert) and node.msg is not None and _binds(node.msg):
            self._refuse(node, "in an assert message")
        for expr in _own_expressions(node):
            if any(_is_lazy_binding(n) for n in structure.walk_nodes(expr)):
                self._refuse(node, "inside and/or/if-else here")
        return node

    def _refuse(self, node, where):
        origin = None
        if anno.hasanno(node, anno.Static.ORIGIN):
            origin = anno.getanno(node, anno.Static.ORIGIN)
        raise ConversionError(
            f"an assignment expression (:=) {where} cannot be converted",
            origin,
            "Assign the value in a statement of its own before this one.",
        )

    def _linearize(self, node: gast.expr) -> tuple[list[gast.stmt], gast.expr]:
        """(statements, expression) that evaluate `node` as Python would, with the first lazy
        `:=` (in evaluation order) turned into statements."""
        if isinstance(
            node, (gast.Lambda, gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)
        ):
            if any(_is_lazy_binding(n) for n in structure.walk_nodes(node)):
                self._refuse(node, "inside and/or/if-else in a lambda or a comprehension")
            return [], node
        if _is_lazy_binding(node):
            return self._desugar(node)
        parts = _evaluation_order(node)
        for i, part in enumerate(parts):
            if any(_is_lazy_binding(n) for n in structure.walk_nodes(part)):
                before = []
                for earlier in parts[:i]:  # evaluated first, into temporaries
                    if not isinstance(earlier, gast.Constant):
                        before += self._hoist(node, earlier)
                inner, new_part = self._linearize(part)
                _replace_child(node, part, new_part)
                return before + inner, node
        return [], node

    def _hoist(self, parent, child) -> list[gast.stmt]:
        name = self.namer.new("value")
        _replace_child(parent, child, templates.name(name))
        return templates.replace("name = value", name=name, value=child)

    def _desugar(self, node) -> tuple[list[gast.stmt], gast.expr]:
        if logical_expressions.conditional_idiom(node):
            # `b` where `a` and `b` are true, else `c`: one value, as the logical-expressions
            # pass makes it (not `a and b`, a bool or `b`, then `or`).
            result = self.namer.new("chosen")
            (a, b), c = node.values[0].values, node.values[1]
            stmts = templates.replace(
                "if a:\n    result = b\n    if not result:\n        result = c\n"
                "else:\n    result = c",
                a=a,
                b=b,
                c=c,
                result=result,
            )
        elif isinstance(node, gast.BoolOp):
            is_and = isinstance(node.op, gast.And)
            result = self.namer.new("and_value" if is_and else "or_value")
            rest = node.values[1:]
            right = rest[0] if len(rest) == 1 else gast.BoolOp(op=node.op, values=rest)
            template = "result = left\nif result:\n    result = right"
            if not is_and:
                template = "result = left\nif not result:\n    result = right"
            stmts = templates.replace(template, result=result, left=node.values[0], right=right)
        elif isinstance(node, gast.IfExp):
            result = self.namer.new("if_value")
            stmts = templates.replace(
                "if test:\n    result = body\nelse:\n    result = orelse",
                test=node.test,
                result=result,
                body=node.body,
                orelse=node.orelse,
            )
        else:  # a chain a < b < c whose later comparisons hold a `:=`
            result = self.namer.new("comparison")
            left, right = self.namer.new("left"), self.namer.new("right")
            first = gast.Compare(
                left=templates.name(left), ops=node.ops[:1], comparators=[templates.name(right)]
            )
            rest = gast.Compare(
                left=templates.name(right), ops=node.ops[1:], comparators=node.comparators[1:]
            )
            stmts = templates.replace(
                "left = a\nright = b\nresult = first\nif result:\n    result = rest",
                left=left,
                right=right,
                a=node.left,
                b=node.comparators[0],
                result=result,
                first=first,
                rest=rest,
            )
        return stmts, templates.name(result)


_EAGER_FIELDS = {
    gast.Expr: ("value",),
    gast.Return: ("value",),
    gast.Assign: ("value",),
    gast.AugAssign: ("value",),
    gast.AnnAssign: ("value",),
    gast.If: ("test",),
    gast.For: ("iter",),
    gast.Raise: ("exc", "cause"),
    gast.Match: ("subject",),
    gast.Assert: ("test",),
}


def _own_expressions(node: gast.stmt):
    """The expressions a statement holds itself (its nested statements' excluded)."""
    stack = [node]
    while stack:
        current = stack.pop()
        for _, value in gast.iter_fields(current):
            for item in _as_list(value):
                if isinstance(item, gast.expr):
                    yield item
                elif isinstance(item, gast.AST) and not isinstance(item, gast.stmt):
                    stack.append(item)  # a handler, a case, a with item, arguments, ...


def _rebinds_target(node: gast.AugAssign) -> bool:
    return isinstance(node.target, gast.Name) and any(
        isinstance(n, gast.NamedExpr) and n.target.id == node.target.id
        for n in structure.walk_nodes(node.value)
    )


_SCOPES = (gast.Lambda, gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _replace_child(parent: gast.AST, old: gast.AST, new: gast.AST) -> None:
    for field, value in gast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
                if isinstance(item, gast.keyword) and item.value is old:
                    item.value = new
                    return
    raise AssertionError(f"{old!r} is not a child of {parent!r}")
