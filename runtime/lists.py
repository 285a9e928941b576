"""Lists that a staged loop appends to: a fixed-size buffer plus a length, stacked on exit.

Generated code writes `out.append(x)` as `out = rt__.list_append(out, x)`, so the list is loop
state. With Python values that is exactly `out.append(x)` (the same list object, mutated). When a
staged loop carries a Python list that its body appends to, the loop turns it into a `StagedList`:
an array buffer with room for every item the loop can append (its trip count, or the loop's
`max_iterations`) and the number of items in it.

If every iteration appends the same number of items unconditionally, the length after the loop is
known, the buffer is exactly that long, and the list behaves as the Python list would (`len`,
indexing, iteration, `jnp.stack`). If appends happen under a traced condition (an `if`, or after a
`break`), the length is traced: `len(out)` gives an array, indexing is checked when the program
runs, and stacking or iterating raises a StagingError (`padded(out)` gives the buffer and the
length, for code that masks the padding itself).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import operator
import re
import types

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import powers, staging
from runtime.errors import Site, StagingError, python_call, python_error
from runtime.staging import is_staged


class Origin:
    """Where a staged list comes from, for error messages: its name, and why its length is
    traced. Every Origin equals every other, so it never makes two lists' pytrees differ."""

    __slots__ = ("name", "why", "fix")

    def __init__(self, name: str = "the list", why: str = "", fix: str = ""):
        self.name, self.why, self.fix = name, why, fix  # fix: what else the user can do

    def __eq__(self, other) -> bool:
        return isinstance(other, Origin)

    def __hash__(self) -> int:
        return 0


