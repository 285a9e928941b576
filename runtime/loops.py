"""Functional form of `while`: a Python path and a staged path.

A Python loop stays Python. As soon as its test is traced, the remaining iterations lower to one
`lax.while_loop` (a bounded one given `loop_options(max_iterations=N)`), after checking that the
state keeps its structure, shapes and dtypes. `for` loops are in `runtime.for_loops`.
"""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp

from runtime import (
    bounded,
    checkpointed,
    control_flow,
    errors,
    exits,
    identity,
    log,
    logical,
    peeling,
    staging,
)
from runtime import carry as carry_
from runtime.carry import Carry
from runtime.control_flow import staged_cond
from runtime.effects import Effects
from runtime.errors import Site
from runtime.staging import is_staged


@identity.letting_go
def while_stmt(
    test,
    body,
    state,
    *,
    symbol_names,
    max_iterations=None,
    checkpoints=None,
    exit_test=None,
    reads=(),
    sums=(),
    test_reads=(),
    compared=(),
    compared_with=None,
    aliased=(),
    stores=(),
    owned=(),
    counted=None,
):
    """Functional form of a while statement.

    Same semantics as::

        while test(*state):          # and, given max_iterations, at most that many times
            if exit_test is not None and exit_test(*state):
                break
            state = body(*state)

    (`exit_test`: a leading `if C: break` of the body, see `runtime.exits`.) The test is
    evaluated in Python while it gives Python values. As soon as it gives a traced value, the
    rest of the loop lowers to `jax.lax.while_loop`, starting from the state as it is then, or,
    when the first iteration made it traced, from before that iteration where that is exact
    (see `runtime.peeling`); the exit test is part of its condition. Every state variable must
    keep its shape and dtype across iterations. With `max_iterations` (from
    `transpiler.loop_options`) the loop is bounded (see `runtime.bounded`). Either way
    reverse-mode differentiation goes through it: the unbounded loop recomputes what its
    derivative needs from `checkpoints` stored states (see `runtime.checkpointed`). Python
    state the loop changes (an attribute, a global) is carried too, or refused (see
    `runtime.effects`). `reads`, `sums`, `test_reads`, `compared`, `compared_with` (a function
    of the state giving what the test compares `compared` with): what the conversion knows of
    the state's uses, for `runtime.peeling`; `aliased`: the variables whose lists and dicts
    other names may reach and change in place; `stores`: the body's stores of such a container
    into another, refused when staged; `owned`: the variables whose containers no other name
    can see (see `Effects`). `counted`: (counter, bound, extra) where the test bounds the loop
    by a counter (`it < max_iter`, `it += 1` in every iteration: see
    `transpiler.analysis.counters`), `bound` a function giving the bound: staged where both
    are Python ints, the loop is bounded by that count as by `max_iterations` (see
    `implied_bound`).
    """
    site = Site("while loop")
    max_iterations = check_count(max_iterations, "max_iterations", 1, site)
    checkpoints = check_count(checkpoints, "checkpoints", 2, site)
    loop_test = test
    if exit_test is not None:

        def loop_test(*state):  # `test and not exit_test`, as Python evaluates them
            return logical.and_(test(*state), lambda: logical.not_(exit_test(*state)))

    functions = (test, exit_test, body)

    def staged(state, iterations, first, counting=None):
        """The loop staged from `state`, after `iterations` Python ran; `counting`: the state
        whose counter tells the iterations left, where `state` is it promoted (a restart)."""
        left = None if max_iterations is None else max_iterations - iterations
        implied = None
        if left is None and checkpoints is None:
            counting = state if counting is None else counting
            left = implied_bound(counted, counting, symbol_names)
            implied = None if left is None else Implied()
        reads_ = (*reads, *sums, *test_reads)
        owning = identity.owning(owned, symbol_names, state)
        effects = Effects(functions, site, aliased, stores, reads_, owning)
        out = effects.run(
            state,
            symbol_names,
            lambda state, names, wrap: staged_while(
                wrap(loop_test, returns_state=False),
                wrap(body),
                state,
                names,
                site,
                left,
                checkpoints,
                first=first,
                implied=implied,
            ),
        )
        if implied is not None and implied.taken:
            log.staged(site, f"lax.while_loop (at most {left} iterations, by its counter)")
        elif implied is not None:
            log.staged(site, "lax.while_loop")
        else:
            log.staged(site, "lax.while_loop" if max_iterations is None else "lax.scan")
        return out

    if max_iterations == 0:
        return state
    pred, first = _first_test(test, state, symbol_names, test_reads, compared, functions, site)
    if exit_test is not None and (is_staged(pred) or pred):
        # The exit test, as Python evaluates it after the test: where the test is traced, its
        # checks (`st[-1]` under `while len(st) > 0`) are made only where the test holds.
        def exit_now():
            if not is_staged(pred):
                return staging.condition(exit_test(*state))
            truth = staging.scalar_predicate(pred, site, "loop condition")
            with staging.tracing_branch(truth):
                return staging.condition(exit_test(*state))

        stop, clean = peeling.watched(exit_now, state, symbol_names, functions)
        if is_staged(pred):  # staged at once: the loop's condition tests both
            if first is None and (not clean or is_staged(stop)):
                first = pred  # the exit test's evaluation is carried in too, with it
            if isinstance(first, bounded.Retest):
                first = pred  # (joined with the exit test's value, carried in)
            if first is not None:
                first = logical.and_(first, lambda: logical.not_(stop))
            return staged(state, 0, first)
        if is_staged(stop):
            if clean and peeling.restartable(state, symbol_names, reads, sums):
                # Staged from here: as if the loop's test, `test and not exit`, were traced.
                again = peeling.tests_the_same(state, symbol_names, test_reads, compared)
                return staged(state, 0, None if again else logical.not_(stop))
            # As Python runs it: this iteration with a flag, the loop after it.
            return _with_exit_flag(
                stop, loop_test, body, state, symbol_names, max_iterations, checkpoints
            )
        if stop:
            return state
        pred = True  # the test held and the exit did not: the body runs
    elif is_staged(pred):
        return staged(state, 0, first)
    iterations = 0
    before = None  # the state before the loop, while staging it from there stays exact
    while pred:
        if iterations == 0 and max_iterations != 1:
            # Python runs it, and tells whether the loop is staged after it: if so, staged
            # from before it where that is exact (see runtime.peeling).
            retest = None

            def iteration(state):
                nonlocal retest
                after = body(*state)
                decides, retest = _first_test(
                    loop_test, after, symbol_names, test_reads, compared, functions, site
                )
                return after, decides

            owning = identity.owning(owned, symbol_names, state)
            before = state
            state, pred, start = peeling.first_iteration(
                iteration, state, symbol_names, functions, reads, sums, owning
            )
            if is_staged(pred):
                # From before it: True, the test Python evaluated before it. From after it:
                # the test evaluated again by the loop's condition where that is exact (the
                # evaluation after the iteration is then dead code), else carried in.
                if start is not None:
                    return staged(start, 0, True, counting=before)
                return staged(state, 1, retest)
            if start is None or not peeling.compares_alike(
                state, symbol_names, test_reads, compared, compared_with
            ):
                before = None
        elif before is not None and (max_iterations is None or iterations + 1 < max_iterations):
            # The test is still Python's True where the state is traced (`(err > tol or it <
            # 5) and ...`): staged from before the first iteration where each one Python ran
            # is one the staged loop computes the same (see `peeling.again`).
            state, pred, exact = peeling.again(
                functools.partial(_iteration, body, loop_test),
                state,
                symbol_names,
                functions,
                reads,
                sums,
                test_reads,
                compared,
                compared_with,
            )
            before = before if exact else None
            if is_staged(pred) and before is not None:
                start = peeling.start_state(before, state)
                if start is not None:
                    return staged(start, 0, True, counting=before)
        else:
            state = body(*state)
            if max_iterations is not None and iterations + 1 >= max_iterations:
                break
            pred = staging.condition(loop_test(*state))
        iterations += 1
        if is_staged(pred):
            return staged(state, iterations, pred)
    return state


