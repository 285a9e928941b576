"""A list a staged scan only appends to: its items are the scan's stacked outputs.

    outs = []
    for x in xs:                 # staged: one lax.scan
        h = step(h, x)
        outs.append(h)           # one item per iteration, and nothing else done with `outs`

A list a staged loop changes is carried as a buffer with room for every item it will hold
(`runtime.carry`): the buffer's type must be known before the loop, so the body is traced once
first, abstractly, to see what it appends (a probe), then again as the loop's body. Where the
conversion found that the body appends one item to the list in every iteration and does nothing
else with it (`collects`, see `transpiler.passes.control_flow`), the scan gives the items as
its stacked outputs instead, as a hand-written `lax.scan` gives its `ys`: the body is traced once,
and nothing is carried. The list after the loop holds the items it held before, then the scan's.

What the body appends is checked as it is traced: anything but exactly one array (or number)
per iteration, of a type the list's items before the loop take, raises `NotCollected`, and the
loop is staged as any other (whose errors say what is wrong).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import lists as lists_
from runtime import staging
from runtime.errors import StagingError


class NotCollected(staging.Retrace):
    """The body did not append one item per iteration of a type the list takes (or read it
    otherwise than the conversion found): stage the loop with the list carried instead. (A
    `Retrace`: no `try` in the user's code catches it.)"""


class Collector:
    """Stands for list `name` (holding `items` before the loop) in the scan's body: records what
    one trace of the body appends to it, and gives the body's reads of its last `depth` items
    (`hs[-1]`) from `window`, which the scan carries (the last `depth` items, the latest last)."""

    def __init__(self, name: str, items: list, depth: int = 0):
        self.name = name
        self.items = items
        self.depth = depth
        self.appended: list = []
        self.window: tuple = ()
        self.element: jax.ShapeDtypeStruct | None = None

    def append(self, item) -> None:
        self.appended.append(item)

    def __getitem__(self, index):
        """`hs[-k]`, before the iteration's append: from the window."""
        if type(index) is not int or not -len(self.window) <= index < 0 or self.appended:
            raise NotCollected(self.name)
        return self.window[index]

    def __repr__(self) -> str:
        return f"<the list '{self.name}', its items collected by a staged scan>"

    def first_window(self) -> tuple:
        """The items the window holds when the loop starts: the last `depth` before it, as
        they are. NotCollected where there are fewer (Python's read would fail), or where one
        is not a JAX array: a Python number computes as Python's (`True + True` is 2, an int
        grows past int32, `1.0 / 0.0` raises), and `None` is no array at all."""
        last = self._last_items()
        if len(last) < self.depth or not all(isinstance(x, jax.Array) for x in last):
            raise NotCollected(self.name)
        return tuple(last)

    def _last_items(self) -> list:
        """The items before the loop that the window starts with."""
        return self.items[len(self.items) - self.depth :]

    def start(self, window: tuple = ()) -> None:
        """Before each trace of the body: nothing appended yet (a probe of the body, traced
        before the scan's, appends too), the window as the iteration finds it."""
        self.appended = []
        self.window = window

    def row(self) -> jax.Array:
        """After a trace of the body: the one item it appended, of the list's item type, which
        is the type of every item the window held before the loop (they are read as they are:
        a read of a Python int must not give a float)."""
        if len(self.appended) != 1 or not staging.is_array_leaf(self.appended[0]):
            raise NotCollected(self.name)
        item = self.appended[0]
        element = lists_.item_type([item, *self.items])
        if element is None:
            raise NotCollected(self.name)
        try:
            lists_.check_kept_items(self.name, self.items, element)
        except StagingError:
            raise NotCollected(self.name) from None
        # (The items as they were before the loop, not as the window carries them: a loop
        # staged again with its state promoted carries them promoted.)
        if any(lists_.item_type([x]) != element for x in self._last_items()):
            raise NotCollected(self.name)
        if not _holds(element, [x for x in self.items if type(x) is int]):
            raise NotCollected(self.name)  # `[300]`, then int8 items: refused as carried
        self.element = element
        if lists_.item_type([item]) == element:
            return jnp.asarray(item)  # (weakly typed where it is: the window keeps its type)
        return jnp.asarray(item, element.dtype)

    def next_window(self, row) -> tuple:
        """The window the next iteration finds: the last `depth` items, `row` the latest."""
        return (*self.window, row)[1:] if self.depth else ()

    def staged(self, rows: jax.Array) -> lists_.StagedList:
        """The list after the loop: its items before it, then `rows` (the scan's outputs)."""
        element = self.element
        origin = lists_.Origin(self.name)
        if self.items:
            before = [lists_.as_dtype(x, element.dtype) for x in self.items]
            buffer = jnp.concatenate([jnp.stack(before), rows])
        else:
            buffer = rows
        if element.weak_type:  # Python numbers only: the items promote as they do
            buffer = staging.python_number(buffer)
        elif jax.typeof(buffer).weak_type:
            buffer = lax.convert_element_type(buffer, buffer.dtype)
        count = len(self.items) + rows.shape[0]
        return lists_.StagedList(
            buffer, jnp.asarray(count), static_length=count, origin=origin, least=len(self.items)
        )


def _holds(element: jax.ShapeDtypeStruct, ints: list[int]) -> bool:
    """Whether `element`'s dtype holds each of the Python ints `ints`."""
    if not ints:
        return True
    try:
        np.asarray(ints, element.dtype)
    except OverflowError:
        return False
    return True


def collectors(state, names, collects) -> dict[int, Collector]:
    """{index: Collector} for the variables of `state` that `collects` (pairs (name, depth),
    from the conversion) names and that hold a Python list."""
    depths = dict(collects)
    return {
        i: Collector(name, value, depths[name])
        for i, (name, value) in enumerate(zip(names, state))
        if name in depths and type(value) is list
    }