@jax.tree_util.register_pytree_node_class
class StagedList:
    """A list of same-shaped arrays stored as `buffer[:length]`.

    A list carried by a staged loop is `fixed`: its buffer was sized for every append the loop
    can make, and appends write into it. Any other staged list grows its buffer by one row per
    append, as Python would grow the list. When appends happened under a traced condition the
    length is traced, and whatever depends on it (stacking, iterating, slicing) raises a
    StagingError instead of seeing the padding: `padded(lst)` gives (buffer, length).

    `least`: the fewest items it holds wherever its length is traced: in a staged loop, the
    length the loop found it with (`hs = [h0]`, then `hs.append(f(hs[-1]))` in every
    iteration: at least 1), one more after each append in an iteration (`hs = []`, then
    `hs.append(h); h = g(hs[-1])`), one fewer after each pop (a sliding window's
    `window.pop(0); window.append(x)`: one fewer between the two); the loop carries it with the
    count it entered with, and starts again counting on none where an iteration leaves it with
    fewer (`carry.FewerItems`). A Python index within it (`hs[-1]`) is in range without a
    check when the program runs (a host call each iteration).
    """

    def __init__(
        self,
        buffer,
        length,
        static_length: int | None = None,
        fixed: bool = False,
        origin: Origin | None = None,
        least: int = 0,
    ):
        self.buffer = buffer
        self.length = length
        self.static_length = static_length  # known after a loop that always appends
        self.fixed = fixed
        self.origin = origin or Origin()
        self.least = least

    def _with(self, **changes) -> StagedList:
        fields = dict(
            buffer=self.buffer,
            length=self.length,
            static_length=self.static_length,
            fixed=self.fixed,
            origin=self.origin,
            least=self.least,
        )
        return StagedList(**{**fields, **changes})

    @classmethod
    def create(
        cls, items, capacity: int, element: jax.ShapeDtypeStruct, origin: Origin | None = None
    ) -> StagedList:
        """A list holding `items` (Python) with room for `capacity` items in all, its length
        known (`len(items)`). A weakly typed `element` (Python numbers) gives a weakly typed
        buffer: its items promote as they do."""
        shape = (capacity, *element.shape)
        buffer = staging.zeros_like(
            jax.ShapeDtypeStruct(shape, element.dtype, weak_type=element.weak_type)
        )
        values = []
        for item in items:
            try:
                values.append(as_dtype(item, buffer.dtype))
            except OverflowError:  # `[jnp.int8(1), 300]`: no int8 holds the Python int
                name = origin.name if origin is not None else "the list"
                where = Site("list").location()
                raise StagingError(
                    f"'{name}' holds {item!r} among items of dtype {np.dtype(buffer.dtype).name}"
                    f", which cannot hold it{f' ({where})' if where else ''}, and staged code "
                    "makes the list one array of that dtype (a list that changes length in a "
                    "staged loop or branch). Make the items one wider dtype first "
                    "(jnp.int32(...)), or keep the number out of the list."
                ) from None
        if values:  # one store of them all (`[0] * 256`: not 256 stores, one per item)
            buffer = buffer.at[: len(values)].set(jnp.stack(values))
        return cls(buffer, jnp.asarray(len(items)), static_length=len(items), origin=origin)

    @property
    def capacity(self) -> int:
        return self.buffer.shape[0]

    @property
    def weak(self) -> bool:
        """Whether the items are weakly typed (Python numbers): they promote as Python's do."""
        return jax.typeof(self.buffer).weak_type

    def resized(self, capacity: int, fixed: bool) -> StagedList:
        """The same items in a buffer of `capacity` rows (never fewer than now)."""
        extra = capacity - self.capacity
        buffer = self.buffer
        if extra > 0:
            rows = jax.ShapeDtypeStruct(
                (extra, *buffer.shape[1:]), buffer.dtype, weak_type=self.weak
            )
            zeros = staging.zeros_like(rows)
            buffer = jnp.concatenate([buffer, zeros]) if self.capacity else zeros
        return self._with(buffer=buffer, fixed=fixed)

    def _stored(self, buffer, item) -> jax.Array:
        """`buffer` (this list's, with `item` written into it) weakly typed where this list's is
        and `item` is (a Python number): a strongly typed item makes the list strongly typed,
        as stacking them would (an update of a row drops the weak type: it is put back)."""
        if self.weak and _promotes_weakly(jnp.asarray(item)):
            return staging.python_number(buffer)
        if jax.typeof(buffer).weak_type:  # (an update of a weakly typed buffer may keep it)
            return lax.convert_element_type(buffer, buffer.dtype)
        return buffer

    def tree_flatten(self):
        aux = (self.static_length, self.fixed, self.origin, self.least)
        return (self.buffer, self.length), aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def known_length(self) -> int | None:
        if self.static_length is not None:
            return self.static_length
        if is_staged(self.length):
            return None
        if self.batched():
            raise self._as_batch()
        return int(self.length)

    def batched(self) -> bool:
        """Whether this is the batch of lists `jax.vmap` returns (a length per example)."""
        return not is_staged(self.length) and jnp.ndim(self.length) > 0

    def _as_batch(self) -> StagingError:
        name = self.origin.name
        lengths = np.asarray(self.length).tolist()
        return StagingError(
            f"'{name}' is a batch of lists (jax.vmap returned one per example, of lengths "
            f"{lengths}): as one value it has no Python length or items. Use "
            f"transpiler.padded({name}) for (buffers, lengths), each buffer with zeros after "
            "its last item."
        )

    def append(self, item):
        raise StagingError(
            f"'{self.origin.name}' is a list built in staged code, held as an array (a new one "
            f"after each append; {Site('append')}): it can only be appended to through the "
            "name it was built "
            "under, where the append rebinds that name, not through another reference (an "
            "argument, an alias), which would keep the list as it was. Append where the list "
            "is built, or build it as a Python list (see docs/semantics.md, Lists)."
        )

    def appended(self, item) -> StagedList | list:
        """The list with `item` after its last item; the Python list of its items and `item`
        where `item` is an array of another dtype and the list is no loop's (see
        `_of_another_dtype`)."""
        check_items([item], f"'{self.origin.name}', a list built in staged code,")
        if type(item) in (bool, int, float, complex):
            staging.check_fits(item, self.buffer.dtype)
        if not _fits_row(item, self.buffer):
            raise StagingError(
                f"'{self.origin.name}.append(...)' appends a "
                f"{staging.describe(jnp.asarray(item))} to a list of "
                f"{staging.describe(self.buffer[0])} items built in staged code: its items are "
                "stacked into one array, so each must have their shape and a dtype that "
                "converts to theirs exactly (an int item into a list of floats, not a float "
                "into a list of ints). Make the first items of that type (0.0, not 0)."
            )
        held = self._taking_dtype_of(item)
        known = self.known_length()
        if _of_another_dtype(item, held.buffer):
            if not self.fixed and known is not None:
                # (after the loop that built it: the Python list of its items, as Python's)
                return [*self.items("an append of another dtype"), item]
            raise StagingError(
                f"'{self.origin.name}.append(...)' appends a "
                f"{staging.describe(jnp.asarray(item))} to a list of "
                f"{staging.describe(held.buffer[0])} items built in staged code "
                f"({Site('append')}): its items are stacked into one array of one dtype, where "
                "Python's list keeps each item's own (read back, it would be a "
                f"{np.dtype(held.buffer.dtype).name}). Cast it to the items' dtype, or keep "
                "items of each dtype in a list of their own."
            )
        row = jnp.asarray(item, held.buffer.dtype)
        # Room after its items already (made for an append under a traced condition: the
        # `if` staged it with room for one), or a row more.
        room = self.fixed or (known is not None and known < self.capacity)
        grown = held if room else held.resized(self.capacity + 1, fixed=False)
        buffer = lax.dynamic_update_index_in_dim(grown.buffer, row, self.length, 0)
        buffer = held._stored(buffer, item)
        return self._with(
            buffer=buffer,
            length=self.length + 1,
            static_length=None if known is None else known + 1,
            least=self.least + 1,
        )

    def _taking_dtype_of(self, item) -> StagedList:
        """The list, its items of `item`'s dtype where they are Python numbers and `item` an
        array that they promote to, as stacking them would (`[0]`, then a uint8 appended: uint8s,
        strongly typed, not int32s)."""
        if not self.weak or _promotes_weakly(jnp.asarray(item)):
            return self
        dtype = jnp.result_type(self.buffer, item)
        if dtype == self.buffer.dtype:
            return self
        return self._with(buffer=lax.convert_element_type(self.buffer, dtype))

    def pop(self, *index):
        raise StagingError(
            f"'{self.origin.name}' is a list built in staged code, held as an array "
            f"({Site('pop()')}): it can only be popped from through the name it was built "
            f"under, in a statement of its own (`item = {self.origin.name}.pop()` or "
            f"`{self.origin.name}.pop()`), not through another reference (an argument of a "
            "helper, an alias, a container holding it), which would leave the list as it was, "
            "nor inside an expression. Pop where the list is built, or build it as a Python list "
            "(see docs/semantics.md, Lists)."
        )

    def popped(self, *index, deleting: bool = False) -> tuple[StagedList, object]:
        """The list without its last item (or item `index`), and that item. `deleting`: for
        `del out[index]`, whose IndexError Python words as an assignment's."""
        if index:
            return self._popped_at(index[0], deleting)
        last = self.length - 1
        item = lax.dynamic_index_in_dim(self.buffer, last, 0, keepdims=False)
        self._check_index(-1, "pop from empty list")
        # Zeros where it was: past its length a staged list holds zeros (`padded` gives them).
        cleared = lax.dynamic_update_index_in_dim(self.buffer, lax.full_like(item, 0), last, 0)
        return self._one_fewer(buffer=self._stored(cleared, lax.full_like(item, 0))), item

    def _one_fewer(self, **changes) -> StagedList:
        """The list with one item fewer (its last, unless `changes` gives the buffer)."""
        known = self.known_length()
        return self._with(
            length=self.length - 1,
            static_length=None if known is None else known - 1,
            least=max(self.least - 1, 0),
            **changes,
        )

    def _popped_at(self, index, deleting: bool = False) -> tuple[StagedList, object]:
        """`pop(index)`: the items after it move down one. A traced index is checked in range
        when the program runs (Python's IndexError; a read's is clamped, see `_check_index`)."""
        name = self.origin.name
        python = "list assignment index out of range" if deleting else "pop index out of range"
        shown = f"del {name}[{{}}]" if deleting else f"'{name}'.pop({{}})"
        message = f"{python} ({shown})"
        if not deleting:  # Python's words for any index of an empty list
            self._check_index(-1, "pop from empty list")
        if is_staged(index):
            staging.check_when_run(
                lambda i, length: (i < -length) | (i >= length),
                lambda i, _: IndexError(message.format(int(np.ravel(i)[0]))),
                index,
                self.length,
            )
        position = self._position(index, python)
        item = self._item_at(position)
        buffer = self.buffer
        moved = jnp.arange(buffer.shape[0]).reshape((-1,) + (1,) * (buffer.ndim - 1)) >= position
        shifted = jnp.concatenate([buffer[1:], lax.full_like(buffer[-1:], 0)], axis=0)
        return self._one_fewer(buffer=jnp.where(moved, shifted, buffer)), item

    def reversed_in_place(self) -> StagedList:
        """The list after `reverse()`: its items, last first."""
        known = self.known_length()
        if known is None:
            raise self._traced_length("reverse()")
        items = jnp.flip(self.buffer[:known], axis=0)
        return self._with(buffer=jnp.concatenate([items, self.buffer[known:]]))

    def stacked(self, what: str = "jnp.stack", strong: bool = False):
        """The items as one array, weakly typed if they are Python numbers (as `jnp.stack` of
        them gives), unless `strong` (as `jnp.array` of them gives); StagingError if how many
        there are is known only at run time."""
        known = self.known_length()
        if known is None:
            raise self._traced_length(what)
        items = self.buffer[:known]
        return lax.convert_element_type(items, items.dtype) if strong and self.weak else items

    def _traced_length(self, what: str) -> StagingError:
        name, why = self.origin.name, self.origin.why
        return StagingError(
            f"'{name}' {why or 'has a traced length'}, so how many items it holds is known only "
            f"when the program runs, and {what} of it cannot give what Python would. Use "
            f"len({name}) for its length (an array), or transpiler.padded({name}) for "
            "(buffer, length) with zeros after the last item"
            + (f"; or {self.origin.fix}." if self.origin.fix else ".")
        )

    def masked(self, fill):
        """The buffer with `fill` in place of the padding after the last item."""
        present = jnp.arange(self.capacity) < self.length
        present = present.reshape((-1,) + (1,) * (self.buffer.ndim - 1))
        masked = jnp.where(present, self.buffer, jnp.asarray(fill, self.buffer.dtype))
        return staging.python_number(masked) if self.weak else masked

    def check_not_empty(self, what: str) -> None:
        """A check, when the program runs, that the list (of traced length) has items."""
        message = f"{what} arg is an empty sequence ('{self.origin.name}')"
        staging.check_when_run(
            lambda length: length == 0, lambda _: ValueError(message), self.length
        )

    def _check_index(self, index, message: str = "list index out of range") -> None:
        """An IndexError now where the length and `index` are known and it is out of range; a
        check when the program runs where only the length is traced. A traced index is not
        checked: out of range, it is clamped, as JAX's indexing does (a check on every read
        costs a host call per read: 800x slower in a scan that reads an item per step)."""
        if is_staged(index) or -self.least <= index < self.least:
            return  # (within `least`: in range wherever the program reads it)
        known = self.known_length()
        if known is not None:
            if not -known <= index < known:
                raise python_error(IndexError(f"{message} ('{self.origin.name}'[{index}])"))
            return
        message = f"{message} ('{self.origin.name}'[{index}])"
        staging.check_when_run(
            lambda length: (index < -length) | (index >= length),
            lambda _: IndexError(message),
            self.length,
        )

    def _position(self, index, message: str = "list index out of range"):
        """Where item `index` (a Python int or a traced integer) is in the buffer, after
        checking that it is in range (Python's IndexError)."""
        staged = is_staged(index)
        if staged:
            integer = jnp.ndim(index) == 0 and jnp.issubdtype(jnp.result_type(index), jnp.integer)
        else:
            integer = isinstance(index, (int, np.integer))
            index = int(index) if integer else index  # a bool too: `hs[True]` is `hs[1]`
        if not integer:
            kind = staging.describe(index) if staged else type(index).__name__
            raise python_error(
                TypeError(
                    f"list indices must be integers or slices, not {kind} ('{self.origin.name}')"
                )
            )
        self._check_index(index, message)
        known = self.known_length()
        length = self.length if known is None else known
        if staged:
            position = staging.where(index < 0, index + length, index)
            # Out of range: the nearest item, as JAX's indexing clamps (lax's dynamic indexing
            # would count a position still negative from the end a second time).
            return jnp.clip(position, 0, jnp.maximum(length - 1, 0))
        return index + length if index < 0 else index

    def _item_at(self, position):
        if is_staged(position):
            return lax.dynamic_index_in_dim(self.buffer, position, 0, keepdims=False)
        return self.buffer[position]

    def with_item(self, index, value, update=None) -> StagedList:
        """The list with `value` in place of item `index` (`out[i] = value`); with `update`
        (`operator.iadd`), `update(item, value)` in place of it (`out[i] += value`)."""
        if isinstance(index, slice):
            raise StagingError(
                f"'{self.origin.name}' is a list built in staged code, held as an array: "
                f"assigning to a slice of it ({self.origin.name}[{index.start}:{index.stop}] = "
                "...) may change its length, which is not staged. Assign items one by one."
            )
        if update is not None:  # Python reads the item first: its index error is the read's
            position = self._position(index)
            value = update(self._item_at(position), value)
        check_items([value], f"'{self.origin.name}[...] = ...', into a list built in staged code,")
        item = jnp.asarray(_typed_as(value))  # (the value itself is checked against the list)
        if not (self._takes(item) and _fits_row(item, self.buffer)):
            raise StagingError(
                f"'{self.origin.name}[...] = ...' ({Site('item assignment')}) puts a "
                f"{staging.describe(item)} into a list of {staging.describe(self.buffer[0])} "
                "items staged as one array: the new item must have their shape and dtype (or be "
                "a Python number they take), as Python gives each item back with its own. Cast "
                "it, or make the list's items of its dtype."
            )
        staging.check_fits(value, self.buffer.dtype)
        if update is None:
            position = self._position(index, "list assignment index out of range")
        buffer = lax.dynamic_update_index_in_dim(
            self.buffer, as_dtype(value, self.buffer.dtype), position, 0
        )
        return self._with(buffer=self._stored(buffer, value))

    def _takes(self, item) -> bool:
        """Whether the list can hold `item` as Python holds it: of its dtype, or a Python number
        (weakly typed) that it takes (a bool into a list of Python numbers as a number of
        theirs, as a staged `if` joins them); not a uint8 into a list of int32s, which Python
        gives back a uint8 (a list of Python numbers whose values are known took an assigned
        array's dtype already: `picked_by_program`)."""
        typed = jax.typeof(item)
        if typed.dtype == self.buffer.dtype:
            return True  # (a strongly typed item makes a weakly typed list strong: `_stored`)
        if typed.weak_type or (typed.dtype == jnp.bool_ and self.weak):
            return staging.takes_dtype(item, self.buffer.dtype)
        return False

    def __setitem__(self, index, value):
        raise StagingError(
            f"'{self.origin.name}' is a list built in staged code, held as an array (a new one "
            "after each change): an item can only be assigned through the name it was built "
            f"under (`{self.origin.name}[i] = v`), where the assignment rebinds that name, not "
            "through another reference (an argument, an alias)."
        )

    def __getattr__(self, name):
        if name.startswith("__") or name not in _LIST_METHODS:
            raise AttributeError(name)
        known = self.known_length()
        if known is not None and name in ("index", "count", "copy"):
            return getattr(self.items(f"{name}()"), name)  # they read it: its items
        fix = (
            f" It holds {known} items: make it a Python list first (`{self.origin.name} = "
            f"list({self.origin.name})`), then call {name}() on that."
            if known is not None
            else ""
        )
        raise StagingError(
            f"'{self.origin.name}' is a list built in staged code, held as an array "
            f"({Site(f'{name}()')}): of the list methods only append(), pop(), clear() and "
            f"reverse() are staged, not {name}().{fix}"
        )

    def __staged_truth__(self):
        """`if items:`: a traced `length > 0` when the length is traced."""
        known = self.known_length()
        return bool(known) if known is not None else self.length > 0

    def __bool__(self) -> bool:
        known = self.known_length()
        if known is None:
            raise self._traced_length("its truth value (as an operand of and/or)")
        return bool(known)

    def __len__(self) -> int:
        known = self.known_length()
        if known is None:
            raise self._traced_length("len() outside converted code")
        return known

    def items(self, what: str) -> list:
        """The items as the Python list the list stands for; StagingError if how many there
        are is known only at run time (`what`: what needs them, for the message)."""
        return list(self.stacked(what))

    def __getitem__(self, index):
        if isinstance(index, slice):  # a new Python list, as Python's slice is
            return self.items(f"the slice [{index.start}:{index.stop}:{index.step}]")[index]
        return self._item_at(self._position(index))

    def __iter__(self):
        return iter(self.stacked("iterating"))

    def __delitem__(self, index):
        raise StagingError(
            f"'{self.origin.name}' is a list built in staged code, held as an array: "
            f"del {self.origin.name}[...] is not staged (only append(), pop() and item "
            "assignment are). Build the list without the item, or pop() it."
        )

    # Operators act on the Python list it stands for (`out[:1] + out[-1:]`, `out == other`):
    # a list of arrays, as Python's would be. With a traced length they cannot.
    def _operand(self, op: str) -> list:
        return self.items(f"'{op}'")

    def __eq__(self, other):
        return self._equal(other, "==")

    def __ne__(self, other):
        equal = self._equal(other, "!=")
        return jnp.logical_not(equal) if is_staged(equal) else not equal

    def _equal(self, other, op: str):
        """`self == other` as Python compares lists: lengths, then items by `==`, each one's
        truth (traced, for items of one value each)."""
        mine, theirs = self._operand(op), _python_list(other)
        if not isinstance(theirs, list):
            return False
        if len(mine) != len(theirs):
            return False
        pairs = [(a, b) for a, b in zip(mine, theirs) if a is not b]
        if any(jnp.size(a) != 1 or jnp.size(b) != 1 for a, b in pairs):
            return mine == theirs  # as Python does: an array's truth may be ambiguous
        return jnp.all(jnp.asarray([jnp.reshape(a == b, ()) for a, b in pairs], bool))

    def __lt__(self, other):
        return self._operand("<") < _python_list(other)

    def __le__(self, other):
        return self._operand("<=") <= _python_list(other)

    def __gt__(self, other):
        return self._operand(">") > _python_list(other)

    def __ge__(self, other):
        return self._operand(">=") >= _python_list(other)

    def __add__(self, other):
        return self._operand("+") + _python_list(other)

    def __radd__(self, other):
        return _python_list(other) + self._operand("+")

    def __mul__(self, count):
        return self._operand("*") * count

    __rmul__ = __mul__
    __hash__ = None  # a list is not hashable

    def contains(self, item):
        """`item in self`, traced: `==` with each item (only those the list holds), combined
        with `or`, as Python's `in` compares them."""
        known = self.known_length()
        rows = self.buffer if known is None else self.buffer[:known]
        if rows.ndim != 1:
            raise StagingError(
                f"'{staging.describe(item)} in {self.origin.name}': the items of "
                f"'{self.origin.name}' are {staging.describe(self.buffer[0])} arrays, whose "
                "comparison with `==` has no single truth value (Python raises here too)."
            )
        equal = rows == item
        if known is None:
            equal = equal & (jnp.arange(self.capacity) < self.length)
        return jnp.any(equal)

    def __contains__(self, item):
        raise StagingError(
            f"`in` on '{self.origin.name}', a list built in staged code, outside converted code"
        )

    def __jax_array__(self):
        return self.stacked("an array", strong=True)  # as `jnp.asarray` of the list

    def __repr__(self) -> str:
        if self.batched():
            return f"StagedList(lengths={self.length}, buffers={staging.describe(self.buffer)})"
        if self.known_length() is not None:  # as the Python list it stands for prints
            return repr(list(self))
        return f"StagedList(length={self.length}, buffer={staging.describe(self.buffer)})"


