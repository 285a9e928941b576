"""Functional forms of `while` and `for`: a Python path and a staged path each.

Python loops stay Python. As soon as a loop's test (or, for a `for` over a range or an array, its
state) is traced, the remaining iterations lower to one `lax.while_loop` or `lax.scan`, after
checking that the state keeps its structure, shapes and dtypes.
"""

from __future__ import annotations

import functools
import itertools
import logging
import operator
import warnings

import jax
import jax.numpy as jnp
from jax import lax

from runtime import (
    bounded,
    checkpointed,
    control_flow,
    errors,
    exits,
    log,
    logical,
    peeling,
    sequences,
    staging,
)
from runtime import carry as carry_
from runtime import effects as effects_
from runtime import lists as lists_
from runtime.carry import Carry
from runtime.control_flow import staged_cond
from runtime.effects import Effects
from runtime.errors import Site, StagingError
from runtime.staging import is_staged

logger = logging.getLogger("transpiler")

UNROLL_WARNING_THRESHOLD = 100
"""A `for` loop that cannot be staged warns when it unrolls more iterations than this."""


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
    `runtime.effects`). `reads`, `sums`, `test_reads`, `compared`: what the conversion knows of
    the state's uses, for `runtime.peeling`.
    """
    site = Site("while loop")
    max_iterations = _check_count(max_iterations, "max_iterations", 1, site)
    checkpoints = _check_count(checkpoints, "checkpoints", 2, site)
    loop_test = test
    if exit_test is not None:

        def loop_test(*state):  # `test and not exit_test`, as Python evaluates them
            return logical.and_(test(*state), lambda: logical.not_(exit_test(*state)))

    functions = (test, exit_test, body)

    def staged(state, iterations, first):
        left = None if max_iterations is None else max_iterations - iterations
        out = Effects(functions, site).run(
            state,
            symbol_names,
            lambda state, names, wrap: _staged_while(
                wrap(loop_test, returns_state=False),
                wrap(body),
                state,
                names,
                site,
                left,
                checkpoints,
                first=first,
            ),
        )
        log.staged(site, "lax.while_loop" if max_iterations is None else "lax.scan")
        return out

    if max_iterations == 0:
        return state
    pred, first = _first_test(test, state, symbol_names, test_reads, compared, functions)
    if exit_test is not None and (is_staged(pred) or pred):
        # The exit test, as Python evaluates it after the test.
        stop, clean = peeling.watched(
            lambda: staging.condition(exit_test(*state)), state, symbol_names, functions
        )
        if is_staged(pred):  # staged at once: the loop's condition tests both
            if first is None and (not clean or is_staged(stop)):
                first = pred  # the exit test's evaluation is carried in too, with it
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
    while pred:
        if iterations == 0 and max_iterations != 1:
            # Python runs it, and tells whether the loop is staged after it: if so, staged
            # from before it where that is exact (see runtime.peeling).
            def iteration(state):
                after = body(*state)
                return after, staging.condition(loop_test(*after))

            state, pred, start = peeling.first_iteration(
                iteration, state, symbol_names, functions, reads, sums
            )
            if is_staged(pred) and start is not None:
                return staged(start, 0, True)  # True: the test Python evaluated before it
        else:
            state = body(*state)
            if max_iterations is not None and iterations + 1 >= max_iterations:
                break
            pred = staging.condition(loop_test(*state))
        iterations += 1
        if is_staged(pred):
            return staged(state, iterations, pred)
    return state


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


def _first_test(test, state, names, test_reads, compared, functions):
    """(the test's value on `state`, what the staged loop is given as its first test): None
    where the loop's condition can evaluate it again, as a hand-written loop does (see
    `peeling.watched`, `peeling.tests_the_same`), else the value itself, carried into the
    loop."""
    pred, clean = peeling.watched(lambda: staging.condition(test(*state)), state, names, functions)
    again = clean and peeling.tests_the_same(state, names, test_reads, compared)
    return pred, (None if again and is_staged(pred) else pred)


def _check_count(value, option: str, least: int, site: Site) -> int | None:
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


def _staged_while(
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
):
    """`trip_count`: at most that many iterations run (known for a `for` loop that may stop
    early); lists the body appends to get room for that many. `first`: the test's value on
    `state`, if it was evaluated already (it is not evaluated again)."""
    if max_iterations is not None:
        return _bounded_while(test, body, state, names, site, max_iterations, first)
    try:
        return _while_loop(test, body, state, names, site, checkpoints, trip_count, first)
    except staging.CANNOT_STAGE:
        raise
    except Exception as e:  # noqa: BLE001 - the user's exception, raised if the loop runs
        cannot_stage = errors.as_cannot_stage(e)
        if cannot_stage is not None:
            raise cannot_stage from e
        if not errors.is_users(e):
            raise

        # Traced once, the body raised: every iteration would. So the loop raises when the
        # program runs it at all, as Python would on its first iteration.
        def raise_it(*state, error=e):
            raise error

        return staged_cond(test(*state), raise_it, lambda *s: s, state, names, site)


def _while_loop(test, body, state, names, site, checkpoints, trip_count=None, first=None):
    return carry_.staged_with(
        lambda state: _while_loop_once(
            test, body, state, names, site, checkpoints, trip_count, first
        ),
        state,
        names,
    )


def _while_loop_once(test, body, state, names, site, checkpoints, trip_count, first):
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
        return carry.check(body(*carry.merge(staging.fresh(dynamic))), dynamic)

    k = checkpoints or checkpointed.DEFAULT_CHECKPOINTS
    if first is None:

        def body_fun(dynamic):
            # Under vmap an element's effects (prints, checks) happen only while it loops.
            with staging.tracing_loop_body(lambda: evaluate(dynamic), trip_count):
                return iteration(dynamic)

        final = checkpointed.while_loop(evaluate, body_fun, carry.init, checkpoints=k, site=site)
        return carry.finish(final)

    def carried_body(looping):
        going, dynamic = looping
        with staging.tracing_loop_body(lambda: going, trip_count):
            dynamic = iteration(dynamic)
            return evaluate(dynamic), dynamic  # the test's effects too, while it loops

    going = staging.scalar_predicate(first, site, "loop condition")
    _, final = checkpointed.while_loop(
        lambda looping: looping[0], carried_body, (going, carry.init), checkpoints=k, site=site
    )
    return carry.finish(final)


def _bounded_while(test, body, state, names, site, max_iterations, first=None):
    """A while loop of at most `max_iterations` iterations: a `lax.while_loop`, differentiated
    as a scan of that many masked steps (see `runtime.bounded`). `first`: as for
    `_staged_while`."""
    return carry_.staged_with(
        lambda state: _bounded_while_once(test, body, state, names, site, max_iterations, first),
        state,
        names,
    )


def _bounded_while_once(test, body, state, names, site, max_iterations, first):
    carry = Carry(
        state, names, site, probe=lambda s: body(*s), trip_count=max_iterations, stops_early=True
    )

    def evaluate(dynamic):
        return staging.scalar_predicate(test(*carry.merge(dynamic)), site, "loop condition")

    def iteration(dynamic):
        # Under vmap an element's effects (prints, checks) happen only while it loops.
        with staging.tracing_loop_body(lambda: evaluate(dynamic), max_iterations):
            return carry.check(body(*carry.merge(staging.fresh(dynamic))), dynamic)

    going = None if first is None else staging.scalar_predicate(first, site, "loop condition")
    final = bounded.while_loop(evaluate, iteration, carry.init, max_iterations, going)
    return carry.finish(final)


class TracedRange:
    """`range(start, stop, step)` where a bound is traced: the loop over it becomes a while loop."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def trip_count(self):
        start, stop, step = self.start, self.stop, self.step
        if is_staged(step):
            step_sign = jnp.sign(step)
            return jnp.maximum(0, (stop - start + step - step_sign) // step)
        # A Python step (as nearly always): no sign, and no division by 1.
        span = stop - start if step > 0 else start - stop
        magnitude = abs(step)
        if magnitude != 1:
            span = (span + magnitude - 1) // magnitude
        return jnp.maximum(0, span)

    def reversed(self) -> TracedRange:
        """`reversed(range(...))`: the same items, last first."""
        last = self.start + (self.trip_count() - 1) * self.step
        return TracedRange(last, self.start - self.step, -self.step)

    def __iter__(self):
        raise TypeError(
            f"{self!r}: a range with a traced bound has no length yet, so only a for statement "
            "can loop over it (staged as a while loop); a comprehension or a call such as "
            "list() cannot."
        )

    def __repr__(self) -> str:
        return f"range({self.start}, {self.stop}, {self.step})"


def range_(*args):
    """`range(*args)`, or a `TracedRange` when a bound is traced."""
    if not any(is_staged(a) for a in args):
        return range(*args)
    if not 1 <= len(args) <= 3:
        raise TypeError(f"range expected at most 3 arguments, got {len(args)}")
    for arg in args:
        dtype = jnp.result_type(arg)
        if not (jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.bool_)):
            kind = "float" if jnp.issubdtype(dtype, jnp.floating) else dtype.name
            raise errors.python_error(
                TypeError(f"'{kind}' object cannot be interpreted as an integer")
            )
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if not is_staged(step) and step == 0:
        raise errors.python_error(ValueError("range() arg 3 must not be zero"))
    return TracedRange(start, stop, step)


