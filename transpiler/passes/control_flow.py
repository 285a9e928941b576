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

from transpiler import anno, templates
from transpiler.analysis import activity
from transpiler.naming import RUNTIME, Namer
from transpiler.transformer import Transformer

_A = anno.Static


def transform(fn_node: gast.FunctionDef, namer: Namer) -> gast.FunctionDef:
    """Converts the control flow of `fn_node` and of the functions nested in it."""
    for scope_node in _function_scopes(fn_node):
        undefined = _undefined_names(scope_node)
        if undefined:
            _LoadUndefined(undefined).visit(scope_node)
    return _ControlFlow(namer).visit(fn_node)


def _function_scopes(fn_node):
    yield fn_node
    for node in activity.walk_scope(fn_node.body):
        if isinstance(node, gast.FunctionDef):
            yield from _function_scopes(node)


def _has_early_exit(node: gast.stmt) -> bool:
    """Whether `node` holds a return, or a break/continue that leaves `node` (not an inner loop)."""

    def search(stmts, in_loop):
        for stmt in stmts:
            if isinstance(stmt, gast.Return):
                return True
            if isinstance(stmt, (gast.Break, gast.Continue)) and not in_loop:
                return True
            if isinstance(stmt, (gast.FunctionDef, gast.ClassDef)):
                continue
            nested_loop = in_loop or isinstance(stmt, (gast.For, gast.While))
            for field in ("body", "orelse", "finalbody"):
                if search(
                    getattr(stmt, field, None) or [], nested_loop if field == "body" else in_loop
                ):
                    return True
            for handler in getattr(stmt, "handlers", None) or []:
                if search(handler.body, in_loop):
                    return True
        return False

    if isinstance(node, (gast.For, gast.While)):
        return search(node.body, False) or search(node.orelse, False)
    return search(node.body, False) or search(node.orelse, False)


def _convertible(node: gast.stmt) -> bool:
    return isinstance(node, (gast.If, gast.While, gast.For)) and not _has_early_exit(node)


def _state(node: gast.stmt) -> list[str]:
    """The names a converted statement passes in and out, in a stable order.

    Names declared `global` or `nonlocal` are state like any other (liveness keeps them live):
    the generated functions take them as parameters, and the assignment of the returned state,
    in the user's function, writes the global or nonlocal as the original statement would.
    """
    modified = anno.getanno(node, _A.BODY_ACTIVITY).modified
    if isinstance(node, gast.For):
        modified |= activity.of(node.target).bound
    used = anno.getanno(node, _A.LIVE_OUT) | anno.getanno(node, _A.LIVE_IN)
    if isinstance(node, gast.If):
        for block in (node.body, node.orelse):
            if block:
                used |= anno.getanno(block[0], _A.LIVE_IN)
    return sorted(modified & used)


def _attributes(node: gast.stmt) -> list[str]:
    """Attribute paths (`self.count`) the statement assigns, on objects that exist before it."""
    act = anno.getanno(node, _A.BODY_ACTIVITY)
    if isinstance(node, gast.For):
        act = act | activity.of(node.target)
    return sorted(path for path in act.attributes if path.split(".")[0] not in act.bound)


def _undefined_names(fn_node) -> set[str]:
    """State names of this scope's converted statements that may have no value before them."""
    declared = anno.getanno(fn_node, _A.SCOPE).declared
    undefined = set()
    for node in activity.walk_scope(fn_node.body):
        if isinstance(node, gast.stmt) and _convertible(node):
            defined = anno.getanno(node, _A.DEFINED_IN)
            undefined |= {n for n in _state(node) if n not in defined and n not in declared}
    return undefined


class _LoadUndefined(gast.NodeTransformer):
    """`y` -> `rt__.ld(y)` wherever a possibly undefined `y` is read."""

    def __init__(self, names: set[str]):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names and isinstance(node.ctx, gast.Load):
            call = templates.replace_as_expression(f"{RUNTIME}.ld(name)", name=node.id)
            if anno.hasanno(node, _A.ORIGIN):
                anno.setanno(call, _A.ORIGIN, anno.getanno(node, _A.ORIGIN))
            return call
        return node


_IF = """
    def if_true(state_args):
        prologue
        body
        return state_tuple
    def if_false(state_args):
        prologue
        orelse
        return state_tuple
    state_out = rt__.if_stmt(test, if_true, if_false, state_tuple, symbol_names=names)
"""

_WHILE = """
    def loop_test(state_args):
        prologue
        return test
    def loop_body(state_args):
        prologue
        body
        return state_tuple
    state_out = rt__.while_stmt(loop_test, loop_body, state_tuple, symbol_names=names)
"""

_FOR = """
    def loop_body(item, state_args):
        prologue
        bind_item
        body
        return state_tuple
    state_out = rt__.for_stmt(iterable, loop_body, state_tuple, symbol_names=names)
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
        iterable, loop_body, state_tuple, symbol_names=names, extra_test=loop_test
    )
"""


