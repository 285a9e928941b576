"""Rewrites `if`, `while` and `for` statements into calls of `rt__.if_stmt/while_stmt/for_stmt`.

Each statement's state (the names it modifies that are read later, or read by the statement
itself) goes in and out of plain nested functions, so the runtime can either run the statement as
Python or stage it as `lax.cond` / `lax.while_loop` / `lax.scan`:

    if x[0] > 0:                      def if_true(x):
        x = x * 2                         x = x * 2
    else:                      ->         return (x,)
        x = x - 1                     def if_false(x):
                                          x = x - 1
                                          return (x,)
                                      (x,) = rt__.if_stmt(x[0] > 0, if_true, if_false, (x,),
                                                          symbol_names=('x',))

A state variable that cannot have a value before the statement is passed in as
`rt__.Undefined('y')`, and reads of it elsewhere become `rt__.ld(y)`, which raises the
UnboundLocalError Python would raise. Statements that hold `break`, `continue` or `return` are
left as Python here (the early-exit passes run first and remove those they can).
"""

from __future__ import annotations

import gast

from transpiler import analysis, anno, structure, templates
from transpiler.analysis import activity, item_uses
from transpiler.context import PassContext
from transpiler.naming import RUNTIME, Namer
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.If, gast.While, gast.For)
ADDS = (gast.FunctionDef, gast.Return, gast.Call, gast.Assign)

_A = anno.Static


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Converts the control flow of `fn_node` and of the functions nested in it."""
    analysis.analyze(fn_node)
    return _ControlFlow(ctx.namer).visit(fn_node)


def _has_early_exit(node: gast.stmt) -> bool:
    """Whether `node` holds a return, or a break/continue that leaves `node` (not an inner loop)."""
    return any(
        any(structure.jumps_out(block.stmts, structure.EXITS)) for block in structure.blocks(node)
    )


def convertible(node: gast.stmt) -> bool:
    """Whether the control-flow pass rewrites `node` into a runtime call."""
    return isinstance(node, (gast.If, gast.While, gast.For)) and not _has_early_exit(node)


def state(node: gast.stmt, scope: activity.Scope) -> tuple[list[str], list[str]]:
    """(outputs, inputs): the names a converted statement passes out and in, in a stable order.

    A loop passes the same names in and out. An `if` passes out the names its branches modify
    that are read after it; it also takes in (after those) the names a branch modifies but
    reads first, which it needs but need not give back.

    Names declared `global` or `nonlocal` are state like any other (liveness keeps them live):
    the generated functions take them as parameters, and the assignment of the returned state,
    in the user's function, writes the global or nonlocal as the original statement would. A
    name only changed in place (`D[k] = v`, `obj.n = v`) is not state: the object it names is
    changed in place, aliases included (see `runtime.effects`).
    """
    # Rebound names only: an object changed in place (`stats[k] = v`, `self.n = v`) stays the
    # same object, reached through its name as it is; `runtime.effects` stages the change.
    modified = anno.getanno(node, _A.BODY_ACTIVITY).bound & scope.own
    if isinstance(node, gast.For):
        modified |= activity.of(node.target).bound
    live_out, live_in = anno.getanno(node, _A.LIVE_OUT), anno.getanno(node, _A.LIVE_IN)
    if not isinstance(node, gast.If):
        names = sorted(modified & (live_out | live_in))
        return names, names
    outputs = sorted(modified & live_out)
    return outputs, outputs + sorted((modified & live_in) - live_out)


def read_inputs(node: gast.stmt, scope: activity.Scope) -> list[str]:
    """The inputs whose values the statement reads. The rest (an `if` whose branches both
    assign `y`) need no value: they are passed in as `rt__.Undefined` placeholders."""
    _, inputs = state(node, scope)
    if not isinstance(node, gast.If):
        return inputs
    return [name for name in inputs if name in anno.getanno(node, _A.LIVE_IN)]


_IF = """
    def if_true(state_args):
        prologue
        body
        return state_out_tuple
    def if_false(state_args):
        prologue
        orelse
        return state_out_tuple
    state_out = rt__.if_stmt(test, if_true, if_false, state_in_tuple, symbol_names=names)
"""

_WHILE = """
    def loop_test(state_args):
        prologue
        return test
    def loop_body(state_args):
        prologue
        body
        return state_tuple
    state_out = rt__.while_stmt(loop_test, loop_body, state_tuple, symbol_names=names, **options)
"""

_FOR = """
    def loop_body(item, state_args):
        prologue
        bind_item
        body
        return state_tuple
    state_out = rt__.for_stmt(iterable, loop_body, state_tuple, symbol_names=names, **options)
"""

_FOR_WITH_TEST = """
    def loop_test(state_args):
        prologue
        return test
    def loop_body(item, state_args):
        prologue
        bind_item
        body
        return state_tuple
    state_out = rt__.for_stmt(
        iterable, loop_body, state_tuple, symbol_names=names, extra_test=loop_test, **options
    )
