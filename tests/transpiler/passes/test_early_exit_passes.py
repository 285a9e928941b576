"""The early-exit passes on their own: readable output that still runs as plain Python."""

import inspect
import textwrap

import gast

import transpiler
from tests.transpiler.passes.run_pass import apply, context, expect
from transpiler import anno, loading
from transpiler.passes import break_statements, continue_statements, return_statements


def inner_break(m):
    count = 0
    for row in m:
        for v in row:
            if v < 0:
                break
            count += 1
        else:
            count += 100
    return count


def test_break_then_control_flow_behaves_like_python():
    for m in ([[1, -1, 1], [1, 1]], [[-1], []]):
        assert transpiler.convert(inner_break)(m) == inner_break(m)


def test_continue():
    generated, new, old = apply(
        """
        def f(xs):
            total = 0
            for x in xs:
                if x < 0:
                    continue
                total += x
            return total
        """,
        continue_statements,
    )
    assert generated == expect(
        """
        def f(xs):
            total = 0
            for x in xs:
                did_continue = False
                if x < 0:
                    did_continue = True
                else:
                    total += x
            return total
        """
    )
    for xs in ([1, -2, 3], [], [-1]):
        assert new(xs) == old(xs)


def test_the_rest_of_a_block_goes_into_each_path_that_does_not_jump():
    # A `continue` under an `elif`: the rest of the body runs on two paths, the first branch's
    # and the inner else, and is copied into both (no flag guard: one staged `if`).
    generated, new, old = apply(
        """
        def f(xs, k):
            out = []
            for i, x in enumerate(xs):
                if x > 0:
                    pass
                elif i % k == 0:
                    out.append(x)
                    continue
                out.append(-x)
            return out
        """,
        continue_statements,
    )
    assert generated == expect(
        """
        def f(xs, k):
            out = []
            for i, x in enumerate(xs):
                did_continue = False
                if x > 0:
                    pass
                    out.append(-x)
                elif i % k == 0:
                    out.append(x)
                    did_continue = True
                else:
                    out.append(-x)
            return out
        """
    )
    for xs, k in (([1, -2, 3, -4, -5], 2), ([], 1), ([-1, -1], 3)):
        assert new(xs, k) == old(xs, k)


def test_a_long_rest_on_many_paths_is_guarded_by_the_flag_instead():
    # Copying it into every path would grow the code (and the graph) past MAX_COPIED_NODES.
    rest = "\n".join(f"        total = total * 2 + x + {k}" for k in range(40))
    source = (
        "def f(xs):\n"
        "    total = 0\n"
        "    for x in xs:\n"
        "        if x > 0:\n"
        "            pass\n"
        "        elif x < -5:\n"
        "            continue\n"
        f"{rest}\n"
        "    return total\n"
    )
    generated, new, old = apply(source, continue_statements)
    assert "if not did_continue:" in generated
    assert generated.count("total = total * 2 + x + 39") == 1
    for xs in ([1, -6, -2], [], [-7]):
        assert new(xs) == old(xs)


def test_break_in_while_with_else():
    generated, new, old = apply(
        """
        def f(n, stop):
            i = 0
            while i < n:
                if i == stop:
                    break
                i += 1
            else:
                i = -1
            return i
        """,
        break_statements,
    )
    assert generated == expect(
        """
        def f(n, stop):
            i = 0
            did_break = False
            while not did_break and i < n:
                if i == stop:
                    did_break = True
                else:
                    i += 1
            if not did_break:
                i = -1
            return i
        """
    )
    for args in [(5, 2), (5, 9), (0, 0)]:
        assert new(*args) == old(*args)


def test_a_leading_break_of_a_while_is_its_exit_test():
    # Kept first and marked: the control-flow pass makes it the loop's exit test
    # (`rt__.while_stmt(..., exit_test=...)`), which the staged loop's condition tests.
    generated, new, old = apply(
        """
        def f(n, stop):
            i = 0
            while i < n:
                if i == stop:
                    break
                elif i > 100:
                    break
                else:
                    i += 2
                i -= 1
            return i
        """,
        break_statements,
    )
    assert generated == expect(
        """
        def f(n, stop):
            i = 0
            while i < n:
                if i == stop or i > 100:
                    break
                i += 2
                i -= 1
            return i
        """
    )
    for args in [(5, 2), (5, 9), (0, 0), (300, 400)]:
        assert new(*args) == old(*args)


