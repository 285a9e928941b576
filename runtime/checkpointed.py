"""A `while` loop that reverse-mode differentiation goes through, with bounded memory.

`lax.while_loop` is forward-differentiable only: reverse mode would need every iteration's state,
and the number of iterations is not known when the program is compiled. `while_loop` here is a
`lax.while_loop` when nobody differentiates. Differentiated, its tangent is the linear map

    T: (t0, tc) -> tn,   the derivative of the final state by the initial state `t0` and by the
                         values the body closes over `tc` (parameters), through all n steps

applied with `lax.custom_linear_solve` (its "solve" is T, its "transpose_solve" is T's
transpose), so that forward mode runs T (a while loop carrying tangents) and reverse mode runs
T's transpose: a sweep from the last step back to the first, which needs the state before each
step, in reverse order. Those states are recomputed, not stored:

- the forward pass keeps at most `checkpoints` states (online: every `stride`-th state; when the
  buffer is full, every other one is dropped and the stride doubles, so they end up evenly
  spaced, at most 2n/checkpoints steps apart, whatever n turns out to be);
- the reverse sweep keeps a stack of states, starting with those checkpoints: to step back from
  state i it recomputes, from the nearest state below i on the stack, the state halfway to i,
  pushes it, and repeats, until it holds state i (bisection: Griewank's recursive checkpointing).

Memory: `checkpoints` + ~log2(2n/checkpoints) states. Recomputation: about
(n/2)·log2(2n/checkpoints) extra steps. See docs/gradients.md.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jax_core
from jax.extend.core import ClosedJaxpr, Primitive
from jax.extend.core.primitives import while_p
from jax.interpreters import ad, batching, mlir

from runtime import errors, staging

DEFAULT_CHECKPOINTS = 64
_BISECTION_DEPTH = 34  # stack room for bisection: log2 of the longest segment, with margin


def while_loop(cond_fun, body_fun, init, *, checkpoints: int = DEFAULT_CHECKPOINTS, site=None):
    """`lax.while_loop(cond_fun, body_fun, init)`, differentiable in reverse mode too.

    Effects of the body (prints, checks) happen once per step: the states a derivative needs
    again are recomputed with a quiet version of the body, traced without them. `site` (where
    the loop is, for errors) names the loop in the error that second derivatives raise."""
    body = Traced(body_fun, init)
    promoted = _promote_weak(init, body)
    if promoted is not init:
        init, body = promoted, Traced(body_fun, promoted)
    quiet = body
    if body.effects:
        with staging.quiet():
            # A new function object (`jax.make_jaxpr`, where `staging.jaxpr_of` falls back to
            # it, caches traces by function, and would not see that this one is to be quiet).
            quiet = Traced(lambda x: body_fun(x), init)
    cond = Traced(cond_fun, init)
    if not has_inexact((init, body.consts, cond.consts)):
        # Integers and booleans only (indices, counters, flags): nothing to differentiate, and
        # no custom derivative around the loop in the graph.
        return run_while(cond, body, cond.consts, body.consts, init)
    loop = _loop(body, quiet, cond, checkpoints, site)
    return loop(body.consts, quiet.consts, cond.consts, init)


def _promote_weak(init, body: Traced):
    """`init` with each weakly typed leaf cast to the dtype the body makes of it (a Python `0`
    the body makes a float), as `lax.while_loop` promotes its state; `init` itself if none is.
    The derivative's loops keep states in buffers of the state's dtypes: they must be the
    body's."""
    leaves, tree = jax.tree_util.tree_flatten(init)
    outs = [v.aval for v in body.jaxpr.outvars]
    if len(outs) != len(leaves):
        return init
    changed = False
    promoted = []
    for leaf, out in zip(leaves, outs):
        aval = jax.typeof(leaf)
        if (
            aval.weak_type
            and aval.dtype != out.dtype
            and aval.shape == out.shape
            and staging.takes_dtype(leaf, out.dtype)
        ):  # a widening only: a float the body makes an int is JAX's error, not cut to it
            leaf, changed = lax.convert_element_type(leaf, out.dtype), True
        promoted.append(leaf)
    return jax.tree_util.tree_unflatten(tree, promoted) if changed else init