def _python_list(value):
    if isinstance(value, StagedList):
        return value.items("an operator")
    return value


_LIST_METHODS = frozenset(name for name in dir(list) if not name.startswith("_"))


def padded(target):
    """(buffer, length) of a list: its items stacked with zeros after the last one, and how many
    there are. For a list appended to under a traced condition, whose length is traced."""
    if isinstance(target, StagedList):
        # (zeros past the length: appends write at the length, pops and `clear` put zeros back)
        return target.buffer, target.length
    if not target:
        return jnp.zeros((0,)), 0
    return jnp.stack(target), len(target)


def check_items(items, what: str) -> None:
    """Raises StagingError unless every item is an array or a number: a staged list stacks its
    items into one array, where a tuple, a dict or a string would lose what it is (`pair + pair`
    would add where Python concatenates). `what`: the list and where, for the message."""
    for item in items:
        if not staging.is_array_leaf(item):
            raise StagingError(
                f"{what} gets {staging.describe(item)}: a list built in staged code is one array "
                "of its items, stacked, so each item must be an array (or a number) of one "
                "shape. Keep one list per field (`xs.append(x); ys.append(y)`), or stack the "
                "fields into one array."
            )


def one_array_type(items) -> jax.ShapeDtypeStruct | None:
    """The one type of `items` if they are arrays (not Python numbers) of one shape, dtype and
    weak type, so that stacking them gives each back as it is; else None."""
    if not items or not all(isinstance(x, np.ndarray | jax.Array) for x in items):
        return None
    types = {(jnp.shape(x), jnp.result_type(x), jax.typeof(x).weak_type) for x in items}
    if len(types) != 1:
        return None
    shape, dtype, weak = types.pop()
    return jax.ShapeDtypeStruct(shape, dtype, weak_type=weak)


