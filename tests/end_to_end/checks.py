"""Compare a converted function with the eager, unconverted one."""

from __future__ import annotations

import jax
import numpy as np

import transpiler


def assert_tree_close(actual, expected, rtol=1e-5, atol=1e-6):
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree, f"structure {a_tree} != {e_tree}"
    for a, e in zip(a_leaves, e_leaves):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=rtol, atol=atol)


def check_jit(fn, *args, static_argnums=()):
    """converted(*args) under jax.jit equals fn(*args) run eagerly; returns the converted fn."""
    converted = transpiler.convert(fn)
    expected = fn(*args)
    actual = jax.jit(converted, static_argnums=static_argnums)(*args)
    assert_tree_close(actual, expected)
    assert_same_types(actual, expected)
    return converted


def assert_same_types(actual, expected):
    """Leaf by leaf, what a jitted function gives for what `expected` holds: the same dtype,
    shape and weak type for an array (a NumPy one as JAX canonicalizes it); for a Python number,
    a scalar of JAX's dtype for it or of one it promotes to: where another path of the program
    gives an array or a float, a staged choice joins the two (see docs/limitations.md)."""
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
        got = jax.typeof(a)
        if isinstance(e, bool | int | float | complex):
            want = jax.typeof(jax.numpy.asarray(e))
            joined = jax.numpy.promote_types(want.dtype, got.dtype) == got.dtype
            assert got.shape == () and joined, (got, e)
            continue
        want = jax.typeof(jax.numpy.asarray(e))
        assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type), (
            f"{got} (weak: {got.weak_type}) != {want} (weak: {want.weak_type}); "
            f"{actual!r} vs {expected!r}"
        )


def check_python(fn, *args):
    """With Python/NumPy inputs, the converted function returns exactly what fn returns."""
    converted = transpiler.convert(fn)
    expected = fn(*args)
    assert_identical(converted(*args), expected)
    return converted


def assert_identical(actual, expected):
    """Same types all the way down, same values: what Python semantics promise."""
    assert type(actual) is type(expected), (type(actual), type(expected))
    if isinstance(expected, tuple | list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_identical(a, e)
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for k in expected:
            assert_identical(actual[k], expected[k])
    elif isinstance(expected, np.ndarray | jax.Array):
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)
    else:
        assert actual == expected


def check_vmap(fn, *batched_args):
    """jax.vmap(converted) equals fn applied eagerly to each slice (batched predicates)."""
    converted = transpiler.convert(fn)
    actual = jax.jit(jax.vmap(converted))(*batched_args)
    n = len(batched_args[0])
    expected = [fn(*(a[i] for a in batched_args)) for i in range(n)]
    for i, one in enumerate(expected):  # each element's types are the eager call's
        assert_same_types(jax.tree_util.tree_map(lambda a, i=i: a[i], actual), one)
    expected = jax.tree_util.tree_map(lambda *xs: np.stack(xs), *expected)
    assert_tree_close(actual, expected)


def check_grad(fn, *args, argnums=0, static_argnums=()):
    """jax.grad of the converted function under jit equals jax.grad of fn run eagerly."""
    converted = transpiler.convert(fn)
    expected = jax.grad(fn, argnums=argnums)(*args)
    grad = jax.grad(converted, argnums=argnums)
    actual = jax.jit(grad, static_argnums=static_argnums)(*args)
    assert_tree_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert_same_types(actual, expected)


def primitives(fn, *args, **make_jaxpr_kwargs) -> str:
    return str(jax.make_jaxpr(transpiler.convert(fn), **make_jaxpr_kwargs)(*args))


def inner_primitives(fn, outer: str, *args, **make_jaxpr_kwargs) -> list[str]:
    """The primitives inside the first `outer` equation (`"while"`, `"scan"`, `"cond"`) of the
    converted function's jaxpr, at any depth below it (custom derivative wrappers looked into)."""

    def jaxprs_of(eqn):
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else [value]:
                inner = getattr(item, "jaxpr", item)
                if hasattr(inner, "eqns"):
                    yield inner

    def names(jaxpr):
        return [n for eqn in jaxpr.eqns for n in (eqn.primitive.name, *all_inner(eqn))]

    def all_inner(eqn):
        return [n for inner in jaxprs_of(eqn) for n in names(inner)]

    def find(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == outer:
                return all_inner(eqn)
            for inner in jaxprs_of(eqn):
                found = find(inner)
                if found is not None:
                    return found
        return None

    closed = jax.make_jaxpr(transpiler.convert(fn), **make_jaxpr_kwargs)(*args)
    found = find(closed.jaxpr)
    assert found is not None, f"no {outer} in {closed}"
    return found