def has_inexact(tree) -> bool:
    return any(
        jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
        for leaf in jax.tree_util.tree_leaves(tree)
    )


def lax_while_loop(cond_fun, body_fun, init_val):
    """What converted code calls for `lax.while_loop`: the same loop, differentiable in reverse
    mode too."""
    return while_loop(cond_fun, body_fun, init_val, site=_LaxLoop("lax.while_loop"))


def lax_fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """What converted code calls for `lax.fori_loop`: with Python bounds it is `lax.fori_loop`
    (a scan, reverse-differentiable already); with traced bounds, where JAX would make it a
    `lax.while_loop`, it is this module's loop instead."""
    if not (staging.is_staged(lower) or staging.is_staged(upper)):
        return lax.fori_loop(lower, upper, body_fun, init_val, unroll=unroll)
    dtype = jnp.result_type(lower, upper)
    upper = jnp.asarray(upper, dtype)

    def body(carry):
        i, x = carry
        return i + 1, body_fun(i, x)

    start = (jnp.asarray(lower, dtype), init_val)
    _, final = while_loop(
        lambda carry: carry[0] < upper, body, start, site=_LaxLoop("lax.fori_loop")
    )
    return final


class Traced:
    """A function of the loop state, traced once: its jaxpr, and the values it closes over (made
    explicit arguments, so that derivatives by them, say parameters, are taken)."""

    def __init__(self, fn, init):
        trees = []
        closed = staging.jaxpr_of(staging.flattened(fn, trees), init)
        self.jaxpr, self.consts, self.effects = closed.jaxpr, tuple(closed.consts), closed.effects
        self.out_tree = trees[0]

    def __call__(self, x, consts):
        out = jax.core.eval_jaxpr(self.jaxpr, list(consts), *jax.tree_util.tree_leaves(x))
        return jax.tree_util.tree_unflatten(self.out_tree, out)

    def with_consts_first(self) -> ClosedJaxpr:
        """The jaxpr as a loop primitive takes it: the constants as its first arguments."""
        return _consts_first(self.jaxpr)


def _consts_first(jaxpr) -> ClosedJaxpr:
    """`jaxpr` as a loop primitive takes it: its constants as its first arguments."""
    names = jaxpr.debug_info.arg_names
    if names is not None:
        names = ("",) * len(jaxpr.constvars) + tuple(names)
    lifted = jaxpr.replace(
        constvars=[],
        invars=[*jaxpr.constvars, *jaxpr.invars],
        debug_info=jaxpr.debug_info._replace(arg_names=names),
    )
    return ClosedJaxpr(lifted, [])


def run_while(cond: Traced, body: Traced, cond_consts, body_consts, init):
    """`lax.while_loop` of the traced `cond` and `body` from `init`: one `while` equation made
    of their jaxprs, without tracing them a second time (replaying a jaxpr costs about as much
    as tracing the function). The body's results may differ from the state in weak types
    (`done = x < tol` is a weakly typed bool where `done = False` was made a strong one), which
    `lax.while_loop` accepts as they are (`while`'s results have the body's types); where they
    differ in more, `lax.while_loop` makes it and raises its error."""
    leaves, tree = jax.tree_util.tree_flatten(init)
    state = [_type(v.aval) for v in body.jaxpr.invars]
    if [_type(v.aval) for v in body.jaxpr.outvars] != state or len(leaves) != len(state):
        return lax.while_loop(lambda x: cond(x, cond_consts), lambda x: body(x, body_consts), init)
    out = while_p.bind(
        *cond_consts,
        *body_consts,
        *leaves,
        cond_nconsts=len(cond_consts),
        cond_jaxpr=cond.with_consts_first(),
        body_nconsts=len(body_consts),
        body_jaxpr=body.with_consts_first(),
    )
    return jax.tree_util.tree_unflatten(tree, out)


