import textwrap

import gast
import pytest

from transpiler.analysis import activity, item_uses


def loop(body: str) -> gast.For:
    source = "for i in range(4):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return _marked(gast.parse(source).body[0])  # as the pass context marks a function's reads


@pytest.mark.parametrize(
    "body",
    [
        "x = x * 2 + i",
        "x = xs[i] + ys[i, 0]",
        "y = xs[i]\nz = y.mean()",  # an item of xs, not the index
        "j = i + 1\nx = x + jnp.sin(j)",
        "if i > 2:\n    x = -x",
        "x = x + rt__.float_(i)",
        "rt__.print_(rt__.fstring('i=', (i, '', '')))",
        "x = x + (i if x > 0 else 0)",
        "x = x ** i",
        "x = x + i ** 2",
        "x = x + jnp.sum(m[i, :])",
        "if i >= n:\n    out = rt__.list_append(out, x)",  # n may be traced anyway
        "if i % 2 == 0:\n    x = x + 1",
        # an item of what a read of the index makes: followed up as that value
        "members = labels == i\nx = x + jnp.sum(m * members[:, None], axis=0)",
        "k = i + 1\nx = x + ~k - (-k)",  # ints: the same in int32
        "b = i % 2 == 0\nx = x + jnp.where(b & (i > 1), 1.0, 0.0)",
        # an item of a list or tuple the body builds of Python scalars: followed as one
        "pair = (i, 1)\nx = x + pair[0] * pair[1]",
        "best = [i, best[0], best[1]]\nx = x + best[2]",
        "p = (i + 1, i % 3)\nk = p[1]\nx = x + xs[k]",
        # times an item read at the index: an array either way
        "if xs[i] > t:\n    kept = rt__.list_append(kept, xs[i] * i)",
        "kept = rt__.list_append(kept, i * m[i, 0] + 1)",
    ],
)
def test_array_uses(body):
    assert not item_uses.uses_items_as_python(loop(body))


@pytest.mark.parametrize(
    "body",
    [
        "key = f'w{i}'",
        "x = x + 2 ** -i",
        "name = str(i)",
        "ok = isinstance(i, int)",
        "x = rt__.call(helper, x, i)",
        "for j in rt__.range_(i):\n    x = x + j",
        "j = i * 2\nkey = 'k' + str(j)",
        "d = {i: x}",
        "b = i.bit_length()",
        "j = rt__.max_(i, 1)\nx = x * 2 ** -j",
        "def scale(v):\n    return v * i\nx = rt__.call(scale, x)",
        "x = x + 10 ** i",
        "x = x + 1.0 / i",
        "x = x + (1.0, 5.0)[i > 0]",
        "x = x + jnp.sum(xs[:i])",
        "key = 'w%d' % i",
        "x = x + i ** -1",
        "x = x + i ** k",
        "x = x + jnp.sum(m[:, :i])",
        "if i is ZERO:\n    x = x + 1",
        "if i % 2 == 0:\n    out = rt__.list_append(out, x)",
        "if i > 1:\n    pass\nelse:\n    out, last = rt__.list_pop(out)",
        "pair = (i, 1)\nkey = str(pair[0])",
        "pair = (i, 1)\nkey = f'w{pair[0]}'",
        "p = [i]\nq = p[0] / 3\nrt__.print_(q)",
        "p = (i, -1)\nx = x + 2.0 ** p[1] * i",
        "k = (i, 0)\nx = x + jnp.sum(xs[: k[0]])",
        "p = (i, 2)\nx = x + rt__.call(helper, p[0])",
        # an item of a tuple the body built of other than Python scalars
        "rows = [[i, 1], [2, 3]]\nx = x + rows[0][0]",
        "p = (i, xs)\nx = x + p[0]",
        "p = (i, 1)\nx = x + p[:1][0]",
        # an item of a tuple the body built of Python scalars, computed as Python does
        "p = [i, 1]\nx = x + p[0] * 1000000000",
        # a float made of an item of such a list, printed: Python's digits (helper 158)
        "hist = [i, hist[0]]\nfrac = hist[0] / n\nrt__.print_(frac)",
        "hist = [i, hist[0]]\nrt__.print_(hist[0] * dt)",
        "p = [i > 2, 1]\nx = x + (p[0] + p[1])",
        "p = rt__.max_((i, 1), (0, 0))\nrt__.print_(p[0] / n)",  # one of the tuples (helper 144)
        "p = (i % 2 == 0, 2)\nx = x + (-p[0])",
        # what Python does with a bool made of the index: an int
        "b = i % 2 == 0\nx = x + ~b",
        "b = i % 2 == 0\nx = x + (b + b)",
        "x = x - (i > 2)",
        # past int32, where Python's ints go on
        "x = x + i * 1000000000",
        "x = x + (i << 30)",
        # a Python number made of the index has no axes to index (`k[None]` raises)
        "k = i + 0\nx = x + jnp.sum(k[None])",
        # into a list: a Python int there where Python's loop runs
        "out = rt__.list_append(out, i)",
        "out = rt__.list_append(out, xs[0] * i)",  # `xs` may be a list: not read at a tracer
        "out = rt__.list_append(out, xs[i] / i)",  # `1 / i` raises in Python
        "frac = i / 3\nout = rt__.list_append(out, xs[i] * frac)",  # a float64 in Python
    ],
)
def test_python_uses(body):
    assert item_uses.uses_items_as_python(loop(body))


