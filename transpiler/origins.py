"""Source maps: every AST node, and every line of generated code, back to the user's file:line."""

from __future__ import annotations

import ast
import dataclasses
import os

import gast

from transpiler import anno, structure


@dataclasses.dataclass(frozen=True)
class Location:
    """A place in the user's source."""

    filename: str
    lineno: int
    col_offset: int = 0
    source_line: str = ""

    def __str__(self) -> str:
        return f"{display_path(self.filename)}:{self.lineno}"


def display_path(filename: str) -> str:
    """`filename` relative to the working directory when it lies under it, else as given."""
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return filename if rel.startswith(os.pardir) else rel


def stamp(tree: gast.AST, filename: str, line_offset: int, source_lines: list[str]) -> None:
    """Annotates every node of a freshly parsed tree with its location in the user's file.

    Args:
      tree: the parsed source (columns as in the file).
      filename: the user's file.
      line_offset: what to add to a parsed line number to get the line in `filename`.
      source_lines: the lines of `filename`, for quoting in error messages.
    """
    for node in structure.walk_nodes(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        user_line = lineno + line_offset
        text = source_lines[user_line - 1].strip() if 0 < user_line <= len(source_lines) else ""
        col = getattr(node, "col_offset", 0)
        anno.setanno(node, anno.Static.ORIGIN, Location(filename, user_line, col, text))


def fill_missing(node: gast.AST, origin: Location, seen: set[int] | None = None) -> None:
    """Gives `origin` to every node under `node` that has none (nodes a pass created).

    With `seen` (ids of the nodes walked by earlier calls, which the caller keeps alive), each
    node is walked once across calls: a subtree seen before is not walked again."""
    seen = set() if seen is None else seen
    todo = [node]
    while todo:
        child = todo.pop()
        if id(child) in seen:
            continue
        seen.add(id(child))
        if not anno.hasanno(child, anno.Static.ORIGIN):
            anno.setanno(child, anno.Static.ORIGIN, origin)
        todo.extend(structure.children(child))


def line_map(tree: gast.AST, generated_source: str | ast.Module) -> dict[int, Location]:
    """Maps each line of `generated_source` (the unparsed `tree`, or its parse) to the user
    location it came from.

    `ast.unparse` drops line numbers, so the printed source is parsed again and its statements are
    walked in step with the statements of the tree it was printed from (printing keeps statements).
    """
    mapping: dict[int, Location] = {}
    parsed = generated_source
    if not isinstance(parsed, ast.Module):
        parsed = ast.parse(generated_source)
    printed = structure.walk_all(parsed.body)  # `ast` nests as gast does
    for gnode, pnode in zip(structure.walk_all(tree.body), printed):
        if anno.hasanno(gnode, anno.Static.ORIGIN):
            mapping.setdefault(pnode.lineno, anno.getanno(gnode, anno.Static.ORIGIN))
    return mapping


def annotate(tree: gast.AST, generated_source: str) -> str:
    """`generated_source` (the unparsed `tree`) with the user's `file:line` as a comment at the
    end of the first line of each statement that has an origin::

        def if_true(x):  # model.py:12

    (not where a string spanning lines starts: the comment would be in the string)."""
    parsed = ast.parse(generated_source)
    mapping = line_map(tree, parsed)
    in_strings = {
        stmt.lineno
        for stmt in structure.walk_all(parsed.body)
        if isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
        and stmt.end_lineno > stmt.lineno
    }
    lines = generated_source.split("\n")
    for lineno, location in mapping.items():
        if lineno not in in_strings:
            lines[lineno - 1] += f"  # {location}"
    return "\n".join(lines)
