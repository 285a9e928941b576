"""Code templates -> AST.

A template is ordinary Python source whose placeholder names are replaced by code:

    replace('''
        def body_name(state_args):
            body
            return state
        state = rt__.while_stmt(test_name, body_name, state, symbol_names=names)
    ''', body_name='loop_body', body=node.body, state=['x', 'i'], ...)

A replacement is a string (a name), a list of strings (a tuple of names, or the parameters of a
function), a gast expression, or a list of statements (spliced where the placeholder stands alone as
a statement), or a list of keywords (spliced where `**placeholder` stands in a call). An
assignment whose single target is replaced by an empty list becomes its value
alone (`state = call()` with no state: `call()`). `replace` sets `ctx` itself and raises on a
placeholder that is missing or unused. Replacements are copied, except a list of statements used
once: it is moved (the caller gives up the block it passes).
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import gast

from transpiler import anno, structure, trees
from transpiler.transformer import Rewriter


def replace(template: str, **replacements: Any) -> list[gast.stmt]:
    """Parses `template` and fills in its placeholders; returns the statements."""
    parsed = _parsed.get(template)
    if parsed is None:
        if len(_parsed) >= _MAX_TEMPLATES:
            _parsed.clear()  # a bound on memory: the passes use a few dozen templates
        parsed = _parsed[template] = trees.to_gast(ast.parse(textwrap.dedent(template)))
    tree = clone(parsed)
    filler = _Filler(replacements)
    tree = filler.visit(tree)
    unused = set(replacements) - filler.used
    if unused:
        raise ValueError(f"template placeholders not found: {sorted(unused)}")
    _fix_ctx(tree, filler.moved)
    return tree.body


# Each template parsed once: conversion fills in hundreds of them (a handful of distinct ones).
_parsed: dict[str, gast.Module] = {}
_MAX_TEMPLATES = 256


def clone(node: Any) -> Any:
    """A deep copy of a tree: `copy.deepcopy`, without its memo and `__reduce__` machinery (a
    few times faster). Each node's annotations are copied too, as a new dict of the same values
    (origins and analysis results, never changed in place)."""
    if isinstance(node, list):
        return [clone(item) for item in node]
    if not isinstance(node, gast.AST):
        return node  # str, int, None, ...: immutable
    cls = type(node)
    new = cls.__new__(cls)
    # Fields and attributes (line numbers) are the instance's dict: copied at once, then the
    # fields that hold nodes are replaced by copies.
    contents = dict(node.__dict__)
    for field in cls._fields:
        value = contents.get(field)
        if isinstance(value, (list, gast.AST)):
            contents[field] = clone(value)
    for field in cls._fields:
        contents.setdefault(field, None)
    annotations = contents.get(anno.FIELD)
    if annotations is not None:
        contents[anno.FIELD] = dict(annotations)
    new.__dict__.update(contents)
    return new


def replace_as_expression(template: str, **replacements: Any) -> gast.expr:
    """Like `replace`, for a template that is a single expression."""
    (stmt,) = replace(template, **replacements)
    if not isinstance(stmt, gast.Expr):
        raise ValueError(f"template is not an expression: {template!r}")
    return stmt.value


def name(id_: str, ctx: gast.AST | None = None) -> gast.Name:
    return gast.Name(id=id_, ctx=ctx or gast.Load(), annotation=None, type_comment=None)


def names_tuple(ids: list[str]) -> gast.Tuple:
    return gast.Tuple(elts=[name(i) for i in ids], ctx=gast.Load())


def constant(value: Any) -> gast.Constant:
    return gast.Constant(value=value, kind=None)


class _Filler(Rewriter):
    def __init__(self, replacements: dict[str, Any]):
        self.replacements = replacements
        self.used: set[str] = set()
        self.moved: set[int] = set()  # statements moved in: their contexts are right already

    def _take(self, key: str) -> Any:
        first = key not in self.used
        self.used.add(key)
        value = self.replacements[key]
        if isinstance(value, list):
            if first and value and all(isinstance(v, gast.stmt) for v in value):
                # A block is moved into the template, not copied: copying every nested block
                # at every level would make conversion quadratic in the nesting depth.
                self.moved.update(id(v) for v in value)
                return list(value)
            return [clone(v) if isinstance(v, gast.AST) else v for v in value]
        return clone(value) if isinstance(value, gast.AST) else value

    def visit_Expr(self, node):
        # A placeholder alone on a line stands for a list of statements.
        if isinstance(node.value, gast.Name) and node.value.id in self.replacements:
            value = self._take(node.value.id)
            if isinstance(value, list) and all(isinstance(v, gast.stmt) for v in value):
                return value
            node.value = self._as_expr(value, node.value.ctx)
            return node
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id not in self.replacements:
            return node
        return self._as_expr(self._take(node.id), node.ctx)

    def _as_expr(self, value: Any, ctx: gast.AST) -> gast.expr:
        if isinstance(value, str):
            return name(value, ctx)
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return gast.Tuple(elts=[name(v, ctx) for v in value], ctx=ctx)
        if isinstance(value, gast.expr):
            return value
        raise ValueError(f"cannot use {value!r} as an expression in a template")

    def visit_FunctionDef(self, node):
        if node.name in self.replacements:
            node.name = self._take(node.name)
        self._fill_parameters(node.args)
        node.body = [self.visit(s) for s in node.body]
        node.body = [s for item in node.body for s in (item if isinstance(item, list) else [item])]
        return node

    def visit_Lambda(self, node):
        self._fill_parameters(node.args)
        node.body = self.visit(node.body)
        return node

    def _fill_parameters(self, arguments: gast.arguments) -> None:
        """A placeholder among the parameters stands for a name or a list of names."""
        args = []
        for arg in arguments.args:
            if isinstance(arg, gast.Name) and arg.id in self.replacements:
                value = self._take(arg.id)
                ids = [value] if isinstance(value, str) else list(value)
                args.extend(name(i, gast.Param()) for i in ids)
            else:
                args.append(arg)
        arguments.args = args

    def visit_ClassDef(self, node):
        if node.name in self.replacements:
            node.name = self._take(node.name)
        return self.generic_visit(node)

    def visit_Assign(self, node):
        # `names = call(...)` with no names to assign: just the call.
        (target,) = node.targets if len(node.targets) == 1 else (None,)
        if isinstance(target, gast.Name) and self.replacements.get(target.id, None) == []:
            self.used.add(target.id)
            return gast.Expr(value=self.visit(node.value))
        return self.generic_visit(node)

    def visit_Call(self, node):
        # `f(..., **name)` with a list of keywords for `name`: they are spliced in.
        keywords = []
        for keyword in node.keywords:
            value = keyword.value
            if (
                keyword.arg is None
                and isinstance(value, gast.Name)
                and value.id in self.replacements
            ):
                keywords += self._take(value.id)
            else:
                keywords.append(keyword)
        node.keywords = keywords
        return self.generic_visit(node)

    def visit_keyword(self, node):
        node.value = self.visit(node.value)
        return node


def _fix_ctx(tree: gast.AST, skip: set[int]) -> None:
    """Sets Store on assignment targets (recursively through tuples), except in the statements
    whose ids are in `skip`."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if id(node) in skip:
            continue
        todo.extend(structure.children(node))
        targets = []
        if isinstance(node, gast.Assign):
            targets = node.targets
        elif isinstance(node, (gast.AugAssign, gast.AnnAssign, gast.For)):
            targets = [node.target]
        for target in targets:
            _set_store(target)


def _set_store(node: gast.expr) -> None:
    if isinstance(node, (gast.Tuple, gast.List)):
        node.ctx = gast.Store()
        for elt in node.elts:
            _set_store(elt)
    elif isinstance(node, gast.Starred):
        node.ctx = gast.Store()
        _set_store(node.value)
    elif isinstance(node, (gast.Name, gast.Attribute, gast.Subscript)):
        node.ctx = gast.Store()
