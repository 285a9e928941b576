"""Containers chosen by a staged `if` (or bound by a staged loop) and then changed in place by a
function they are handed to, or reached through what a function gives back.

Python's `best = params` leaves one dict under two names: `sgd(params, g)` changing it shows
through `best`. A staged `if` hands `best` back as a new dict, which the change cannot reach;
each program below gave the old values with no error before calls were followed
(`analysis.callees`). Those that cannot show the difference must still run, and match Python.
"""

import heapq
import operator

import jax
import jax.numpy as jnp
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import check_jit

# -- helpers, as model code writes them ---------------------------------------------------------


def sgd(params, grads, lr=0.5):
    for k in params:
        params[k] = params[k] - lr * grads[k]


def train_step(params, g):
    sgd(params, {"w": g})  # a helper that hands it on


def bump_first_layer(p):
    p["l1"]["w"] = p["l1"]["w"] + 1.0


def layer(params, name):
    return params[name]


def same(d):
    return d


def zero_all(*dicts):
    for d in dicts:
        d["w"] = 0.0


def fill(d, n):
    if n:
        d["w"] = d["w"] + 1.0
        fill(d, n - 1)


def sgd_on_a_copy(params, g):
    params = dict(params)  # the caller's dict is never changed
    params["w"] = params["w"] - g
    return params


def norm(params):
    return params["w"] * 2.0


def make_updater(lr):
    def update(p, g):
        p["w"] = p["w"] - lr * g

    return update


scaled_update = make_updater(0.1)

# -- programs that were silently wrong -----------------------------------------------------------


def changed_by_a_global_helper(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    sgd(params, {"w": x})
    return best["w"]


def changed_by_a_helper_of_a_helper(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    train_step(params, x)
    return best["w"]


def changed_by_a_helper_given_keywords(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    sgd(grads={"w": x}, params=params)
    return best["w"]


def changed_by_a_helper_given_it_among_args(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    zero_all(params)
    return best["w"]


def changed_by_a_local_function(x):
    params, best = {"w": x}, {"w": 0 * x}

    def halve(d):
        d["w"] = d["w"] / 2

    if x > 0:
        best = params
    halve(params)
    return best["w"]


def changed_by_a_closure_made_by_a_factory(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    scaled_update(params, x)
    return best["w"]


def changed_by_a_recursive_helper(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    fill(params, 2)
    return best["w"]


def changed_by_operator_setitem(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    operator.setitem(params, "w", 5.0)
    return best["w"]


def items_changed_by_a_helper(x):
    params = {"l1": {"w": x}}
    best = {"l1": {"w": 0 * x}}
    if x > 0:
        best = dict(params)  # shares params["l1"]
    bump_first_layer(params)
    return best["l1"]["w"]


def item_taken_by_a_name_then_changed(x):
    params = {"l1": {"w": x}}
    best = {"l1": {"w": 0 * x}}
    if x > 0:
        best = dict(params)
    first = params["l1"]  # the inner dict `best` shares
    first["w"] = first["w"] + 1.0
    return best["l1"]["w"]


def item_a_helper_gives_back_then_changed(x):
    params = {"l1": {"w": x}}
    best = {"l1": {"w": 0 * x}}
    if x > 0:
        best = dict(params)
    first = layer(params, "l1")
    first["w"] = first["w"] + 1.0
    return best["l1"]["w"]


def container_a_helper_gives_back_then_changed(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = same(params)
    params["w"] = 5.0
    return best["w"]


def bound_by_a_loop_then_changed_by_a_helper(x):
    params, best = {"w": x}, {"w": 0 * x}
    i = x
    while i < 3:
        best = params
        i = i + 1
    sgd(params, {"w": x})
    return best["w"]


@pytest.mark.parametrize(
    "fn, message",
    [
        (changed_by_a_global_helper, "'best' is a different dict depending on"),
        (changed_by_a_helper_of_a_helper, "'best' is a different dict depending on"),
        (changed_by_a_helper_given_keywords, "'best' is a different dict depending on"),
        (changed_by_a_helper_given_it_among_args, "'best' is a different dict depending on"),
        (changed_by_a_local_function, "'best' is a different dict depending on"),
        (changed_by_a_closure_made_by_a_factory, "'best' is a different dict depending on"),
        (changed_by_a_recursive_helper, "'best' is a different dict depending on"),
        (changed_by_operator_setitem, "'best' is a different dict depending on"),
        (items_changed_by_a_helper, "'best' is a different dict depending on"),
        (item_taken_by_a_name_then_changed, "'best' is a different dict depending on"),
        (item_a_helper_gives_back_then_changed, "'best' is a different dict depending on"),
        (container_a_helper_gives_back_then_changed, "'best' is a different dict depending on"),
        (bound_by_a_loop_then_changed_by_a_helper, "'best' is bound to a dict another name"),
    ],
)
def test_a_container_a_helper_changes_or_gives_back_is_refused(fn, message):
    with pytest.raises(StagingError, match=message) as e:
        jax.jit(transpiler.convert(fn))(jnp.float32(1.0))
    assert "test_helper_aliases.py:" in str(e.value)


# -- programs that cannot show the difference: run, as Python does -------------------------------


def copy_chosen_then_items_replaced_by_a_helper(x):
    params = {"w": x, "b": 2 * x}
    best = {"w": 0 * x, "b": 0 * x}
    if x > 0:
        best = dict(params)  # `sgd` replaces params' items: the copy keeps the old ones
    sgd(params, {"w": x, "b": x})
    return best["w"], params["w"]


def chosen_then_replaced_by_a_helper_that_copies(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    params = sgd_on_a_copy(params, x)
    return best["w"], params["w"]


def chosen_then_read_by_a_helper(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    return best["w"] + norm(params)


def chosen_then_a_local_heap_changed(x):
    params, best = {"w": x}, {"w": 0 * x}
    if x > 0:
        best = params
    heap = [3, 1]
    heapq.heappush(heap, 2)  # changes `heap`, which no chosen name holds
    return best["w"] * heap[0]


@pytest.mark.parametrize(
    "fn",
    [
        copy_chosen_then_items_replaced_by_a_helper,
        chosen_then_replaced_by_a_helper_that_copies,
        chosen_then_read_by_a_helper,
        chosen_then_a_local_heap_changed,
    ],
)
@pytest.mark.parametrize("x", [1.5, -1.0])
def test_a_container_no_helper_changes_afterwards_is_exact(fn, x):
    check_jit(fn, jnp.float32(x))