def test_a_leading_break_that_empties_the_body():
    generated, new, old = apply(
        """
        def f(xs):
            i = 0
            while True:
                if xs[i] < 0:
                    break
            return i
        """,
        break_statements,
    )
    assert "while True:\n        if xs[i] < 0:\n            break\n    return i" in generated
    assert new([-1]) == old([-1]) == 0


def test_break_in_for_sets_the_extra_test():
    fn = gast.parse(
        textwrap.dedent(
            """
            def f(xs):
                for x in xs:
                    x = x - 1
                    if x:
                        break
            """
        )
    ).body[0]
    fn = break_statements.transform(fn, context(fn))
    loop = fn.body[1]
    assert loading.unparse(anno.getanno(loop, anno.Static.EXTRA_TEST)) == "not did_break"


def test_a_leading_break_of_a_for_stays_as_its_exit_guard():
    # The control-flow pass makes it the loop's exit test (runtime/exits.py): no flag.
    fn = gast.parse(
        textwrap.dedent(
            """
            def f(xs):
                for x in xs:
                    if x > 2:
                        found = x
                        break
                    x = x - 1
                    if x:
                        break
            """
        )
    ).body[0]
    fn = break_statements.transform(fn, context(fn))
    loop = fn.body[1]
    guard = loop.body[0]
    assert anno.hasanno(guard, anno.Static.EXIT_GUARD)
    assert loading.unparse(guard).strip() == "if x > 2:\n    found = x\n    break"
    # The other break is the loop's flag, as ever.
    assert loading.unparse(anno.getanno(loop, anno.Static.EXTRA_TEST)) == "not did_break"


def test_break_of_an_inner_loop_leaves_only_that_loop():
    generated, _, _ = apply(inspect.getsource(inner_break), break_statements)
    assert generated == expect(
        """
        def inner_break(m):
            count = 0
            for row in m:
                did_break = False
                for v in row:
                    if v < 0:
                        did_break = True
                    else:
                        count += 1
                if not did_break:
                    count += 100
            return count
        """
    )
    # The outer loop has no break of its own. The inner `for` stops through its EXTRA_TEST, which
    # only the control-flow pass applies: run as plain Python here, it would go on iterating.
    assert "did_break_1" not in generated


def test_returns():
    generated, new, old = apply(
        """
        def f(x):
            if x > 10:
                return x * 2
            y = x + 1
            return y
        """,
        return_statements,
    )
    assert generated == expect(
        """
        def f(x):
            do_return = False
            retval = rt__.UndefinedReturnValue()
            if x > 10:
                retval = x * 2
                do_return = True
            else:
                y = x + 1
                retval = y
                do_return = True
            return retval
        """
    )
    for x in (20, 3):
        assert new(x) == old(x)


def test_return_inside_a_loop_breaks_out_and_falling_off_returns_none():
    generated, new, old = apply(
        """
        def f(xs):
            for x in xs:
                if x > 0:
                    return x
        """,
        return_statements,
    )
    assert generated == expect(
        """
        def f(xs):
            do_return = False
            retval = rt__.UndefinedReturnValue()
            for x in xs:
                if x > 0:
                    retval = x
                    do_return = True
                    break
            if not do_return:
                retval = None
                do_return = True
            return retval
        """
    )
    for xs in ([-1, 2, 3], [-1], []):
        assert new(xs) == old(xs)


def test_single_final_return_is_left_alone():
    generated, _, _ = apply("def f(x):\n    y = x\n    return y\n", return_statements)
    assert generated == "def f(x):\n    y = x\n    return y"


def test_flags_are_named_in_source_order():
    generated, _, _ = apply(
        """
        def f(xs):
            for x in xs:
                for y in xs:
                    y = y + 1
                    if y:
                        break
                if x:
                    break
            return 0
        """,
        break_statements,
    )
    outer, inner = generated.index("did_break = False"), generated.index("did_break_1 = False")
    assert outer < inner
