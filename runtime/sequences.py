"""Iterables a `for` loop can stage as one `lax.scan`: ranges, arrays, and enumerate/zip/reversed
over them.

Each view iterates exactly like the Python object it stands for (`enumerate(arr)` yields
`(i, arr[i])` with a Python int `i`), so the Python path of `for_stmt` is unchanged; staged, it
hands `lax.scan` its remaining items as arrays with a leading axis. The views of `enumerate`,
`zip` and `reversed` are iterators, as Python's are (`OneShot`): a loop takes their items once.
"""

from __future__ import annotations

import functools
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np

from runtime import effects, errors
from runtime.errors import StagingError
from runtime.staging import is_staged, is_traced


class Sequence:
    """A sized, indexable iterable that `for_stmt` can scan over from any position `k`."""

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, k: int):
        """The k-th item, as Python iteration would give it."""
        raise NotImplementedError

    def __iter__(self):
        return (self[k] for k in range(len(self)))

    def staged(self) -> bool:
        """Whether its items are staged (see `runtime.staging.is_staged`)."""
        raise NotImplementedError

    def exact_as_arrays(self) -> bool:
        """Whether its Python items are exactly what a scan would hand the body as arrays (a
        NumPy int64 or float64 array is not, unless JAX has 64-bit types enabled)."""
        return True

    def python_parts(self) -> bool:
        """Whether some part of its items is Python's however the loop runs (the index of
        `enumerate`, the int of a `range` zipped with an array), which a scan would make traced
        too."""
        return not self.staged()

    def python_items(self) -> bool:
        """Whether the items themselves, the index of `enumerate` aside, are Python's (see
        `python_parts`)."""
        return self.python_parts()

    def scan_inputs(self, k: int):
        """(xs, to_item): `lax.scan` inputs for items k.., and `to_item(x, j)` rebuilding item
        k + j from its slice `x` of xs (or from the counter `j` when xs is None)."""
        raise NotImplementedError


class ArraySequence(Sequence):
    """A NumPy or JAX array, iterated over its leading axis."""

    def __init__(self, array):
        self.array = array

    def __len__(self):
        return len(self.array)

    def __getitem__(self, k):
        return self.array[k]

    def staged(self):
        return is_staged(self.array)

    def exact_as_arrays(self):
        dtype = np.asarray(self.array).dtype if not is_traced(self.array) else None
        return dtype is None or jax.dtypes.canonicalize_dtype(dtype) == dtype

    def scan_inputs(self, k):
        rest = self.array[k:]
        return (rest if is_traced(rest) else jnp.asarray(rest)), lambda x, j: x


class RangeSequence(Sequence):
    """A Python `range`: scanned with a counter, no array of indices."""

    def __init__(self, r: range):
        self.range = r

    def __len__(self):
        return len(self.range)

    def __getitem__(self, k):
        return self.range[k]

    def staged(self):
        return False

    def scan_inputs(self, k):
        return None, functools.partial(counted, self.range[k], self.range.step)


class StandInIterator:
    """What an iterator the runtime stands in for has, whatever holds its items (`OneShot`: a
    sequence of known length; `for_loops.CountedIterator`: one of traced length): Python's
    truth and type, and where it stands, which may be known only when the program runs."""

    kind: str  # what messages call it: `enumerate()`
    type_name: str  # the type Python's is (its messages name it): `enumerate`, `range_iterator`
    why: str | None = None  # why its position is known only at run time, if not a loop's break

    __reversed__ = None  # reversed() of an iterator: Python's TypeError

    def __bool__(self) -> bool:
        return True  # an iterator, empty or not (not its length's truth)

    def unknown_position(self, what: str) -> StagingError:
        """The error of `what` taking items from it where its position is known only at run
        time."""
        return StagingError(
            f"{what} takes items from an iterator ({self.kind}) whose items left are known "
            f"only when the program runs ({errors.Site(what)}): {why_unknown(self.why)}. "
            f"Make a new {self.kind} for each loop, or take its items into a list first."
        )