def _iteration(body, test, state):
    """(the state after one iteration of the loop, its test on that)."""
    after = body(*state)
    return after, staging.condition(test(*after))


def _with_exit_flag(stop, test, body, state, names, max_iterations, checkpoints):
    """The loop whose first iteration's exit test gave the traced `stop`, as the break pass
    would write it: that iteration under `if not stop`, then the loop while its flag is clear."""
    *state, stopped = control_flow.if_stmt(
        stop,
        lambda *s: (*s, True),
        lambda *s: (*body(*s), False),
        tuple(state),
        symbol_names=(*names, exits.FLAG),
    )
    if max_iterations == 1:
        return tuple(state)

    def flagged_test(*flagged):
        return logical.and_(logical.not_(flagged[-1]), lambda: test(*flagged[:-1]))

    def flagged_body(*flagged):
        return (*body(*flagged[:-1]), flagged[-1])

    out = while_stmt(
        flagged_test,
        flagged_body,
        (*state, stopped),
        symbol_names=(*names, exits.FLAG),
        max_iterations=None if max_iterations is None else max_iterations - 1,
        checkpoints=checkpoints,
    )
    return out[:-1]


def _first_test(test, state, names, test_reads, compared, functions, site):
    """(the test's value on `state`, what the staged loop is given as its first test): None
    where the loop's condition can evaluate it again, as a hand-written loop does (see
    `peeling.watched`, `peeling.tests_the_same`); a `bounded.Retest` where it may evaluate it
    again but not on the state it gives (Python numbers it promotes: `t = 0.0`); else the
    value itself, carried into the loop."""

    def pred_of(state):
        return staging.condition(test(*state))

    pred, clean = peeling.watched(lambda: pred_of(state), state, names, functions)
    if not (clean and is_staged(pred)):
        return pred, pred
    if peeling.tests_the_same(state, names, test_reads, compared):
        return pred, None
    retest = bounded.Retest(
        lambda: staging.scalar_predicate(pred_of(state), site, "loop condition")
    )
    return pred, (pred if retest.jaxpr.effects else retest)  # (a check: made once, carried)


