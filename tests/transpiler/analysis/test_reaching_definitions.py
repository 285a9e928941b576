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


def test_walrus_and_with_and_except_bind_names_and_the_handler_unbinds_its_name():
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
    ) == ["if@4: defined_in={fh, x}", "if@10: defined_in={fh, n, x}"]


def test_must_be_bound_needs_every_path():
    assert dump(
        """
        def f(xs, p):
            for x in xs:
                if x:
                    step = 2
                else:
                    step = 1
                if step:
                    pass
            if p:
                y = 1
            else:
                return 0
            if y:
                del y
            while p:
                pass
        """,
        "defined_in",
        "must",
    ) == [
        "for@3: defined_in={p, xs} must={p, xs}",
        "if@4: defined_in={p, step, x, xs} must={p, x, xs}",
        "if@8: defined_in={p, step, x, xs} must={p, step, x, xs}",
        "if@10: defined_in={p, step, x, xs} must={p, xs}",
        "if@14: defined_in={p, step, x, xs, y} must={p, xs, y}",
        "while@16: defined_in={p, step, x, xs, y} must={p, xs}",
    ]


def test_match_cases_bind_their_captures():
    assert dump(
        """
        def f(k):
            match k:
                case [a, *rest]:
                    if a:
                        pass
                case {"key": v, **others}:
                    if v:
                        pass
                case Point(x=px) as point:
                    if px:
                        pass
            if k:
                pass
        """,
        "must",
    ) == [
        "if@5: must={a, k, rest}",
        "if@8: must={k, others, v}",
        "if@11: must={k, point, px}",
        "if@13: must={k}",
    ]


def test_a_del_in_a_loop_body_unbinds_the_name_for_later_iterations():
    assert dump(
        """
        def f(x, n):
            y = x
            for i in range(n):
                if i:
                    z = y
                if i > 1:
                    del y
            while x:
                if x:
                    del x
        """,
        "must",
    ) == [
        "for@4: must={n, x, y}",
        "if@5: must={i, n, x}",
        "if@7: must={i, n, x}",
        "while@9: must={n, x}",
        "if@10: must={n}",
    ]


def test_while_true_is_left_by_its_breaks_only():
    assert dump(
        """
        def f(x):
            while True:
                if x:
                    found = x
                    break
                x = x - 1
            if found:
                pass
            for v in x:
                if v:
                    hit = v
                    break
            if hit:
                pass
        """,
        "must",
    ) == [
        "while@3: must={x}",
        "if@4: must={x}",
        "if@8: must={found, x}",
        "for@10: must={found, x}",
        "if@11: must={found, v, x}",
        "if@14: must={found, x}",
    ]


def test_a_handler_cannot_count_on_a_name_the_try_body_deletes():
    assert dump(
        """
        def f(x):
            y = x
            try:
                del y
                x = int(x)
            except ValueError:
                if x:
                    pass
        """,
        "must",
    ) == ["if@8: must={x}"]