class OneShot(StandInIterator, Sequence):
    """A view Python gives as an iterator (`enumerate`, `zip`, `reversed`): its items are taken
    once. `taken`: how many a loop, `next()` or `list()` took so far; None where that is known
    only when the program runs (a staged loop that may stop early took them)."""

    taken: int | None = 0

    def __iter__(self):
        return self

    def __next__(self):
        k = self.position("taking an item (next(), list(), a comprehension)")
        if k >= len(self):
            raise StopIteration
        self.taken = k + 1
        return self[k]

    def position(self, what: str) -> int:
        """How many items were taken; StagingError where that is known only at run time."""
        if self.taken is not None:
            return self.taken
        raise self.unknown_position(what)

    def forget_position(self, why: str) -> None:
        """Where it stands is known only when the program runs, `why` (taken past a traced item
        by `in`, `any`, `all`, or by another iterator made of it)."""
        self.taken, self.why = None, why

    def rest(self, by: str) -> Sequence:
        """The items not taken yet, as a view `by` (an `enumerate()` made of this one) takes
        them; this iterator's own position is known no more."""
        k = self.position(by)
        self.forget_position(f"the {by} made of it takes them")
        return self if k == 0 else Tail(self, k)


def why_unknown(why: str | None) -> str:
    """Why an iterator's position is known only at run time (see `OneShot.position`)."""
    if why:
        return why
    return (
        "a loop that may stop early (a break or a return under a traced condition) took some "
        "of them before"
    )


class Tail(Sequence):
    """The items of `base` from item `skip` on (a partly consumed iterator, wrapped again)."""

    def __init__(self, base: Sequence, skip: int):
        self.base, self.skip = base, skip

    def __len__(self):
        return max(len(self.base) - self.skip, 0)

    def __getitem__(self, k):
        return self.base[self.skip + k]

    def staged(self):
        return self.base.staged()

    def exact_as_arrays(self):
        return self.base.exact_as_arrays()

    def python_parts(self):
        return self.base.python_parts()

    def python_items(self):
        return self.base.python_items()

    def scan_inputs(self, k):
        return self.base.scan_inputs(self.skip + k)


class Iterated(OneShot, Tail):
    """An iterator over the items of `base` (`reversed(range(3))`: Python's range iterator)."""

    def __init__(self, base: Sequence, kind: str, type_name: str):
        Tail.__init__(self, base, 0)
        self.kind, self.type_name = kind, type_name


class Enumerated(OneShot):
    kind, type_name = "enumerate()", "enumerate"

    def __init__(self, base: Sequence, start: int):
        self.base, self.start = base, start

    def __len__(self):
        return len(self.base)

    def __getitem__(self, k):
        return self.start + k, self.base[k]

    def staged(self):
        return self.base.staged()

    def exact_as_arrays(self):
        return self.base.exact_as_arrays()

    def python_parts(self):
        return True  # the index

    def python_items(self):
        return self.base.python_parts()

    def scan_inputs(self, k):
        xs, item = self.base.scan_inputs(k)
        first = self.start + k
        return xs, lambda x, j: (counted(first, 1, x, j), item(x, j))


class Zipped(OneShot):
    kind, type_name = "zip()", "zip"

    def __init__(self, bases: list[Sequence]):
        self.bases = bases

    def __len__(self):
        return min(len(b) for b in self.bases)

    def __getitem__(self, k):
        return tuple(b[k] for b in self.bases)

    def staged(self):
        return any(b.staged() for b in self.bases)

    def exact_as_arrays(self):
        return all(b.exact_as_arrays() for b in self.bases)

    def python_parts(self):
        return any(b.python_parts() for b in self.bases)

    def scan_inputs(self, k):
        n = len(self)
        inputs = [b.scan_inputs(k) for b in self.bases]
        xs = tuple(None if x is None else x[: n - k] for x, _ in inputs)
        return xs, lambda x, j: tuple(item(xi, j) for (_, item), xi in zip(inputs, x))


