"""Rewrites `print(...)` into `rt__.print_(...)`: Python's print, or JAX's debug print when traced.

    print("loss", loss, sep=": ")   ->   rt__.print_("loss", loss, sep=": ")
    print(f"x={x:.3f}")             ->   rt__.print_(rt__.fstring('x=', (x, '', '.3f')))
    raise ValueError(f"bad {x}")    ->   raise ValueError(rt__.fstring('bad ', (x, '', '')))
    fh.write(f"x={x}")              ->   fh.write(rt__.fstring('x=', (x, '', '')))

Only calls of the builtin `print` are rewritten (not a local or global named `print`). Text made
from values among their arguments (f-strings, `%`, `.format`, `str()`), and in the exception of
a `raise`, and in what is written with a stream's or a logger's method (`fh.write`,
`log.info`), is made by runtime calls that keep traced values apart from the text, so a staged
print shows their values, not the tracers. So is text assigned to a name that is only printed,
raised or asserted (`msg = f"loss {loss}"; print(msg)`); where no traced value is in it, it is
the same `str`. Text used anywhere else stays Python's.
"""

from __future__ import annotations

import gast

from transpiler import naming, structure, templates
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Rewriter, Transformer

# Methods that write text to the host, which staged code calls when the program runs (see
# `transpiler.libraries.host_effect`): a stream's `fh.write(f"loss {loss}")`, a logger's
# `log.info(...)`. Their text is made as a print's is; called on another object (a method of the
# user's named `write`), text with no traced value in it is the same str, and one with traced
# values the same text (a tracer's) that Python's formatting gives.
_WRITING_METHODS = frozenset(
    {"write", "writelines", "debug", "info", "warning", "warn", "error", "exception", "critical"}
)


# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (
    "call:print",
    gast.Assert,
    gast.Raise,
    gast.JoinedStr,
    "call:str",
    "call:repr",
    "call:.format",
    *(f"call:.{method}" for method in sorted(_WRITING_METHODS)),
)
ADDS = (gast.Call,)


class _PrintStatements(Transformer):
    def __init__(self, globals_: dict):
        self.globals = globals_

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if activity.reads_builtin(node.func, self.globals, ("print",)):
            node.func = templates.replace_as_expression(f"{RUNTIME}.print_")
            node.args = [_Text(self.globals).visit(arg) for arg in node.args]
        elif _writes_text(node):
            node.args = [_Text(self.globals).visit(arg) for arg in node.args]
        return node

    def visit_Assert(self, node):
        # A traced assert fails when the program runs: its message is made then.
        node = self.generic_visit(node)
        if node.msg is not None:
            node.msg = _Text(self.globals).visit(node.msg)
        return node

    def visit_Raise(self, node):
        # Raised under a traced condition, the message is made when the program raises it.
        node = self.generic_visit(node)
        if node.exc is not None:
            node.exc = _Text(self.globals).visit(node.exc)
        return node


def _writes_text(call: gast.Call) -> bool:
    return isinstance(call.func, gast.Attribute) and call.func.attr in _WRITING_METHODS


class _Text(Rewriter):
    """Text made from values, kept apart from them (see `runtime.text`):

    f"a {x!r:>8}"      ->  rt__.fstring('a ', (x, 'r', '>8'))
    "%d items" % n     ->  rt__.percent('%d items', n)
    "{}".format(x)     ->  rt__.format_('{}', x)
    str(x), repr(x)    ->  rt__.str_(x), rt__.repr_(x)
    format(x, ".2f")   ->  rt__.fstring((x, '', '.2f'))     (what f"{x:.2f}" is)
    """

    def __init__(self, globals_: dict, in_printed_assignment: bool = False):
        self.globals = globals_
        # Text assigned to names only printed, raised or asserted (`msg = "n %d" % n; print(
        # msg)`): made as a print's is, but `str()` of more than one argument stays Python's.
        self.in_printed_assignment = in_printed_assignment

    def visit_Call(self, node):
        node = self.generic_visit(node)
        func = node.func
        one_argument = len(node.args) == 1 and not node.keywords
        if activity.reads_builtin(func, self.globals, ("str", "repr")) and (
            one_argument or not self.in_printed_assignment
        ):
            node.func = templates.replace_as_expression(f"{RUNTIME}.{func.id}_")
        elif (
            activity.reads_builtin(func, self.globals, ("format",))
            and 1 <= len(node.args) <= 2
            and not node.keywords
            and not any(isinstance(a, gast.Starred) for a in node.args)
        ):
            spec = node.args[1] if len(node.args) == 2 else templates.constant("")
            field = gast.Tuple(elts=[node.args[0], templates.constant(""), spec], ctx=gast.Load())
            node.func = templates.replace_as_expression(f"{RUNTIME}.fstring")
            node.args = [field]
        elif (
            isinstance(func, gast.Attribute)
            and func.attr == "format"
            and isinstance(func.value, gast.Constant)
            and isinstance(func.value.value, str)
        ):
            node.args = [func.value, *node.args]
            node.func = templates.replace_as_expression(f"{RUNTIME}.format_")
        return node

    def visit_BinOp(self, node):
        node = self.generic_visit(node)
        if _percent_of_text(node):
            return templates.replace_as_expression(
                f"{RUNTIME}.percent(text, values)", text=node.left, values=node.right
            )
        return node

    def visit_JoinedStr(self, node):
        node = self.generic_visit(node)
        parts = []
        for value in node.values:
            if isinstance(value, gast.FormattedValue):
                conversion = chr(value.conversion) if value.conversion > 0 else ""
                spec = value.format_spec if value.format_spec is not None else ""
                spec = spec if isinstance(spec, gast.expr) else templates.constant(spec)
                field = [value.value, templates.constant(conversion), spec]
                parts.append(gast.Tuple(elts=field, ctx=gast.Load()))
            else:
                parts.append(value)
        call = templates.replace_as_expression(f"{RUNTIME}.fstring()")
        call.args = parts
        return call

    def visit_FormattedValue(self, node):
        # The format spec of a field is itself a JoinedStr: `f"{x:{width}}"`.
        if node.format_spec is not None:
            node.format_spec = self.visit(node.format_spec)
        node.value = self.visit(node.value)
        return node


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    fn_node = _PrintStatements(ctx.globals).visit(fn_node)
    text = _Text(ctx.globals, in_printed_assignment=True)
    for assignment in _printed_text_assignments(fn_node, ctx.globals):
        assignment.value = text.visit(assignment.value)
    return fn_node


