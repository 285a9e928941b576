"""Object attributes a staged statement assigns (`self.count += 1`) become part of its state.

Generated code names them: `rt__.while_stmt(..., attributes={'self.count': (self, 'count')})`.
The state the runtime stages is then the variables plus the attributes' values; the functions it
traces set the attributes from their arguments before running and read them back after, so the
user's code reads and writes `self.count` as written, and no tracer from inside a `lax` body is
left behind on the object: after the statement each attribute holds its final value.
"""

from __future__ import annotations

import contextlib


class Attributes:
    def __init__(self, attributes: dict[str, tuple[object, str]]):
        self.labels = tuple(attributes)
        self.pairs = tuple(attributes.values())

    def values(self) -> tuple:
        return tuple(getattr(obj, name) for obj, name in self.pairs)

    def set(self, values) -> None:
        for (obj, name), value in zip(self.pairs, values):
            setattr(obj, name, value)

    def wrap(self, fn, n_state: int, leading: int = 0, returns_state: bool = True):
        """`fn(*leading, *state)` as a function of `(*leading, *state, *attribute values)`."""

        def wrapped(*args):
            head, state = args[:leading], args[leading : leading + n_state]
            self.set(args[leading + n_state :])
            out = fn(*head, *state)
            return (*out, *self.values()) if returns_state else out

        return wrapped

    @contextlib.contextmanager
    def staged(self):
        """Restores the attributes if staging fails: a half-traced value must not stay."""
        before = self.values()
        try:
            yield
        except BaseException:
            self.set(before)
            raise