def item_type(items, dtype=None) -> jax.ShapeDtypeStruct | None:
    """The one type a staged list of `items` stores: their common shape, and the dtype stacking
    them gives (`jnp.stack` promotion: `[1, 2.5]` -> float32), or `dtype` if every item promotes
    to it; weakly typed if every item is (Python numbers: each promotes as they do). None if the
    shapes differ or an item does not fit `dtype`."""
    items = [jnp.asarray(item) for item in items]
    weak = not all(item.dtype == jnp.bool_ for item in items) and all(
        _promotes_weakly(item) for item in items
    )
    shapes = {item.shape for item in items}
    if len(shapes) != 1:
        return None
    if any(jax.dtypes.issubdtype(item.dtype, jax.dtypes.extended) for item in items):
        # PRNG keys (`jax.random.key`): no promotion, one key type.
        dtypes = {item.dtype for item in items}
        if len(dtypes) != 1 or (dtype is not None and dtype not in dtypes):
            return None
        return jax.ShapeDtypeStruct(shapes.pop(), dtypes.pop())
    proxies = [staging.dtype_like(item) for item in items]
    if dtype is None:
        dtype = jnp.result_type(*proxies)
    elif any(jnp.result_type(dtype, proxy) != dtype for proxy in proxies):
        return None
    return jax.ShapeDtypeStruct(shapes.pop(), dtype, weak_type=weak)


