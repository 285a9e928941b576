"""Dicts keep the order of their keys through staged code, as Python's do: JAX rebuilds every
dict it flattens with its keys sorted, so `loss, acc = m.values()` after a staged `if` that
rebinds `m` swapped the two (runtime/effects.py `Effects._in_key_order`)."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

import transpiler
from runtime import StagingError


def rebound_in_a_branch(x):
    m = {"loss": x, "acc": 1.0}
    if x > 0:
        m = {"loss": 2 * x, "acc": 0.5}
    loss, acc = m.values()
    return loss, acc


def rebound_in_a_while(x):
    d = {"z": x, "a": 1.0}
    while d["z"] < 10:
        d = {"z": d["z"] + 3, "a": d["a"] + 1}
    return tuple(d.values())


def read_in_order_in_the_body(x):
    m = {"loss": x, "acc": 1.0}
    out = 0.0
    for _ in range(3):
        out = out * 10 + list(m.values())[0]
        m = {"loss": m["loss"] + 1, "acc": m["acc"]}
    return out


def read_in_order_in_a_branch(x):
    m = {"loss": x, "acc": 1.0}
    r = x
    if x > 0:
        r = list(m.values())[0]
    return r


def made_by_two_returns(x):
    if x > 0:
        return {"b": x, "a": 1.0}
    return {"b": -x, "a": 2.0}


def returned_by_a_helper(x):
    return tuple(made_by_two_returns(x).values())


def chosen_by_a_conditional_expression(x):
    m = {"b": x, "a": 1.0} if x > 0 else {"b": -x, "a": 2.0}
    return tuple(m.values())


def iterated_records(x):
    records = [{"w": x, "b": 1.0}, {"w": 2 * x, "b": 3.0}, {"w": 3 * x, "b": 5.0}]
    s = 0.0
    for rec in records:
        w, b = rec.values()
        s = s * 10 + w - b
    return s


class Holder:
    pass


def held_by_an_attribute(x):
    o = Holder()
    o.m = {"z": x, "a": 0.0}
    while o.m["z"] < 10:
        o.m = {"z": o.m["z"] + 3, "a": o.m["a"] + 1}
    return tuple(o.m.values())


@pytest.mark.parametrize(
    "fn",
    [
        rebound_in_a_branch,
        rebound_in_a_while,
        read_in_order_in_the_body,
        read_in_order_in_a_branch,
        returned_by_a_helper,
        chosen_by_a_conditional_expression,
        iterated_records,
        held_by_an_attribute,
    ],
)
@pytest.mark.parametrize("x", [1.5, -1.0])
def test_a_dict_keeps_its_keys_in_order_through_staged_code(fn, x):
    expected = fn(jnp.float32(x))
    got = transpiler.jit(fn)(jnp.float32(x))
    assert [float(v) for v in jax.tree_util.tree_leaves(got)] == [
        float(v) for v in jax.tree_util.tree_leaves(expected)
    ]


def test_a_dict_keeps_its_keys_in_order_under_vmap():
    xs = jnp.array([1.5, -1.0])
    loss, acc = jax.vmap(transpiler.convert(rebound_in_a_branch))(xs)
    assert loss.tolist() == [3.0, -1.0] and acc.tolist() == [0.5, 1.0]


def printed_keys(x):
    m = {"loss": x, "acc": 1.0}
    if x > 0:
        m = {"loss": 2 * x, "acc": 0.5}
    print(list(m))
    return m["loss"]


def test_printed_keys_keep_their_order(capfd):
    transpiler.jit(printed_keys)(jnp.float32(1.5))
    assert capfd.readouterr().out == "['loss', 'acc']\n"


def two_orders(x):
    m = {"loss": x, "acc": 1.0}
    if x > 0:
        m = {"acc": 0.5, "loss": 2 * x}
    return tuple(m.values())


def test_keys_in_two_orders_on_two_paths_are_refused_by_name():
    with pytest.raises(StagingError, match=r"'m' is a dict whose keys come in different orders"):
        transpiler.jit(two_orders)(jnp.float32(1.5))


def update_params(params, x):
    if x > 0:
        params = {"w": params["w"] * x, "b": params["b"] + 1.0}
    return params


def test_a_dict_argument_jax_sorted_may_be_rebuilt_in_another_order():
    # Inside jax.jit the argument's keys are sorted (JAX rebuilds it so); the branch's dict is
    # in the order written: the result is sorted, as lax gives it.
    params = {"w": jnp.ones(2), "b": jnp.zeros(2)}
    got = transpiler.jit(update_params)(params, jnp.float32(2.0))
    assert got["w"].tolist() == [2.0, 2.0] and got["b"].tolist() == [1.0, 1.0]


def sorted_literal_rebuilt_in_another_order(x):
    d = {"a": x, "b": 2 * x}  # sorted as written: not a dict JAX made
    if x > 0:
        d = {"b": x + 1, "a": x - 1}
    return tuple(d.values())


def test_a_dict_the_function_wrote_sorted_is_not_taken_for_one_jax_made():
    with pytest.raises(StagingError, match=r"'d' is a dict whose keys come in different orders"):
        transpiler.jit(sorted_literal_rebuilt_in_another_order)(jnp.float32(1.5))


def bound_in_one_branch(x):
    if x > 0:
        d = {"b": x, "a": x * 0}
    return tuple(d.values())


def read_before_bound_in_the_body(xs):
    r = 0.0
    for v in xs:
        if v > 1:
            r = r * 10 + list(d.values())[0]  # noqa: F821 (bound by an earlier iteration)
        d = {"b": v, "a": 0 * v}  # noqa: F841
    return r


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Fields:
    d: dict


def inside_a_dataclass(x):
    s = Fields({"b": x, "a": 2 * x})
    if x > 0:
        s = Fields({"b": x + 1, "a": x + 2})
    return tuple(s.d.values())


def counted_in_a_dict(x):
    st = {"n": 0}
    while x < 100:
        st["n"] += 1
        x = x * 2
    return x, st["n"]


def returned_from_a_while(x):
    while x < 100:
        x = x * 3
        if x > 20:
            return {"b": x, "a": x * 0}
    return {"b": x, "a": x * 0 + 1}


def values_returned_from_a_while(x):
    return tuple(returned_from_a_while(x).values())


@pytest.mark.parametrize(
    "fn, x",
    [
        (bound_in_one_branch, 1.5),
        (read_before_bound_in_the_body, jnp.array([1.0, 2.0, 3.0, 4.0])),
        (inside_a_dataclass, 1.5),
        (inside_a_dataclass, -1.5),
        (counted_in_a_dict, 1.5),
        (values_returned_from_a_while, 1.5),
    ],
)
def test_dicts_bound_on_some_paths_inside_nodes_and_returned_keep_their_order(fn, x):
    x = jnp.float32(x) if isinstance(x, float) else x
    expected = fn(x)
    got = transpiler.jit(fn)(x)
    assert [float(v) for v in jax.tree_util.tree_leaves(got)] == [
        float(v) for v in jax.tree_util.tree_leaves(expected)
    ]


def test_the_gradient_through_a_dict_bound_in_one_branch_follows_its_order():
    grad = jax.jit(jax.grad(lambda x: transpiler.convert(bound_in_one_branch)(x)[0]))
    assert float(grad(2.0)) == 1.0


def scan_step(carry, v):
    if v > 1:
        carry = {"w": carry["w"] + v, "b": carry["b"]}  # lax.scan gave the carry sorted
    return carry, carry["w"]


def scanned(xs):
    return jax.lax.scan(scan_step, {"w": xs[0], "b": xs[1]}, xs)


def test_a_dict_lax_scan_hands_a_converted_step_counts_as_one_jax_made():
    carry, ws = transpiler.jit(scanned)(jnp.array([1.0, 2.0]))
    assert float(carry["w"]) == 3.0 and float(carry["b"]) == 2.0 and ws.tolist() == [1.0, 3.0]


def helper_rebuilding(d, x):
    if x > 0:
        d = {"b": x + 1, "a": x - 1}
    return tuple(d.values())


def hands_its_own_sorted_dict(x):
    return helper_rebuilding({"a": x, "b": 2 * x}, x)  # sorted as written: the caller's order


def test_a_dict_converted_code_hands_a_helper_is_not_taken_for_one_jax_made():
    with pytest.raises(StagingError, match=r"'d' is a dict whose keys come in different orders"):
        transpiler.jit(hands_its_own_sorted_dict)(jnp.float32(1.5))
