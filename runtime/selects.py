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
   gathers, selects), for a product with a literal of at most 1 in magnitude or a quotient by
   one of at least 1 (XLA folds chains of constant factors into one, which a larger literal
   could make infinite: `0 * inf`), and for those
   whose derivative is a mask (max, min, clamp) or zero (sign, floor, round). Equations whose
   outputs are all integers or booleans carry no derivative: any cheap primitive is fine there.
   (Forward mode selects the tangent too: nothing is multiplied.)

Branches that pass (1) and (2) but not (3) — `x * x`, `jnp.sqrt(x)`, `jnp.log(x)`, `1 / x`,
`jnp.tanh(x)`, with the elementwise functions of `_GUARDED` allowed too — are a *guarded*
select: each branch computes on its floating-point inputs masked by the condition,
`where(p, x, 1)` in the true branch and `where(p, 1, x)` in the false one, and the outputs are
selected. The branch not taken then computes at the constant 1 (its value is discarded), and
every derivative path from an input into it passes through the mask, a select, which gives an
exact zero whatever the branch's derivative is there (a NaN included): values and derivatives
of every order are the cond's. Inputs that are not floating point carry no derivative and are
not masked. The masks cost as many elements as the masked inputs hold: above
`MAX_ELEMENTS` (a branch reading one entry of a large table it closes over) the branch stays a
cond.

Anything else stays a `lax.cond`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jax_core

MAX_EQUATIONS = 24
"""At most this many equations (nested `jit` calls counted by their own) in each branch."""

MAX_ELEMENTS = 2048
"""At most this many array elements computed by the equations of each branch."""

# Primitives linear in each floating-point input, or masks of it (`max`, `clamp`): their
# derivative passes a cotangent on multiplied by nothing that depends on their inputs.
LINEAR = frozenset(
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
    }
)

# Primitives whose derivative is zero (JAX's symbolic zero): they pass no cotangent on.
ZERO_DERIVATIVE = frozenset({"sign", "floor", "ceil", "round", "stop_gradient"})

# Primitives whose derivative never multiplies the cotangent by a value that depends on their
# inputs: linear ones, masks, and those whose derivative is zero.
_ZERO_SAFE = LINEAR | ZERO_DERIVATIVE

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
        # the truth of a float (`staging.truth`: its bits, so that no flush of subnormals to
        # zero makes 1e-45 false)
        "bitcast_convert_type",
    }
)

# Elementwise functions whose derivative depends on their input, unbounded or undefined at
# some inputs: cheap to compute, selected only with the inputs masked (a guarded select).
_GUARDED = frozenset(
    {
        "square",
        "sqrt",
        "rsqrt",
        "cbrt",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log1p",
        "tanh",
        "logistic",
        "sin",
        "cos",
        "tan",
        "sinh",
        "cosh",
        "asin",
        "acos",
        "atan",
        "atan2",
        "asinh",
        "acosh",
        "atanh",
        "pow",
        "erf",
        "erfc",
    }
)

_CALLS = frozenset({"jit", "pjit"})  # jnp functions wrapped in jit: judged by their jaxprs


def selectable(jaxprs) -> bool:
    """Whether the branches (closed jaxprs) may be computed both and selected between, as
    they are: rules 1-3."""
    kinds = lowering(jaxprs)
    return kinds is not None and all(kind == "select" for kind in kinds)


def lowering(jaxprs) -> tuple[str, ...] | None:
    """None: the branches stay a cond. Else, per branch, `"select"` (computed as it is: rules
    1-3) or `"guarded select"` (computed on masked inputs: rules 1-2)."""
    kinds = []
    for closed in jaxprs:
        kind = None if closed.effects else _cheap(closed.jaxpr, [0, 0])
        if kind == "guarded select" and _masked_elements(closed) > MAX_ELEMENTS:
            kind = None  # masking its inputs would cost more than the branch
        if kind is None:
            return None
        kinds.append(kind)
    return tuple(kinds)


def _masked_elements(closed) -> int:
    """The elements a guarded select of the branch `closed` masks (see `masked`)."""
    return sum(_count(np.shape(closed.consts[i])) for i in masked(closed))