def run_while_then(cond_fun, body: Traced, body_consts, extras, init, then):
    """`lax.while_loop(cond_fun, step, (extras, init))[1]`, where `step` runs `body` and then
    `then(extras, x)` on the state `x` it made (a counter, the loop's test of the new state):
    one `while` equation whose body is `body`'s jaxpr followed by `then`'s, so that the body,
    traced once, is not traced a second time (replaying it costs about as much as tracing
    it); `then` and `cond_fun`, small, are traced here."""
    leaves, tree = jax.tree_util.tree_flatten(init)
    extra_leaves, extra_tree = jax.tree_util.tree_flatten(extras)
    jaxpr = body.jaxpr
    ins, outs = [v.aval for v in jaxpr.invars], [v.aval for v in jaxpr.outvars]
    if [_type(a) for a in outs] != [_type(a) for a in ins] or len(leaves) != len(ins):

        def step(c):
            x = body(c[1], body_consts)
            return then(c[0], x), x

        return lax.while_loop(cond_fun, step, (extras, init))[1]

    def tail_fun(extra_leaves, leaves):
        e = jax.tree_util.tree_unflatten(extra_tree, extra_leaves)
        return jax.tree_util.tree_leaves(then(e, jax.tree_util.tree_unflatten(tree, leaves)))

    def cond_flat(extra_leaves, leaves):
        e = jax.tree_util.tree_unflatten(extra_tree, extra_leaves)
        return [cond_fun((e, jax.tree_util.tree_unflatten(tree, leaves)))]

    extra_avals = [jax.typeof(leaf) for leaf in extra_leaves]
    tail = staging.jaxpr_of(tail_fun, extra_avals, outs)
    cond = staging.jaxpr_of(cond_flat, extra_avals, ins)
    if [_type(a) for a in tail.out_avals] != [_type(a) for a in extra_avals]:
        raise TypeError("a while loop's carried counters changed type")  # (internal)
    tail_jaxpr = tail.jaxpr
    given = tail_jaxpr.invars[len(extra_leaves) :]
    made = dict(zip(given, jaxpr.outvars))

    def made_of(v):
        return made.get(v, v) if isinstance(v, jax_core.Var) else v

    eqns = [eqn.replace(invars=[made_of(v) for v in eqn.invars]) for eqn in tail_jaxpr.eqns]
    invars = [
        *jaxpr.constvars,
        *tail_jaxpr.constvars,
        *tail_jaxpr.invars[: len(extra_leaves)],
        *jaxpr.invars,
    ]
    composed = jax_core.Jaxpr(
        [],
        invars,
        [*map(made_of, tail_jaxpr.outvars), *jaxpr.outvars],
        [*jaxpr.eqns, *eqns],
        jaxpr.effects | tail_jaxpr.effects,
        _COMPOSED,
    )
    out = while_p.bind(
        *cond.consts,
        *body_consts,
        *tail.consts,
        *extra_leaves,
        *leaves,
        cond_nconsts=len(cond.consts),
        cond_jaxpr=_consts_first(cond.jaxpr),
        body_nconsts=len(body_consts) + len(tail.consts),
        body_jaxpr=ClosedJaxpr(composed, []),
    )
    return jax.tree_util.tree_unflatten(tree, out[len(extra_leaves) :])


_COMPOSED = jax_core.DebugInfo("a staged loop", "staged code", None, None)


def _type(aval) -> tuple:
    """What `while` requires of a state variable: the same shape and dtype (not weak type)."""
    return aval.shape, aval.dtype