def for_stmt(
    iterable,
    body,
    state,
    *,
    symbol_names,
    extra_test=None,
    exit_test=None,
    on_exit=None,
    max_iterations=None,
    checkpoints=None,
    items_as_python=False,
    reads=(),
    sums=(),
):
    """Functional form of a for statement.

    Same semantics as::

        for item in iterable:
            if extra_test is not None and not extra_test(*state):
                break
            if exit_test is not None and exit_test(item, *state):
                state = on_exit(item, *state)
                break
            state = body(item, *state)

    (`extra_test` comes from `break`; `exit_test` and `on_exit` from a `break` or `return` at the
    top of the body, see `runtime.exits`; `max_iterations`, from `transpiler.loop_options`, stops
    the loop after that many iterations.) Python containers (lists, tuples, dicts, generators)
    run as Python. A `range`, a NumPy or JAX array, or `enumerate`/`zip`/`reversed` over them,
    runs as Python until the state holds traced values (at once, for a traced array); the
    remaining iterations then lower to one `jax.lax.scan`, so compile time does not grow with
    the trip count (all of them, when the first iteration made the state traced: see
    `runtime.peeling`). A loop that may stop early (a traced `extra_test` or `exit_test`) lowers
    to a `jax.lax.while_loop` over the item index that tests them, with `max_iterations` a
    bounded one (see `runtime.bounded`), or, with only an `extra_test` and `max_iterations`, to
    a `scan` whose iterations after the `break` are masked. A range with a traced bound lowers
    to `jax.lax.while_loop`. A body that cannot be staged (it changes a variable's shape, or
    needs the index as a Python int) runs as unrolled Python instead, and so does a loop whose
    body uses its Python items as Python values (`items_as_python`: `f"layer{i}"`, a call of
    user code with `i`), where a traced item would not be exact. Python state the loop changes
    is carried too, or refused (see `runtime.effects`).
    """
    site = Site("for loop")
    max_iterations = _check_count(max_iterations, "max_iterations", 1, site)
    checkpoints = _check_count(checkpoints, "checkpoints", 2, site)
    effects = Effects((body, extra_test, exit_test, on_exit), site)
    plain = (body, extra_test, symbol_names)
    exit_ = None
    if exit_test is not None:
        # The Python paths run the loop as the break pass would write it: a flag in the state.
        exit_ = exits.Exit(exit_test, on_exit)
        body, extra_test, state, symbol_names = exit_.flagged(body, extra_test, state, symbol_names)

    def finish(state):
        return state if exit_ is None else state[:-1]

    def staged(stage, state, unfired=False):
        """`stage(body, extra_test, exit, state, names)` run by `effects`; `unfired`: the
        exit's flag in `state` is known to be False, so the loop is staged with the exit test
        itself (in the loop's condition), the flag left out, unless the test makes an effect."""
        if unfired:
            try:
                return staged_once(stage, state, True)
            except exits.ExitMakesEffects:
                pass  # the loop with its flag, the exit test in its body
        return staged_once(stage, state, False)

    def staged_once(stage, state, unfired):
        body_, extra_test_, names = plain if unfired else (body, extra_test, symbol_names)
        if unfired:
            state = state[:-1]

        def run(state, names, wrap):
            test = extra_test_ and wrap(extra_test_, returns_state=False)
            exit_wrapped = None
            if unfired:
                exit_wrapped = exits.Exit(
                    wrap(exit_.test, leading=1, returns_state=False), wrap(exit_.on_exit, leading=1)
                )
            return stage(wrap(body_, leading=1), test, exit_wrapped, state, names)

        out = effects.run(state, names, run)
        return (*out, False) if unfired else out

    unfired = exit_ is not None  # the flag starts False: the staged loop may test the exit
    if isinstance(iterable, TracedRange):
        log.staged(site, "lax.while_loop" if max_iterations is None else "lax.scan")
        return finish(
            staged(
                lambda body, test, exit_, state, names: _staged_range_while(
                    iterable, body, state, names, site, test, max_iterations, checkpoints, exit_
                ),
                state,
                unfired,
            )
        )
    if isinstance(iterable, lists_.StagedList) and iterable.known_length() is None:
        # A list of traced length: a while loop over its items, however many there are.
        items = iterable.buffer

        def over_items(body, test, exit_, state, names):
            if exit_ is not None:
                on_item = exit_
                exit_ = exits.Exit(
                    lambda j, *s: on_item.test(items[j], *s),
                    lambda j, *s: on_item.on_exit(items[j], *s),
                )
            return _staged_range_while(
                TracedRange(0, iterable.length, 1),
                lambda j, *s: body(items[j], *s),
                state,
                names,
                site,
                test,
                max_iterations,
                checkpoints,
                exit_,
            )

        log.staged(site, "lax.while_loop" if max_iterations is None else "lax.scan")
        return finish(staged(over_items, state, unfired))
    seq = sequences.as_sequence(iterable)
    if seq is None:
        if staging.trackers() or staging.watches():
            effects_.check_consumed(iterable, "a for loop")
        items = iterable if max_iterations is None else itertools.islice(iterable, max_iterations)
        return finish(_python_for(items, body, state, symbol_names, site, extra_test, effects))
    n, k = len(seq), 0
    if max_iterations is not None:
        n = min(n, max_iterations)
    # Python items the body uses as Python values stay Python: no scan hands it tracers.
    may_scan = seq.staged() or (not items_as_python and seq.exact_as_arrays())

    def scan_from(k, state, unfired=False):
        out = staged(
            lambda body, test, exit_, state, names: _scan(
                seq, k, n, body, test, state, names, site, max_iterations is None, exit_
            ),
            state,
            unfired,
        )
        stops = extra_test is not None and (max_iterations is None or unfired)
        log.staged(site, "lax.while_loop" if stops else "lax.scan")
        return finish(out)

    go = None  # the extra test on the state, once evaluated
    while k < n:
        if go is None:
            go = extra_test(*state) if extra_test is not None else True
        if not is_staged(go) and not go:
            return finish(state)
        if is_staged(go) and not may_scan:
            break  # the rest, as Python, each iteration masked by the traced test
        if may_scan and (is_staged(go) or (n - k >= 2 and _should_scan(seq, state))):
            try:
                return scan_from(k, state, exit_ is not None and state[-1] is False)
            except carry_.Unsized:
                pass  # this iteration, as Python, binds what the body binds first
            except _SCAN_REFUSED as e:
                _log_unrolled(site, e, n - k)
                break
        body_k, exit_clean = body, True
        if exit_ is not None and state[-1] is False:
            # The exit test on this item, as Python evaluates it (after the extra test): where
            # it is traced, the staged loop evaluates it again in its condition if it can.
            *plain_state, _ = state
            stop, exit_clean = peeling.watched(
                lambda item=seq[k], s=plain_state: staging.condition(exit_.test(item, *s)),
                state,
                symbol_names,
                effects.functions,
            )
            again = is_staged(stop) and exit_clean
            again = again and peeling.restartable(state, symbol_names, reads, sums)
            if again and may_scan:
                try:
                    return scan_from(k, state, True)
                except _SCAN_REFUSED as e:  # the rest unrolled, this item with `stop`
                    _log_unrolled(site, e, n - k)
                    may_scan = False
            if not is_staged(stop) and stop:
                return finish((*exit_.on_exit(seq[k], *plain_state), True))

            def body_k(item, *state, stop=stop):  # the exit test evaluated already
                return exit_.step(stop, item, state[:-1], plain[0], plain[2])

        if k == 0 and may_scan and n >= 2:
            # Python runs it, and tells whether the loop is staged after it: if so, staged
            # from before it where that is exact (see runtime.peeling).
            def iteration(state, body_k=body_k):
                after = body_k(seq[0], *state)
                return after, (extra_test(*after) if extra_test is not None else True)

            state, go, start = peeling.first_iteration(
                iteration, state, symbol_names, effects.functions, reads, sums
            )
            k = 1
            if exit_ is not None and not exit_clean:
                start = None  # restarted, the loop would evaluate the exit test on it again
            if start is not None and (is_staged(go) or _should_scan(seq, state)):
                try:
                    # Before it, the exit's flag was False.
                    return scan_from(0, start, exit_ is not None)
                except _SCAN_REFUSED as e:  # as it would from the state after: the rest unrolled
                    _log_unrolled(site, e, n - k)
                    break
            continue
        state = body_k(seq[k], *state)
        k += 1
        go = None
    rest = (seq[i] for i in range(k, n))
    return finish(_python_for(rest, body, state, symbol_names, site, extra_test, effects))


