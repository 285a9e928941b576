"""Which names own their lists and dicts, and which functions change others in place."""

import textwrap

import gast
import pytest

from transpiler.analysis import activity, ownership


def _function(source: str) -> gast.FunctionDef:
    """The function, with the reads of builtins marked as the pass context marks them."""
    fn = gast.parse(textwrap.dedent(source)).body[0]
    activity.mark_module_reads(fn)
    return fn


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
    a, b = [1], [2]             # owned: each bound to a new list by unpacking
    c, e = [3], kept            # `e` reaches `kept`, which another name holds
    def g():
        return t
    do_return = False
    retval = rt__.UndefinedReturnValue()
    retval = best               # the return pass's variable: a return
    return best, q
"""


def test_owned_names_are_the_lists_only_their_name_reaches():
    owned = ownership.owned_names(_function(OWNERSHIP))
    assert {"best", "hist", "q", "a", "b", "c"} <= owned
    assert not owned & {"opts", "other", "alias", "kept", "z", "u", "e", "t", "cfg", "x"}
    # The return value is the caller's to hold (and change in place): `retval = best` leaves
    # `best` owned, and `retval` is not.
    assert "retval" not in owned


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


def _aliased_at(source: str) -> dict[int, frozenset[str]]:
    """`aliased_after` by the line of each statement."""
    fn = _function(source)
    return {stmt.lineno: names for stmt, names in ownership.aliased_after(fn).items()}


def test_aliases_of_a_container_changed_after_a_statement_are_aliased_there():
    found = _aliased_at(
        """
        def f(h, c, k):
            p = h
            if c:           # line 4
                b = p
            p[0] = 1
            q = k if c else h
            while c:        # line 8
                h = [1]
                r = q
                r[0] = 2
            return b
        """
    )
    # After line 4, `p` and `r` are changed in place; bindings join p, h, b, q, k and r.
    assert found[4] == {"p", "h", "b", "q", "k", "r"}
    # After the loop nothing is changed (its own `r[0] = 2` the loop follows itself).
    assert found[8] == frozenset()


def test_a_change_before_a_statement_aliases_nothing_there():
    found = _aliased_at(
        """
        def f(h, c):
            h[0] = 1
            b = [0]
            if c:           # line 5
                b = h
            return b
        """
    )
    assert found[5] == frozenset()


def test_a_loop_around_a_statement_counts_its_whole_body_as_after():
    found = _aliased_at(
        """
        def f(h, c):
            b = [0]
            for i in c:
                if i:       # line 5: h changes at line 7, which runs again after it
                    b = h
                h[0] = i
            return b
        """
    )
    assert {"b", "h"} <= found[5]


def test_a_pop_joins_the_popped_item_with_the_lists_items_not_with_the_list():
    found = _aliased_at(
        """
        def f(adj, start):
            stack = [start]
            total = 0
            while stack:
                stack, v = rt__.list_pop(stack)
                if v > 5:       # line 7
                    total += v
                    for u in rt__.range_(2):
                        stack = rt__.list_append(stack, u)
            return total
        """
    )
    # `v` is an item of `stack`, as `u` is: neither is the list, which the loop changes.
    assert found[7] == {"stack", "total"}


def test_a_popped_list_changed_in_place_is_an_item_of_its_list():
    found = _aliased_at(
        """
        def f(rows, c):
            if c:           # line 3
                c = 1
            rows, row = rt__.list_pop(rows)
            row[0] = 2
            return rows
        """
    )
    assert {"row", "rows"} <= found[3]
