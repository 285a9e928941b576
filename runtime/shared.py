"""What both branches of a staged `if` compute alike, computed once before it.

Model code often computes the same thing in both branches and uses it differently::

    if jnp.mean(h) > threshold:
        h = h + jnp.tanh(layer(h))     # residual
    else:
        h = 0.5 * jnp.tanh(layer(h))

Traced as they are, both branches hold the layer's matrix product, so the `if` is a `lax.cond`
(a select computes both branches: `runtime.selects` takes cheap ones only), and `jax.grad`
linearizes the cond into two, each with its own product. Hand-written `lax` computes
`z = jnp.tanh(layer(h))` once and selects between `h + z` and `0.5 * z`. So does the staged
`if`: the equations both branches' jaxprs hold alike, computed from the same values (the values
from before the `if` the branches read, literals, and results of other such equations), are
computed once before it, and each branch reads their results as values from before it.
What is left of each branch then decides between a select and a cond as any branch does.

Values are the cond's: whichever branch is taken computes those equations from those values.
Derivatives are where what they compute goes, in both branches, linearly to the same outputs
of the `if` (`_exact`): elsewhere the branch taken could have sent them JAX's symbolic zero,
which their derivative never multiplies, where moved out they get an array of zeros from the
other (`0 * inf` at `jnp.log(0)`). Equations whose parameters do not compare equal (a custom
derivative's rule, a function of its own in each trace) stay in their branches; branches
with an effect (a print, a check) keep all their equations, in their order.
"""

from __future__ import annotations

import collections

import jax
import numpy as np
from jax.extend import core as jax_core

from runtime import selects


def hoisted(first, second):
    """The branches `first` and `second` (closed jaxprs of no arguments), each with the
    equations it shares with the other computed here, once, under the current trace, and read
    as constants; the branches as they are where they share none (or either has an effect:
    what moves out of it would be ordered against its effects by XLA, not as written)."""
    if first.effects or second.effects:
        return first, second
    pairs = _exact(_shared(first, second), first.jaxpr, second.jaxpr)
    if not pairs:
        return first, second
    ours = {v for i, _ in pairs for v in first.jaxpr.eqns[i].outvars}
    theirs = {  # second's variable of each moved value -> first's
        b: a
        for i, j in pairs
        for a, b in zip(first.jaxpr.eqns[i].outvars, second.jaxpr.eqns[j].outvars)
    }
    moved_first, moved_second = {i for i, _ in pairs}, {j for _, j in pairs}
    kept_first = [e for i, e in enumerate(first.jaxpr.eqns) if i not in moved_first]
    kept_second = [e for j, e in enumerate(second.jaxpr.eqns) if j not in moved_second]
    read_first = _read(kept_first, first.jaxpr.outvars, ours)
    read_second = _read(kept_second, second.jaxpr.outvars, theirs)
    wanted = list(dict.fromkeys([*read_first, *(theirs[v] for v in read_second)]))
    values = {}
    if wanted:  # (else the shared equations are dead code in both branches)
        outer = first.jaxpr.replace(
            outvars=wanted,
            eqns=[first.jaxpr.eqns[i] for i, _ in pairs],
            effects=frozenset(),
            debug_info=first.jaxpr.debug_info._replace(result_paths=None),  # (other outputs)
        )
        values = dict(zip(wanted, jax.core.eval_jaxpr(outer, first.consts)))
    return (
        _reading(first, kept_first, read_first, [values[v] for v in read_first]),
        _reading(second, kept_second, read_second, [values[theirs[v]] for v in read_second]),
    )