def _python_for(items, body, state, names, site, extra_test, effects):
    """The Python loop; once `extra_test` is traced, each remaining iteration is a masked cond."""
    if extra_test is None:
        for item in items:
            state = body(item, *state)
        return state
    items = iter(items)
    while True:
        go = extra_test(*state)  # before fetching: a loop left by `break` fetches no more items
        if not is_staged(go) and not go:
            return state
        try:
            item = next(items)
        except StopIteration:
            return state
        if is_staged(go):
            log.staged(site, "lax.cond (this iteration, after a traced break)")
            state = effects.run(
                state,
                names,
                lambda state, names, wrap, item=item, go=go: _masked(
                    go, functools.partial(wrap(body, leading=1), item), state, names, site
                ),
            )
        else:
            state = body(item, *state)


def _masked(go, body, state, names, site):
    """The staged form of `if go: state = body(*state)`: one iteration that may do nothing."""
    return staged_cond(go, body, lambda *s: s, state, names, site)


def _should_scan(seq, state) -> bool:
    return seq.staged() or staging.has_staged(state)


# What makes a `for` over a Python range run unrolled instead of as one scan: the body changes
# a variable's shape or type (StagingError), or needs the index as a Python value (an index
# into a Python list, a dict key: TracerAsKey): JAX's errors for a tracer where a value is
# needed.
_SCAN_REFUSED = (
    StagingError,
    jax.errors.JAXTypeError,
    jax.errors.JAXIndexError,
)