def masked(closed) -> list[int]:
    """The positions of the inputs (constants) of the branch `closed` that a guarded select
    masks: the traced floating-point ones (the others have no derivative) from which an
    equation that does not map a zero cotangent to zeros (`zero_safe`: `v * v`, `sqrt`)
    computes. An input that reaches the branch's outputs through zero-safe equations only
    (`total + v * v`: `total`) gets exact zeros back unmasked, whatever it holds."""
    jaxpr = closed.jaxpr
    reaching = {v: {i} for i, v in enumerate(jaxpr.constvars)}  # var -> the inputs it is made of
    needed: set[int] = set()
    for eqn in jaxpr.eqns:
        made_of = set().union(*(reaching.get(v, ()) for v in eqn.invars if not _literal(v)))
        if made_of and not zero_safe(eqn):
            needed |= made_of
        for out in eqn.outvars:
            reaching[out] = made_of
    return [
        i
        for i in sorted(needed)
        if isinstance(closed.consts[i], jax.core.Tracer) and masked_input(closed.consts[i].dtype)
    ]


def _literal(var) -> bool:
    return isinstance(var, jax_core.Literal)


def cheap(closed) -> bool:
    """Whether computing `closed` (a closed jaxpr) costs less than a `lax.cond` around it: no
    effects, no control flow, at most `MAX_EQUATIONS` equations computing at most `MAX_ELEMENTS`
    elements, a matrix product counted by its multiplications (rule 2 above, for any primitive:
    what it computes is not differentiated here, a loop's test)."""
    return not closed.effects and _costs_little(closed.jaxpr, [0, 0])


def _costs_little(jaxpr, spent: list[int]) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _CALLS:
            if not _costs_little(eqn.params["jaxpr"].jaxpr, spent):
                return False
            continue
        if inner_jaxprs(eqn):
            return False  # a loop, a cond
        spent[0] += 1
        spent[1] += _cost(eqn)
        if spent[0] > MAX_EQUATIONS or spent[1] > MAX_ELEMENTS:
            return False
    return True


def _cost(eqn) -> int:
    """The elements `eqn` computes: its outputs', times the length of the sums that make each
    for a `dot_general` (a 256x256 matrix times a vector: 65,536)."""
    elements = sum(_count(v.aval.shape) for v in eqn.outvars)
    if eqn.primitive.name == "dot_general":
        (contracting, _), _ = eqn.params["dimension_numbers"]
        shape = eqn.invars[0].aval.shape
        elements *= _count([shape[d] for d in contracting])
    return elements


def _cheap(jaxpr, spent: list[int]) -> str | None:
    """How the equations of `jaxpr` may be selected (see `lowering`). `spent`: [equations,
    elements] so far, updated."""
    found = "select"
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _CALLS:
            inner = _cheap(eqn.params["jaxpr"].jaxpr, spent)
            if inner is None:
                return None
            found = "guarded select" if inner == "guarded select" else found
            continue
        if name not in _CHEAP and name not in _GUARDED:
            return None
        spent[0] += 1
        spent[1] += sum(_count(v.aval.shape) for v in eqn.outvars)
        if spent[0] > MAX_EQUATIONS or spent[1] > MAX_ELEMENTS:
            return None
        if not zero_safe(eqn):
            found = "guarded select"
    return found


def zero_safe(eqn) -> bool:
    """Whether `eqn` maps a zero cotangent to exact zeros whatever its inputs (rule 3): it
    has no floating-point output, or its derivative multiplies by nothing its inputs give
    (a call: every equation of its jaxpr)."""
    name = eqn.primitive.name
    if name in _CALLS:
        return all(zero_safe(inner) for inner in eqn.params["jaxpr"].jaxpr.eqns)
    return not _differentiable(eqn) or name in _ZERO_SAFE or _scaled_by_literal(eqn)


MAX_STEP_ELEMENTS = 1 << 16
"""At most this many array elements computed by a masked step of a bounded loop (below)."""

MAX_MASKED_CONSTANT_ELEMENTS = 256
"""At most this many elements of the values a bounded loop's body closes over masked in each step
of its masked scan: the reverse pass stores each step's masked copy."""


