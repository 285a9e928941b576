"""A while loop of at most N iterations (`loop_options(max_iterations=N)`): run, a
`lax.while_loop` that stops when its test does; differentiated, a `lax.scan` of N masked steps.
A masked step is a select of the state, the body computed in every step (on masked inputs where
its derivative could be infinite there), as a hand-written masked scan is; a `lax.cond` that
runs the body only while the loop goes on where a select cannot be exact or would cost more (see
`selects.step_lowering`).

`lax.while_loop` has no reverse-mode derivative, and a scan runs all its N steps. So the loop is
a `jax.custom_jvp` function whose primal is the while loop (as fast as a hand-written one, and as
quick to compile) and whose derivative is that of the scan, each step of which leaves the state
as it is once the test has failed: the same final state, with the derivative of every step
stored (no recomputation), so reverse mode and derivatives of any order go through it.

    i = 0
    while i < N and test(x):          # the test is not evaluated once N iterations have run
        x = body(x)
        i += 1
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jax_core

from runtime import checkpointed, selects, staging


class Unbounded(Exception):
    """Internal: a bound the loop's own test implies (`runtime.loops`) is not used: the test
    makes an effect (Python evaluates it once more after the last iteration, the bounded loop
    would not), so does the body (the derivative's scan would make it again), the body runs a
    `while` of its own (the derivative's masked steps would run it on states the loop never
    reaches, where it need not stop: under `jax.vmap` a step's `lax.cond` runs both sides), or
    what the steps compute, stored for reverse mode, would take more than `IMPLIED_BYTES`."""


IMPLIED_BYTES = 1 << 22
"""At most this many bytes computed by all the steps of a bound a loop's test implies (each
step's outputs of every equation, the most reverse mode stores): the scan runs every step,
however soon the loop stops, where the checkpointed loop runs those it takes."""


class Retest:
    """A loop's first test: its evaluation on the state before the loop (Python numbers as
    Python has them), which did nothing that evaluating it again repeats, as a closed jaxpr
    that the staged loop's condition evaluates in its first iteration (and the test of its own
    state after), in place of a value computed outside the loop and carried in.

    XLA:CPU compiles anything a program computes outside its loop as a kernel of its own,
    which costs as much to compile as a small loop body (the adaptive ODE's `while t < t_end`
    from `t = 0.0`: see docs/benchmarks.md, twenty-sixth run)."""

    def __init__(self, evaluate):
        # What it reads before the loop: constants.
        self.jaxpr = staging.jaxpr_of(lambda: [evaluate()])

    def __call__(self, consts=None):
        """The test's value (a scalar bool), computed where this is called (with `consts` in
        place of the values it read before the loop: a `jax.custom_jvp`'s arguments)."""
        consts = self.jaxpr.consts if consts is None else consts
        closed = jax_core.ClosedJaxpr(self.jaxpr.jaxpr, list(consts))
        return jax_core.jaxpr_as_fun(closed)()[0]

    def condition(self, later, consts=None):
        """The condition of a loop that carries `(fresh, state)`, `fresh` true until its first
        iteration: this test while fresh, `later(state)` after: a select of both where the test
        is cheap (`selects.cheap`), a `lax.cond` where computing it twice costs more."""

        if selects.cheap(self.jaxpr):

            def test(looping):
                fresh, state = looping
                return lax.select(fresh, self(consts), later(state))

            return test

        def costly_test(looping):
            # (A select would compute it twice in every iteration: a line search's test of
            # a 256x256 matrix product ran at 1.7x the time of a hand-written loop's.)
            fresh, state = looping
            return lax.cond(fresh, lambda: self(consts), lambda: later(state))

        return costly_test


