"""call_trees, lists, directives, print_statements, asserts: printed output and Python behaviour."""

import textwrap

import gast
import numpy as np
import pytest

import transpiler
from tests.transpiler.passes.run_pass import apply, context, expect
from transpiler import anno, loading
from transpiler.errors import ConversionError
from transpiler.naming import Namer
from transpiler.passes import asserts, call_trees, directives, lists, print_statements


def parse(source: str) -> gast.FunctionDef:
    return gast.parse(textwrap.dedent(source)).body[0]


def helper(x):
    return x


def test_call_trees_wraps_user_calls_and_leaves_library_calls():
    fn = parse(
        """
        def f(x, layer):
            y = helper(x) + layer(x) + np.sum(x) + int(x) + len(x) + isinstance(x, int)
            return self_made(y).mean()
        """
    )
    fn = call_trees.transform(fn, context(fn, {"helper": helper, "np": np}))
    assert loading.unparse(fn) == expect(
        """
        def f(x, layer):
            y = rt__.call(helper, x) + rt__.call(layer, x) + np.sum(x) + rt__.int_(x) + rt__.len_(x) + isinstance(x, int)
            return rt__.call(rt__.call(self_made, y).mean)
        """
    )


def test_lists_pass():
    generated, new, old = apply(
        """
        def f(xs):
            out = []
            for x in xs:
                out.append(x * 2)
            last = out.pop()
            out.pop()
            return np.stack(out), last
        """,
        lists,
    )
    assert generated == expect(
        """
        def f(xs):
            out = []
            for x in xs:
                out = rt__.list_append(out, x * 2)
            out, last = rt__.list_pop(out)
            out, _ = rt__.list_pop(out)
            return (rt__.stack_list(np.stack, out), last)
        """
    )


def test_lists_pass_leaves_globals_closures_and_attributes_alone():
    generated, _, _ = apply(
        """
        def f(x, obj):
            log.append(x)
            obj.items.append(x)
            return log
        """,
        lists,
    )
    assert "rt__" not in generated


def test_directives_read_loop_options():
    fn = parse(
        """
        def f(x):
            while x > 0:
                transpiler.loop_options(max_iterations=10)
                x = x - 1
        """
    )
    fn = directives.transform(fn, context(fn, {"transpiler": transpiler}))
    loop = fn.body[0]
    assert [loading.unparse(s) for s in loop.body] == ["x = x - 1"]
    options = anno.getanno(loop, anno.Static.LOOP_OPTIONS)
    assert {k: loading.unparse(v) for k, v in options.items()} == {"max_iterations": "10"}


def test_directives_reject_unknown_options():
    fn = parse(
        """
        def f(x):
            for i in x:
                loop_options(unroll=2)
        """
    )
    with pytest.raises(ConversionError, match="loop_options\\(\\) has no option 'unroll'"):
        directives.transform(fn, context(fn, {"loop_options": transpiler.loop_options}))


def test_print_statements_only_rewrite_the_builtin():
    fn = parse("def f(x):\n    print('x', x, sep='=')\n")
    assert "rt__.print_('x', x, sep='=')" in loading.unparse(
        print_statements.transform(fn, context(fn))
    )
    shadowed = parse("def f(x, print):\n    print(x)\n")
    assert "rt__" not in loading.unparse(print_statements.transform(shadowed, context(shadowed)))


def test_asserts_keep_the_message_lazy():
    generated, new, old = apply(
        """
        def f(x):
            assert x > 0, expensive(x)
            assert x < 10
            return x
        """,
        asserts,
    )
    assert generated == expect(
        """
        def f(x):
            rt__.assert_(x > 0, lambda: expensive(x))
            rt__.assert_(x < 10)
            return x
        """
    )
    assert new(3) == old(3) == 3  # `expensive` is never evaluated: it does not even exist
    with pytest.raises(AssertionError):
        new(11)


def test_namer_gives_fresh_names():
    assert Namer({"a"}).new("a") == "a_1"