def _scan(seq, k, n, body, test, state, names, site, stop_early=True, exit_=None):
    try:
        return _staged_scan(seq, k, n, body, state, names, site, test, stop_early, exit_)
    except TypeError as e:  # the index as a dict key, say: the loop runs as Python
        cannot_stage = errors.as_cannot_stage(e)
        if cannot_stage is None:
            raise
        raise cannot_stage from e


def _log_unrolled(site, error, count) -> None:
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    message = (
        f"the for loop ({site}) cannot be staged as one lax.scan ({type(error).__name__}: "
        f"{reason}); its {count} remaining iterations run as unrolled Python instead"
    )
    logger.info(message)
    if count > UNROLL_WARNING_THRESHOLD:
        warnings.warn(message + ", so compile time grows with the trip count.", stacklevel=4)


def _staged_scan(seq, k, n, body, state, names, site, extra_test, stop_early=True, exit_=None):
    """The rest of the loop, items k..n-1. With a traced `extra_test` (a `break`), it stops
    early where it can (`stop_early`): a while loop over the index; with
    `loop_options(max_iterations=N)` it stays a scan whose iterations after the `break` are
    masked (every step stored by reverse mode: derivatives of any order). With an `exit_`
    test, it is a while loop over the index that tests it (bounded, given `max_iterations`)."""
    xs, to_item = seq.scan_inputs(k)
    xs = jax.tree_util.tree_map(lambda x: x[: n - k], xs)
    if exit_ is not None or (extra_test is not None and stop_early):
        bound = None if stop_early else n - k
        return _early_exit_loop(
            xs, to_item, n - k, body, state, names, site, extra_test, exit_, bound
        )
    return carry_.staged_with(
        lambda state: _scan_once(xs, to_item, n - k, body, state, names, site, extra_test),
        state,
        names,
    )