def _loop(body, quiet, cond, checkpoints, site):
    def primal(body_consts, quiet_consts, cond_consts, init):
        return run_while(cond, body, cond_consts, body_consts, init)

    loop = jax.custom_jvp(primal)

    def loop_jvp(primals, tangents):
        primals = _refusing_derivatives(primals, site)
        body_consts, quiet_consts, cond_consts, init = primals
        _, t_consts, _, t_init = _as_arrays(tangents)  # derivatives: by the quiet body's consts
        # The state's tangents are those of its floating-point leaves; the constants', those
        # that are not zero (not differentiated by): T is linear in exactly those.
        x_part = _Inexact(init)
        c_part = _Inexact(quiet_consts, t_consts)

        def step(x, consts):  # a step as the derivative recomputes it: no prints, no checks
            return quiet(x, consts)

        final, count, saved = _forward(
            lambda x, _: body(x, body_consts),
            lambda x: cond(x, cond_consts),
            None,
            init,
            checkpoints,
        )
        body_consts = quiet_consts

        def tangent_map(v):  # T: the derivative of the n steps; forward mode runs this
            v_init, v_consts = v

            def advance(carry):
                i, x, t = carry
                x, t = jax.jvp(
                    step,
                    (x, body_consts),
                    (x_part.full(t, x), c_part.full(v_consts, body_consts)),
                )
                return i + 1, x, x_part.part(t)

            _, _, t_final = lax.while_loop(
                lambda c: c[0] < count, advance, (jnp.zeros((), jnp.int32), init, v_init)
            )
            return t_final, _zeros(v_consts)

        def transposed_map(ct):  # T's transpose: reverse mode runs this
            ct_final, _ = ct
            return _reverse_sweep(step, body_consts, saved, count, ct_final, x_part, c_part)

        live = c_part.part(t_consts) + _live(t_init)
        if not live:  # nothing is differentiated: the tangent is zero
            return final, x_part.full(_zeros(x_part.part(final)), final)
        # Every input of the linear map must be a tangent (JAX transposes it only then), even
        # where it is zero, or a zero JAX made (a scan's jvp instantiates the tangents of its
        # carry as constant zeros): each is tied to a zero made from the live tangents.
        anchor = _linear_zero(live)
        v_init = _tied(x_part.part(_instantiate(t_init, init, anchor)), anchor)
        t_final, _ = lax.custom_linear_solve(
            lambda v: v,
            (v_init, _tied(c_part.part(t_consts), anchor)),
            lambda _, b: tangent_map(b),
            lambda _, b: transposed_map(b),
        )
        return final, x_part.full(t_final, final)

    loop.defjvp(loop_jvp, symbolic_zeros=True)
    return loop


def _refusing_derivatives(values, site):
    """`values`, through an identity whose derivative raises: the loop's own derivative uses
    them (the states it recomputes, the parameters), and a derivative of that derivative
    (`jax.hessian`, `jacfwd` of `grad`, `grad` of `jvp`) through a `lax.custom_linear_solve`
    would be taken as if it did not depend on them: silently wrong, so it is refused. An
    equation of the graph, not a check now: the refusal is met however the second derivative
    reaches the loop, also through a `cond` or `scan` around it, which JAX differentiates as a
    jaxpr (a primitive, since JAX inlines a `custom_jvp` whose inputs it knows)."""
    leaves, tree = jax.tree_util.tree_flatten(values)
    if isinstance(site, _LaxLoop):
        where, fix = f" ({site.name} at {site.line})" if site.line else "", _LAX_FIX
    else:
        where, fix = f" ({site})" if site is not None else "", _PYTHON_FIX
    out = _first_order_only_p.bind(*leaves, where=where, fix=fix)
    return jax.tree_util.tree_unflatten(tree, out)


_PYTHON_FIX = (
    "Bound the loop with transpiler.loop_options(max_iterations=N) (a scan, differentiable to "
    "any order), or take the second derivative outside jax.jit (the loop then runs in Python)."
)
_LAX_FIX = (
    "Write the loop as a lax.scan of a fixed number of steps (masked after the test fails), or "
    "as a Python while loop with transpiler.loop_options(max_iterations=N)."
)


class _LaxLoop:
    """A `lax.while_loop` or `lax.fori_loop` that converted code calls: named in the refusal
    of second derivatives by the user's line that calls it."""

    def __init__(self, name: str):
        self.name, self.line = name, errors.calling_line()


