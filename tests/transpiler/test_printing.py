"""`printing.numbered` prints as `ast.unparse` and gives every node the position a parse of the
printed text gives it: lines everywhere, and statements' columns."""

import ast

import pytest

from tests.transpiler.test_roundtrip import CODE, ROOT
from transpiler import printing

_POSITIONS = ("lineno", "col_offset", "end_lineno", "end_col_offset")


def _unplaced(source: str) -> ast.Module:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for key in _POSITIONS:
            node.__dict__.pop(key, None)
    return tree


def _check_numbered(source: str, first_line: int = 1) -> printing.Numbered:
    tree = _unplaced(source)
    numbered = printing.numbered(tree, first_line)
    assert numbered.text == ast.unparse(ast.parse(source))
    assert numbered.complete
    compile(tree, "<numbered>", "exec")  # every node has a position
    parsed = ast.parse("\n" * (first_line - 1) + numbered.text)
    for mine, theirs in zip(ast.walk(tree), ast.walk(parsed), strict=True):
        assert type(mine) is type(theirs)
        if "lineno" in theirs._attributes and hasattr(theirs, "lineno"):
            where = f"{type(mine).__name__} {ast.unparse(theirs)[:60]!r}"
            assert (mine.lineno, mine.end_lineno) == (theirs.lineno, theirs.end_lineno), where
            if isinstance(mine, ast.stmt):
                assert mine.col_offset == theirs.col_offset, where
    return numbered


@pytest.mark.parametrize("path", CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_positions_are_those_of_the_printed_text(path):
    _check_numbered(path.read_text())


EVERY_SHAPE = '''
"""A module docstring
over lines."""
import a.b as c
from d import (e as f, g)

@decorator
@other.decorator(1)
class Model(Base, metaclass=Meta):
    """One line."""

    @property
    def h(self, a, /, b: int = 1, *args: float, c, d=2, **kwargs: "str") -> None:
        """Lines of a docstring

        keep their indentation."""
        global G
        x = y[1:2, ::3] + y[i, j] + y[(i, j)] + y[()] + y[*a, b]
        print(f"{x!r:>{w}} and {y:.2f}\\n", f"{'q'}", "a\\nb")
        if x:
            pass
        elif y:
            if z:
                z = 1
            elif w:
                w = 2
            else:
                w = 3
        elif q:
            del q
        else:
            raise ValueError("no") from None
        try:
            g = lambda x, *y, z=3, **w: x
        except (ValueError, TypeError) as error:
            error = None
        else:
            pass
        finally:
            pass
        try:
            pass
        except* KeyError:
            pass
        with open(p) as f, other():
            assert f, "message"
        match command:
            case [x, *rest] if x > 0:
                pass
            case {"k": v, **others}:
                pass
            case Point(x=0, y=0) | None:
                pass
            case _:
                pass
        for i, (j, k) in enumerate(zip(a, b)):
            continue
        else:
            i = 0
        while (n := n - 1) > 0:
            yield {k: v for k, v in d.items()}, {s for s in t}, (g for g in h), [*a, *b]
        return a if a < b <= c else not d

    async def waits(self):
        async with lock:
            async for item in stream:
                return await item
'''


def test_every_shape_of_statement_and_expression():
    numbered = _check_numbered(EVERY_SHAPE, first_line=3)
    assert numbered.multiline_strings


def test_without_multiline_strings():
    assert not _check_numbered("def f(x):\n    'one line'\n    return f'{x}'\n").multiline_strings
