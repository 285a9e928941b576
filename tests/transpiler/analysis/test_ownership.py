"""Which names own their lists and dicts, and which functions change others in place."""

import textwrap

import gast
import pytest

from transpiler.analysis import ownership


def _function(source: str) -> gast.FunctionDef:
    return gast.parse(textwrap.dedent(source)).body[0]


OWNERSHIP = """
def f(x, cfg, obj):
    best = [x, x]               # owned: new lists only, looked inside only
    hist = []
    hist = rt__.list_append(hist, best[0])
    q = {"a": 1}
    q["b"] = 2
    t = [x]
    if t:
        best = [x + 1, x]
    n = rt__.len_(best) + jnp.sum(jnp.stack(hist))
    opts = cfg                  # a parameter's dict
    other = [1]
    alias = other               # two names reach one list
    kept = [2]
    obj.h = kept                # handed to an object
    z = [4]
    w = rt__.call(helper, z)    # handed to a function
    u = [5]
    hist = rt__.list_append(hist, u)  # kept inside another list
    a, b = [1], [2]             # bound by unpacking
    def g():
        return t
    do_return = False
    retval = rt__.UndefinedReturnValue()
    retval = best               # the return pass's variable: a return
    return best, q
"""


def test_owned_names_are_the_lists_only_their_name_reaches():
    owned = ownership.owned_names(_function(OWNERSHIP))
    assert {"best", "hist", "q", "retval"} <= owned
    assert not owned & {"opts", "other", "alias", "kept", "z", "u", "a", "b", "t", "cfg", "x"}


@pytest.mark.parametrize(
    "body, changed",
    [
        ("m = [1]\n    m[0] = 2", set()),  # its own list
        ("h[0] = 2", {"h"}),  # a parameter's
        ("obj.items[0][1] = 2", {"obj.items"}),
        ("del d[k]", {"d"}),
        ("h += [1]", {"h"}),  # extends the list itself
        ("n += 1", set()),  # a number, as far as anyone can tell
        ("m = [1]\n    m = rt__.list_append(m, 2)", set()),
        ("h = rt__.list_append(h, 2)", {"h"}),
        ("rt__.call(d.update, a=2)", {"d"}),
        ("m = rt__.call(dict, d)\n    m['a'] = 1", set()),  # the call pass's dict(d): a copy
        ("y = h[0] + 1", set()),
        ("def g():\n        h[0] = 1", set()),  # a nested function's own code
    ],
)
def test_changed_in_place_through_names_it_does_not_own(body, changed):
    fn = _function(f"def f(h, d, k, obj):\n    {body}\n")
    assert ownership.changed_in_place(fn, ownership.owned_names(fn)) == changed