"""


class _ControlFlow(Transformer):
    def __init__(self, namer: Namer):
        self.namer = namer
        self.scopes: list[gast.FunctionDef] = []

    def visit_FunctionDef(self, node):
        self.scopes.append(node)
        node.body = self.visit_block(node.body)
        self.scopes.pop()
        return node

    def _state(self, node):
        """(outputs, inputs, cells) of the statement, from the annotations, which describe it as
        it was before its sub-blocks change; `cells` as `_cells` gives them."""
        scope = anno.getanno(self.scopes[-1], _A.SCOPE)
        outputs, inputs = state(node, scope)
        # Placeholders for what no branch reads: `rt__.Undefined('y')`.
        read = read_inputs(node, scope)
        inputs = [name if name in read else _placeholder(name) for name in inputs]
        return outputs, inputs, self._cells([_label(v) for v in inputs])

    def _visit_blocks(self, node):
        """Converts the sub-blocks, after the statement has taken its names: generated names
        follow source order (the outer `if` gets `if_true`, an inner one `if_true_1`)."""
        node.body = self.visit_block(node.body)
        node.orelse = self.visit_block(node.orelse)

    def visit_If(self, node):
        if not convertible(node):
            return self.generic_visit(node)
        outputs, inputs, cells = self._state(node)
        names = dict(if_true=self.namer.new("if_true"), if_false=self.namer.new("if_false"))
        self._visit_blocks(node)
        return self._assign_state(
            _IF, outputs, inputs, cells, body=node.body, orelse=node.orelse, test=node.test, **names
        )

    def visit_While(self, node):
        if not convertible(node):
            return self.generic_visit(node)
        names, _, cells = self._state(node)
        loop_test, loop_body = self.namer.new("loop_test"), self.namer.new("loop_body")
        self._visit_blocks(node)
        stmts = self._assign_state(
            _WHILE,
            names,
            names,
            cells,
            body=node.body,
            test=node.test,
            loop_test=loop_test,
            loop_body=loop_body,
            options=_loop_options(node),
        )
        return stmts + node.orelse

    def visit_For(self, node):
        if not convertible(node):
            return self.generic_visit(node)
        # Decided on the body as the user wrote it, before its statements become functions.
        options = _loop_options(node)
        if item_uses.uses_items_as_python(node, anno.getanno(node, _A.LIVE_OUT)):
            true = templates.constant(True)
            options.append(gast.keyword(arg="items_as_python", value=true))
        names, _, cells = self._state(node)
        target = node.target
        if isinstance(target, gast.Name) and target.id not in names:
            item, bind_item = target.id, []
        else:
            item = self.namer.new("item")
            bind_item = templates.replace("target = item", target=target, item=item)
        replacements = dict(item=item, bind_item=bind_item, iterable=node.iter, options=options)
        template = _FOR
        if anno.hasanno(node, _A.EXTRA_TEST):
            # From the break pass: the loop stops fetching items once this is false.
            template = _FOR_WITH_TEST
            replacements.update(
                test=anno.getanno(node, _A.EXTRA_TEST), loop_test=self.namer.new("loop_test")
            )
        replacements["loop_body"] = self.namer.new("loop_body")
        self._visit_blocks(node)
        stmts = self._assign_state(template, names, names, cells, body=node.body, **replacements)
        return stmts + node.orelse

    def _cells(self, state):
        """The parameters for `state`, and the statements that open each generated function.

        A state variable that a nested function reads or writes (through its closure cell), or
        that is declared global or nonlocal, must live in that one place while the generated
        functions run, or the nested function would see a stale value. Such a variable enters
        under another name and is written to its cell first: `nonlocal acc; acc = acc_1`.
        """
        scope = anno.getanno(self.scopes[-1], _A.SCOPE)
        shared = scope.closure_reads | scope.declared
        params, prologue = [], []
        for name in state:
            if name not in shared:
                params.append(name)
                continue
            param = self.namer.new(name)
            params.append(param)
            declaration = gast.Global if name in scope.globals else gast.Nonlocal
            prologue.append(declaration(names=[name]))
            prologue += templates.replace("name = param", name=name, param=param)
        return params, prologue

    def _assign_state(self, template, outputs, inputs, cells, **replacements):
        """`inputs`: names, and placeholder expressions for the inputs that are not read;
        `cells`: `_cells` of them."""
        params, prologue = cells
        if template is _IF:
            values = [templates.name(v) if isinstance(v, str) else v for v in inputs]
            replacements.update(
                state_out_tuple=templates.names_tuple(outputs),
                state_in_tuple=gast.Tuple(elts=values, ctx=gast.Load()),
            )
        else:
            replacements.update(state_tuple=templates.names_tuple(outputs))
        return templates.replace(
            template,
            state_args=params,
            prologue=prologue,
            names=templates.constant(tuple(outputs)),
            state_out=outputs,  # no outputs: no assignment, just the call
            **replacements,
        )


def _placeholder(name: str) -> gast.expr:
    return templates.replace_as_expression(
        f"{RUNTIME}.Undefined(label)", label=templates.constant(name)
    )


def _label(value) -> str:
    """The name an input stands for: itself, or the label of its placeholder."""
    return value if isinstance(value, str) else value.args[0].value


def _loop_options(node: gast.stmt) -> list[gast.keyword]:
    """The loop's `transpiler.loop_options(...)`, as keywords of its runtime call."""
    if not anno.hasanno(node, _A.LOOP_OPTIONS):
        return []
    return [
        gast.keyword(arg=name, value=value)
        for name, value in anno.getanno(node, _A.LOOP_OPTIONS).items()
    ]
