"""Whether a loop body traced with a Python number's weak type computes what it computes with
the strong type the body makes of it, so that the loop need not be traced again.

A staged loop's state enters as the values the program holds: a Python number (`t = 0.0`) is a
weakly typed array. Where the body makes it a strongly typed array of the same dtype (`t = t +
h`, `h` a float32), the loop carries the strong type (see `carry.Promoted`), and the body, traced
with the weak one, would be traced again with it. A weak type decides nothing but how values
are promoted where they meet others, and whether what is made of them is weakly typed. So the
body as traced stands where the values made of the number that are still weakly typed (its
"taint": a strongly typed result is the same either way) are read only by the operations below,
which promote nothing (JAX's operations take operands of one dtype; a promotion shows as a
`convert_element_type`, allowed only where it makes a value strong in its own dtype, which the
strong type needs not), and no output is one of them (it would be strongly typed, traced again).
Anything else (a conversion to another dtype, a call or a loop it reaches, a list written with
it, an effect: a print shows its value as Python would) is traced again.

    t = 0.0                      # weak float32
    while t < t_end:             # t_end: a float32
        t = t + h                # `add t h`: both float32, the sum strongly typed
"""

from __future__ import annotations

from jax.extend import core as jax_core

# Operations that decide nothing by their operands' weak types (elementwise arithmetic and tests
# of operands of one dtype, shapes, slices and reads at an index): what they give is the same
# values traced with a strong type; weakly typed where all of their operands are.
READS = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "rem",
        "neg",
        "abs",
        "sign",
        "max",
        "min",
        "clamp",
        "sqrt",
        "rsqrt",
        "exp",
        "log",
        "log1p",
        "expm1",
        "tanh",
        "logistic",
        "sin",
        "cos",
        "pow",
        "integer_pow",
        "square",
        "floor",
        "ceil",
        "round",
        "lt",
        "le",
        "gt",
        "ge",
        "eq",
        "ne",
        "and",
        "or",
        "not",
        "select_n",
        "broadcast_in_dim",
        "reshape",
        "squeeze",
        "expand_dims",
        "transpose",
        "rev",
        "stack",
        "concatenate",
        "slice",
        "dynamic_slice",
        "gather",
        "reduce_sum",
        "reduce_max",
        "reduce_min",
        "argmax",
        "argmin",
        "dot_general",
    }
)


def strong_alike(jaxpr: jax_core.Jaxpr, weak: list[int]) -> bool:
    """Whether `jaxpr` (a loop body's, with no effects), traced with its inputs at positions
    `weak` weakly typed, computes what it computes traced with them strongly typed (see
    above): the weakly typed values made of them are read only by `READS` (of operands of one
    dtype) or made strong in their dtype, and are not outputs."""
    tainted = {jaxpr.invars[i] for i in weak}
    for eqn in jaxpr.eqns:
        if not any(isinstance(v, jax_core.Var) and v in tainted for v in eqn.invars):
            continue
        name = eqn.primitive.name
        if name == "convert_element_type" and _made_strong(eqn):
            continue  # strong: the same either way
        if name not in READS:
            return False
        operands = eqn.invars[1:] if name == "select_n" else eqn.invars
        if name in _ARITHMETIC and len({v.aval.dtype for v in operands}) > 1:
            return False
        tainted.update(v for v in eqn.outvars if v.aval.weak_type)
    return not any(isinstance(v, jax_core.Var) and v in tainted for v in jaxpr.outvars)


# Of `READS`, those whose operands (`select_n`: its cases) are of one dtype in JAX's typing.
_ARITHMETIC = READS - {"dynamic_slice", "gather", "integer_pow", "argmax", "argmin"}


def _made_strong(eqn) -> bool:
    """Whether `eqn` (a `convert_element_type`) casts a value to the strong type of its own
    dtype: it changes nothing but the weak type."""
    (operand,) = eqn.invars
    return eqn.params["new_dtype"] == operand.aval.dtype and not eqn.params["weak_type"]
