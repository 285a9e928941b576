"""Parse -> gast -> print, with no passes, over the project's own sources: nothing is lost."""

import ast
import pathlib

import gast
import pytest

from transpiler import loading

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SOURCES = sorted(
    p
    for d in ("transpiler", "runtime", "samples", "tests", "benchmarks")
    for p in (ROOT / d).rglob("*.py")
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_round_trip_keeps_the_ast(path):
    source = path.read_text()
    printed = loading.unparse(gast.parse(source))
    assert ast.dump(ast.parse(printed)) == ast.dump(ast.parse(source))


def test_subscripts_with_tuples_print_as_valid_python():
    # The reason the project prints with ast.unparse and not astunparse 1.6.3.
    assert loading.unparse(gast.parse("y = x[:, 0]")) == "y = x[:, 0]"
