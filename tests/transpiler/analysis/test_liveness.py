from tests.transpiler.analysis.dump import dump


def test_branch_modified_names_live_after_the_if():
    assert dump(
        """
        def f(x, y):
            if x > 0:
                x = x * 2
                t = 1
                y = t
            return x
        """,
        "modified",
        "live_out",
    ) == ["if@3: modified={t, x, y} live_out={x}"]


def test_loop_temporaries_are_dead_at_the_top_of_the_body():
    assert dump(
        """
        def f(x, n):
            i = 0
            while i < n:
                tmp = x * 2
                x = tmp + i
                i += 1
            return x
        """,
        "live_out",
        "loop_live_in",
    ) == ["while@4: live_out={x} loop_live_in={i, n, x}"]


def test_for_target_is_live_only_if_read_after_the_loop():
    assert dump(
        """
        def f(xs):
            s = 0
            for v in xs:
                s = s + v
            for w in xs:
                s = s * w
            return s, w
        """,
        "live_out",
    ) == ["for@4: live_out={s, w, xs}", "for@6: live_out={s, w}"]  # xs may be empty: w stays live


def test_break_continue_and_return():
    assert dump(
        """
        def f(x, a, b):
            while x:
                if a:
                    break
                if b:
                    continue
                x = x - 1
            return a
        """,
        "live_out",
    ) == [
        "while@3: live_out={a}",
        "if@4: live_out={a, b, x}",
        "if@6: live_out={a, b, x}",
    ]


def test_names_read_by_closures_are_always_live():
    assert dump(
        """
        def f(x):
            g = lambda: x
            if x > 0:
                x = x + 1
            return g()
        """,
        "live_out",
    ) == ["if@4: live_out={g, x}"]
