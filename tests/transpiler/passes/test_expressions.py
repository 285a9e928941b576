import textwrap

from tests.transpiler.passes.run_pass import apply
from transpiler.passes import conditional_expressions, logical_expressions


def test_conditional_expression():
    generated, new, old = apply(
        """
        def f(x):
            return x if x > 0 else (-x if x < -5 else 0)
        """,
        conditional_expressions,
    )
    assert generated == textwrap.dedent(
        """\
        def f(x):
            return rt__.if_exp(x > 0, lambda: x, lambda: rt__.if_exp(x < -5, lambda: -x, lambda: 0))"""
    )
    for x in (3, -7, -2):
        assert new(x) == old(x)


def test_boolean_operators():
    generated, new, old = apply(
        """
        def f(a, b, c):
            return (a or b) and not c or b
        """,
        logical_expressions,
    )
    assert generated == textwrap.dedent(
        """\
        def f(a, b, c):
            return rt__.and_or(rt__.or_(a, lambda: b), lambda: rt__.not_(c), lambda: b)"""
    )
    for args in [(0, 1, 0), (1, 0, 1), (1, 2, 3), ([], None, ""), (0, 0, 0)]:
        assert new(*args) == old(*args)
    generated, _, _ = apply(
        "def f(a, b, c, d):\n    return a and b and c or d", logical_expressions
    )
    assert "rt__.or_(rt__.and_(a, lambda: rt__.and_(b, lambda: c)), lambda: d)" in generated


def test_chained_comparisons():
    generated, new, old = apply(
        """
        def f(a, b, c):
            return 0 <= a < b < len(c) <= 10
        """,
        logical_expressions,
    )
    assert generated == textwrap.dedent(
        """\
        def f(a, b, c):
            return rt__.and_(0 <= a, lambda: rt__.and_(a < b, lambda: rt__.and_(b < (cmp := len(c)), lambda: cmp <= 10), lazy=True), lazy=True)"""
    )
    for args in [(1, 2, "abc"), (3, 2, "abc"), (0, 1, ""), (1, 2, "x" * 20)]:
        assert new(*args) == old(*args)