class _ControlFlow(Transformer):
    def __init__(self, namer: Namer):
        self.namer = namer
        self.scopes: list[gast.FunctionDef] = []
        self.local_names: list[frozenset[str]] = []  # of each scope, before it is rewritten

    def visit_FunctionDef(self, node):
        self.scopes.append(node)
        self.local_names.append(activity.local_names(node))
        node.body = self._visit_block(node.body)
        self.scopes.pop()
        self.local_names.pop()
        return node

    def _visit_block(self, stmts):
        out = []
        for stmt in stmts:
            result = self.visit(stmt)
            out.extend(result if isinstance(result, list) else [result])
        return out

    def _prepare(self, node):
        """Converts the sub-blocks; returns (state, attributes, placeholders) from the
        annotations, which describe the statement as it was before its sub-blocks changed."""
        state, attributes = _state(node), _attributes(node)
        node.body = self._visit_block(node.body)
        node.orelse = self._visit_block(node.orelse)
        defined = anno.getanno(node, _A.DEFINED_IN)
        declared = anno.getanno(self.scopes[-1], _A.SCOPE).declared
        placeholders = []
        for name in state:
            if name not in defined and name not in declared:
                placeholders += templates.replace(
                    f"name = {RUNTIME}.Undefined(label)", name=name, label=templates.constant(name)
                )
        return state, attributes, placeholders

    def visit_If(self, node):
        if not _convertible(node):
            return self.generic_visit(node)
        state, attributes, placeholders = self._prepare(node)
        stmts = self._assign_state(
            _IF,
            state,
            body=node.body,
            orelse=node.orelse,
            test=node.test,
            if_true=self.namer.new("if_true"),
            if_false=self.namer.new("if_false"),
        )
        return placeholders + _with_keywords(stmts, node, attributes)

    def visit_While(self, node):
        if not _convertible(node):
            return self.generic_visit(node)
        state, attributes, placeholders = self._prepare(node)
        stmts = self._assign_state(
            _WHILE,
            state,
            body=node.body,
            test=node.test,
            loop_test=self.namer.new("loop_test"),
            loop_body=self.namer.new("loop_body"),
        )
        return placeholders + _with_keywords(stmts, node, attributes) + node.orelse

    def visit_For(self, node):
        if not _convertible(node):
            return self.generic_visit(node)
        state, attributes, placeholders = self._prepare(node)
        target = node.target
        if isinstance(target, gast.Name) and target.id not in state:
            item, bind_item = target.id, []
        else:
            item = self.namer.new("item")
            bind_item = templates.replace("target = item", target=target, item=item)
        replacements = dict(
            item=item,
            bind_item=bind_item,
            body=node.body,
            iterable=self._iterable(node.iter),
            loop_body=self.namer.new("loop_body"),
        )
        template = _FOR
        if anno.hasanno(node, _A.EXTRA_TEST):
            # From the break pass: the loop stops fetching items once this is false.
            template = _FOR_WITH_TEST
            replacements.update(
                test=anno.getanno(node, _A.EXTRA_TEST), loop_test=self.namer.new("loop_test")
            )
        stmts = self._assign_state(template, state, **replacements)
        return placeholders + _with_keywords(stmts, node, attributes) + node.orelse

    def _iterable(self, node):
        """`range(...)` -> `rt__.range_(...)`, which accepts traced bounds."""
        if (
            isinstance(node, gast.Call)
            and isinstance(node.func, gast.Name)
            and node.func.id == "range"
            and "range" not in self.local_names[-1]
            and not node.keywords
            and not any(isinstance(a, gast.Starred) for a in node.args)
        ):
            node.func = templates.replace_as_expression(f"{RUNTIME}.range_")
        return node

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

    def _assign_state(self, template, state, **replacements):
        template = template.replace("rt__", RUNTIME)
        params, prologue = self._cells(state)
        names = templates.constant(tuple(state))
        if not state:
            template = template.replace("state_out = ", "")
            state_out = []
        else:
            state_out = state
        stmts = templates.replace(
            template,
            state_args=params,
            prologue=prologue,
            state_tuple=templates.names_tuple(state),
            names=names,
            **({"state_out": state_out} if state else {}),
            **replacements,
        )
        return stmts


def _with_keywords(stmts: list[gast.stmt], node: gast.stmt, attributes: list[str]):
    """Adds the statement's attribute state (`attributes={'self.n': (self, 'n')}`) and its
    loop's `loop_options(...)` as keywords of its runtime call, the last of `stmts`."""
    call = stmts[-1].value
    if attributes:
        pairs = [
            templates.replace_as_expression(
                "(obj, attr)",
                obj=templates.replace_as_expression(path.rsplit(".", 1)[0]),
                attr=templates.constant(path.rsplit(".", 1)[1]),
            )
            for path in attributes
        ]
        labels = [templates.constant(path) for path in attributes]
        value = gast.Dict(keys=labels, values=pairs)
        call.keywords.append(gast.keyword(arg="attributes", value=value))
    if anno.hasanno(node, _A.LOOP_OPTIONS):
        for name, value in anno.getanno(node, _A.LOOP_OPTIONS).items():
            call.keywords.append(gast.keyword(arg=name, value=value))
    return stmts