def _scan_once(xs, to_item, count, body, state, names, site, extra_test):
    def step(item, s):
        if extra_test is None:
            return body(item, *s)
        return _masked(extra_test(*s), lambda *s: body(item, *s), s, names, site)

    first = jax.tree_util.tree_map(lambda x: x[0], xs)
    carry = Carry(
        state,
        names,
        site,
        probe=lambda s, x, j: step(to_item(x, j), s),
        trip_count=count,
        probe_args=(first, jnp.asarray(0)),
    )

    def scan_body(scan_carry, x):
        j, dynamic = scan_carry
        with staging.tracing_loop(count):
            outs = step(to_item(x, j), carry.merge(staging.fresh(dynamic)))
        return (j + 1, carry.check(outs, dynamic)), None

    final, _ = lax.scan(scan_body, (jnp.asarray(0), carry.init), xs, length=count)
    return carry.finish(final[1], ran=count > 0)


def _early_exit_loop(
    xs, to_item, count, body, state, names, site, extra_test, exit_=None, max_iterations=None
):
    """The rest of a `for` loop over `count` items `xs` that a traced `extra_test` (a `break`,
    a `return`) or `exit_` test may stop early: a while loop over the index, which stops there
    (a scan would run every remaining iteration, masked). Reverse mode goes through it as
    through any staged `while` (checkpointed, or a masked scan given `max_iterations`)."""

    def item_at(j):
        return to_item(jax.tree_util.tree_map(lambda x: x[j], xs), j)

    return _indexed_while(
        item_at, count, body, state, names, site, extra_test, exit_, max_iterations
    )