def _refuse_second_order(primals, tangents, *, where, fix):
    if all(type(t) is ad.Zero or jnp.result_type(t) == jax.dtypes.float0 for t in tangents):
        return _first_order_only_p.bind(*primals, where=where, fix=fix), tangents
    raise errors.StagingError(
        f"second derivatives through a staged while loop{where} are not supported: "
        "jax.hessian, jax.jacfwd/jacrev of a gradient, or jax.grad of jax.jvp through it "
        f"would be computed wrong. {fix}"
    )


_first_order_only_p = Primitive("first_order_only")
_first_order_only_p.multiple_results = True
_first_order_only_p.def_impl(lambda *values, where, fix: values)
_first_order_only_p.def_abstract_eval(lambda *avals, where, fix: avals)
ad.primitive_jvps[_first_order_only_p] = _refuse_second_order
batching.primitive_batchers[_first_order_only_p] = lambda args, dims, *, where, fix: (
    _first_order_only_p.bind(*args, where=where, fix=fix),
    dims,
)
mlir.register_lowering(
    _first_order_only_p,
    mlir.lower_fun(lambda *values, where, fix: values, multiple_results=True),
)


class _Inexact:
    """The leaves of a tree that carry tangents: floating-point ones (the rest have `float0`),
    and, given `tangents`, not symbolically zero."""

    def __init__(self, tree, tangents=None):
        leaves, self.treedef = jax.tree_util.tree_flatten(tree)
        self.mask = [jnp.issubdtype(jnp.result_type(leaf), jnp.inexact) for leaf in leaves]
        if tangents is not None:
            zero = jax.custom_derivatives.SymbolicZero
            flat = jax.tree_util.tree_leaves(tangents, is_leaf=lambda t: isinstance(t, zero))
            self.mask = [m and not isinstance(t, zero) for m, t in zip(self.mask, flat)]

    def part(self, tree) -> list:
        """The tangent-carrying leaves of a tree shaped like this one."""
        return [leaf for leaf, m in zip(jax.tree_util.tree_leaves(tree), self.mask) if m]

    def full(self, part: list, primal):
        """Tangents for all of `primal`: `part` where floating, `float0` zeros elsewhere."""
        part = iter(part)
        leaves = [
            next(part) if m else _zero_tangent(p) for p, m in zip(leaves_of(primal), self.mask)
        ]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


def leaves_of(tree) -> list:
    return jax.tree_util.tree_leaves(tree)


def _zero_tangent(primal):
    """The zero tangent of `primal`: zeros for floating point, `float0` otherwise."""
    dtype = jnp.result_type(primal)
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.zeros(jnp.shape(primal), dtype)
    return np.zeros(jnp.shape(primal), jax.dtypes.float0)


def _as_arrays(tangents):
    """Tangents with Python numbers (JAX passes some for Python-number primals) as arrays."""
    zero = jax.custom_derivatives.SymbolicZero
    return jax.tree_util.tree_map(
        lambda t: t if isinstance(t, zero) else jnp.asarray(t),
        tangents,
        is_leaf=lambda t: isinstance(t, zero),
    )


def _zeros(tree):
    return jax.tree_util.tree_map(jnp.zeros_like, tree)


def _live(tangents) -> list:
    """The tangent leaves that are not zero (symbolically) and not `float0`."""
    zero = jax.custom_derivatives.SymbolicZero
    leaves = jax.tree_util.tree_leaves(tangents, is_leaf=lambda t: isinstance(t, zero))
    return [t for t in leaves if not isinstance(t, zero) and t.dtype != jax.dtypes.float0]


def _linear_zero(tangents: list):
    """A scalar zero that depends on every tangent in `tangents` (JAX sees it as linear in
    them): selected away, so that it is zero even where a tangent is inf or nan (`0 * inf`)."""
    total = sum(jnp.real(jnp.sum(t)).astype(jnp.float32) for t in tangents)
    return lax.select(jnp.zeros((), bool), total, jnp.zeros((), jnp.float32))


