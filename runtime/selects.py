"""When a staged `if` is a select of both branches rather than `lax.cond`: the rule, in one place.

`lax.cond` runs one branch. On a CPU it costs a few microseconds of control flow each time it
runs, far more than a branch that only rebinds names (`lam = lam_new; done = True`) or does a
little scalar arithmetic costs to compute; hand-written `lax` code uses `jnp.where` there. A
select computes both branches and keeps, output by output, the one the condition picks. It
gives exactly what the cond gives when the branches, traced (`jax.make_jaxpr`), show that:

1. neither has an effect (a print, an assert, a raise, a callback: those must happen in the
   branch taken only): their jaxprs have no effects;
2. computing the branch not taken is cheap: at most `MAX_EQUATIONS` equations in all, computing
   at most `MAX_ELEMENTS` array elements in all, every one a primitive named below; no loop and
   no `cond` inside;
3. derivatives are the cond's. Reverse mode sends the branch not taken a zero cotangent, and a
   select passes that zero through the branch's own derivative: `0 * f'(x)` is NaN where
   `f'(x)` is infinite or NaN (`log`, `sqrt`, a division at 0, a product of two variables at
   inf). So every equation with a floating-point output must map a zero cotangent to exactly
   zero *whatever its inputs*: its derivative multiplies the cotangent by nothing that depends
   on them. That holds for the linear primitives (sums, negation, casts, reshapes, slices,
   gathers, selects), for a product or quotient with a finite nonzero literal, and for those
   whose derivative is a mask (max, min, clamp) or zero (sign, floor, round). Equations whose
   outputs are all integers or booleans carry no derivative: any cheap primitive is fine there.
   (Forward mode selects the tangent too: nothing is multiplied.)

Anything else stays a `lax.cond`.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax.extend import core as jax_core

MAX_EQUATIONS = 24
"""At most this many equations (nested `jit` calls counted by their own) in each branch."""

MAX_ELEMENTS = 2048
"""At most this many array elements computed by the equations of each branch."""

# Primitives whose derivative never multiplies the cotangent by a value that depends on their
# inputs: linear ones, masks, and those whose derivative is zero.
_ZERO_SAFE = frozenset(
    {
        "add",
        "add_any",
        "sub",
        "neg",
        "convert_element_type",
        "copy",
        "copy_p",
        "reshape",
        "squeeze",
        "expand_dims",
        "broadcast_in_dim",
        "transpose",
        "rev",
        "select_n",
        "slice",
        "dynamic_slice",
        "dynamic_update_slice",
        "gather",
        "concatenate",
        "pad",
        "reduce_sum",
        "cumsum",
        "max",
        "min",
        "clamp",
        "sign",
        "floor",
        "ceil",
        "round",
        "stop_gradient",
    }
)

# Cheap primitives whose derivative does depend on an input: fine on integers and booleans,
# where there is no derivative; on floats only in the forms `_products_with_a_literal` allows.
_CHEAP = _ZERO_SAFE | frozenset(
    {
        "mul",
        "div",
        "rem",
        "abs",
        "integer_pow",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "and",
        "or",
        "not",
        "xor",
        "shift_left",
        "shift_right_logical",
        "shift_right_arithmetic",
        "iota",
        "argmax",
        "argmin",
        "reduce_max",
        "reduce_min",
        "reduce_and",
        "reduce_or",
        "is_finite",
    }
)

_CALLS = frozenset({"jit", "pjit"})  # jnp functions wrapped in jit: judged by their jaxprs


def selectable(jaxprs) -> bool:
    """Whether the branches (closed jaxprs) may be computed both and selected between."""
    return all(not closed.effects and _cheap(closed.jaxpr, [0, 0]) for closed in jaxprs)


def _cheap(jaxpr, spent: list[int]) -> bool:
    """`spent`: [equations, elements] so far, updated."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _CALLS:
            if not _cheap(eqn.params["jaxpr"].jaxpr, spent):
                return False
            continue
        if name not in _CHEAP:
            return False
        spent[0] += 1
        spent[1] += sum(math.prod(v.aval.shape) for v in eqn.outvars)
        if spent[0] > MAX_EQUATIONS or spent[1] > MAX_ELEMENTS:
            return False
        if _differentiable(eqn) and name not in _ZERO_SAFE and not _scaled_by_literal(eqn):
            return False
    return True


def _differentiable(eqn) -> bool:
    return not all(selects(v.aval.dtype) and not _inexact(v.aval.dtype) for v in eqn.outvars)


def _inexact(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.inexact)


def _scaled_by_literal(eqn) -> bool:
    """`x * c`, `c * x` or `x / c` with `c` a finite literal (nonzero, to divide by)."""
    name, args = eqn.primitive.name, eqn.invars
    if name not in ("mul", "div") or len(args) != 2:
        return False
    candidates = (args[1],) if name == "div" else args
    for arg in candidates:
        if isinstance(arg, jax_core.Literal):
            value = np.asarray(arg.val)
            if value.size == 1 and np.isfinite(value).all() and (name == "mul" or value != 0):
                return True
    return False


def selects(dtype) -> bool:
    """Whether `lax.select` takes values of `dtype` (numbers and booleans, not PRNG keys)."""
    # jnp's issubdtype: NumPy's does not count bfloat16 or float8 as numbers.
    return isinstance(dtype, np.dtype) and (
        jnp.issubdtype(dtype, jnp.number) or jnp.issubdtype(dtype, jnp.bool_)
    )
