"""The allow-list has a decision for every node type, and the fence pass applies it."""

import inspect
import pathlib
import re
import textwrap

import gast
import pytest

import transpiler
from tests.transpiler.passes.run_pass import context
from transpiler import fence
from transpiler.passes import fence as fence_pass

# Abstract bases: never instantiated, so never in a tree.
_ABSTRACT = {
    gast.AST,
    *(c for c in vars(gast).values() if inspect.isclass(c) and c.__subclasses__()),
}


def test_every_gast_node_type_has_a_decision():
    concrete = {
        c
        for c in vars(gast).values()
        if inspect.isclass(c) and issubclass(c, gast.AST) and c not in _ABSTRACT
    }
    missing = sorted(c.__name__ for c in concrete if c not in fence.FENCE)
    assert not missing, f"no decision for {missing}"
    for decision, note in fence.FENCE.values():
        assert isinstance(decision, fence.Decision) and note


def check(source):
    node = gast.parse(textwrap.dedent(source)).body[0]
    return fence_pass.transform(node, context(node))


@pytest.mark.parametrize(
    "source, message",
    [
        ("def f(xs):\n    yield xs\n", "generators ('yield') cannot be converted"),
        ("async def f(xs):\n    pass\n", "'async def' cannot be converted"),
        ("def f(x):\n    rt__x = 1\n", "reserved for generated code"),
        (
            "def f(xs):\n    try:\n        pass\n    finally:\n        return 1\n",
            "'return' inside 'finally' leaves the finally block",
        ),
        (
            "def f(xs):\n    for x in xs:\n        try:\n            return x\n"
            "        finally:\n            break\n",
            "'break' inside 'finally' leaves the finally block",
        ),
        (
            "def f(xs):\n    while xs:\n        try:\n            pass\n"
            "        finally:\n            if xs:\n                continue\n",
            "'continue' inside 'finally' leaves the finally block",
        ),
    ],
)
def test_refused(source, message):
    with pytest.raises(transpiler.ConversionError, match=re.escape(message)):
        check(source)


def test_jumps_that_stay_inside_finally_are_fine():
    check(
        """
        def f(xs):
            try:
                return xs
            finally:
                for x in xs:
                    if x:
                        break
                    continue
                def g():
                    return 1
        """
    )


def test_the_semantics_page_lists_every_statement_and_expression():
    page = (pathlib.Path(__file__).parents[2] / "docs" / "semantics.md").read_text()
    table = page[page.index("## Every construct") :]
    for node_type in fence.FENCE:
        if issubclass(node_type, (gast.stmt, gast.expr)):
            assert f"`{node_type.__name__}`" in table, node_type.__name__