def test_a_negative_range_index_is_no_exponent():
    body = "x = x ** i\n"
    negative = _marked(gast.parse("for i in range(-3, 3):\n    " + body).body[0])
    assert item_uses.uses_items_as_python(negative)
    positive = _marked(gast.parse("for i in range(1, 9, 2):\n    " + body).body[0])
    assert not item_uses.uses_items_as_python(positive)


def test_an_item_of_the_index_raises_differently_under_a_try():
    # `i[0]`: TypeError in Python, IndexError staged; a handler may catch only one of them.
    body = loop("members = labels == i\nx = x + members[0]")
    assert not item_uses.uses_items_as_python(body)
    assert item_uses.uses_items_as_python(body, catches=True)


def _marked(node: gast.For) -> gast.For:
    activity.mark_module_reads(node)
    return node


def test_an_index_read_after_the_loop_keeps_it_python():
    for_loop = loop("x = x + 1")
    assert item_uses.uses_items_as_python(for_loop, frozenset({"i"}))
    assert not item_uses.uses_items_as_python(for_loop, frozenset({"x"}))


def enumerated(body: str) -> gast.For:
    source = "for i, x in rt__.enumerate_(xs):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return _marked(gast.parse(source).body[0])


@pytest.mark.parametrize(
    "body, found",
    [
        ("out = rt__.list_append(out, x)", "items"),  # the rows of an array: arrays either way
        ("out = rt__.list_append(out, x * i)", "items"),
        ("y = y + x * i", False),
        ("name = str(x)", "items"),
        ("name = str(i)", True),
        ("out = rt__.list_append(out, i)", True),
        ("x = i\nout = rt__.list_append(out, x * i)", True),  # `x` rebound: not the row
    ],
)
def test_the_index_and_the_items_of_enumerate_apart(body, found):
    # "items": only the items are used as Python values, Python's where `xs` is a Python list,
    # arrays where it is an array (the runtime tells them apart); True: the index, Python's
    # int either way.
    assert item_uses.uses_items_as_python(enumerated(body)) == found


def test_a_list_of_the_index_read_after_the_loop_keeps_it_python_unless_stacked():
    # After the loop, `str(last[0])` is text of a Python int in Python: the loop runs as Python
    # (helper 158); `jnp.stack(best)` makes an array of it either way.
    source = textwrap.dedent(
        """
        def f(x):
            last = [-1, -1]
            for i in range(4):
                last = [i, last[0]]
                x = x + 1.0
            return x, USE
        """
    )
    for use, python in (("str(last[0])", True), ("{last[0]: x}", True), ("jnp.stack(last)", False)):
        scope = gast.parse(source.replace("USE", use)).body[0]
        activity.mark_module_reads(scope)
        for_loop = scope.body[1]
        live = frozenset({"x", "last"})
        assert bool(item_uses.uses_items_as_python(for_loop, live, scope=scope)) == python, use