def _printed_text_assignments(fn_node: gast.FunctionDef, globals_: dict) -> list[gast.stmt]:
    """The assignments `name = <text>` (`name += <text>`) of the names whose every read is in
    what is printed, raised or asserted, or in such an assignment (`msg = f"loss {loss}"; print(
    msg)`): their text is made as a print's is. Text read anywhere else (appended to a list,
    compared, used as a key) stays Python's, the text of a tracer or JAX's error, as under
    `jax.jit`."""
    assignments: dict[str, list[gast.stmt]] = {}
    shown: set[int] = set()  # the nodes of what is printed, raised or asserted
    for node in structure.walk_nodes(fn_node):
        assigns = isinstance(node, (gast.Assign, gast.AugAssign))
        if assigns and _text_assignment(node, globals_):
            target = node.targets[0] if isinstance(node, gast.Assign) else node.target
            assignments.setdefault(target.id, []).append(node)
        shown_here = []
        if isinstance(node, gast.Call) and (
            naming.runtime_operator(node.func) == "print_" or _writes_text(node)
        ):
            shown_here = node.args
        elif isinstance(node, gast.Raise) and node.exc is not None:
            shown_here = [node.exc]
        elif isinstance(node, gast.Assert) and node.msg is not None:
            shown_here = [node.msg]
        for region in shown_here:
            shown.update(id(n) for n in structure.walk_nodes(region))
    if not assignments:
        return []
    reads = [
        n for n in structure.walk_nodes(fn_node) if isinstance(n, gast.Name) and n.id in assignments
    ]
    names = set(assignments)
    while True:  # drop the names read elsewhere, until the rest read only each other
        fine = set(shown)
        for name in names:
            for assignment in assignments[name]:
                fine.update(id(n) for n in structure.walk_nodes(assignment.value))
        other = {
            n.id
            for n in reads
            if n.id in names and isinstance(n.ctx, gast.Load) and id(n) not in fine
        }
        if not other:
            return [a for name in names for a in assignments[name]]
        names -= other


def _percent_of_text(node) -> bool:
    """`"..." % values`: Python's text formatting (a `%` of a string constant)."""
    return (
        isinstance(node, gast.BinOp)
        and isinstance(node.op, gast.Mod)
        and isinstance(node.left, gast.Constant)
        and isinstance(node.left.value, str)
    )


def _text_assignment(node, globals_: dict) -> bool:
    """`name = <value>` or `name += <value>` whose value makes text (an f-string, `.format` of a
    constant, `str()`/`repr()` of one argument, `format()`, `%` of a constant)."""
    if isinstance(node, gast.Assign):
        if len(node.targets) != 1 or not isinstance(node.targets[0], gast.Name):
            return False
    elif not (isinstance(node.target, gast.Name) and isinstance(node.op, gast.Add)):
        return False
    for n in structure.walk_nodes(node.value):
        if isinstance(n, gast.JoinedStr):
            return True
        if _percent_of_text(n):
            return True
        if isinstance(n, gast.Call):
            func = n.func
            if activity.reads_builtin(func, globals_, ("str", "repr")):
                if len(n.args) == 1 and not n.keywords:
                    return True
            if activity.reads_builtin(func, globals_, ("format",)):
                return True
            if (
                isinstance(func, gast.Attribute)
                and func.attr == "format"
                and isinstance(func.value, gast.Constant)
                and isinstance(func.value.value, str)
            ):
                return True
    return False
