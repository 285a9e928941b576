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
# The library's and the samples' (the tests' own sources add time, not shapes of code).
CODE = [p for p in SOURCES if p.relative_to(ROOT).parts[0] in ("transpiler", "runtime", "samples")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_round_trip_keeps_the_ast(path):
    source = path.read_text()
    printed = loading.unparse(gast.parse(source))
    assert ast.dump(ast.parse(printed)) == ast.dump(ast.parse(source))


def test_subscripts_with_tuples_print_as_valid_python():
    # The reason the project prints with ast.unparse and not astunparse 1.6.3.
    assert loading.unparse(gast.parse("y = x[:, 0]")) == "y = x[:, 0]"


def _definitions(tree: gast.Module):
    """(qualified name, definition) of the functions and methods at the top of a module."""
    for node in tree.body:
        if isinstance(node, gast.FunctionDef | gast.AsyncFunctionDef):
            yield node.name, node
        elif isinstance(node, gast.ClassDef):
            for item in node.body:
                if isinstance(item, gast.FunctionDef | gast.AsyncFunctionDef):
                    yield f"{node.name}.{item.name}", item


DEFINITION_CASES = '''
def documented(x):
    """Lines of a docstring

    keep their indentation: it is the string's."""
    return f"""{x}
    and more"""

class Owner:
    def method(self, x):
        return x + 1

    async def waits(self, x):
        return await x

def plain(x):
    if x > 0:
        x = x - 1
    return x
'''


@pytest.mark.parametrize(
    "path", [ROOT / "samples" / "greedy_decoder.py", ROOT / "samples" / "kmeans.py", None]
)
def test_compiled_definition_prints_as_the_definition_alone(path):
    # compile_function takes the definition's text from the printed module where it can.
    tree = gast.parse(DEFINITION_CASES if path is None else path.read_text())
    definitions = list(_definitions(tree))
    assert definitions
    for qualname, node in definitions:
        node.decorator_list = []
        compiled = loading.compile_function(node, (), "user.py", qualname)
        assert compiled.source == loading.unparse(node), qualname
        assert compiled.code.co_name == node.name