def _promotes_weakly(item: jax.Array) -> bool:
    """Whether `item` meets any number as a Python number does: weakly typed, or a bool (which
    promotes below every number: `True * uint8` is a uint8). Such items, not all bools, keep a
    list weakly typed."""
    return jax.typeof(item).weak_type or item.dtype == jnp.bool_


def _of_another_dtype(item, buffer) -> bool:
    """Whether `item` is an array (or a NumPy scalar) whose dtype is not the items' of a staged
    list held in `buffer`: stored there, it would be read back in theirs (a bool array among
    float32 items as 1.0), where Python's list keeps it as it is. (A Python number takes their
    dtype, as a Python number among arrays does in a staged `if`.)"""
    if not isinstance(item, (jax.Array, np.ndarray, np.generic)):
        return False
    return jnp.result_type(item) != buffer.dtype


def _fits_row(item, buffer) -> bool:
    """Whether `item` can be an item of a staged list held in `buffer`: its shape, and a dtype
    that promotes to the buffer's."""
    element = item_type([item], buffer.dtype)
    return element is not None and element.shape == buffer.shape[1:]


def list_append(target, item):
    """Functional form of `target.append(item)`: returns the list (the same object, if Python)."""
    if isinstance(target, StagedList):
        return target.appended(item)
    target.append(item)
    return target


def handed_list(target, callee: str, *, built: bool = False):
    """A list its function built, handed to other code once it is done (`helper(out)`,
    `jax.tree_util.tree_leaves(out)`, `isinstance(out, list)`): the Python list of its items, as
    Python hands it. One of traced length stays as it is: converted code can use it (`len`,
    `sum`, `transpiler.padded`; `callee` names the call). `built`: the list is the one a
    comprehension builds (`callee`: which), which errors about its traced length name as the
    user's code does, not by the name conversion gave it."""
    if not isinstance(target, StagedList):
        return target
    if target.known_length() is not None:
        return target.items(f"'{callee}(...)'")
    if built:
        return target._with(origin=comprehension_origin(target.origin.name, Site(callee)))
    return target


def comprehension_origin(name: str, site: Site) -> Origin:
    """Where the list a comprehension (at `site`) builds comes from, named as the user's code
    names it, not by the name conversion holds it in (`kept_items` for `kept = [...]`, see
    `transpiler.passes.comprehensions`)."""
    base = re.sub(r"_items(_\d+)?$", "", name)
    shown = "the list it builds" if base == "kept" or base == name else base
    return Origin(
        shown,
        f"is built by a {site.construct} ({site}) with a traced filter, or over a list of "
        "traced length",
    )


def as_python_lists(tree):
    """`tree` with each list built in staged code whose length is known as the Python list of
    its items, as the function that built it returns it; one of traced length stays as it is
    (only converted code can use it: `len`, `sum`, `transpiler.padded`)."""
    return _as_python_lists(tree, {})


def _as_python_lists(tree, made: dict):
    # `made`: one Python list per staged list (`return out, out` gives the same list twice).
    if isinstance(tree, StagedList):
        if tree.known_length() is None:
            return tree
        if id(tree) not in made:
            made[id(tree)] = (tree, list(tree))
        return made[id(tree)][1]
    # A container is rebuilt only if something in it changed: one the function got (an
    # argument, an attribute) and returns is the very same object, as in Python.
    if type(tree) in (tuple, list):
        items = [_as_python_lists(v, made) for v in tree]
        if all(a is b for a, b in zip(items, tree)):
            return tree
        return type(tree)(items)
    if type(tree) is dict:
        values = {k: _as_python_lists(v, made) for k, v in tree.items()}
        if all(values[k] is v for k, v in tree.items()):
            return tree
        return values
    return tree


def list_item(target, index, recent=None):
    """`target[index]` of a list the function keeps private. With a traced index, the program
    picks the item: a Python list is read as the staged list of its items (arrays of one type,
    see `picked_by_program`; the index clamped, as a staged list's is). `recent`: where the
    conversion proved the index reads from the end (`best[i - 1]` is `best[-1]` in every
    iteration of the loop that collects `best`, see `runtime.collected`)."""
    if recent is not None and not isinstance(target, list | StagedList):
        return target[recent]  # a collector, which holds the last items only
    if type(target) is list and is_staged(index):
        return picked_by_program(target, "an item")[index]
    return python_call(operator.getitem, target, index)  # an IndexError is the program's


