"""The standard library's `ast` trees <-> `gast` trees, as `gast.ast_to_gast` and
`gast.gast_to_ast` translate them, in about half their time.

gast's translators visit every node through `ast.NodeTransformer` and copy each position
attribute under a `try` (raising `AttributeError` for every node a pass created); converting a
function translates its tree three times (parsing it, checking it against the code that runs,
printing the result), a tenth of a conversion. Here each node is one call: its instance
dictionary copied with the values below it translated. Where gast's trees differ from Python's
(Python 3.10 to 3.13), the differences are these, and nothing else:

- a parameter (`ast.arg`) is a `gast.Name` whose context is `gast.Param()`;
- a `Name` has two more fields, `annotation` and `type_comment` (None);
- an `except E as name:` handler's name is a `gast.Name` (context `Store`, no position);
- `FunctionDef`, `AsyncFunctionDef` and `ClassDef` have `type_params` before Python 3.12, and
  a type parameter has `default_value` before Python 3.13 (empty: `[]`, None).

`tests/transpiler/test_trees.py` compares both translations with gast's on the library's and
the samples' sources, and on converted functions (nodes the passes made, annotated).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import gast

_POSITIONS = ("lineno", "col_offset", "end_lineno", "end_col_offset")


class _Kind:
    """How nodes of one class translate: the other side's class, the keys of a node's
    dictionary kept (its fields and positions, not our annotations), its fields that may hold
    nodes, and the fields the other side has that this one lacks (with a function making their
    empty value)."""

    __slots__ = ("target", "keys", "fields", "missing")

    def __init__(self, source: type, target: type, positions: bool) -> None:
        self.target = target
        keys = set(source._fields) | set(source._attributes if positions else ())
        self.keys = frozenset(keys & (set(target._fields) | set(target._attributes)))
        self.fields = tuple(f for f in source._fields if f in self.keys)
        self.missing = tuple(
            (field, list if field == "type_params" else _none)
            for field in target._fields
            if field not in source._fields
        )


def _none() -> None:
    return None


def _translator(target_module, special: dict[type, Callable], positions: bool = True) -> Callable:
    kinds: dict[type, _Kind] = {}
    place = _copy_positions if positions else _unplaced

    def kind_of(cls: type) -> _Kind:
        kind = kinds[cls] = _Kind(cls, getattr(target_module, cls.__name__), positions)
        return kind

    def translate(node):
        cls = type(node)
        how = special.get(cls)
        if how is not None:
            return how(node, translate, place)
        kind = kinds.get(cls) or kind_of(cls)
        target = kind.target
        new = target.__new__(target)
        fields = new.__dict__
        fields.update(node.__dict__)
        keys = kind.keys
        if len(fields) > len(keys) or not fields.keys() <= keys:
            for key in [k for k in fields if k not in keys]:
                del fields[key]
        for field in kind.fields:
            value = fields.get(field)
            if type(value) is list:
                fields[field] = [translate(v) if isinstance(v, ast.AST) else v for v in value]
            elif isinstance(value, ast.AST):
                fields[field] = translate(value)
        for field, empty in kind.missing:
            fields[field] = empty()
        return new

    return translate


def _copy_positions(new: ast.AST, node: ast.AST) -> ast.AST:
    fields, old = new.__dict__, node.__dict__
    for key in _POSITIONS:
        if key in old:
            fields[key] = old[key]
    return new


def _unplaced(new: ast.AST, node: ast.AST) -> ast.AST:
    return new


def _translated(value, translate):
    return None if value is None else translate(value)


# -- ast -> gast ----------------------------------------------------------------------------------


_GAST_CONTEXT = {ast.Load: gast.Load, ast.Store: gast.Store, ast.Del: gast.Del}


def _gast_name(node: ast.Name, translate, place) -> gast.Name:
    context = _GAST_CONTEXT[type(node.ctx)]()
    return place(gast.Name(node.id, context, None, None), node)


def _gast_parameter(node: ast.arg, translate, place) -> gast.Name:
    annotation = _translated(node.annotation, translate)
    new = gast.Name(node.arg, gast.Param(), annotation, getattr(node, "type_comment", None))
    return place(new, node)


def _gast_handler(node: ast.ExceptHandler, translate, place) -> gast.ExceptHandler:
    name = None if node.name is None else gast.Name(node.name, gast.Store(), None, None)
    new = gast.ExceptHandler(
        _translated(node.type, translate), name, [translate(s) for s in node.body]
    )
    return place(new, node)


to_gast: Callable[[ast.AST], gast.AST] = _translator(
    gast, {ast.Name: _gast_name, ast.arg: _gast_parameter, ast.ExceptHandler: _gast_handler}
)
to_gast.__doc__ = "The gast tree of a Python `ast` tree (a new one), as `gast.ast_to_gast` has it."


# -- gast -> ast ----------------------------------------------------------------------------------


_AST_CONTEXT = {gast.Load: ast.Load, gast.Store: ast.Store, gast.Del: ast.Del}


def _ast_name(node: gast.Name, translate, place) -> ast.AST:
    context = _AST_CONTEXT.get(type(node.ctx))
    context = translate(node.ctx) if context is None else context()
    return place(ast.Name(node.id, context), node)


def _ast_parameter(node: gast.Name, translate, place) -> ast.arg:
    new = ast.arg(node.id, _translated(node.annotation, translate), node.type_comment)
    return place(new, node)


def _ast_arguments(node: gast.arguments, translate, place) -> ast.arguments:
    def parameter(name):
        return None if name is None else _ast_parameter(name, translate, place)

    return ast.arguments(
        [parameter(n) for n in node.posonlyargs],
        [parameter(n) for n in node.args],
        parameter(node.vararg),
        [parameter(n) for n in node.kwonlyargs],
        [_translated(d, translate) for d in node.kw_defaults],
        parameter(node.kwarg),
        [translate(d) for d in node.defaults],
    )


def _ast_handler(node: gast.ExceptHandler, translate, place) -> ast.ExceptHandler:
    name = None if node.name is None else node.name.id
    new = ast.ExceptHandler(
        _translated(node.type, translate), name, [translate(s) for s in node.body]
    )
    return place(new, node)


_AST_SPECIAL = {
    gast.Name: _ast_name,
    gast.arguments: _ast_arguments,
    gast.ExceptHandler: _ast_handler,
}
to_ast: Callable[[gast.AST], ast.AST] = _translator(ast, _AST_SPECIAL)
to_ast.__doc__ = "The Python `ast` tree of a gast tree (a new one), as `gast.gast_to_ast` has it."
to_unplaced_ast: Callable[[gast.AST], ast.AST] = _translator(ast, _AST_SPECIAL, positions=False)
to_unplaced_ast.__doc__ = """`to_ast`, leaving out every position: for a tree to print, which
`printing.numbered` gives the positions of the printed text."""
