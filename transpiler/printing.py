"""Printing a tree as Python source and numbering its nodes with the lines they print on.

Generated code is compiled from the tree it was printed from, not from its text: the tree is
given the positions its nodes have in the text as it is printed (`ast.unparse` prints every
statement on lines of its own and every expression on its statement's line, so a line counter
kept by the printer is all it takes). Parsing the text again to find them cost a fifth of
loading a converted function.

The counting follows the standard library's printer (`ast._Unparser`, Python 3.10 to 3.13), which
is not a public class: where a Python version prints a node some other way, the count comes out
short or a node is left without a position, `numbered` says so, and the caller parses the
text instead (`tests/transpiler/test_printing.py` checks every position against a parse).
"""

from __future__ import annotations

import ast

# Where an expression ends on its line: past the end of any line, so that a traceback printer
# underlines nothing in a generated line (the stand-ins of `runtime.errors` span lines alike).
_LINE_END = 1 << 16


class _Numbering(ast._Unparser):
    """`ast.unparse`'s printer, giving each node it prints the line it prints it on.

    A statement's line is that of the next line started once its visit begins (a decorated
    definition's: the one after its decorators'); an expression's, the line being written when
    its visit begins.
    """

    def __init__(self, first_line: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.line = first_line  # the line being written
        self.multiline_strings = False  # whether a docstring was printed over several lines
        self._awaiting: ast.AST | None = None  # the statement the next line starts
        self._decorators = 0  # lines to let go by first (its decorators')
        self._elifs: list[list[ast.If]] = []  # per `if` being printed, its `elif`s to come
        self._docstring: ast.stmt | None = None  # the statement holding the next docstring

    # -- lines ------------------------------------------------------------------------------------

    def maybe_newline(self) -> None:
        if self._source:
            self.line += 1
            self._source.append("\n")

    def fill(self, text: str = "") -> None:
        self.maybe_newline()
        statement = self._awaiting
        if statement is not None:
            if self._decorators:
                self._decorators -= 1
            else:
                self._start(statement)
                self._awaiting = None
        elif text == "elif " and self._elifs:
            self._start(self._elifs[-1].pop())
        self._source.append("    " * self._indent + text)

    def _start(self, statement: ast.AST) -> None:
        fields = statement.__dict__
        fields["lineno"] = self.line
        fields["col_offset"] = 4 * self._indent

    def _end(self, node: ast.AST) -> None:
        fields = node.__dict__
        fields["end_lineno"] = self.line
        fields["end_col_offset"] = _LINE_END

    # -- nodes ------------------------------------------------------------------------------------

    def traverse(self, node) -> None:
        if isinstance(node, list):
            for item in node:
                self.traverse(item)
            return
        if isinstance(node, (ast.stmt, ast.excepthandler)):
            self._awaiting = node
            self._decorators = len(getattr(node, "decorator_list", ()))
            super().traverse(node)
            self._end(node)
            return
        if "lineno" in type(node)._attributes:
            self._number_on_this_line(node)
        super().traverse(node)

    def visit_If(self, node: ast.If) -> None:
        chain, link = [], node
        while link.orelse and len(link.orelse) == 1 and isinstance(link.orelse[0], ast.If):
            link = link.orelse[0]
            chain.append(link)
        self._elifs.append(chain[::-1])
        try:
            super().visit_If(node)
        finally:
            self._elifs.pop()
        for link in chain:
            self._end(link)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.slice, ast.Tuple):  # `x[i, j]`: its items printed, not the tuple
            self._number_on_this_line(node.slice)
        super().visit_Subscript(node)

    def visit_arguments(self, node: ast.arguments) -> None:
        super().visit_arguments(node)
        for parameter in (node.vararg, node.kwarg):  # printed as text, not visited
            if parameter is not None:
                self._number_on_this_line(parameter)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        # Its parts are printed by printers of their own (each counting from line 1).
        line = self.line
        super().visit_JoinedStr(node)
        for part in ast.walk(node):
            if "lineno" in type(part)._attributes:
                self._number_on_this_line(part, line)

    def _number_on_this_line(self, node: ast.AST, line: int | None = None) -> None:
        fields = node.__dict__
        fields["lineno"] = fields["end_lineno"] = self.line if line is None else line
        fields["col_offset"] = 4 * self._indent
        fields["end_col_offset"] = _LINE_END

    def _write_docstring_and_traverse_body(self, node) -> None:
        if self.get_raw_docstring(node) is not None:
            self._docstring = node.body[0]
        super()._write_docstring_and_traverse_body(node)

    def _write_docstring(self, node: ast.Constant) -> None:
        start, line = len(self._source), self.line
        statement, self._docstring = self._docstring, None
        super()._write_docstring(node)
        first = self.line  # the line `fill` started
        breaks = sum(piece.count("\n") for piece in self._source[start:]) - (first - line)
        self.line += breaks
        self.multiline_strings |= breaks > 0
        for part in (statement, node):
            if part is not None:
                fields = part.__dict__
                fields["lineno"], fields["end_lineno"] = first, self.line
                fields["col_offset"], fields["end_col_offset"] = 4 * self._indent, _LINE_END


class Numbered:
    """The text `ast.unparse` prints for a tree, whose nodes now have their positions in it."""

    def __init__(self, text: str, complete: bool, multiline_strings: bool) -> None:
        self.text = text
        # Whether every line was counted: else some positions are wrong (parse the text).
        self.complete = complete
        # Whether a docstring spans lines: `ast.unparse` prints other strings on one line.
        self.multiline_strings = multiline_strings


def numbered(tree: ast.AST, first_line: int = 1) -> Numbered:
    """Prints `tree` as `ast.unparse` does, giving its nodes the positions they have in the
    text (its first line numbered `first_line`): lines, and each line's indentation as columns
    (an expression spans the rest of its line)."""
    printer = _Numbering(first_line)
    text = printer.visit(tree)
    complete = printer.line - first_line == text.count("\n")
    return Numbered(text, complete, printer.multiline_strings)
