"""What called functions do with the containers they are given (`analysis.callees`), and the
alias analysis that follows them (`ownership.aliased_after` with a resolver)."""

import operator
import textwrap

import gast
import pytest

from transpiler.analysis import callees, ownership


def _function(source: str) -> gast.FunctionDef:
    return gast.parse(textwrap.dedent(source)).body[0]


def _summary(source: str, globals_=None) -> callees.Summary:
    node = _function(source)
    return callees.summarize(node, callees.Callees(node, globals_ or {}))


@pytest.mark.parametrize(
    "source, changes",
    [
        ("def f(p, g):\n    p['w'] = g", {"p"}),
        ("def f(p, g):\n    p['l1']['w'] = g", {"p", "p[*]"}),  # not `g`: two levels down
        ("def f(p, g):\n    q = p\n    q.update(g)", {"p"}),
        ("def f(p, g):\n    first = p['l1']\n    first['w'] = g", {"p", "p[*]"}),
        ("def f(p, g):\n    for layer in p:\n        layer.append(g)", {"p", "p[*]"}),
        ("def f(p, g):\n    p = dict(p)\n    p['w'] = g\n    return p", set()),
        ("def f(p, g):\n    p = dict(p)\n    p['l1']['w'] = g", {"p[*]"}),
        ("def f(p, g):\n    p = p or {}\n    p['w'] = g", {"p"}),
        ("def f(p, g):\n    return p['w'] + g", set()),
        ("def f(*ds):\n    for d in ds:\n        d['w'] = 0", {"ds", "ds[*]"}),
        ("def f(p, *, log):\n    log.append(p)", {"log"}),
        ("def f(p, g):\n    w = p['w']\n    w -= g\n    return w", set()),
    ],
)
def test_what_a_function_changes_in_the_containers_it_is_given(source, changes):
    assert _summary(source).changes == changes


@pytest.mark.parametrize(
    "source, returns",
    [
        ("def f(p):\n    return p", {("p", 0)}),
        ("def f(p, k):\n    return p[k]", {("p[*]", False)}),
        ("def f(p, k):\n    return p.get(k)", {("p[*]", False)}),
        ("def f(p, q):\n    return (p, q)", {("p", 1), ("q", 1)}),
        ("def f(p):\n    b = p\n    return b", {("p", False)}),
        ("def f(p):\n    return dict(p)", {("p[*]", True)}),
        ("def f(p):\n    return {'w': p['w'], 'b': 0}", {("p[*]", True)}),
        ("def f(p):\n    return {'w': p['w'] * 2}", set()),
        ("def f(p):\n    return p['w'] * 2", set()),
    ],
)
def test_what_a_function_gives_back_of_the_containers_it_is_given(source, returns):
    assert _summary(source).returns == returns


def sgd(params, grads):
    for k in params:
        params[k] = params[k] - grads[k]


def train_step(params, g):
    sgd(params, g)


def first_layer(params):
    return params["l1"]


def _aliased_at(source: str, globals_) -> dict[int, frozenset[str]]:
    node = _function(source)
    resolve = callees.Callees(node, globals_)
    return {stmt.lineno: names for stmt, names in ownership.aliased_after(node, resolve).items()}


def test_a_helper_changing_an_argument_after_an_if_aliases_it_there():
    found = _aliased_at(
        """
        def f(params, c, g):
            best = {}
            if c:               # line 4
                best = params
            rt__.call(train_step, params, g)
            return best
        """,
        {"train_step": train_step},
    )
    assert {"best", "params"} <= found[4]


def test_an_unresolved_call_changes_nothing():
    found = _aliased_at(
        """
        def f(params, c, g, opt):
            best = {}
            if c:               # line 4
                best = params
            rt__.call(opt.update, params, g)
            return best
        """,
        {},
    )
    assert "best" not in found[4] and "params" not in found[4]


def test_what_a_helper_gives_back_is_joined_to_its_argument():
    found = _aliased_at(
        """
        def f(params, c):
            best = {}
            if c:               # line 4
                best = dict(params)
            layer = rt__.call(first_layer, params)
            layer["w"] = 0
            return best
        """,
        {"first_layer": first_layer},
    )
    assert {"best", "layer"} <= found[4]


def test_an_item_rebound_by_an_array_update_changes_no_container():
    found = _aliased_at(
        """
        def f(params, c, g):
            best = {}
            if c:               # line 4
                best = dict(params)
            w = params["w"]
            w -= g              # an array's update: a new array, not a changed container
            params["w"] = w
            return best
        """,
        {},
    )
    assert "best" not in found[4]


def test_library_functions_that_change_their_first_argument_are_known():
    node = _function("def f(p):\n    operator.setitem(p, 'w', 0)\n")
    resolve = callees.Callees(node, {"operator": operator})
    call = node.body[0].value
    assert resolve.changed_by(call) == ["p"]


def test_methods_of_objects_are_not_resolved():
    node = _function("def f(p, opt):\n    opt.update(p)\n")
    assert callees.Callees(node, {}).summary(node.body[0].value.func) is None
