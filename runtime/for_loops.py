"""Functional form of `for`: a Python path and a staged path.

Python containers are looped over in Python. A `range`, an array, or `enumerate`/`zip`/`reversed`
over them, runs as Python until the loop's state is traced (at once, for a traced array); the
remaining iterations then lower to one `lax.scan`, or, where the loop may stop early (a `break`,
a `return`, an exit at the top of its body: `runtime.exits`), to a `lax.while_loop` over the
item index. A range with a traced bound lowers to a `lax.while_loop` over a counter.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import logging
import sys
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import carry as carry_
from runtime import (
    collected,
    control_flow,
    errors,
    exits,
    identity,
    log,
    peeling,
    sequences,
    staging,
)
from runtime import effects as effects_
from runtime import lists as lists_
from runtime.carry import Carry
from runtime.control_flow import staged_cond
from runtime.effects import Effects
from runtime.errors import Site, StagingError
from runtime.loops import check_count, staged_while
from runtime.staging import is_staged
from runtime.variables import MaybeUnbound, Undefined

logger = logging.getLogger("transpiler")

UNROLL_WARNING_THRESHOLD = 100
"""A `for` loop that cannot be staged warns when it unrolls more iterations than this."""


class TracedRange:
    """`range(start, stop, step)` where a bound is traced: the loop over it becomes a while loop."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def trip_count(self):
        """The number of items, `ceil((stop - start) / step)` or 0, as a Python int staged
        code holds (a weakly typed int32). The span is taken unsigned, where it is exact
        (`range(-2**30 - 1, 2**30 + 1, 2**30)` spans more than an int32 holds: three items)."""
        start, stop, step = self.start, self.stop, self.step
        forward = step > 0
        if is_staged(step):
            ahead = jnp.where(forward, stop > start, start > stop)
            low, high = jnp.where(forward, start, stop), jnp.where(forward, stop, start)
        else:
            ahead = stop > start if forward else start > stop
            low, high = (start, stop) if forward else (stop, start)
        unsigned = _UNSIGNED_INT
        span = jnp.asarray(high).astype(unsigned) - jnp.asarray(low).astype(unsigned)
        if is_staged(step) or abs(step) != 1:  # (no division by 1)
            magnitude = jnp.asarray(abs(step)).astype(unsigned)  # (abs(-2**31) wraps to it)
            span = (span - 1) // magnitude + 1
        return python_int(jnp.where(ahead, span.astype(_INT), 0))

    def before_end(self, j):
        """`j < len(self)`, for `j` a loop's count of items taken (0, 1, ...), computed where
        the loop tests it (called in its condition): for a step of 1 or -1 from the bounds as
        they are (`j < stop`, `start + j < stop`), not a trip count (`max(0, stop - start)`)
        computed before the loop, which XLA:CPU compiles as a kernel of its own (as long to
        compile as a small loop body)."""
        start, stop, step = self.start, self.stop, self.step
        if is_staged(step) or step not in (1, -1):
            # (item `len(self)`, past the last, may not fit the dtype: `range(2**31 - 4, n,
            # 2)` would wrap around to a negative item, below `stop`)
            return j < self.trip_count()
        if step == 1:
            return (j if type(start) is int and start == 0 else start + j) < stop
        return start - j > stop

    def item(self, j):
        """Item `j` (a traced index, counted from 0) of the range."""
        if is_staged(self.start) or is_staged(self.step):
            return self.start + j * self.step
        return sequences.counted(self.start, self.step, None, j)

    def reversed(self) -> TracedRange:
        """`reversed(range(...))`: the same items, last first."""
        last = self.start + (self.trip_count() - 1) * self.step
        return TracedRange(last, self.start - self.step, -self.step)

    def __getitem__(self, index):
        """Item `index` (a Python or traced int; negative counts from the end), checked in
        range when the program runs (Python's IndexError)."""
        if isinstance(index, slice):
            raise errors.python_error(
                TypeError(
                    f"{self!r}[...]: a slice of a range with a traced bound has a traced length; "
                    "slice an array (jnp.arange) instead"
                )
            )
        length = self.trip_count()
        if is_staged(index):
            index = python_int(index)  # the item is a Python int, whatever indexes it
            position = staging.where(index < 0, length + index, index)
        else:
            position = length + index if index < 0 else index

        staging.check_when_run(
            lambda position, length: (position < 0) | (position >= length),
            lambda *_: IndexError("range object index out of range"),
            position,
            length,
        )
        return self.start + position * self.step

    def __staged_truth__(self):
        """`if r:`, `while r:`, `not r`, `bool(r)`: whether it has items, traced."""
        return self.trip_count() > 0

    def __bool__(self):
        raise errors.python_error(
            TypeError(
                f"{self!r}: whether a range with a traced bound has items is known only when "
                "the program runs; converted code stages `if r:`, `while r:`, `not r` and "
                "`bool(r)`, but not a range as an operand of and/or whose value is used "
                "(`r or default`): test `len(r) > 0` there"
            )
        )

    def _parts(self):
        return self.trip_count(), self.start, self.step

    def __eq__(self, other):
        """Python's `==` of ranges: the same items (of the same length; both empty, or the same
        start, and the same step unless there is one item): a traced bool."""
        if other is self:
            return True
        if isinstance(other, range):
            theirs = (len(other), other.start, other.step)
        elif isinstance(other, TracedRange):
            theirs = other._parts()
        else:
            return NotImplemented
        (n, start, step), (m, start_, step_) = self._parts(), theirs
        same_start = jnp.logical_or(n == 1, jnp.asarray(step == step_))
        same_items = jnp.logical_and(jnp.asarray(start == start_), same_start)
        return jnp.logical_and(n == m, jnp.logical_or(n == 0, same_items))

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else jnp.logical_not(equal)

    def __hash__(self):
        raise errors.python_error(
            TypeError(
                f"{self!r}: a range with a traced bound has no hash (its value is known only "
                "when the program runs), so it cannot be a dict key or a set item"
            )
        )

    def count(self, value):
        """`r.count(value)`: 1 if `value` is in the range, else 0 (a traced int)."""
        return python_int(jnp.asarray(self.contains(value)).astype(_INT))

    def index(self, value):
        """`r.index(value)`: its position, a traced int; Python's ValueError when the program
        runs where it is not in the range."""
        staging.check_when_run(
            lambda inside, _: ~inside,
            lambda _, v: ValueError(f"{v} is not in range"),
            self.contains(value),
            value,
        )
        return python_int((value - self.start) // self.step)

    def contains(self, value):
        """`value in r`, a traced bool."""
        return in_range(value, self.start, self.stop, self.step)

    def total(self, start):
        """`sum(r, start)`: `start` plus n items from `self.start` by `step`, in closed form
        (`n * (n - 1)` is even)."""
        n = self.trip_count()
        return start + n * self.start + self.step * (n * (n - 1) // 2)

    def extreme(self, largest: bool, default):
        """`max(r)` (`min(r)`): its last item or its first, by the step's sign; Python's
        ValueError when the program runs where it is empty and no `default` is given."""
        n = self.trip_count()
        last = self.start + (n - 1) * self.step
        rising = self.step > 0
        value = staging.where(rising == largest, last, self.start)
        name = "max" if largest else "min"
        if default is None:
            staging.check_when_run(
                lambda n: n == 0, lambda _: ValueError(f"{name}() arg is an empty sequence"), n
            )
            return python_int(value)
        return staging.where(n > 0, python_int(value), default)

    def any_item(self):
        """`any(r)`: an item other than 0 (two items, or one that is not 0)."""
        n = self.trip_count()
        return (n >= 2) | ((n == 1) & (self.start != 0))

    def all_items(self):
        """`all(r)`: no item is 0."""
        return ~self.contains(0)

    def __contains__(self, item):
        raise TypeError(  # Python's `in` would take the truth of a traced test
            f"{self!r}: `in` a range with a traced bound is staged only where generated code "
            "tests it (rt__.in_)"
        )

    def __iter__(self):
        raise TypeError(
            f"{self!r}: a range with a traced bound has no length yet, so only a for statement "
            "can loop over it (staged as a while loop), directly, in enumerate(), or in zip() "
            "with arrays, ranges and lists of arrays of one shape and dtype; a comprehension, "
            "a call such as list(), or zip() with other iterables cannot."
        )

    def __repr__(self) -> str:
        shown = ("<traced int>" if is_staged(p) else p for p in (self.start, self.stop, self.step))
        return f"range({', '.join(map(str, shown))})"

    def __traced_parts__(self) -> tuple:
        """What text made of it shows (`print(r)`, `f"{r}"`): see `runtime.text`."""
        return self.start, self.stop, self.step

    def __with_parts__(self, parts, concrete: bool):
        """With the values of its parts when the program runs: the Python range it stands for,
        shown as Python shows it (`range(0, 3)`); while tracing, itself with stand-ins."""
        return range(*(int(p) for p in parts)) if concrete else TracedRange(*parts)


class CountedIterator(sequences.StandInIterator):
    """An iterator of traced length (`enumerate` or `zip` of a range with a traced bound or of a
    list of traced length): one for statement takes its items, as Python's iterator gives them
    once. `spent`: False before that; True once a loop took them all; None where how many it
    took is known only when the program runs (it may stop early, or another iterator took
    them: `why`)."""

    spent: bool | None = False

    def take(self, what: str) -> bool:
        """Whether items are left to take (False: a loop took them all); StagingError where that
        is known only when the program runs."""
        if self.spent is None:
            raise self.unknown_position(what)
        return not self.spent

    def moved(self, by: str) -> None:
        """Another iterator (`by`) takes this one's items from here on."""
        self.take(by)
        if self.spent:
            raise StagingError(
                f"{by} of an iterator of traced length ({self.kind}) that a loop took every item "
                f"of ({Site(by)}): make a new one."
            )
        self.spent, self.why = None, f"the {by} made of it takes them"

    def __next__(self):
        raise TypeError(
            f"next() of {self.kind}: it has a traced length, so whether it has an item is known "
            "only when the program runs; only a for statement can take its items (staged as a "
            "while loop)."
        )


class ReversedRange(CountedIterator):
    """`reversed(range(...))` of a range with a traced bound: an iterator of its items, last
    first, which only a for statement can loop over (staged as a while loop)."""

    type_name = "range_iterator"
    kind = "reversed() of a range with a traced bound"

    def __init__(self, items: TracedRange):
        self.items = items

    def counted(self):
        """(how many items, item j as a function of a traced j)."""
        return self.items.trip_count(), self.items.item

    def at_most(self) -> None:
        return None

    def __iter__(self):
        raise TypeError(
            f"{self.kind}: only a for statement can loop over it (staged as a while loop); a "
            "comprehension or a call such as list() or sum() cannot."
        )


def in_range(item, start, stop, step):
    """Whether `item` is in `range(start, stop, step)` (any of them traced): between the bounds,
    on the step."""
    upward = (item >= start) & (item < stop)
    downward = (item <= start) & (item > stop)
    if is_staged(step):
        inside = jnp.where(step > 0, upward, downward)
    else:
        inside = upward if step > 0 else downward
    return inside & ((item - start) % step == 0)


class EnumeratedList(CountedIterator):
    """`enumerate(items, start)` of a list of traced length: only a for statement can loop over
    it (staged as a while loop over the length)."""

    type_name = "enumerate"
    kind = "enumerate() of a list of traced length"

    def __init__(self, items, start):
        self.items, self.start = items, start

    def counted(self):
        """(how many items, item j as a function of a traced j), as the loop starts."""
        buffer, start = self.items.buffer, self.start
        return self.items.length, lambda j: (start + j, buffer[j])

    def at_most(self) -> int:
        """How many items there can be: the list's capacity."""
        return self.items.capacity

    def __iter__(self):
        raise TypeError(
            f"enumerate() of '{self.items.origin.name}', a list whose length is traced: only a "
            "for statement can loop over it (staged as a while loop); a comprehension or a "
            "call such as list() cannot."
        )


class EnumeratedRange(CountedIterator):
    """`enumerate(range(...), start)` of a range with a traced bound: only a for statement can
    loop over it (staged as a while loop over its trip count)."""

    type_name = "enumerate"
    kind = "enumerate() of a range with a traced bound"

    def __init__(self, items: TracedRange, start):
        self.items, self.start = items, python_int(start)

    def counted(self):
        """(how many items, item j as a function of a traced j)."""
        return self.items.trip_count(), self._item

    def at_most(self) -> None:
        """How many items there can be: a traced bound has none known now."""
        return None

    def _item(self, j):
        start = self.start
        index = start + j if is_staged(start) else sequences.counted(start, 1, None, j)
        return index, self.items.item(j)

    def __iter__(self):
        raise TypeError(
            f"enumerate({self.items!r}): a range with a traced bound has no length yet, so only "
            "a for statement can loop over it (staged as a while loop); a comprehension or a "
            "call such as list() cannot."
        )


class ZippedCounted(CountedIterator):
    """`zip(...)` where an iterable has a traced length (a range with a traced bound, a list of
    traced length, `enumerate` of one) and the others are arrays or ranges: only a for
    statement can loop over it (staged as a while loop over the shortest)."""

    type_name = "zip"
    kind = "zip() with a range with a traced bound or a list of traced length"

    def __init__(self, parts: list[tuple[object, Callable]], bounds: list[int | None]):
        self.parts = parts  # (how many items, item j as a function of a traced j), each
        self.bounds = bounds  # how many items each can have, where known now

    @staticmethod
    def of(iterables) -> ZippedCounted | None:
        """The zip of `iterables`, or None where one is neither of traced length nor an array
        or a range (Python's zip then)."""
        parts, bounds = [], []
        for it in iterables:
            bounds.append(at_most(it))
            if isinstance(it, TracedRange):
                parts.append((it.trip_count(), it.item))
            elif isinstance(it, (EnumeratedList, EnumeratedRange, EnumeratedZip, ReversedRange)):
                it.moved("zip()")
                parts.append(it.counted())
            elif isinstance(it, lists_.StagedList) and it.known_length() is None:
                parts.append((it.length, it.buffer.__getitem__))
            elif isinstance(it, range):
                item = functools.partial(sequences.counted, it.start, it.step, None)
                parts.append((len(it), item))
            elif isinstance(it, np.ndarray | jax.Array) and np.ndim(it) > 0:
                parts.append((len(it), jnp.asarray(it).__getitem__))
            elif type(it) in (list, tuple) and lists_.one_array_type(it) is not None:
                # Arrays of one shape and dtype (`zip([x, 2 * x], range(n))`): item j of them
                # stacked is the j-th as it is.
                parts.append((len(it), jnp.stack(it).__getitem__))
            else:
                return None
        return ZippedCounted(parts, bounds)

    def counted(self):
        """(how many items, item j as a function of a traced j)."""
        count = functools.reduce(jnp.minimum, [n for n, _ in self.parts])
        return count, lambda j: tuple(item(j) for _, item in self.parts)

    def at_most(self) -> int | None:
        """How many items there can be: the fewest any iterable can have, where one is known."""
        known = [bound for bound in self.bounds if bound is not None]
        return min(known) if known else None

    def __iter__(self):
        raise TypeError(
            "zip() of a range with a traced bound (or a list of traced length): only a for "
            "statement can loop over it (staged as a while loop); a comprehension or a call "
            "such as list() cannot."
        )


class EnumeratedZip(CountedIterator):
    """`enumerate(zip(...), start)` of a zip with a traced length (see `ZippedCounted`): only a
    for statement can loop over it (staged as a while loop over the shortest)."""

    type_name = "enumerate"
    kind = "enumerate() of a zip() of traced length"

    def __init__(self, items: ZippedCounted, start):
        items.moved("enumerate()")
        self.items, self.start = items, python_int(start)

    def counted(self):
        """(how many items, item j as a function of a traced j)."""
        count, item = self.items.counted()
        start = self.start

        def numbered(j):
            index = start + j if is_staged(start) else sequences.counted(start, 1, None, j)
            return index, item(j)

        return count, numbered

    def at_most(self) -> int | None:
        return self.items.at_most()

    def __iter__(self):
        raise TypeError(
            "enumerate() of a zip() with a list of traced length or a range with a traced bound: "
            "only a for statement can loop over it (staged as a while loop); a call such as "
            "list() cannot."
        )


def at_most(iterable) -> int | None:
    """How many items a for loop over `iterable` can take, where that is known now though the
    count may be traced: a list of traced length has at most its capacity (what sizes the
    lists its loop appends to); a range with a traced bound has no such bound."""
    if isinstance(iterable, lists_.StagedList):
        return iterable.capacity
    if isinstance(iterable, CountedIterator):
        return iterable.at_most()
    if isinstance(iterable, TracedRange):
        return None
    if isinstance(iterable, range | list | tuple) or np.ndim(iterable) > 0:
        return len(iterable)
    return None


def range_(*args):
    """`range(*args)`, or a `TracedRange` when a bound is traced."""
    if not any(is_staged(a) for a in args):
        return errors.python_call(range, *args)
    if not 1 <= len(args) <= 3:
        raise TypeError(f"range expected at most 3 arguments, got {len(args)}")
    for arg in args:
        if jnp.ndim(arg) != 0:  # Python's (and eager JAX's) `__index__` of an array
            raise errors.python_error(
                TypeError("only integer scalar arrays can be converted to a scalar index")
            )
        dtype = jnp.result_type(arg)
        if not (jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.bool_)):
            kind = "float" if jnp.issubdtype(dtype, jnp.floating) else dtype.name
            raise errors.python_error(
                TypeError(f"'{kind}' object cannot be interpreted as an integer")
            )
        if is_staged(arg) and not _fits_int(dtype):
            _check_fits_int(arg)
    # Its items, its length and its bounds are Python ints: weakly typed int32s, however the
    # bounds are typed (`h * len(range(n))` of a uint8 `h` is a uint8, as in Python).
    args = [python_int(a) for a in args]
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if not is_staged(step) and step == 0:
        raise errors.python_error(ValueError("range() arg 3 must not be zero"))
    if is_staged(step):
        _check_step(step)
    return TracedRange(start, stop, step)


def python_int(value):
    """A traced integer (or bool) `value` as the Python int it stands for in staged code: a
    weakly typed int32 (`staging.python_number`); anything else as it is."""
    if not is_staged(value) or jax.typeof(value).weak_type and value.dtype == _INT:
        return value
    return staging.python_number(value, _INT)


_INT = jnp.result_type(int)  # what JAX makes a Python int: int32 (int64 with jax_enable_x64)
_UNSIGNED_INT = np.dtype(f"uint{np.dtype(_INT).itemsize * 8}")  # its width, unsigned


def _fits_int(dtype) -> bool:
    """Whether every value of integer (or bool) `dtype` fits the int a staged range counts in."""
    if jnp.issubdtype(dtype, jnp.bool_):
        return True
    held, counted = jnp.iinfo(dtype), jnp.iinfo(_INT)
    return counted.min <= held.min and held.max <= counted.max


def _check_fits_int(bound) -> None:
    """A check, when the program runs, that a traced bound of a wider dtype (a uint32) fits the
    int the staged range counts in: cast to it, a larger one would wrap around (a uint32 3e9
    to a negative int32: no iteration, where Python runs them)."""
    counted = jnp.iinfo(_INT)
    dtype = np.dtype(jnp.result_type(bound)).name
    where = Site("range").location()

    def error(value):
        return OverflowError(
            f"range() bound {int(value)} (a traced {dtype}{f', {where}' if where else ''}) "
            f"does not fit the {np.dtype(_INT).name} a staged loop over a range counts in; "
            f"cast it to {np.dtype(_INT).name} where it fits, or loop over another range"
        )

    # (only unsigned dtypes are wider: the int counted in is JAX's widest signed one)
    staging.check_when_run(lambda value: value > counted.max, error, bound)


def _check_step(step) -> None:
    """A check, when the program runs, that a traced step is not zero, as `range` makes."""
    staging.check_when_run(
        lambda step: step == 0, lambda _: ValueError("range() arg 3 must not be zero"), step
    )


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
    in_range=None,
    stages_ranges=False,
    outer_range=False,
    indexed_lists=(),
    last_item=None,
    reads=(),
    sums=(),
    aliased=(),
    stores=(),
    owned=(),
    collects=(),
    construct="for loop",
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
    user code with `i`), where a traced item would not be exact (`indexed_lists`: the lists it
    reads at the index, in range in every iteration, which a staged loop must leave holding
    their items as they are, see `lists.keeping_items`). Python state the loop changes
    is carried too, or refused (see `runtime.effects`; `aliased`: the variables whose lists and
    dicts other names may reach and change in place; `stores`: the body's stores of such a
    container into another, refused when staged; `owned`: the variables whose containers no
    other name can see; `construct`: what errors call the loop, a
    "list comprehension" the comprehensions pass wrote as one). `collects`: the variables
    holding lists the body appends one item to in every iteration and does nothing else with,
    which a scan gives as its stacked outputs (see `runtime.collected`).
    """
    # What staged choices left, let go of before and after the loop (`identity.letting_go`,
    # here by hand: a wrapper's arguments would count as a holder of the iterator).
    identity.let_go()
    site = Site(construct)
    max_iterations = check_count(max_iterations, "max_iterations", 1, site)
    checkpoints = check_count(checkpoints, "checkpoints", 2, site)
    functions = (body, extra_test, exit_test, on_exit)
    owning = identity.owning(owned, symbol_names, state)
    effects = Effects(functions, site, aliased, stores, (*reads, *sums), owning)
    plain = (body, extra_test, symbol_names)
    exit_ = None
    if exit_test is not None:
        # The Python paths run the loop as the break pass would write it: a flag in the state.
        exit_ = exits.Exit(exit_test, on_exit)
        body, extra_test, state, symbol_names = exit_.flagged(body, extra_test, state, symbol_names)

    def finish(state):
        identity.let_go()
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
    stops_early = extra_test is not None or exit_ is not None  # a break or a return in it
    if isinstance(iterable, TracedRange):

        def over_range():
            return finish(
                staged(
                    lambda body, test, exit_, state, names: _indexed_while(
                        iterable.item,
                        iterable,
                        body,
                        state,
                        names,
                        site,
                        test,
                        exit_,
                        max_iterations,
                        checkpoints,
                    ),
                    state,
                    unfired,
                )
            )

        log.staged(site, "lax.while_loop" if max_iterations is None else "lax.scan")
        if outer_range and _staging_ranges.get():
            return _as_python_would(over_range, state, site)
        return over_range()
    counted = isinstance(iterable, CountedIterator)
    if counted or (isinstance(iterable, lists_.StagedList) and iterable.known_length() is None):
        # A list of traced length (or `enumerate` of one, or of a traced range): a while loop
        # over its items, however many there are. (No other name may hold `iterable` past
        # here: the reference count of a Python iterator tells below whether other code holds
        # it.)
        if counted:
            if not iterable.take("a for loop"):
                return finish(state)  # a spent iterator: no items, as Python's gives
            if staging.trackers() or staging.watches():
                effects_.check_consumed(iterable, "a for loop", is_iterator=True)
            count, item = iterable.counted()
            iterable.spent = None if stops_early else True
        else:
            count, item = iterable.length, iterable.buffer.__getitem__
        bound = at_most(iterable)

        def over_items(body, test, exit_, state, names):
            if exit_ is not None:
                on_item = exit_
                exit_ = exits.Exit(
                    lambda j, *s: on_item.test(item(j), *s),
                    lambda j, *s: on_item.on_exit(item(j), *s),
                )
            indices = TracedRange(0, count, 1)
            return _indexed_while(
                indices.item,
                indices,
                lambda j, *s: body(item(j), *s),
                state,
                names,
                site,
                test,
                exit_,
                max_iterations,
                checkpoints,
                at_most=bound,
            )

        log.staged(site, "lax.while_loop" if max_iterations is None else "lax.scan")
        return finish(staged(over_items, state, unfired))
    seq = sequences.as_sequence(iterable)
    if seq is None:
        if staging.trackers() or staging.watches():
            effects_.check_consumed(iterable, "a for loop")
        iterator = iter(iterable)  # once, as Python's `for` does
        # Whether other code holds it too (less the parameter, where the iterable is it).
        refs = sys.getrefcount(iterator) - (iterator is iterable)
        taking_shows = sequences.taking_items_shows(iterator, refs) and type(iterator).__name__
        if max_iterations is not None:
            iterator = itertools.islice(iterator, max_iterations)
        return finish(
            _python_for(
                iterator, body, state, symbol_names, site, extra_test, effects, taking_shows
            )
        )
    # An iterator (`enumerate`, `zip`, `reversed`): the loop takes the items not taken yet.
    one_shot = isinstance(seq, sequences.OneShot)
    first = 0
    if one_shot:
        first = seq.position("a for loop")
        if staging.trackers() or staging.watches():
            effects_.check_consumed(seq, "a for loop")
    n, k = len(seq), first
    if max_iterations is not None:
        n = min(n, first + max_iterations)

    def took(count):  # Python's iterator has given `count` items (None: known at run time)
        if one_shot:
            seq.taken = count

    # Reads of lists at the index, in range for every item left (`back[t]`): the index is
    # an array's index there, as exact traced (checked again where the loop is staged).
    checked = offsets = None
    if items_as_python and in_range is not None:
        read_lists, offsets, checked_as_python = in_range
        checked = _read_lists(read_lists, seq)
        if checked is not None and _in_range(checked, offsets, seq, first, n):
            items_as_python = checked_as_python
        else:
            checked = None
    # Python items the body uses as Python values stay Python: no scan hands it tracers (the
    # index of `enumerate` over a traced array is a Python int too; "items": it uses only the
    # items of an `enumerate` so, rows of a traced array there, arrays either way).
    if items_as_python == "items":
        may_scan = not seq.python_items()
    elif items_as_python:
        may_scan = not seq.python_parts()
    else:
        may_scan = seq.staged() or seq.exact_as_arrays()

    def scan_from(k, state, unfired=False):
        if checked is not None and not _in_range(checked, offsets, seq, k, n):
            raise StagingError(f"{_AS_PYTHON}, out of range of the list")
        with _ranges_staged(stages_ranges), lists_.keeping_items(indexed_lists):
            out = staged(
                lambda body, test, exit_, state, names: _scan(
                    seq,
                    k,
                    n,
                    body,
                    test,
                    state,
                    names,
                    site,
                    max_iterations is None,
                    exit_,
                    collects,
                ),
                state,
                unfired,
            )
        stops = extra_test is not None and (max_iterations is None or unfired)
        log.staged(site, "lax.while_loop" if stops else "lax.scan")
        took(None if stops_early else n)
        if last_item is not None and not stops_early and n > k:
            # Every iteration ran: the item is the last one, as Python's loop leaves it (a
            # Python int of a range), not the traced one the scan carried.
            out = list(out)
            out[symbol_names.index(last_item)] = seq[n - 1]
        return finish(tuple(out))

    go = None  # the extra test on the state, once evaluated
    told = False  # whether the log (and a warning) said the loop runs unrolled
    while k < n:
        if go is None:
            go = extra_test(*state) if extra_test is not None else True
        if not is_staged(go) and not go:
            return finish(state)
        if not may_scan and not told and (is_staged(go) or _should_scan(seq, state)):
            told = True
            _log_unrolled(site, _AS_PYTHON, n - k)
        if is_staged(go) and not may_scan:
            break  # the rest, as Python, each iteration masked by the traced test
        if may_scan and (is_staged(go) or (n - k >= 2 and _should_scan(seq, state))):
            try:
                return scan_from(k, state, exit_ is not None and state[-1] is False)
            except carry_.Unsized:
                pass  # this iteration, as Python, binds what the body binds first
            except effects_.StateBehindCall:
                raise  # final: unrolled, the loop would meet the state tracing left
            except _SCAN_REFUSED as e:
                _log_unrolled(site, _refusal(e), n - k)
                break
        body_k, exit_clean = body, True
        if exit_ is not None and state[-1] is False:
            # The exit test on this item, as Python evaluates it (after the extra test): where
            # it is traced, the staged loop evaluates it again in its condition if it can.
            *plain_state, _ = state
            took(k + 1)
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
                except effects_.StateBehindCall:
                    raise  # final: unrolled, the loop would meet the state tracing left
                except _SCAN_REFUSED as e:  # the rest unrolled, this item with `stop`
                    _log_unrolled(site, _refusal(e), n - k)
                    may_scan = False
            if not is_staged(stop) and stop:
                return finish((*exit_.on_exit(seq[k], *plain_state), True))

            def body_k(item, *state, stop=stop):  # the exit test evaluated already
                return exit_.step(stop, item, state[:-1], plain[0], plain[2])

        if k == first and may_scan and n - first >= 2:
            # Python runs it, and tells whether the loop is staged after it: if so, staged
            # from before it where that is exact (see runtime.peeling).
            def iteration(state, body_k=body_k):
                after = body_k(seq[first], *state)
                return after, (extra_test(*after) if extra_test is not None else True)

            took(first + 1)
            state, go, start = peeling.first_iteration(
                iteration, state, symbol_names, effects.functions, reads, sums, owning
            )
            k = first + 1
            if exit_ is not None and not exit_clean:
                start = None  # restarted, the loop would evaluate the exit test on it again
            if start is not None and (is_staged(go) or _should_scan(seq, state)):
                try:
                    # Before it, the exit's flag was False.
                    return scan_from(first, start, exit_ is not None)
                except effects_.StateBehindCall:
                    raise  # final: unrolled, the loop would meet the state tracing left
                except _SCAN_REFUSED as e:  # as it would from the state after: the rest unrolled
                    _log_unrolled(site, _refusal(e), n - k)
                    break
            continue
        took(k + 1)
        state = body_k(seq[k], *state)
        k += 1
        go = None

    def rest():
        for i in range(k, n):
            took(i + 1)
            yield seq[i]

    unknown = lambda: took(None)  # noqa: E731 - where the program decides how many it took
    state = _python_for(
        rest(), body, state, symbol_names, site, extra_test, effects, on_traced_stop=unknown
    )
    return finish(state)


def _python_for(
    items, body, state, names, site, extra_test, effects, taking_shows=None, on_traced_stop=None
):
    """The Python loop; once `extra_test` is traced, each remaining iteration is a masked cond.
    `taking_shows`: the type name of `items` where taking an item from them can be seen (see
    `sequences.taking_items_shows`), which a traced `extra_test` cannot stop. `on_traced_stop`:
    called where how many items Python takes becomes known only at run time (a traced break)."""
    if extra_test is None:
        for item in items:
            state = body(item, *state)
        return state
    items = iter(items)
    while True:
        go = extra_test(*state)  # before fetching: a loop left by `break` fetches no more items
        if not is_staged(go) and not go:
            return state
        if is_staged(go) and on_traced_stop is not None:
            on_traced_stop()
        if is_staged(go) and taking_shows:
            raise StagingError(
                f"the {site.construct} ({site}) takes its items from an iterator "
                f"({taking_shows}) that other code can see (it holds it, or taking an item "
                "runs code), and whether the loop stops (a break or a return) depends on "
                "traced values: how many items Python would take is known only when the "
                "program runs, and the staged loop cannot stop taking them there. Loop over "
                "a list (`for v in list(it)`) or a range, or decide the break on Python values."
            )
        try:
            item = next(items)
        except StopIteration:
            return state
        if is_staged(go):
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
    keep = control_flow.keeping_state(len(state))  # (computes nothing: traced in no jaxpr)
    note = " (this iteration, after a traced break)"
    refused = effects_.loop_aliased()
    return staged_cond(go, body, keep, state, names, site, logged=note, refused=refused)


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


def _scan(seq, k, n, body, test, state, names, site, stop_early=True, exit_=None, collects=()):
    try:
        return _staged_scan(seq, k, n, body, state, names, site, test, stop_early, exit_, collects)
    except (TypeError, ValueError, IndexError, OverflowError) as e:
        # The index as a dict key or a shape, times an int no int32 holds, or times a tuple,
        # say: the loop runs as Python.
        cannot_stage = errors.as_cannot_stage(e, operators=True)
        if cannot_stage is None:
            raise
        raise cannot_stage from e


# Whether a loop staged because its index reaches only the ranges of nested loops that are exact
# over a traced range (`for_stmt(stages_ranges=True)`) is being traced: those loops
# (`outer_range=True`) check that they compute what they would over the Python range.
_staging_ranges: contextvars.ContextVar[bool] = contextvars.ContextVar("ranges", default=False)


@contextlib.contextmanager
def _ranges_staged(staging_ranges: bool):
    """Marks the code inside as a loop `for_stmt(stages_ranges=True)` being traced, where
    `staging_ranges` (see `_staging_ranges`)."""
    token = _staging_ranges.set(True) if staging_ranges else None
    try:
        yield
    finally:
        if token is not None:
            _staging_ranges.reset(token)


def _as_python_would(run, state, site):
    """`run()`, the loop over a range that a staged loop around it made traced (see
    `ControlFlow._traced_range_bounds`), where that computes what the loop over the Python
    range computes: its state is arrays, all of them (a Python number would be one only in the
    staged loop, `h = h * 100003 % m` wrapping in int32; a state of Python values runs as
    Python over a Python range; a variable the loop binds first would be unbound only when
    the program runs), and tracing it raises nothing (over the Python range, an error of
    tracing runs the loop unrolled, or is the program's own, raised there). Else an
    `errors.OuterRangeRefused`, which runs the loop around it unrolled."""
    leaves = jax.tree_util.tree_leaves(
        state, is_leaf=lambda v: isinstance(v, (MaybeUnbound, Undefined, lists_.StagedList))
    )
    if not leaves or not all(isinstance(v, jax.Array) and is_staged(v) for v in leaves):
        raise errors.OuterRangeRefused(f"the state of the {site.construct} is not all arrays")
    try:
        with staging.refusing_raises():  # (a branch that raises: refused, not raised when run)
            return run()
    except errors.OuterRangeRefused:
        raise
    except Exception as e:  # noqa: BLE001 - over the Python range: unrolled, or raised there
        refused = errors.OuterRangeRefused(f"tracing the {site.construct} raised {e!r}")
        raise refused from e


def _read_lists(lists, seq) -> tuple | None:
    """The lists a loop over `seq` reads at its index (`for_stmt(in_range=...)`: a function
    giving them), where each is one Python reads at an index as a staged loop reads it at a
    traced one: a Python list of traced arrays of one type (not NumPy arrays, which a read
    would give to be changed in place; not Python numbers, which it would give as Python's;
    not constants, whose text and Python value a tracer would not show), or a list staged with
    its length known. None where `seq` is not a range, or a name is unbound
    (Python may never read it)."""
    if not isinstance(seq, sequences.RangeSequence):
        return None
    try:
        found = lists()
    except NameError:  # an UnboundLocalError too
        return None
    for items in found:
        if isinstance(items, lists_.StagedList):
            if items.known_length() is None:
                return None
        elif type(items) is not list or not items:
            return None
        elif not all(is_staged(x) for x in items):
            return None  # (a constant's read at a traced index would be a tracer: its text...)
        elif lists_.one_array_type(items) is None:
            return None
    return found


def _in_range(lists, offsets, seq, k: int, n: int) -> bool:
    """Whether items `k..n-1` of the range `seq` plus each list's offsets are in range of it
    (Python's `xs[t + c]` raises no IndexError at any of them)."""
    if k >= n:
        return True
    low, high = min(seq[k], seq[n - 1]), max(seq[k], seq[n - 1])
    for items, cs in zip(lists, offsets):
        size = len(items) if type(items) is list else items.known_length()
        if not all(-size <= low + c and high + c < size for c in cs):
            return False
    return True


# Why a loop whose body uses its items as Python values (`items_as_python`) runs unrolled.
_AS_PYTHON = (
    "its body uses the item as a Python value: an index into a list, text, a shape, a static "
    "argument (see docs/semantics.md)"
)


def _refusal(error: Exception) -> str:
    """Why a loop runs unrolled, from what refused the scan."""
    reason = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {reason}" if reason else type(error).__name__


def _log_unrolled(site, reason: str, count) -> None:
    message = (
        f"the for loop ({site}) cannot be staged as one lax.scan ({reason}); its {count} "
        "remaining iterations run as unrolled Python instead"
    )
    logger.info(message)
    if count > UNROLL_WARNING_THRESHOLD:
        errors.warn_at_user_line(
            message + ", so compile time grows with the trip count.", stacklevel=4
        )


def _staged_scan(
    seq, k, n, body, state, names, site, extra_test, stop_early=True, exit_=None, collects=()
):
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
        lambda state: _scan_once(
            xs, to_item, n - k, body, state, names, site, extra_test, collects
        ),
        state,
        names,
    )


def _scan_once(xs, to_item, count, body, state, names, site, extra_test, collects=()):
    """The scan. The lists `collects` names (see `runtime.collected`) are its stacked outputs
    where the body appends one item to each per iteration; else carried as any list."""
    # Not staged again after a promotion (`carry.Promoted`): an item appended in the first
    # iteration (`outs.append(h)`, `h = 1` before the loop) would take the promoted type.
    plain = extra_test is None and not carry_._PROMOTIONS.get()
    found = collected.collectors(state, names, collects) if plain else {}
    if found:
        try:
            return _scan_traced(xs, to_item, count, body, state, names, site, None, found)
        except collected.NotCollected:
            pass
    return _scan_traced(xs, to_item, count, body, state, names, site, extra_test, {})


def _scan_traced(xs, to_item, count, body, state, names, site, extra_test, collectors):
    """The scan; `collectors` (see `_scan_once`) stand for their lists, whose windows the scan
    carries after the state."""
    windows = [(i, c.first_window()) for i, c in collectors.items() if c.depth]
    size = len(state)

    def step(item, s):
        s, carried = s[:size], iter(s[size:])
        for collector in collectors.values():
            collector.start(next(carried) if collector.depth else ())
        if extra_test is None:
            outs = body(item, *s)
        else:
            outs = _masked(extra_test(*s), lambda *s: body(item, *s), s, names, site)
        rows = {i: collector.row() for i, collector in collectors.items()}
        following = [collectors[i].next_window(rows[i]) for i, _ in windows]
        return (*outs, *following), tuple(rows.values())

    first = jax.tree_util.tree_map(_item_type, xs)  # (a probe traces the body abstractly)
    carry = Carry(
        (*(collectors.get(i, v) for i, v in enumerate(state)), *(w for _, w in windows)),
        (*names, *(f"{names[i]}[-{collectors[i].depth}:]" for i, _ in windows)),
        site,
        probe=lambda s, x, j: step(to_item(x, j), s)[0],
        trip_count=count,
        probe_args=(first, jnp.asarray(0)),
    )

    def scan_body(scan_carry, x):
        j, dynamic = scan_carry
        with staging.tracing_loop(count), carry.giving(dynamic) as given:
            outs, rows = step(to_item(x, j), given)
        return (j + 1, carry.check(outs, dynamic)), rows

    final, rows = lax.scan(scan_body, (jnp.asarray(0), carry.init), xs, length=count)
    state = list(carry.finish(final[1], ran=count > 0)[:size])
    for (i, collector), items in zip(collectors.items(), rows):
        state[i] = collector.staged(items)
    return tuple(state)


def _item_type(x) -> jax.ShapeDtypeStruct:
    """The type of one item of array `x` (computing none: no slice left in the program)."""
    return jax.ShapeDtypeStruct(x.shape[1:], x.dtype, weak_type=jax.typeof(x).weak_type)


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


def _first_runs(count, extra_test, state) -> bool:
    """Whether `_indexed_while`'s loop takes its first item: there are items (a Python count),
    and no `break` or `return` stopped the loop before it (its flags, known now). (Its first
    iteration then runs, unless an exit test stops it at that item.)"""
    if not isinstance(count, int) or count < 1:
        return False
    if extra_test is None:
        return True
    first = extra_test(*state)
    return not staging.is_staged(first) and bool(first)


def _indexed_while(
    item_at,
    count,
    body,
    state,
    names,
    site,
    extra_test,
    exit_,
    max_iterations,
    checkpoints=None,
    at_most=None,
):
    """`for j in range(count)`: `body(item_at(j), *state)` while `extra_test` holds and
    `exit_.test` does not; then, if the exit test stopped it, `exit_.on_exit` on that item.
    `count`: a number, or the `TracedRange` whose items are looped over (its length then
    tested where the loop tests it, `TracedRange.before_end`). `at_most`: a bound on a traced
    `count` (a list's capacity), which sizes the lists the loop appends to."""
    items = count if isinstance(count, TracedRange) else None

    def more(j, s):
        going = items.before_end(j) if items is not None else j < count
        if extra_test is None:
            return going
        test = staging.scalar_predicate(extra_test(*s), site, "loop test")
        return staging.both(going, test, tested=True)

    def last(j):  # an item in range where the loop has none left: what it computes is unused
        length = items.trip_count() if items is not None else count
        return item_at(jnp.minimum(j, length - 1))

    def test(j, *s):
        if exit_ is None:
            return more(j, s)
        return exit_.condition(more(j, s), last(j), s, site)

    def counted_body(j, *s):
        return (j + 1, *body(item_at(j), *s))

    takes_first = _first_runs(count, extra_test, state)
    every_iteration: set[int] = set()

    final = staged_while(
        test,
        counted_body,
        (0, *state),
        ("<iteration>", *names),
        site,
        max_iterations,
        checkpoints,
        trip_count=count if isinstance(count, int) else at_most,
        ran=exit_ is None and takes_first,
        every_iteration=every_iteration,
    )
    j, state = final[0], final[1:]
    if exit_ is None:
        return state
    stopped = more(j, state)  # not at the end of the items, nor by another `break`
    if max_iterations is not None:  # nor by the bound
        stopped = staging.both(stopped, j < max_iterations)
    # Not stopped by the exit test, the loop ran an iteration at least, where it takes its first
    # item: what every iteration binds is bound (`for row in xs: if f(row): break`, then `row`).
    bound = {i - 1 for i in every_iteration} if takes_first else ()
    return exit_.after(stopped, last(j), state, names, site, bound)
