"""The runtime's own `where` and comparisons give what `jnp.where` and `jnp.less` ... give.

`staging.where` and `staging.compare` skip `jnp`'s jitted functions where the operands are of
one shape and promote to one dtype by a strong cast; everywhere else they are `jnp`'s. Both
paths must give `jnp`'s values, dtypes and weak types, under a trace and outside one.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from runtime import staging

# Operands: Python numbers, weakly and strongly typed arrays of several dtypes, shapes () and
# (3,), a NumPy value.
_OPERANDS = {
    "int 2": lambda: 2,
    "float 0.5": lambda: 0.5,
    "bool True": lambda: True,
    "weak int32": lambda: jnp.asarray(3),
    "weak float32": lambda: jnp.asarray(-1.5),
    "float32": lambda: jnp.float32(0.5),
    "float16": lambda: jnp.float16(2.0),
    "int8": lambda: jnp.int8(-2),
    "uint8": lambda: jnp.uint8(7),
    "int32": lambda: jnp.int32(2),
    "bool": lambda: jnp.bool_(False),
    "complex64": lambda: jnp.complex64(1 + 2j),
    "float32[3]": lambda: jnp.array([0.5, jnp.nan, -1.0], jnp.float32),
    "int32[3]": lambda: jnp.array([2, -3, 0], jnp.int32),
    "numpy float64": lambda: np.float64(0.25),
}
_PAIRS = list(itertools.product(_OPERANDS, repeat=2))


def _values(fn, jnp_fn, cases):
    """[(ours, theirs)] for each of `cases` (argument tuples), computed in one jitted program
    (an operation run on values compiles a program for each new combination of types: there
    are hundreds), or the name of the error each raised while traced."""
    arrays = [a for args in cases for a in args]
    traced_at = [k for k, a in enumerate(arrays) if isinstance(a, jax.Array)]
    raised = {}

    def both(*traced):
        given = list(arrays)
        for k, value in zip(traced_at, traced):
            given[k] = value
        outs, start = [], 0
        for i, args in enumerate(cases):
            args, start = given[start : start + len(args)], start + len(args)
            for j, f in enumerate((fn, jnp_fn)):
                try:
                    outs.append(f(*args))
                except Exception as e:  # noqa: BLE001 - the same error is expected of both
                    raised[i, j] = type(e).__name__
                    outs.append(jnp.zeros(()))
        return outs

    outs = jax.jit(both)(*[arrays[k] for k in traced_at])
    return [tuple(raised.get((i, j), outs[2 * i + j]) for j in (0, 1)) for i in range(len(cases))]


def _same_value(ours, theirs) -> bool:
    if isinstance(ours, str) or isinstance(theirs, str):
        return ours == theirs
    return np.array_equal(np.asarray(ours), np.asarray(theirs), equal_nan=True)


def _same_type(ours, theirs) -> bool:
    return ours == theirs


@pytest.mark.parametrize("op", [lax.lt, lax.gt, lax.le, lax.ge, lax.eq, lax.ne])
def test_compare_is_jnp_comparison(op):
    jnp_op = staging._JNP_COMPARISONS[op]
    cases = [(_OPERANDS[x](), _OPERANDS[y]()) for x, y in _PAIRS]
    for (x_name, y_name), args in zip(_PAIRS, cases):
        ours = _traced(lambda a, b: staging.compare(op, a, b), *args)
        theirs = _traced(jnp_op, *args)
        assert ours == theirs, (op, x_name, y_name, ours, theirs)
    values = _values(lambda a, b: staging.compare(op, a, b), jnp_op, cases)
    for (x_name, y_name), (ours, theirs) in zip(_PAIRS, values):
        assert _same_value(ours, theirs), (op, x_name, y_name, ours, theirs)


def test_where_is_jnp_where():
    predicates = (jnp.bool_(True), jnp.array([True, False, True]), jnp.asarray(False))
    names = [(x, y, p) for x, y in _PAIRS for p in range(len(predicates))]
    cases = [(predicates[p], _OPERANDS[x](), _OPERANDS[y]()) for x, y, p in names]
    for name, args in zip(names, cases):
        ours = _traced(lambda p, a, b: staging.where(p, a, b), *args)
        theirs = _traced(jnp.where, *args)
        assert ours == theirs, (name, ours, theirs)
    values = _values(lambda p, a, b: staging.where(p, a, b), jnp.where, cases)
    for name, (ours, theirs) in zip(names, values):
        assert _same_value(ours, theirs), (name, ours, theirs)


def _traced(fn, *args):
    """(dtype, weak type, shape) of `fn`'s output traced (`jax.make_jaxpr`), the arrays among
    `args` its traced inputs (the Python numbers stay Python numbers), or the type of what it
    raised."""
    arrays = [i for i, a in enumerate(args) if isinstance(a, jax.Array)]

    def staged(*traced):
        given = list(args)
        for i, value in zip(arrays, traced):
            given[i] = value
        return fn(*given)

    try:
        (aval,) = jax.make_jaxpr(staged)(*[args[i] for i in arrays]).out_avals
    except Exception as e:  # noqa: BLE001 - the same error is expected of both
        return type(e).__name__
    return str(aval.dtype), aval.weak_type, aval.shape
