"""`trees.to_gast` / `trees.to_ast` translate as gast's own translators do, over the project's
sources and over converted functions (nodes the passes made, annotations on them)."""

import ast

import gast
import pytest

from tests.transpiler.test_roundtrip import CODE, ROOT
from transpiler import parsing, pipeline, trees
from transpiler.analysis import callees


@pytest.mark.parametrize("path", CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_translations_are_gasts(path):
    tree = ast.parse(path.read_text())
    mine, theirs = trees.to_gast(tree), gast.ast_to_gast(tree)
    assert gast.dump(mine, include_attributes=True) == gast.dump(theirs, include_attributes=True)
    back, theirs_back = trees.to_ast(theirs), gast.gast_to_ast(theirs)
    assert ast.dump(back, include_attributes=True) == ast.dump(theirs_back, include_attributes=True)
    compile(back, str(path), "exec")


EVERY_DIFFERENCE = '''
def f(a, /, b: int = 1, *args: float, c, d=2, **kwargs: str) -> None:
    """Docstring."""
    try:
        g = lambda x, *y, z=3, **w: x
    except (ValueError, TypeError) as error:
        del error
    except KeyError:
        pass
    [v for v in args if v]
    return x[1:2, ::3]

class C(Base, metaclass=M):
    x: int = 0
'''


def test_every_difference_between_the_trees():
    # Parameters, `except ... as name`, type_params: what the translations do by hand.
    tree = ast.parse(EVERY_DIFFERENCE)
    mine, theirs = trees.to_gast(tree), gast.ast_to_gast(tree)
    assert gast.dump(mine, include_attributes=True) == gast.dump(theirs, include_attributes=True)
    back = trees.to_ast(mine)
    assert ast.dump(back, include_attributes=True) == ast.dump(tree, include_attributes=True)


def _converted(fn):
    parsed = parsing.parse_function(fn)
    closure = callees.closure_of(fn)
    return pipeline.run(parsed.node, fn.__globals__, fn.__code__.co_freevars, closure=closure).node


def _loop_with_everything(x, n):
    out = []
    for i in range(n):
        if x[i] > 0 and i % 2:
            out.append(x[i] * 2)
            continue
        elif x[i] < -1:
            break
        x = x + 1
    while n > 0:
        n = n - 1
    return out, x


def test_converted_trees_translate_as_gasts():
    # Nodes made by the passes: no positions, annotations in their dictionaries.
    node = _converted(_loop_with_everything)
    unplaced = ast.dump(trees.to_unplaced_ast(node))
    assert ast.dump(trees.to_ast(node)) == ast.dump(gast.gast_to_ast(node)) == unplaced
    assert "lineno" not in {k for n in ast.walk(trees.to_unplaced_ast(node)) for k in vars(n)}