def check_count(value, option: str, least: int, site: Site) -> int | None:
    """`value` of `loop_options(<option>=...)`: None, or a Python int at least `least`."""
    if value is None:
        return None
    try:
        count = None if isinstance(value, bool) else operator.index(value)
    except TypeError:  # a float, or a traced integer (JAX's error is a TypeError too)
        count = None
    if count is None:
        raise TypeError(
            f"loop_options({option}=...) must be a Python int, got {value!r} ({site}). "
            "It sizes the staged loop, so it must be known before the program runs."
        )
    if count < least:
        raise ValueError(f"loop_options({option}={count}) must be at least {least} ({site}).")
    return count


def staged_while(
    test,
    body,
    state,
    names,
    site,
    max_iterations=None,
    checkpoints=None,
    trip_count=None,
    *,
    first=None,
    implied=None,
    ran=False,
    every_iteration=None,
):
    """`trip_count`: at most that many iterations run (known for a `for` loop that may stop
    early); lists the body appends to get room for that many. `first`: the test's value on
    `state`, if it was evaluated already (it is not evaluated again). `implied` (an
    `Implied`): `max_iterations` is the bound the test's counter implies (see
    `implied_bound`), dropped where `bounded.while_loop` finds it costs too much. `ran`: the
    first iteration is known to run (a `for` over items that a `break` stops), so what every
    iteration binds is bound after the loop (no check when the program runs).
    `every_iteration`: a set, given the positions of the state variables every iteration binds
    (unbound before the loop): bound after it wherever an iteration ran."""
    try:
        if max_iterations is not None:
            try:
                return _bounded_while(
                    test,
                    body,
                    state,
                    names,
                    site,
                    max_iterations,
                    first,
                    implied is not None,
                    ran,
                    every_iteration,
                )
            except bounded.Unbounded:
                implied.taken = False  # unbounded, as the user wrote it
        return _while_loop(
            test, body, state, names, site, checkpoints, trip_count, first, ran, every_iteration
        )
    except staging.CANNOT_STAGE:
        raise
    except Exception as e:  # noqa: BLE001 - the user's exception, raised if the loop runs
        staging.raise_cannot_stage(e)
        if not errors.is_users(e):
            raise

        # Traced once, the body raised: every iteration would. So the loop raises when the
        # program runs it at all, as Python would on its first iteration.
        def raise_it(*state, error=e):
            raise error

        return staged_cond(test(*state), raise_it, lambda *s: s, state, names, site)