def step_lowering(body, test, state_dtypes, constants) -> str | None:
    """How a step of a bounded loop's masked scan (`runtime.bounded`: once its test has failed, a
    step leaves the state as it is) is computed, given the body's and the test's jaxprs (open or
    closed), the dtypes of the state and the body's `constants` (the values it closes over):

    - None: a `lax.cond` that runs the body only while the loop goes on;
    - `"select"`: body and test computed in every step, the state selected
      (`jnp.where(going, body(x), x)`, as a hand-written masked scan does);
    - `"guarded select"`: the same, with the body's floating-point inputs (state and
      constants) masked to ones in the steps after the test failed (rule 3 above).

    On a CPU the cond costs more than computing a small step: the scan of a Heun-Euler step runs
    about 20x faster selected, and XLA compiles it in half the time. The cond stays where the
    step has an effect (rule 1: `effects` of the jaxprs), where it holds a `while` (computed on a
    state the loop never reaches, it need not stop), where it computes more than
    `MAX_STEP_ELEMENTS` elements, where the state holds values a select does not take (PRNG
    keys), where the step computes complex numbers (JAX's rematerialization of the scan's
    residuals takes no complex ones outside a cond), or where guarding would mask more than
    `MAX_MASKED_CONSTANT_ELEMENTS` constants."""
    if not all(selects(dtype) and not _complex(dtype) for dtype in state_dtypes):
        return None
    found = "select"
    spent = [0]
    for jaxpr in (body, test):
        if isinstance(jaxpr, jax_core.ClosedJaxpr):
            jaxpr = jaxpr.jaxpr
        kind = None if jaxpr.effects else _step_kind(jaxpr, spent)
        if kind is None:
            return None
        found = "guarded select" if kind == "guarded select" else found
    if found == "guarded select":
        masked = sum(np.size(c) for c in constants if masked_input(jnp.result_type(c)))
        if masked > MAX_MASKED_CONSTANT_ELEMENTS:
            return None
    return found


def _step_kind(jaxpr, spent: list[int]) -> str | None:
    """`step_lowering` of one jaxpr and the jaxprs inside it; `spent`: [elements], updated."""
    found = "select"
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "while":
            return None
        for sub in inner_jaxprs(eqn):
            kind = _step_kind(sub, spent)
            if kind is None:
                return None
            found = "guarded select" if kind == "guarded select" else found
        if any(_complex(v.aval.dtype) for v in eqn.outvars):
            return None
        if name in _CALLS:
            continue
        spent[0] += sum(_count(v.aval.shape) for v in eqn.outvars)
        if spent[0] > MAX_STEP_ELEMENTS:
            return None
        if not zero_safe(eqn):
            found = "guarded select"
    return found


def _count(shape) -> int:
    """The elements of an array of `shape`; for a symbolic one (`jax.export.symbolic_shape`),
    more than any limit here: its size is known only when the exported program is called."""
    try:
        return int(math.prod(shape))
    except Exception:  # noqa: BLE001 - JAX's InconclusiveDimensionOperation
        return 1 << 62


def _complex(dtype) -> bool:
    return isinstance(dtype, np.dtype) and dtype.kind == "c"


def inner_jaxprs(eqn) -> list:
    """The jaxprs an equation holds (branches, bodies, called functions), open."""
    found = []
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jax_core.ClosedJaxpr):
                found.append(item.jaxpr)
            elif isinstance(item, jax_core.Jaxpr):
                found.append(item)
    return found


def equations(jaxpr):
    """Every equation of `jaxpr` (open) and of the jaxprs inside it, at any depth."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in inner_jaxprs(eqn):
            yield from equations(sub)


def masked_input(dtype) -> bool:
    """Whether a guarded select masks a branch input of `dtype`: those with derivatives."""
    return isinstance(dtype, np.dtype) and _inexact(dtype)


def _differentiable(eqn) -> bool:
    return not all(selects(v.aval.dtype) and not _inexact(v.aval.dtype) for v in eqn.outvars)


def _inexact(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.inexact)


def _scaled_by_literal(eqn) -> bool:
    """`x * c`, `c * x` or `x / c` with `c` a literal that scales by at most 1 (|c| <= 1 to
    multiply by, |c| >= 1 to divide by). The cotangent the branch not taken gets is a zero
    times the literal, but XLA folds a chain of products with constants into one (`ct * 1e20 *
    1e20` is `ct * inf`, a NaN at a zero `ct`), the chain going on past the branch (`y = x *
    1e30` before the `if`, `y * 1e10` in it): a factor of at most 1 makes no product larger
    than the one outside it."""
    name, args = eqn.primitive.name, eqn.invars
    if name not in ("mul", "div") or len(args) != 2:
        return False
    candidates = (args[1],) if name == "div" else args
    for arg in candidates:
        if isinstance(arg, jax_core.Literal):
            value = np.abs(np.asarray(arg.val))
            if value.size == 1 and (value <= 1 if name == "mul" else value >= 1):
                return True
    return False


def selects(dtype) -> bool:
    """Whether `lax.select` takes values of `dtype` (numbers and booleans, not PRNG keys)."""
    # jnp's issubdtype: NumPy's does not count bfloat16 or float8 as numbers.
    return isinstance(dtype, np.dtype) and (
        jnp.issubdtype(dtype, jnp.number) or jnp.issubdtype(dtype, jnp.bool_)
    )