def _shared(first, second) -> list[tuple[int, int]]:
    """[(equation index in `first`, its match in `second`)]: equations of one primitive and
    parameters with inputs of the same keys, in `first`'s order. A key names a value either
    branch may read: a constant (by identity: the same value from before the `if`), a literal
    (by value), or an output of a matched pair."""
    first_keys = {v: ("value", id(c)) for v, c in zip(first.jaxpr.constvars, first.consts)}
    second_keys = {v: ("value", id(c)) for v, c in zip(second.jaxpr.constvars, second.consts)}
    equations = second.jaxpr.eqns
    readers = collections.defaultdict(list)  # second's variable -> the equations that read it
    for j, eqn in enumerate(equations):
        for var in eqn.invars:
            if isinstance(var, jax_core.Var):
                readers[var].append(j)
    ready = collections.defaultdict(list)  # (primitive, input keys) -> second's equations
    offered = set()

    def offer(j):
        eqn = equations[j]
        key = None if j in offered or eqn.effects else _inputs(eqn, second_keys)
        if key is not None:
            offered.add(j)
            ready[key].append(j)

    for j in range(len(equations)):
        offer(j)
    pairs, taken = [], set()
    for i, eqn in enumerate(first.jaxpr.eqns):
        key = None if eqn.effects else _inputs(eqn, first_keys)
        match = next(
            (j for j in ready.get(key, ()) if j not in taken and _alike(eqn, equations[j])),
            None,
        )
        if match is None:
            continue
        taken.add(match)
        pairs.append((i, match))
        for n, (a, b) in enumerate(zip(eqn.outvars, equations[match].outvars)):
            first_keys[a] = second_keys[b] = ("shared", i, n)
            for j in readers.get(b, ()):
                offer(j)
    return pairs


def _exact(pairs, first, second) -> list[tuple[int, int]]:
    """The pairs whose moving out of the branches (open jaxprs `first`, `second`) keeps every
    derivative the branches give: those whose floating-point outputs, where the rest of each
    branch reads them, reach the same outputs of the `if` in both, and linearly (`_uses`), or
    that map a zero cotangent to exact zeros (`selects.zero_safe`), and pass it on to what
    they read (judged through them).

    Moved out, an equation gets its cotangent from the branch taken plus one from the other,
    an array of zeros (a select's or a cond's transpose). In its branch it got the taken
    branch's alone, which is JAX's symbolic zero where nothing there differentiates through it
    (`y = -x` on that path, `jnp.floor(r)`, `stop_gradient`, or an output of the `if` nothing
    after it differentiates, where the other branch sends it to one that is): its derivative
    was never computed. Moved, it multiplies those zeros: `0 * inf` at `jnp.log(0)`, a NaN.
    Where both branches send it, linearly, to the same outputs, its cotangent is zero in one
    exactly where it is in the other, and so is the cotangent's own derivative (a second
    derivative: `jnp.sqrt(x)` on one path, `jnp.sqrt(x) * x` on the other, would make the
    taken branch's constant where the other's is not)."""
    pairs = list(pairs)
    safe = {i for i, _ in pairs if selects.zero_safe(first.eqns[i])}
    while True:
        # What each value reaches through the branch as it is left, and through the zero-safe
        # equations that move: they pass a zero on to what they read (a moved `jnp.sqrt(x)`
        # under a moved `+ 1.0` gets the zeros the `+ 1.0` gets).
        passing_first = {i for i, _ in pairs if i not in safe}
        passing_second = {j for i, j in pairs if i not in safe}
        uses_first = _uses([e for i, e in enumerate(first.eqns) if i not in passing_first], first)
        uses_second = _uses(
            [e for j, e in enumerate(second.eqns) if j not in passing_second], second
        )
        failing = {
            i
            for i, j in pairs
            if i not in safe
            and any(
                _use(uses_first, v) is None or _use(uses_first, v) != _use(uses_second, w)
                for v, w in zip(first.eqns[i].outvars, second.eqns[j].outvars)
                if _inexact(v.aval)
            )
        }
        if not failing:
            return pairs
        staying = set()  # what the failing pairs compute, and what is computed from it
        kept = []
        for i, j in pairs:
            reads = first.eqns[i].invars
            if i in failing or any(isinstance(v, jax_core.Var) and v in staying for v in reads):
                staying.update(first.eqns[i].outvars)
            else:
                kept.append((i, j))
        pairs = kept


_NOTHING = frozenset()


def _use(uses, var):
    return uses.get(var, _NOTHING) if isinstance(var, jax_core.Var) else _NOTHING