def while_loop(cond_fun, body_fun, init, max_iterations: int, first=None, implied=False):
    """`x = init; while i < max_iterations and cond_fun(x): x = body_fun(x)`; the final `x`.

    `first`: the test's value on `init` (a traced bool), evaluated already where the test's
    evaluations must not be repeated (its effects, see `runtime.loops`); then the loop carries
    the test's value, evaluated after each iteration that may be followed by another. Or a
    `Retest` (the test as Python evaluated it before the loop, on Python numbers the
    loop's state promotes): a bound the test implies evaluates it in the loop's first
    condition; otherwise it is computed before the loop and carried as a value.
    `implied`: `max_iterations` is a bound the test itself implies (its counter); raises
    Unbounded where the loop does not take it (see there).
    """
    body = checkpointed.Traced(body_fun, init)
    if implied and (body.effects or _runs_while(body.jaxpr)):
        raise Unbounded()
    if implied and max_iterations * _computed_bytes(body.jaxpr) > IMPLIED_BYTES:
        raise Unbounded()
    cond = checkpointed.Traced(cond_fun, init)
    if implied and cond.effects:
        raise Unbounded()

    def test_within(i, x, consts):
        """`i < max_iterations and cond(x)`: a test with effects is evaluated only below it."""
        more = i < max_iterations
        if cond.effects:
            return lax.cond(more, lambda: cond(x, consts), lambda: jnp.asarray(False))
        return more & cond(x, consts)

    retest = first if isinstance(first, Retest) else None
    if retest is not None:
        first = retest.jaxpr.consts  # (arguments of the custom derivative below, as values)

    def primal(body_consts, cond_consts, init, going):
        # Each a `while` whose body is the body's jaxpr and a small tail after it (a counter,
        # the test of the new state): the body is not traced again (`run_while_then`).
        if implied and retest is not None:  # (see `Retest`)
            retested = retest.condition(lambda x: cond(x, cond_consts), going)
            once = lambda fresh, x: jnp.asarray(False)  # noqa: E731
            return checkpointed.run_while_then(
                retested, body, body_consts, jnp.asarray(True), init, once
            )
        if retest is not None:
            going = retest(going)
        if implied:  # the test stops the loop by then: the loop as written, no count of ours
            if going is None:
                return checkpointed.run_while(cond, body, cond_consts, body_consts, init)
            tested = lambda _, x: cond(x, cond_consts)  # noqa: E731
            return checkpointed.run_while_then(
                lambda c: c[0], body, body_consts, going, init, tested
            )
        zero = jnp.zeros((), jnp.int32)
        if going is None:
            return checkpointed.run_while_then(
                lambda c: test_within(c[0], c[1], cond_consts),
                body,
                body_consts,
                zero,
                init,
                lambda i, _: i + 1,
            )

        def counted(c, x):
            i, _ = c
            return i + 1, test_within(i + 1, x, cond_consts)

        return checkpointed.run_while_then(
            lambda c: c[0][1], body, body_consts, (zero, going), init, counted
        )

    if not checkpointed.has_inexact((init, body.consts, cond.consts)):
        return primal(body.consts, cond.consts, init, first)  # nothing to differentiate

    masking = selects.step_lowering(
        body.jaxpr,
        cond.jaxpr,
        [jnp.result_type(leaf) for leaf in jax.tree_util.tree_leaves(init)],
        body.consts,
    )

    def scanned(body_consts, cond_consts, init, going):
        if retest is not None:
            going = retest(going)
        if going is None:
            going = test_within(0, init, cond_consts)

        # Saving everything: no recomputation. Under `jax.checkpoint` the values the body
        # closes over (parameters) stay loop-invariant; saved through the mask's `lax.cond`,
        # they would be stored once per iteration (a 64x64 matrix, 1000 iterations: 16 MB
        # instead of 0.8 MB).
        @functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.everything_saveable)
        def step(c):
            i, going, x = c

            def run(x, consts):
                x = body(x, consts)
                return test_within(i + 1, x, cond_consts), x

            if masking is None:
                going, x = lax.cond(
                    going, run, lambda x, _: (jnp.asarray(False), x), x, body_consts
                )
                return i + 1, going, x
            # A select of the state (see `selects.step_lowering`): the step computes the body
            # in every step, on masked inputs where guarded.
            x_in, consts = x, body_consts
            if masking == "guarded select":
                x_in, consts = _masked(going, x_in), _masked(going, consts)
            more, x_new = run(x_in, consts)
            x = jax.tree_util.tree_map(lambda new, old: lax.select(going, new, old), x_new, x)
            return i + 1, going & more, x

        zero = jnp.zeros((), jnp.int32)
        final, _ = lax.scan(
            lambda c, _: (step(c), None), (zero, going, init), None, length=max_iterations
        )
        return final[2]

    loop = jax.custom_jvp(primal)
    loop.defjvp(lambda primals, tangents: jax.jvp(scanned, primals, tangents))
    return loop(body.consts, cond.consts, init, first)


def _computed_bytes(jaxpr) -> int:
    """The bytes of the outputs of every equation of `jaxpr` and the jaxprs inside it."""
    return sum(
        nbytes(v.aval.shape, v.aval.dtype) for eqn in selects.equations(jaxpr) for v in eqn.outvars
    )


def nbytes(shape, dtype) -> int:
    """The bytes of an array of `shape` and `dtype` (a PRNG key's: those of its key data)."""
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:  # an extended dtype (`key<fry>`): not NumPy's
        itemsize = getattr(dtype, "itemsize", 8)
    return int(np.prod(shape, dtype=np.int64)) * itemsize


def _runs_while(jaxpr) -> bool:
    """Whether `jaxpr` (or one inside it) holds a `while` equation."""
    return any(eqn.primitive.name == "while" for eqn in selects.equations(jaxpr))


def _masked(going, tree):
    """`tree` with each floating-point leaf where the loop goes on, ones after its test failed:
    a step computed there reaches its inputs' derivatives through this select only, which gives
    an exact zero whatever the body's derivative is at those ones."""

    def mask(leaf):
        if not selects.masked_input(jnp.result_type(leaf)):
            return leaf
        return lax.select(going, leaf, lax.full_like(leaf, 1))

    return jax.tree_util.tree_map(mask, tree)
