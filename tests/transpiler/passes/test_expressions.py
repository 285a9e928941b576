import textwrap

import transpiler
from tests.transpiler.passes.run_pass import apply, expect
from transpiler.passes import conditional_expressions, logical_expressions, pick_checks


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


def test_pick_checks_go_before_the_stores_and_returns_of_a_function_that_picks():
    generated, new, old = apply(
        """
        def f(ps, k):
            best = min(ps, key=lambda p: p["w"])
            ps[k]["w"], n = 0.0, 1
            if n:
                return best
            best.scale = 2
        """,
        pick_checks,
    )
    assert generated == expect(
        """
        def f(ps, k):
            best = min(ps, key=lambda p: p['w'])
            rt__.let_go()
            ps[k]['w'], n = (0.0, 1)
            if n:
                rt__.let_go()
                return best
            rt__.let_go()
            best.scale = 2
            rt__.let_go()"""
    )
    assert new([{"w": 2.0}, {"w": 1.0}], 0) == old([{"w": 2.0}, {"w": 1.0}], 0)


def test_a_function_that_picks_nothing_gets_no_pick_checks():
    source = "def f(d, x):\n    d['w'] = x\n    return d"
    generated, _, _ = apply(source, pick_checks)
    assert "let_go" not in generated
    assert "let_go" not in transpiler.to_source(_store_only)


def _store_only(d, x):
    d["w"] = x
    return d


def test_a_pick_read_for_the_last_time_is_handed_to_the_check_after_it():
    generated, new, old = apply(
        """
        def f(ps):
            best = min(ps, key=lambda p: p["w"])
            bw = best["w"]
            total = 0.0
            for p in ps:
                p["w"] = p["w"] - bw
            return total
        """,
        pick_checks,
    )
    assert generated == expect(
        """
        def f(ps):
            best = min(ps, key=lambda p: p['w'])
            bw = best['w']
            rt__.let_go(best)
            total = 0.0
            for p in ps:
                rt__.let_go()
                p['w'] = p['w'] - bw
            rt__.let_go()
            return total"""
    )
    assert new([{"w": 2.0}, {"w": 1.0}]) == old([{"w": 2.0}, {"w": 1.0}])


def test_plain_choices_are_marked_for_the_runtime():
    # Names and number literals on both sides compute nothing and have no effect: the runtime
    # may select them without tracing either side. Anything that runs an object's code is not.
    def flags(source):
        generated, _, _ = apply(source, conditional_expressions)
        return generated.count("plain=True")

    assert flags("def f(x, y):\n    return x if x > 0 else y") == 1
    assert flags("def f(x):\n    return 1 if x > 0 else -1.5") == 1
    assert flags("def f(x):\n    return True if x > 0 else False") == 1
    for side in ("-x", "x.w", "x[0]", "f(x)", "'a'", "None", "(x, x)"):
        assert flags(f"def f(x):\n    return {side} if x > 0 else 0") == 0, side
