"""Tuples and namedtuples holding lists and dicts through staged `if`s and loops: Python's tuple
holds the very objects (`st = (w, x)`: `st[0] is w`), which other names change in place; the
staged tuple must hold them too, not copies the `lax` primitive made (helper 123: `w[0] = 9.0`
after the `if` did not show in `st`, silently)."""

from collections import namedtuple

import jax
import jax.numpy as jnp
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import assert_tree_close

State = namedtuple("State", "w b")


def rebound_on_one_path(x):
    w = [1.0, 2.0]
    st = (w, 0.0)
    if x > 0:
        st = (w, x)
    w[0] = 9.0
    return st, st[0] is w


def bound_on_both_paths(x):
    w = [1.0, 2.0]
    if x > 0:
        st = (w, x)
    else:
        st = (w, 0.0)
    w[0] = 9.0
    return st


def changed_on_the_path_that_keeps_it(x):
    w = [1.0, 2.0]
    st = (w, 0.0)
    if x > 0:
        st = (w, x)
    else:
        w[0] += x
    return st, w


def changed_through_the_tuple(x):
    w = [1.0, 2.0]
    st = State(w, 0.0)
    if x > 0:
        st.w[1] = st.w[1] * x
        st = st._replace(b=x)
    return st, w


def namedtuple_in_a_dict(x):
    s = {"st": State([1.0, 2.0], 0.0)}
    w = s["st"].w
    if x > 0:
        s["st"] = s["st"]._replace(b=x)
    w[0] = 7.0
    return s, s["st"].w is w


def nested_tuple(x):
    w = {"m": 1.0}
    st = ((w, 0.0), 1.0)
    if x > 0:
        st = ((w, x), st[1] + x)
    w["m"] = 5.0
    return st


def while_loop_replacing_the_namedtuple(x):
    st = State([1.0, 2.0], 0.0)
    w = st.w
    k = 0
    while k < x:
        st.w[0] += 1.0
        st = st._replace(b=st.b + 1.0)
        k += 1
    return st, w


def for_loop_then_a_change(x):
    st = State([1.0, 2.0], 0.0)
    w = st.w
    for _ in range(jnp.int32(x)):
        st = st._replace(b=st.b + 1.0)
    w[0] = 9.0
    return st, w


@pytest.mark.parametrize(
    "fn",
    [
        rebound_on_one_path,
        bound_on_both_paths,
        changed_on_the_path_that_keeps_it,
        changed_through_the_tuple,
        namedtuple_in_a_dict,
        nested_tuple,
        while_loop_replacing_the_namedtuple,
        for_loop_then_a_change,
    ],
)
@pytest.mark.parametrize("x", [-1.0, 2.0])
def test_a_tuple_holds_the_lists_python_s_holds(fn, x):
    expected = fn(x)
    actual = jax.jit(transpiler.convert(fn))(jnp.float32(x))
    assert_tree_close(actual, expected)


def list_changed_then_replaced_in_the_tuple(x):
    w = [1.0, 2.0]
    st = State(w, 0.0)
    k = 0
    while k < x:
        st.w[0] += 1.0  # the first iteration changes `w`
        st = State([0.0, 0.0], st.b)
        k += 1
    return st, w


def test_a_tuple_s_list_changed_then_replaced_in_a_loop_is_refused():
    with pytest.raises(StagingError, match=r"'st' is given a tuple holding another list at \[0\]"):
        jax.jit(transpiler.convert(list_changed_then_replaced_in_the_tuple))(jnp.float32(2.0))