def list_setitem(target, index, value):
    """Functional form of `target[index] = value`: returns the list (the same object, if
    Python; the staged list of its items where a traced index picks the item)."""
    if type(target) is list and is_staged(index):
        target = picked_by_program(target, "the item assigned", joining=assigned_type(value))
    if isinstance(target, StagedList):
        return target.with_item(index, value)
    python_call(operator.setitem, target, index, value)
    return target


def list_update(target, index, op: str, value):
    """Functional form of `target[index] <op>= value` (`op`: "+", "*", ...): returns the list
    (the same object, if Python)."""
    update = _IN_PLACE[op]
    if type(target) is list and is_staged(index):
        target = picked_by_program(target, "the item updated", joining=assigned_type(value))
    if isinstance(target, StagedList):
        return target.with_item(index, value, update)
    updated = python_call(update, python_call(operator.getitem, target, index), value)
    python_call(operator.setitem, target, index, updated)
    return target


_IN_PLACE = types.MappingProxyType(
    {
        "+": operator.iadd,
        "-": operator.isub,
        "*": operator.imul,
        "/": operator.itruediv,
        "//": operator.ifloordiv,
        "%": operator.imod,
        "**": powers.pow_,  # Python's type for a power of two ints (`items[i] **= -k`)
        "@": operator.imatmul,
        "&": operator.iand,
        "|": operator.ior,
        "^": operator.ixor,
        "<<": operator.ilshift,
        ">>": operator.irshift,
    }
)


def list_pop(target, *index):
    """Functional form of `item = target.pop(*index)`: returns `(target, item)`."""
    if isinstance(target, StagedList):
        return target.popped(*index)
    if index and is_staged(index[0]) and type(target) is list:
        return picked_by_program(target, "the item popped").popped(*index)
    item = python_call(target.pop, *index)
    return target, item


def list_delete(target, index):
    """Functional form of `del target[index]` (an item, not a slice): returns the list."""
    if isinstance(target, StagedList):
        return target.popped(index, deleting=True)[0]
    if is_staged(index) and type(target) is list:
        return picked_by_program(target, "the item deleted").popped(index, deleting=True)[0]
    if isinstance(target, ProbeList):
        try:
            target.pop(index)  # counted as the pop it is
        except IndexError:
            raise IndexError("list assignment index out of range") from None
        return target
    python_call(operator.delitem, target, index)
    return target


def list_clear(target):
    """Functional form of `target.clear()`: returns the list, emptied."""
    if isinstance(target, StagedList):
        return target._with(
            buffer=lax.full_like(target.buffer, 0),
            length=jnp.zeros_like(target.length),
            static_length=0,
            least=0,
        )
    if isinstance(target, ProbeList):
        target.cleared()
        return target
    target.clear()
    return target


def picked_by_program(
    items: list, what: str, name: str | None = None, joining: jax.ShapeDtypeStruct | None = None
) -> StagedList:
    """The Python list `items` as the staged list of its items, where a traced index picks
    one (`out[k]`, `out[k] = v`, `out.pop(k)`): which, the program decides when it runs, and
    the items must be one array then. They must be arrays of one shape, dtype and weak type,
    or Python numbers of one kind (each read back as it is), or both where the numbers join the
    arrays' dtype (`_joined_type`); else a StagingError naming the line and `what` the index
    picks. `joining`: the type of an array assigned into it (`out[k] = v`, `out[k] -= v`),
    whose dtype Python numbers take where they join it (`dp = [0] * n`, then `dp[k] = x` of a
    uint8 `x`: a uint8 list; -1 among them is refused, not wrapped)."""
    element = one_array_type(items)
    kinds = {_number_kind(x) for x in items}
    if element is None and len(kinds) == 1 and None not in kinds:
        element = item_type([_typed_as(x) for x in items])
        for item in items:
            staging.check_fits(item, element.dtype)  # 2**40 among Python ints: not an int32
    if element is None:
        element = _joined_type(items)
    if (
        element is not None
        and element.weak_type  # Python numbers (or a loop's state they became)
        and joining is not None
        and not joining.weak_type
        and joining.shape == element.shape
    ):
        joined = _joined_type(items, joining)
        element = element if joined is None else joined
    if element is None:
        raise StagingError(
            f"{what} of a list with a traced index ({Site('index')}): which item, the program "
            "decides when it runs, and the list must be one array then, but its items are not "
            "arrays of one shape and dtype (nor Python numbers of one type, or among arrays of "
            "a dtype they join). Index with a Python int, or make the items arrays of one type."
        )
    return StagedList.create(items, len(items), element, None if name is None else Origin(name))


def assigned_type(value) -> jax.ShapeDtypeStruct | None:
    """The type of an array assigned into a list (see `picked_by_program`); None for a Python
    number."""
    if not isinstance(value, (np.ndarray, jax.Array)):
        return None
    typed = jax.typeof(value)
    return jax.ShapeDtypeStruct(typed.shape, typed.dtype, weak_type=typed.weak_type)


def _joined_type(items, extra: jax.ShapeDtypeStruct | None = None) -> jax.ShapeDtypeStruct | None:
    """The type of strongly typed arrays of one shape and dtype (`items`', and `extra`, the type
    of one more) among which the other items are Python numbers (or weakly typed arrays) that
    join that dtype as a staged `if` joins them (`staging.joins_as`: `dp = [0] * n` whose items
    a staged `if` made int32 arrays, some of them): read back, a Python number is an array of
    that dtype, as after such an `if`. A number the dtype cannot hold is refused
    (`staging.check_fits`). None where there is no such dtype."""
    if not all(isinstance(x, (int, float, complex, np.ndarray, jax.Array)) for x in items):
        return None
    proxies = [_typed_as(x) for x in items]
    types = [jax.typeof(p) for p in proxies] + ([] if extra is None else [extra])
    if len({t.shape for t in types}) != 1:
        return None
    strong = {t.dtype for t in types if not t.weak_type}
    if len(strong) != 1:
        return None
    (dtype,) = strong
    weak = [(x, p) for x, p, t in zip(items, proxies, types) if t.weak_type]
    if not all(
        staging.joins_as(jax.typeof(p), dtype) and staging.takes_dtype(p, dtype) for _, p in weak
    ):
        return None  # (a Python float among int32 arrays would make them float32)
    for item, _ in weak:
        staging.check_fits(item, dtype)
    return jax.ShapeDtypeStruct(types[0].shape, dtype)