def _uses(eqns, jaxpr) -> dict:
    """{variable: the indices of `jaxpr`'s outputs it reaches through `eqns`, or None where a
    path to one is not linear}: linear in each floating-point input are sums, casts, reshapes,
    slices, gathers, selects, masks (`max`, `clamp`), products and quotients by a literal, and
    `jit` calls of them; `floor`, `sign`, `stop_gradient`, comparisons pass no derivative on;
    anything else (a product of two values, an elementwise function, a loop, a custom
    derivative) is a path that is not linear."""
    found = {}
    for k, var in enumerate(jaxpr.outvars):
        if isinstance(var, jax_core.Var) and _inexact(var.aval):
            found[var] = _joined(found.get(var, _NOTHING), frozenset({k}))
    for eqn in reversed(eqns):
        reached = [_use(found, v) for v in eqn.outvars]
        if all(r == _NOTHING for r in reached):
            continue
        for position, var in enumerate(eqn.invars):
            if not (isinstance(var, jax_core.Var) and _inexact(var.aval)):
                continue
            found[var] = _joined(found.get(var, _NOTHING), _through(eqn, position, reached))
    return found


def _through(eqn, position, reached):
    """What input `position` of `eqn` reaches, given what each of its outputs reaches."""
    name = eqn.primitive.name
    if name in ("jit", "pjit"):
        inner = eqn.params["jaxpr"].jaxpr
        within = _use(_uses(inner.eqns, inner), inner.invars[position])
        if within is None:
            return None
        return _joined(_NOTHING, *(reached[k] for k in within))
    if name in _NO_DERIVATIVE:
        return _NOTHING
    linear = name in _LINEAR or (
        name in ("mul", "div")
        and isinstance(eqn.invars[1 - position], jax_core.Literal)
        and (name == "mul" or position == 0)
    )
    return _joined(_NOTHING, *reached) if linear else None


def _joined(*reaches):
    """The union of what each reaches; None (not linear) if any is."""
    if any(r is None for r in reaches):
        return None
    return frozenset().union(*reaches)


# Linear in each floating-point input, or masks of it (`reduce_max` too: the cotangent goes to
# where the maximum is).
_LINEAR = selects.LINEAR | {"reduce_max", "reduce_min"}

# Primitives whose derivative is JAX's symbolic zero: nothing reaches an output through them.
_NO_DERIVATIVE = selects.ZERO_DERIVATIVE


def _inexact(aval) -> bool:
    return selects.masked_input(getattr(aval, "dtype", None))


def _inputs(eqn, keys):
    """(primitive, the keys of the equation's inputs), or None where one has none."""
    found = []
    for var in eqn.invars:
        if isinstance(var, jax_core.Literal):
            value = np.asarray(var.val)
            found.append(("literal", str(var.aval), value.dtype.str, value.tobytes()))
        elif var in keys:
            found.append(keys[var])
        else:
            return None
    return eqn.primitive, tuple(found)


def _alike(a, b) -> bool:
    """Whether equations `a` and `b` (of one primitive, on the same inputs) compute alike: equal
    parameters (jaxprs by identity: JAX traces a `jit`-wrapped function once per input types)
    and outputs of the same types."""
    if [v.aval for v in a.outvars] != [v.aval for v in b.outvars]:
        return False
    if a.params.keys() != b.params.keys():
        return False
    for name, x in a.params.items():
        y = b.params[name]
        if x is y:
            continue
        try:
            if type(x) is not type(y) or not bool(x == y):
                return False
        except (TypeError, ValueError):  # arrays (ambiguous truth), values that do not compare
            return False
    return True


def _read(eqns, outvars, among) -> list:
    """The variables of `among` that `eqns` read or that are among `outvars`, in first-read
    order."""
    among = set(among)
    read = [v for eqn in eqns for v in eqn.invars if isinstance(v, jax_core.Var) and v in among]
    read += [v for v in outvars if isinstance(v, jax_core.Var) and v in among]
    return list(dict.fromkeys(read))


def _reading(closed, eqns, variables, values):
    """`closed` computing only `eqns`, reading `variables` as constants of `values`."""
    jaxpr = closed.jaxpr.replace(constvars=[*closed.jaxpr.constvars, *variables], eqns=eqns)
    return jax_core.ClosedJaxpr(jaxpr, [*closed.consts, *values])
