"""`staging.jaxpr_of` and `staging.eval_shape` trace as `jax.make_jaxpr` and `jax.eval_shape` do.

The runtime traces each branch of a staged `if`, each loop body and test, and each probe with
them (not with `jax.make_jaxpr`, whose `jax.jit` costs more than a small branch's operations):
the jaxprs must compute what JAX's compute, with the same output types (weak types included),
effects and constants, inside a trace (closing over its values) and outside one, on pytrees of
arguments of every kind the runtime passes (arrays, Python numbers, NumPy values).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jax_core

from runtime import staging


def _types(closed):
    return [(a.shape, a.dtype, a.weak_type) for a in closed.out_avals]


_ARGS = {
    "none": (),
    "array": (jnp.arange(3.0),),
    "python numbers": (2, 0.5, True),
    "numpy": (np.float64(0.25), np.arange(4, dtype=np.int16)),
    "pytree": ({"h": jnp.ones(2), "n": 3}, [jnp.int8(1), (jnp.float16(2.0),)]),
}


def _body(*args):
    leaves = jax.tree_util.tree_leaves(args)
    total = sum((jnp.sum(x) for x in leaves), start=jnp.asarray(1.5))
    return [total, total > 2, 3, *leaves]


@pytest.mark.parametrize("args", _ARGS.values(), ids=_ARGS.keys())
def test_same_jaxpr_as_make_jaxpr(args):
    ours = staging.jaxpr_of(_body, *args)
    theirs = jax.make_jaxpr(_body)(*args)
    assert str(ours.jaxpr) == str(theirs.jaxpr)
    assert _types(ours) == _types(theirs)
    leaves = jax.tree_util.tree_leaves(args)
    got = jax_core.jaxpr_as_fun(ours)(*leaves)
    want = jax_core.jaxpr_as_fun(theirs)(*leaves)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_closes_over_the_enclosing_trace():
    """A branch reads the values of the trace it is in: they are its constants, and running
    the jaxpr there computes with them."""

    def outer(x, y):
        def branch():
            return [x * y + 1.0, jnp.float16(2) * x]

        closed = staging.jaxpr_of(branch)
        assert _types(closed) == _types(jax.make_jaxpr(branch)())
        assert len(closed.consts) == 2
        return jax_core.jaxpr_as_fun(closed)()

    got = jax.jit(outer)(jnp.float32(3.0), 2.0)
    assert [float(v) for v in got] == [7.0, 6.0]
    assert [v.dtype for v in got] == [jnp.float32, jnp.float32]


def test_effects_are_the_jaxprs():
    def prints(x):
        jax.debug.print("x={}", x)
        return [x + 1]

    assert staging.jaxpr_of(prints, 1.0).effects == jax.make_jaxpr(prints)(1.0).effects
    assert staging.jaxpr_of(prints, 1.0).effects
    assert not staging.jaxpr_of(_body, 1.0).effects


def test_eval_shape_as_jax():
    def fn(carried, extra):
        return [{"a": carried["h"] * extra, "b": (carried["n"] + 1,)}, extra > 0]

    args = ({"h": jnp.ones((2, 3), jnp.bfloat16), "n": 4}, 0.5)
    assert staging.eval_shape(fn, *args) == jax.eval_shape(fn, *args)


def test_without_the_direct_way(monkeypatch):
    """A JAX without `trace_to_jaxpr_dynamic`: `jax.make_jaxpr`, the same jaxprs."""
    args = _ARGS["pytree"]
    direct = staging.jaxpr_of(_body, *args)
    monkeypatch.setattr(staging, "_trace_to_jaxpr", None)
    fallback = staging.jaxpr_of(_body, *args)
    assert str(fallback.jaxpr) == str(direct.jaxpr)
    assert _types(fallback) == _types(direct)