def as_dtype(value, dtype) -> jax.Array:
    """`value` (an array, or a Python number checked to fit) as an array of `dtype`; a Python
    number made one directly (JAX would make 2**40 an int32 first, and overflow)."""
    if isinstance(value, (int, float, complex)):
        return jnp.asarray(np.asarray(value, dtype))
    return jnp.asarray(value).astype(dtype)


def _typed_as(item):
    """`item`, or for a Python int JAX's default int type cannot hold (2**40), a zero that
    JAX types as it types ints (the value is checked against the dtype it joins)."""
    if isinstance(item, int) and not isinstance(item, bool):
        try:
            jax.typeof(item)
        except OverflowError:
            return 0
    return item


def _number_kind(item) -> str | None:
    """What kind of Python number `item` is or stands for ("b", "i", "f", "c": a Python number,
    a weakly typed scalar array, a bool scalar array), else None. Items of one kind read back
    from one array as they are (a Python int as a weakly typed int32, which promotes as it)."""
    for kind, number in (("b", bool), ("i", int), ("f", float), ("c", complex)):
        if isinstance(item, number):  # (a subclass too: JAX's typed literals)
            return kind
    if isinstance(item, jax.Array | np.ndarray) and np.ndim(item) == 0:
        typed = jax.typeof(item)
        if typed.weak_type or typed.dtype == jnp.bool_:
            return np.dtype(typed.dtype).kind
    return None


def list_reverse(target):
    """Functional form of `target.reverse()`: returns the reversed list (a Python list: itself,
    reversed in place, as Python does)."""
    if isinstance(target, StagedList):
        return target.reversed_in_place()
    target.reverse()
    return target


def stack_list(stack, target, *args, part=None, **kwargs):
    """`stack(target, ...)` that stacks a StagedList at once where `stack` is `jnp.stack` (with
    at most `axis` and `dtype`) or `jnp.array` / `jnp.asarray` (with at most `dtype`); with
    `part`, the (start, stop, step) of a slice, `stack(target[start:stop:step], ...)`: the rows
    of a staged list of known length at once, not a Python list of its items (one slice of the
    buffer where the items would be hundreds). Any other function, or other arguments, get the
    Python list of the items, as Python's call would (`np.array`, `ops.stack`, `ndmin=3`)."""
    if isinstance(target, ProbeList):
        target = target.read_typed()  # JAX takes lists, not subclasses of them
    if isinstance(target, StagedList) and not _stacks_rows(stack, args, kwargs):
        target = target.items(f"{getattr(stack, '__name__', 'stacking')}()")
    if part is not None:
        part = slice(*part)
        known = target.known_length() if isinstance(target, StagedList) else None
        if known is None or not range(known)[part]:  # (no items: the stacking's own error)
            target = target[part]
    if not isinstance(target, StagedList):
        return stack(target, *args, **kwargs)
    # `jnp.array` of Python numbers is strongly typed, `jnp.stack` of them weakly.
    result = target.stacked(f"{stack.__name__}()", strong=stack is not jnp.stack)
    if part is not None:
        result = result[part]
    if stack is jnp.stack:
        axis, dtype = (args[0] if args else kwargs.get("axis", 0)), kwargs.get("dtype")
    else:
        axis, dtype = 0, (args[0] if args else kwargs.get("dtype"))
    if axis:
        result = jnp.moveaxis(result, 0, axis)
    return result if dtype is None else result.astype(dtype)


def _stacks_rows(stack, args, kwargs) -> bool:
    """Whether `stack(items, *args, **kwargs)` is the rows of the items stacked, cast to a
    `dtype`, the stacked axis moved to `axis` (see `stack_list`)."""
    if stack is jnp.stack:
        return len(args) <= 1 and set(kwargs) <= {"axis", "dtype"}
    if stack is jnp.array or stack is jnp.asarray:
        return len(args) <= 1 and set(kwargs) <= {"dtype"}
    return False


STAND_IN = jax.ShapeDtypeStruct((), jnp.float32)
"""What a probed list gives for an item it does not hold until a probe learned the item type."""