def _tied(tangents: list, anchor) -> list:
    """`tangents`, each plus `anchor` (a zero linear in all of them): all linear if one is. The
    anchor is cast to each tangent's dtype first: a weakly typed float64 tangent (a Python
    float's, with x64) plus the float32 anchor was a float32 (rounded, 1e-50 made 0)."""
    return [t + anchor.astype(t.dtype) for t in tangents]


def _instantiate(tangents, primals, anchor):
    """Symbolically zero tangents (and `float0` ones) as zeros, made from `anchor` (a traced
    zero) so that they are tangents too."""
    zero = jax.custom_derivatives.SymbolicZero

    def one(t, p):
        if not jnp.issubdtype(jnp.result_type(p), jnp.inexact):  # ints, bools, PRNG keys
            return _zero_tangent(p)  # no tangent of their own: float0
        if isinstance(t, zero) or t.dtype == jax.dtypes.float0:
            return jnp.zeros_like(p) + anchor.astype(jnp.result_type(p))
        return t

    return jax.tree_util.tree_map(one, tangents, primals, is_leaf=lambda t: isinstance(t, zero))


def _forward(step, test, consts, init, checkpoints):
    """Runs the loop; returns (final state, number of steps, the checkpoints kept): a buffer of
    `checkpoints` states and their step numbers, evenly spaced by a stride that doubles
    whenever the buffer fills.

    The middle loop keeps a state, then runs `stride` steps (the inner loop, which carries
    only the state), until the loop ends or the buffer is full; the outer loop then keeps
    every other checkpoint and doubles the stride (log2(2n/checkpoints) times in all)."""
    k = checkpoints
    buffer = jax.tree_util.tree_map(
        lambda x: jnp.zeros((k, *jnp.shape(x)), jnp.result_type(x)), init
    )
    indices = jnp.full((k,), -1, jnp.int32)

    def stride_of_steps(c):  # the hot loop: it carries only the state and the step number
        x, i, stop = c
        return step(x, consts), i + 1, stop

    def checkpoint_and_run(c):  # keep the state, then run up to `stride` steps
        x, i, buf, idx, count, stride = c
        buf = jax.tree_util.tree_map(lambda a, v: _put(a, v, count), buf, x)
        idx = _put(idx, i, count)
        x, i, _ = lax.while_loop(
            lambda c: (c[1] < c[2]) & test(c[0]), stride_of_steps, (x, i, i + stride)
        )
        return x, i, buf, idx, count + 1, stride

    def epoch(c):
        c = lax.while_loop(lambda c: test(c[0]) & (c[4] < k), checkpoint_and_run, c)

        def compact(c):  # keep checkpoints 0, 2s, 4s, ...; the stride doubles
            x, i, buf, idx, count, stride = c
            half = k // 2
            buf = jax.tree_util.tree_map(
                lambda a: jnp.concatenate([a[: 2 * half : 2], a[half:]]), buf
            )
            idx = jnp.concatenate([idx[: 2 * half : 2], jnp.full((k - half,), -1, idx.dtype)])
            return x, i, buf, idx, jnp.asarray(half, jnp.int32), stride * 2

        return lax.cond(test(c[0]), compact, lambda c: c, c)

    zero = jnp.zeros((), jnp.int32)
    carry = (init, zero, buffer, indices, zero, jnp.ones((), jnp.int32))
    final, n, buf, idx, count, _ = lax.while_loop(lambda c: test(c[0]), epoch, carry)
    return final, n, (buf, idx, count)


_BLOCK = 32  # below this many steps, a block of states is recomputed at once and swept back


def _put(buffer, value, index):
    """`buffer` with `value` at `index` (in range): one `dynamic_update_slice`, not the scatter
    and the index arithmetic of `buffer.at[index].set(value)`."""
    value = jnp.asarray(value, buffer.dtype)
    return lax.dynamic_update_index_in_dim(buffer, value, index, 0, allow_negative_indices=False)


