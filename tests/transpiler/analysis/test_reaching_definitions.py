from tests.transpiler.analysis.dump import dump


def test_names_defined_before_each_statement():
    assert dump(
        """
        def f(x):
            if x:
                y = 1
            else:
                z = 2
            while x:
                w = y
            for i in range(3):
                pass
            return w
        """,
        "defined_in",
    ) == [
        "if@3: defined_in={x}",
        "while@7: defined_in={x, y, z}",
        "for@9: defined_in={w, x, y, z}",
    ]


def test_loop_bodies_see_their_own_earlier_iterations():
    assert dump(
        """
        def f(xs):
            for x in xs:
                if x:
                    prev = x
        """,
        "defined_in",
    ) == ["for@3: defined_in={xs}", "if@4: defined_in={prev, x, xs}"]


def test_walrus_and_with_and_except_bind_names():
    assert dump(
        """
        def f(x):
            with open(x) as fh:
                if (n := len(x)):
                    pass
            try:
                pass
            except ValueError as err:
                pass
            if x:
                pass
        """,
        "defined_in",
    ) == ["if@4: defined_in={fh, x}", "if@10: defined_in={err, fh, n, x}"]