def _indexed_while(
    item_at, count, body, state, names, site, extra_test, exit_, max_iterations, checkpoints=None
):
    """`for j in range(count)`: `body(item_at(j), *state)` while `extra_test` holds and
    `exit_.test` does not; then, if the exit test stopped it, `exit_.on_exit` on that item."""

    def more(j, s):
        going = j < count
        if extra_test is None:
            return going
        test = staging.scalar_predicate(extra_test(*s), site, "loop test")
        return jnp.logical_and(going, test)

    def last(j):  # an item in range where the loop has none left: what it computes is unused
        return item_at(jnp.minimum(j, count - 1))

    def test(j, *s):
        if exit_ is None:
            return more(j, s)
        return exit_.condition(more(j, s), last(j), s, site)

    def counted_body(j, *s):
        return (j + 1, *body(item_at(j), *s))

    final = _staged_while(
        test,
        counted_body,
        (0, *state),
        ("<iteration>", *names),
        site,
        max_iterations,
        checkpoints,
        trip_count=count if isinstance(count, int) else None,
    )
    j, state = final[0], final[1:]
    if exit_ is None:
        return state
    stopped = more(j, state)  # not at the end of the items, nor by another `break`
    if max_iterations is not None:  # nor by the bound
        stopped = jnp.logical_and(stopped, j < max_iterations)
    return exit_.after(stopped, last(j), state, names, site)


def _staged_range_while(
    r: TracedRange,
    body,
    state,
    names,
    site,
    extra_test,
    max_iterations,
    checkpoints=None,
    exit_=None,
):
    def item_at(j):
        if is_staged(r.start) or is_staged(r.step):
            return r.start + j * r.step
        return sequences.counted(r.start, r.step, None, j)

    return _indexed_while(
        item_at,
        r.trip_count(),
        body,
        state,
        names,
        site,
        extra_test,
        exit_,
        max_iterations,
        checkpoints,
    )