def _get(buffer, index):
    """`buffer[index]` (in range): one `dynamic_slice`, without the wrapping of a negative index."""
    return lax.dynamic_index_in_dim(buffer, index, 0, keepdims=False, allow_negative_indices=False)


def _reverse_sweep(step, consts, saved, count, ct_final, x_part, c_part):
    """(cotangent of the initial state, cotangents of the body's live constants): the
    vector-Jacobian product of all `count` steps, from the last back to the first.

    A stack holds states with their step numbers, starting with the checkpoints. To go back
    from step i, take the top state j (the nearest at or below i): if i - j is small, recompute
    the block of states from the lowest stacked state less than a block below i up to i into a
    buffer, sweep back over it and pop those states; else recompute the state halfway from j
    to i and push it (bisection)."""
    buf, idx, kept = saved
    depth = idx.shape[0] + _BISECTION_DEPTH + 1  # + 1: the slot above the top is written
    pad = depth - idx.shape[0]
    stack = jax.tree_util.tree_map(
        lambda a: jnp.concatenate([a, jnp.zeros((pad, *a.shape[1:]), a.dtype)]), buf
    )
    stack_idx = jnp.concatenate([idx, jnp.full((pad,), -1, jnp.int32)])
    # (+ 1: the slot a bisecting step writes to, never read)
    block = jax.tree_util.tree_map(lambda a: jnp.zeros((_BLOCK + 1, *a.shape[1:]), a.dtype), buf)

    def back_one(x, ct_x, ct_c):
        out, vjp = jax.vjp(step, x, consts)
        d_x, d_c = vjp(x_part.full(ct_x, out))
        return x_part.part(d_x), [a + b for a, b in zip(ct_c, c_part.part(d_c))]

    def body(carry):
        i, ct_x, ct_c, stack, stack_idx, top = carry
        sweeping = i - _get(stack_idx, top - 1) < _BLOCK
        # Sweeping, start from the lowest state on the stack that is less than a block below
        # i (the stack's steps ascend): close checkpoints make one block, not one block each.
        near = (jnp.arange(depth) < top) & (stack_idx >= 0) & (i - stack_idx < _BLOCK)
        start = jnp.where(sweeping, jnp.argmax(near).astype(top.dtype), top - 1)
        j = _get(stack_idx, start)
        x_j = jax.tree_util.tree_map(lambda a: _get(a, start), stack)
        mid = j + (i - j + 1) // 2

        # One loop recomputes the states from j: up to i into the block buffer to sweep back
        # over them, or up to the state halfway to i (bisecting), to push it. One copy of the
        # step in the graph for both, and no `lax.cond` around them.
        def fill(t, c):
            x, states = c
            x = step(x, consts)
            at = jnp.where(sweeping, t + 1, _BLOCK)  # bisecting, nothing is kept
            return x, jax.tree_util.tree_map(lambda a, v: _put(a, v, at), states, x)

        states = jax.tree_util.tree_map(lambda a, v: _put(a, v, 0), block, x_j)
        x_new, states = lax.fori_loop(0, jnp.where(sweeping, i, mid) - j, fill, (x_j, states))

        def back(t, c):
            x = jax.tree_util.tree_map(lambda a: _get(a, i - j - t), states)
            return back_one(x, *c)

        # Bisecting, the sweep runs no step.
        ct_x, ct_c = lax.fori_loop(0, jnp.where(sweeping, i - j + 1, 0), back, (ct_x, ct_c))
        # The state computed is written just above the top, and counts only when bisecting.
        stack = jax.tree_util.tree_map(lambda a, v: _put(a, v, top), stack, x_new)
        stack_idx = _put(stack_idx, jnp.where(sweeping, -1, mid), top)
        top = jnp.where(sweeping, start, top + 1)
        return jnp.where(sweeping, j - 1, i), ct_x, ct_c, stack, stack_idx, top

    carry = (count - 1, ct_final, _zeros(c_part.part(consts)), stack, stack_idx, kept)
    _, ct_init, ct_consts, *_ = lax.while_loop(lambda c: c[0] >= 0, body, carry)
    return ct_init, ct_consts