def _while_loop(
    test,
    body,
    state,
    names,
    site,
    checkpoints,
    trip_count=None,
    first=None,
    ran=False,
    every_iteration=None,
):
    return carry_.staged_with(
        lambda state: _while_loop_once(
            test, body, state, names, site, checkpoints, trip_count, first, ran, every_iteration
        ),
        state,
        names,
    )


def _while_loop_once(
    test, body, state, names, site, checkpoints, trip_count, first, ran, every_iteration=None
):
    """The loop. With `first`, the test's value on `state`, evaluated already (a `while`
    statement evaluates it to tell that the loop is staged), the test's value is carried: the
    test of each iteration's state is evaluated at the end of the body, and the loop's
    condition only reads it, so the test is in the graph once, as Python evaluates it (once
    before the loop, once after each iteration). Without, the condition evaluates it."""
    carry = Carry(
        state, names, site, probe=lambda s: body(*s), trip_count=trip_count, stops_early=True
    )

    def evaluate(dynamic):
        return staging.scalar_predicate(test(*carry.merge(dynamic)), site, "loop condition")

    def iteration(dynamic):
        with carry.giving(dynamic) as given:
            outs = body(*given)
        return carry.check(outs, dynamic)

    k = checkpoints or checkpointed.DEFAULT_CHECKPOINTS
    if first is None:

        def body_fun(dynamic):
            # Under vmap an element's effects (prints, checks) happen only while it loops.
            with staging.tracing_loop_body(lambda: evaluate(dynamic), trip_count):
                return iteration(dynamic)

        final = checkpointed.while_loop(evaluate, body_fun, carry.init, checkpoints=k, site=site)
        return carry.finish(final, ran=ran, every_iteration=every_iteration)

    def carried_body(looping):
        going, dynamic = looping
        with staging.tracing_loop_body(lambda: going, trip_count):
            dynamic = iteration(dynamic)
            return evaluate(dynamic), dynamic  # the test's effects too, while it loops

    if isinstance(first, bounded.Retest) and _effects(evaluate, carry.init):
        first = first()  # a check of the test's is made on the loop's states only: carried
    if isinstance(first, bounded.Retest):
        # The first condition evaluates the test as Python did, the others on the loop's state.
        retested = first.condition(evaluate)

        def body_fun(looping):
            with staging.tracing_loop_body(lambda: retested(looping), trip_count):
                return jnp.asarray(False), iteration(looping[1])

        looping = (jnp.asarray(True), carry.init)
        _, final = checkpointed.while_loop(retested, body_fun, looping, checkpoints=k, site=site)
        return carry.finish(final, ran=ran, every_iteration=every_iteration)
    going = staging.scalar_predicate(first, site, "loop condition")
    _, final = checkpointed.while_loop(
        lambda looping: looping[0], carried_body, (going, carry.init), checkpoints=k, site=site
    )
    return carry.finish(final, ran=ran, every_iteration=every_iteration)


