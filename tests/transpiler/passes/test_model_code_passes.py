"""call_trees, lists, directives, print_statements, asserts: printed output and Python behaviour."""

import textwrap

import gast
import jax
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
        globals_={"np": np},
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


def test_lists_pass_rewrites_item_assignment():
    generated, new, old = apply(
        """
        def f(xs, i):
            out = []
            for x in xs:
                out.append(x)
                out[-1] = x * 2
                out[i] += x
                out[len(out) - 1] = x
                out[0] += abs(x)
                out[1:] = []
            return out
        """,
        lists,
    )
    # The value before an index that calls code; `+=` of a value that calls code stays as it
    # is (Python reads the item first), and so does a slice (it may change the length).
    assert generated == expect(
        """
        def f(xs, i):
            out = []
            for x in xs:
                out = rt__.list_append(out, x)
                out = rt__.list_setitem(out, -1, x * 2)
                out = rt__.list_update(out, i, '+', x)
                item = x
                out = rt__.list_setitem(out, len(out) - 1, item)
                out[0] += abs(x)
                out[1:] = []
            return out
        """
    )
    assert new([1.0, 2.0], 0) == old([1.0, 2.0], 0) == [6.0]


def test_lists_pass_drops_a_list_nothing_reads():
    generated, new, old = apply(
        """
        def f(x, calls):
            log = []
            while x > 1.0:
                x = x * 0.5
                log.append(calls.append(x))
            return x
        """,
        lists,
    )
    # The item is still evaluated (here: a call), and nothing is carried for `log`.
    assert generated == expect(
        """
        def f(x, calls):
            log = []
            while x > 1.0:
                x = x * 0.5
                calls.append(x)
            return x
        """
    )
    seen_new, seen_old = [], []
    assert new(10.0, seen_new) == old(10.0, seen_old) == 0.625
    assert seen_new == seen_old == [5.0, 2.5, 1.25, 0.625]


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


def test_lists_pass_keeps_the_real_append_of_a_list_another_reference_may_see():
    # Rebinding the name would leave the other reference with the list as it was.
    cases = {
        "parameter": "def f(x, out):\n    out.append(x)\n    return out",
        "alias": "def f(x):\n    out = []\n    alias = out\n    out.append(x)\n    return alias",
        "attribute": "def f(x, obj):\n    out = obj.items\n    out.append(x)\n    return obj",
        "stored": "def f(x, obj):\n    out = []\n    obj.items = out\n    out.append(x)",
        "container": "def f(x):\n    out = []\n    d = {'h': out}\n    out.append(x)\n    return d",
        "tuple": "def f(x):\n    out = []\n    t = (out, 1)\n    out.append(x)\n    return t",
        "user call": "def f(x):\n    out = []\n    keep(out)\n    out.append(x)\n    return out",
        "closure": "def f(x):\n    out = []\n    g = lambda: out\n    out.append(x)\n    return g",
        "or": "def f(x):\n    out = []\n    y = out or []\n    out.append(x)\n    return y",
        "iterator": "def f(x):\n    out = []\n    it = iter(out)\n    out.append(x)\n    return it",
        "unpacked": "def f(x, p):\n    out, y = p\n    out.append(x)\n    return out",
        # (`out += [x]`, a display, is written as appends: see
        # test_lists_pass_writes_an_extension_by_a_display_as_appends)
        "augmented": "def f(x, o):\n    out = []\n    out += o\n    out.append(x)\n    return out",
        "kept by jax": "def f(x):\n    out = []\n    p = jax.tree_util.Partial(g, out)\n"
        "    out.append(x)\n    return p",
    }
    for label, source in cases.items():
        generated, new, old = apply(source, lists, globals_={"keep": print, "jax": jax})
        assert "rt__" not in generated, label


def test_lists_pass_rewrites_a_list_only_read_where_no_reference_stays():
    generated, _, _ = apply(
        """
        def f(xs):
            out = []
            for x in xs:
                out.append(x)
            total = sum(out) + len(out) + out[0] + out[-1]
            for i, v in enumerate(out):
                total = total + v
            if out and not out == [] and xs[0] in out and bool(out):
                print(out, sorted(out), f"{out}")
            return np.mean(np.stack(out)) + total, out
        """,
        lists,
        globals_={"np": np},
    )
    assert "out = rt__.list_append(out, x)" in generated
    assert "rt__.stack_list(np.stack, out)" in generated
    generated, _, _ = apply(
        "def f(x):\n    out = []\n    out.append(x)\n    return jax.numpy.stack(out)",
        lists,
        globals_={"jax": jax},
    )
    assert "rt__.stack_list(jax.numpy.stack, out)" in generated


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


def test_lists_pass_writes_an_extension_by_a_display_as_appends():
    generated, _, _ = apply(
        """
        def f(x, o):
            out = []
            out += [x, x * 2]
            out.extend((x,))
            o += [x]
            return out, o
        """,
        lists,
    )
    assert generated.count("rt__.list_append(out,") == 3
    assert "o += [x]" in generated  # a parameter: it may be a tuple, or an array
