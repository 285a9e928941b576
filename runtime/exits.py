"""A `for` loop's exit at the top of its body, folded into the test of the staged loop.

The break pass leaves a leading `if C: ...; break` (or `if C: return v`) of a `for` body as it
is, and the control-flow pass hands it to the runtime as two functions of the item and the state:

    for i in range(n):              def loop_exit(i, retval, do_return):
        if x[i] == t:                   return x[i] == t
            return i          ->    def loop_exited(i, retval, do_return):
        ...                             retval = i; do_return = True
                                        return (retval, do_return)
                                    rt__.for_stmt(..., exit_test=loop_exit, on_exit=loop_exited)

Staged as a `lax.while_loop` over the index, the loop's condition tests `i < n and not C(i)`, as a
search loop is written by hand, and what the exit does runs once after the loop, on the item it
stopped at (here a select: `retval = where(stopped, i, retval)`): no flag, no branch in the body.
Everywhere else (Python iterations, a loop unrolled, a masked scan) the loop is run as the break
pass would have written it (`flagged`): with a flag in its state, set where the exit test holds.
"""

from __future__ import annotations

from runtime import control_flow, effects, logical, staging
from runtime.variables import MaybeUnbound


class ExitMakesEffects(staging.Retrace):
    """Internal: the exit test makes an effect (a print, a check); stage the loop with a flag."""


FLAG = "<exited>"
"""The name of the flag `flagged` adds to the state (error messages show it)."""


class Exit:
    """The exit at the top of a loop body: `test(item, *state)`, and `on_exit(item, *state)`,
    the state after it, run when the test holds (before the loop breaks)."""

    def __init__(self, test, on_exit):
        self.test, self.on_exit = test, on_exit

    def flagged(self, body, extra_test, state, names):
        """(body, extra_test, state, names) of the same loop without an exit: a flag, the last
        variable of its state, False until the exit test holds; the loop stops once it is set
        (before fetching another item), and the body runs where it is not."""

        def extra(*flagged):
            *state, stopped = flagged
            go = logical.not_(stopped)
            return go if extra_test is None else logical.and_(go, lambda: extra_test(*state))

        def loop_body(item, *flagged):
            *state, _ = flagged
            return self.step(self.test(item, *state), item, state, body, names)

        return loop_body, extra, (*state, False), (*names, FLAG)

    def step(self, stop, item, state, body, names):
        """One iteration of the loop with a flag, the exit test's value `stop` on `item` given:
        `on_exit`, the flag set, where it holds; `body`, the flag clear, where it does not."""
        return control_flow.if_stmt(
            stop,
            lambda *s: (*self.on_exit(item, *s), True),
            lambda *s: (*body(item, *s), False),
            tuple(state),
            symbol_names=(*names, FLAG),
            refused=effects.loop_aliased(),
        )

    def condition(self, more, item, state, site):
        """`more and not test(item, *state)`, traced; the test is evaluated where `more` is false
        too (on an item clamped into range): `ExitMakesEffects` if it makes an effect."""
        seen = effects.EffectSeen()
        with staging.watching(seen):
            stop = staging.scalar_predicate(self.test(item, *state), site, "exit test")
        if seen.effects:
            # In a loop's condition an effect is made for every element under `jax.vmap` and
            # again by the derivative's loops: the loop keeps the test in its body instead.
            raise ExitMakesEffects()
        return staging.both(more, staging.negated(stop), tested=True)

    def after(self, stopped, item, state, names, site, bound=()):
        """The state after the loop: `on_exit(item, *state)` where the loop `stopped` at `item`
        because the exit test held there. `bound`: the positions of the state variables bound
        where it did not stop there (a `MaybeUnbound` there: its value)."""
        keep = control_flow.keeping_state(len(state))
        if any(isinstance(state[i], MaybeUnbound) for i in bound):

            def keep(*s):
                return tuple(
                    v.value if i in bound and isinstance(v, MaybeUnbound) else v
                    for i, v in enumerate(s[: len(state)])
                )

        return control_flow.staged_cond(
            stopped,
            lambda *s: self.on_exit(item, *s),
            keep,
            state,
            names,
            site,
            refused=effects.loop_aliased(),
        )