class Reversed(OneShot):
    kind, type_name = "reversed()", "reversed"

    def __init__(self, base: ArraySequence):
        self.base = base

    def __len__(self):
        return len(self.base)

    def __getitem__(self, k):
        return self.base[len(self.base) - 1 - k]

    def staged(self):
        return self.base.staged()

    def exact_as_arrays(self):
        return self.base.exact_as_arrays()

    def scan_inputs(self, k):
        rest = self.base.array[: len(self.base) - k]
        rest = rest if is_traced(rest) else jnp.asarray(rest)
        return jnp.flip(rest, axis=0), lambda x, j: x


def counted(start: int, step: int, x, j):
    """Item `j` of a range from `start` by `step`: `start + j * step`, with no operation where
    one would do nothing (`range(n)`: `j` itself)."""
    del x  # a range has no scan input
    if step != 1:
        j = j * step
    return j if start == 0 else start + j


def as_sequence(iterable) -> Sequence | None:
    """The scannable view of `iterable`, or None for Python containers and iterators."""
    if isinstance(iterable, Sequence):
        return iterable
    if isinstance(iterable, range):
        return RangeSequence(iterable)
    if isinstance(iterable, np.ndarray | jax.Array) and np.ndim(iterable) > 0:
        return ArraySequence(iterable)
    from runtime.lists import StagedList

    if isinstance(iterable, StagedList):
        return ArraySequence(iterable.stacked("iterating"))  # a list a staged loop built
    return None


# -- iterators: whether taking an item from one shows --------------------------------------------

# Iterators over a Python container: taking items from one changes nothing but the iterator.
_CONTAINER_ITERATORS = frozenset(
    type(iter(c)) for c in ([], (), range(1), "", b"", {}, {}.values(), {}.items(), set())
) | {type(reversed([])), type(reversed(range(1)))}
# Built-in iterators over other iterators, which `__reduce__` shows.
_WRAPPERS = frozenset({enumerate, zip})


def _refs(value) -> int:
    return sys.getrefcount(value)


def _inner(wrapper) -> list[tuple[object, int]]:
    """The iterators an `enumerate` or `zip` takes items from, each with its reference count
    (counted here, the same way for every wrapper)."""
    args = wrapper.__reduce__()[1]
    return [(a, sys.getrefcount(a)) for a in args if not isinstance(a, int) and iter(a) is a]


# What the counts show for an iterator nothing else holds: a local variable of the function
# counting (with `getrefcount`'s own argument), and an iterator inside each wrapper (`zip`
# holds its iterators in a tuple of its own, `enumerate` directly: they count differently).
_UNHELD = _refs(object())
_UNHELD_INNER = types.MappingProxyType(
    {wrapper: _inner(wrapper(iter([])))[0][1] for wrapper in _WRAPPERS}
)


def taking_items_shows(iterator, refs: int) -> bool:
    """Whether taking more items from `iterator` (what `iter()` gave for a loop) than Python
    would take can be seen: other code holds it (`refs`, its reference count in a local
    variable of `for_stmt`, is more than `_UNHELD`), or it runs code or reads something to give
    an item (a generator, a file, `itertools.count()`, a `map`), or it is an `enumerate`/`zip`
    over such an iterator.

    `for v in it: ... break` takes items only up to the `break`; a staged loop cannot stop
    taking them where a traced `break` fires.
    """
    if refs > _UNHELD:
        return True
    todo = [iterator]
    while todo:
        it = todo.pop()
        if type(it) in _WRAPPERS:
            for inner, count in _inner(it):
                if count > _UNHELD_INNER[type(it)]:
                    return True
                todo.append(inner)
        elif isinstance(it, types.GeneratorType):
            # A library's (`nnx.List.__iter__`) gives items as an iterator of a container
            # does; the user's may do anything as it gives one.
            if effects.is_user_generator(it):
                return True
        elif type(it) not in _CONTAINER_ITERATORS:
            return True
    return False