def _bounded_while(
    test,
    body,
    state,
    names,
    site,
    max_iterations,
    first=None,
    implied=False,
    ran=False,
    every_iteration=None,
):
    """A while loop of at most `max_iterations` iterations: a `lax.while_loop`, differentiated
    as a scan of that many masked steps (see `runtime.bounded`). `first`, `implied`, `ran`,
    `every_iteration`: as for `staged_while`."""
    return carry_.staged_with(
        lambda state: _bounded_while_once(
            test, body, state, names, site, max_iterations, first, implied, ran, every_iteration
        ),
        state,
        names,
    )


def _bounded_while_once(
    test, body, state, names, site, max_iterations, first, implied, ran, every_iteration=None
):
    carry = Carry(
        state, names, site, probe=lambda s: body(*s), trip_count=max_iterations, stops_early=True
    )

    def evaluate(dynamic):
        return staging.scalar_predicate(test(*carry.merge(dynamic)), site, "loop condition")

    def iteration(dynamic):
        # Under vmap an element's effects (prints, checks) happen only while it loops.
        with staging.tracing_loop_body(lambda: evaluate(dynamic), max_iterations):
            with carry.giving(dynamic) as given:
                outs = body(*given)
            return carry.check(outs, dynamic)

    going = first
    if first is not None and not isinstance(first, bounded.Retest):
        going = staging.scalar_predicate(first, site, "loop condition")
    final = bounded.while_loop(evaluate, iteration, carry.init, max_iterations, going, implied)
    return carry.finish(final, ran=ran, every_iteration=every_iteration)


MAX_IMPLIED_ITERATIONS = 512
"""A counter's bound above this many iterations leaves the loop unbounded (checkpointed)."""


class Implied:
    """A bound a loop's test implies (`implied_bound`): whether the staged loop took it."""

    def __init__(self):
        self.taken = True


def implied_bound(counted, state, names) -> int | None:
    """The iterations left to a loop whose test bounds a counter (`counted`: see `while_stmt`):
    `bound - counter + extra`, where both are Python ints (not bools) and that is between 1 and
    `MAX_IMPLIED_ITERATIONS`, and the state stored that many times takes at most
    `bounded.IMPLIED_BYTES` (which `bounded.while_loop` holds all a step computes to); else
    None.

    Such a loop runs no more iterations than that (each adds one to the counter; once it
    reaches the bound, the test is false), so it is bounded by that count as by
    `loop_options(max_iterations=N)` (see `runtime.bounded`): run, a `lax.while_loop` that
    stops when its test does; differentiated in reverse, a scan of that many masked steps that
    stores every step and recomputes none, as a hand-written masked scan does, in place of the
    checkpointed loop, whose recomputed steps XLA compiles apart (see docs/gradients.md). A
    loop bound of 0 runs no iteration, as the test it evaluates says: it is left alone.
    """
    if counted is None:
        return None
    counter, bound, extra = counted
    value = state[names.index(counter)] if counter in names else None
    try:
        limit = bound()
    except NameError:  # unbound there (an UnboundLocalError too): Python may never read it
        return None
    if type(value) is not int or type(limit) is not int:
        return None
    left = limit - value + extra
    if not 1 <= left <= MAX_IMPLIED_ITERATIONS:
        return None
    size = sum(
        bounded.nbytes(jnp.shape(leaf), jax.typeof(leaf).dtype)
        for leaf in jax.tree_util.tree_leaves(state)
        if staging.is_array_leaf(leaf)
    )
    return left if left * size <= bounded.IMPLIED_BYTES else None


def _effects(fn, *args):
    """The effects of `fn(*args)` (a print in a loop's test), traced."""
    return staging.jaxpr_of(staging.flattened(fn, []), *args).effects
