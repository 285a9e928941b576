import pytest

from tests.transpiler.passes.run_pass import apply, expect
from transpiler.passes import control_flow, unbound_names


def convert(source):
    return apply(source, unbound_names, control_flow)


def test_if_else():
    generated, new, old = convert(
        """
        def f(x, y):
            if x > 0:
                x = x * 2
                t = y
            else:
                y = -y
            return x + y
        """
    )
    assert generated == expect(
        """
        def f(x, y):

            def if_true(x, y):
                x = x * 2
                t = y
                return (x, y)

            def if_false(x, y):
                y = -y
                return (x, y)
            x, y = rt__.if_stmt(x > 0, if_true, if_false, (x, y), symbol_names=('x', 'y'))
            return x + y
        """
    )
    for args in [(1, 2), (-1, 2), (0, 0)]:
        assert new(*args) == old(*args)


def test_undefined_placeholders_and_guarded_reads():
    generated, new, old = convert(
        """
        def f(x):
            if x:
                y = 1
            return y
        """
    )
    assert generated == expect(
        """
        def f(x):
            y = rt__.Undefined('y')

            def if_true(y):
                y = 1
                return (y,)
            y, = rt__.if_stmt(x, if_true, None, (y,), symbol_names=('y',), plain=True)
            return rt__.ld(y)
        """
    )
    assert new(True) == old(True) == 1
    with pytest.raises(UnboundLocalError):
        new(False)


def test_ifs_that_only_bind_names_to_names_or_numbers_are_marked_plain():
    # The runtime may select such an `if`'s variables without tracing its branches.
    def marked(body):
        source = f"def f(x, y, z):\n    global g\n    if x > 0:\n{body}\n    return y, z\n"
        generated, _, _ = convert(source)
        return "plain=True" in generated

    assert marked("        y = x\n        z = 1.5")
    assert marked("        y, z = z, -2")
    assert marked("        y = z = True")
    assert marked("        pass")
    for body in (
        "        y = x * 2",
        "        y = f(x)",
        "        y, z = z",
        "        y += 1",
        "        y = x\n        print(y)",
        "        g = 1",
    ):
        assert not marked(body), body


def test_while_with_else():
    generated, new, old = convert(
        """
        def f(n):
            i = 0
            total = 0
            while i < n:
                total += i
                i += 1
            else:
                total = -total
            return total
        """
    )
    assert generated == expect(
        """
        def f(n):
            i = 0
            total = 0

            def loop_test(i, total):
                return i < n

            def loop_body(i, total):
                total += i
                i += 1
                return (i, total)
            i, total = rt__.while_stmt(loop_test, loop_body, (i, total), symbol_names=('i', 'total'), reads=('i',), sums=('total',), counted=('i', lambda: n, 0), test_reads=('i',), compared=('i',))
            total = -total
            return total
        """
    )
    for n in (0, 1, 5):
        assert new(n) == old(n)


def test_for_over_range_with_target_used_after():
    generated, new, old = convert(
        """
        def f(n):
            s = 0
            for i in range(n):
                s = s + i
            return s, i
        """
    )
    assert generated == expect(
        """
        def f(n):
            i = rt__.Undefined('i')
            s = 0

            def loop_body(item, i, s):
                i = item
                s = s + i
                return (i, s)
            i, s = rt__.for_stmt(range(n), loop_body, (i, s), symbol_names=('i', 's'), last_item='i', sums=('s',))
            return (s, rt__.ld(i))
        """
    )
    assert new(4) == old(4)
    with pytest.raises(UnboundLocalError):
        new(0)


def test_for_with_tuple_target_and_no_state():
    # A method call is not an assignment: `log` is not state (the lists pass handles append).
    generated, new, old = convert(
        """
        def f(pairs, log):
            for a, b in pairs:
                log.append(a * b)
            return log
        """
    )
    assert generated == expect(
        """
        def f(pairs, log):

            def loop_body(item):
                a, b = item
                log.append(a * b)
                return ()
            rt__.for_stmt(pairs, loop_body, (), symbol_names=())
            return log
        """
    )
    assert new([(1, 2), (3, 4)], []) == old([(1, 2), (3, 4)], []) == [2, 12]


def test_statements_with_early_exits_stay_python():
    generated, new, old = convert(
        """
        def f(xs):
            for x in xs:
                if x < 0:
                    return x
                if x == 0:
                    break
            return None
        """
    )
    assert "for_stmt" not in generated and "if_stmt" not in generated
    for xs in ([1, -2], [1, 0, -1], []):
        assert new(xs) == old(xs)


def test_shadowed_range_is_left_alone():
    generated, _, _ = convert(
        """
        def f(range, n):
            for i in range(n):
                pass
        """
    )
    assert "rt__.range_" not in generated


def test_generated_names_follow_source_order():
    generated, new, old = convert(
        """
        def f(x, n):
            while x < n:
                if x > 0:
                    if x > 1:
                        x = x + 3
                else:
                    x = x + 3
            return x
        """
    )
    assert generated == expect(
        """
        def f(x, n):

            def loop_test(x):
                return x < n

            def loop_body(x):

                def if_true(x):

                    def if_true_1(x):
                        x = x + 3
                        return (x,)
                    x, = rt__.if_stmt(x > 1, if_true_1, None, (x,), symbol_names=('x',))
                    return (x,)

                def if_false(x):
                    x = x + 3
                    return (x,)
                x, = rt__.if_stmt(x > 0, if_true, if_false, (x,), symbol_names=('x',))
                return (x,)
            x, = rt__.while_stmt(loop_test, loop_body, (x,), symbol_names=('x',), reads=('x',), test_reads=('x',), compared=('x',))
            return x
        """
    )
    for args in [(-3, 5), (-4, 9), (2, 20), (7, 3)]:
        assert new(*args) == old(*args)