class ProbeList(list):
    """Stands for a list while a staged loop's body is traced once, abstractly, to learn what it
    appends: counts the appends of one iteration (an append inside a nested staged loop counts
    once per iteration of that loop), their types, and whether any is under a traced condition.
    """

    def __init__(self, items, base: StagedList | None = None):
        super().__init__(items)
        self.base = base  # a staged list being probed: reads come from it
        self.depth = len(staging.loop_trip_counts())
        self.count = 0
        self.pops = 0  # pops of one iteration, counted as appends are
        self.unbounded = False
        self.appended: list = []
        self.conditional = False
        self.where: str | None = None  # the user's file:line of the first append
        self.element: jax.ShapeDtypeStruct | None = None  # what reads of missing items give
        self.guessed = False  # a read of a missing item gave a stand-in

    def append(self, item):
        if self.where is None:
            self.where = Site("append", depth=2).location()
        check_items([item], f"a list appended to in a staged loop ({self.where})")
        item = jnp.asarray(item)
        trips = staging.loop_trip_counts()[self.depth :]
        if any(n is None for n in trips):
            self.unbounded = True
        else:
            self.count += math.prod(trips)
        if any(staging.loops_stopping_early()[self.depth :]):
            # In a nested loop that may stop early (a `break`): how many appends happen is
            # known only when the program runs.
            self.conditional = True
        self.appended.append(item)
        super().append(item)

    def mark(self) -> tuple:
        """What it has counted so far, to go back to (`rewind`)."""
        return (
            list(self),
            self.count,
            self.pops,
            self.unbounded,
            len(self.appended),
            self.conditional,
            self.where,
            self.guessed,
        )

    def rewind(self, mark: tuple) -> None:
        """Back to `mark`: the appends of a trace that is thrown away (a statement in the body,
        traced again: a promotion, an effect found) must not count twice."""
        (
            items,
            self.count,
            self.pops,
            self.unbounded,
            n,
            self.conditional,
            self.where,
            self.guessed,
        ) = mark
        self[:] = items
        del self.appended[n:]

    def read(self) -> list | StagedList:
        """What code that reads the whole list sees while the probe runs (`min(out)`,
        `jnp.stack(out)`): its items; of a staged list being probed, that list with the items
        appended since (their values are a probe's: only their types matter)."""
        if self.base is None:
            return list(self)
        out = self.base
        if len(self):
            out = out.resized(out.capacity + len(self), fixed=False)
            for item in self:
                out = out.appended(item)
        return out

    def read_typed(self) -> list | StagedList:
        """`read()`, for code that needs an item only for its type (`max(out)`,
        `sorted(out)`, `jnp.stack(out)`): where the probe has none (a pop under a traced
        condition took it), one of the item type; whether the list is empty when the program
        runs, the staged loop checks then."""
        items = self.read()
        return [self[0]] if type(items) is list and not items else items

    def traced_length(self):
        """Its length as the staged loop sees it: traced (in the loop, a list's length is
        the loop's count, so what a test on it decides is decided in the graph: `if len(st) >
        2: st.pop()` must be probed as the staged `if` it is, not as Python decides it now)."""
        base = 0 if self.base is None else self.base.length
        return jnp.asarray(base + len(self), jnp.int32)

    def __staged_truth__(self):
        return self.traced_length() > 0

    def pop(self, *index):
        # The length after the loop is known only if every iteration pops as many items: not
        # under a traced condition, nor in a nested loop that may stop early.
        trips = staging.loop_trip_counts()[self.depth :]
        if any(n is None for n in trips):
            self.conditional = True
        else:
            self.pops += math.prod(trips)
        if any(staging.loops_stopping_early()[self.depth :]):
            self.conditional = True
        if not self:  # under a test of its length the graph decides
            return self[-1]  # the staged list's last item, or a stand-in (see __getitem__)
        if index and is_staged(index[0]):
            return super().pop()  # a traced index: which item, the program picks (one type)
        return super().pop(*index)

    def cleared(self) -> None:
        """`clear()`: how many items the list holds after the loop is known only when the
        program runs (the counts of appends and pops no longer tell)."""
        self.conditional = True
        if self.base is not None:
            self.base = self.base._with(
                length=jnp.zeros_like(self.base.length), static_length=0, least=0
            )
        self.clear()

    def branches(self):
        """Counts the appends and pops of a staged `if` (see `runtime.control_flow`): call
        `start()` as each branch starts; `finish(first, second)` with what each branch did,
        `(appends, pops)`."""
        before = self.count, self.pops

        def start():
            self.count, self.pops = before
            return before

        def finish(first: tuple[int, int], second: tuple[int, int]):
            # The list grows by the longer branch. Its length after the `if` is known where
            # both branches change it by as much (`window.pop(0); window.append(x)` against
            # nothing), else traced.
            grown = max(first[0], second[0])
            changes = {appends - pops for appends, pops in (first, second)}
            self.count = before[0] + grown
            if len(changes) == 1:
                self.pops = before[1] + grown - changes.pop()
            else:
                self.pops = before[1] + max(first[1], second[1])
                self.conditional = True

        return start, finish

    def __setitem__(self, index, value):
        if isinstance(index, slice) or (
            isinstance(index, int) and self.base is None and -len(self) <= index < len(self)
        ):
            super().__setitem__(index, value)
        # Else an item only the program run holds (or a traced index): the probe learns only
        # what the appends and pops do, and the staged list checks the index.

    def __getitem__(self, index):
        if is_staged(index):  # which item, the program run tells: one of the item type
            if len(self):
                check_items(self, "a list read at a traced index in a staged loop")
                return jnp.zeros_like(super().__getitem__(-1))
            if self.base is not None:
                return jnp.zeros_like(self.base.buffer[0])
            return self[len(self)]  # a stand-in
        if self.base is not None and not (isinstance(index, int) and index < 0 and len(self)):
            return self.base[index]
        if isinstance(index, int) and not -len(self) <= index < len(self):
            # An item the list holds only when the program runs (`out[-1]` under `len(out) >
            # 0`, a test the loop decides in the graph): a stand-in of the item type, the one
            # its appends give once a probe learned it (`element`), a float32 scalar until then.
            self.guessed = True
            return staging.zeros_like(STAND_IN if self.element is None else self.element)
        return super().__getitem__(index)


# The lists a staged loop reads at its traced index, that must keep the items they hold before
# it as they are (see `keeping_items`).
_kept_items: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "kept_items", default=frozenset()
)


@contextlib.contextmanager
def keeping_items(names):
    """Around the staging of a loop over a range whose body reads lists `names` at its index
    (`for_stmt(indexed_lists=...)`, where Python would run the loop as Python): a staged list
    made of one of them must hold its items as they are, not promoted to what its appends
    give (Python ints made float32 by float appends, Python floats made float32 arrays); else the
    `StagingError` of `check_kept_items` sends the loop back to Python, which reads them exact.
    `names=()` inside the loop's body: its own loops keep their items only if they say so."""
    token = _kept_items.set(frozenset(names))
    try:
        yield
    finally:
        _kept_items.reset(token)


def check_kept_items(name: str, items, element: jax.ShapeDtypeStruct) -> None:
    """StagingError where list `name` is one `keeping_items` names and a staged list of
    `element` items would change the type of one of `items` (its Python items)."""
    if name not in _kept_items.get():
        return
    for item in items:
        typed = item_type([item])
        if typed != element:
            kind = f"a Python {type(item).__name__}" if type(item) in (bool, int, float) else ""
            if not kind and typed is not None and typed.weak_type:
                kind = f"a weakly typed {staging.describe(jnp.asarray(item))} (a Python number's)"
            weak = "weakly typed " if element.weak_type else ""
            if not weak and typed is not None and typed.weak_type:
                weak = "strongly typed "
            raise StagingError(
                f"'{name}' holds {kind or staging.describe(jnp.asarray(item))} before the loop, "
                f"which a staged list of its appends would hold as a {weak}"
                f"{staging.describe(element)} array"
            )


@contextlib.contextmanager
def probes_rewound(values):
    """Around one attempt at tracing a statement whose state is `values`: where the attempt is
    thrown away (`staging.Retrace`: traced again for a promotion, an effect found, a cast), the
    probe lists among `values` (an outer loop's, see `ProbeList`) go back to what they had
    counted before it, so that its appends do not count twice."""
    marks = [(value, value.mark()) for value in values if isinstance(value, ProbeList)]
    try:
        yield
    except staging.Retrace:
        for probe, mark in marks:
            probe.rewind(mark)
        raise
