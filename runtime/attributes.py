"""Object attributes a staged statement assigns (`self.count += 1`) become part of its state.

Generated code names them: `rt__.while_stmt(..., attributes={'self.count': (self, 'count')})`.
The state the runtime stages is then the variables plus the attributes' values; the functions it
traces set the attributes from their arguments before running and read them back after, so the
user's code reads and writes `self.count` as written, and no tracer from inside a `lax` body is
left behind on the object: after the statement each attribute holds its final value.
"""

from __future__ import annotations

from runtime.staging import has_traced


class Attributes:
    def __init__(self, attributes: dict[str, tuple[object, str]]):
        self.labels = tuple(attributes)
        self.pairs = tuple(attributes.values())

    def values(self) -> tuple:
        return tuple(getattr(obj, name) for obj, name in self.pairs)

    def set(self, values) -> None:
        for (obj, name), value in zip(self.pairs, values):
            setattr(obj, name, value)

    def around(self, state, names, run):
        """Runs a staged statement with the attribute values appended to its state.

        `run(state, names, wrap)` runs the statement on the extended state; `wrap(fn, leading=0,
        returns_state=True)` turns a function of the variables into one of the extended state.
        Afterwards the attributes hold their final values; returns the variables. If the statement
        raises, an attribute left holding a traced value gets its first value back (a value traced
        inside a `lax` body must not stay on the object); Python values stay as Python left them.
        """
        n, before = len(state), self.values()

        def wrap(fn, leading: int = 0, returns_state: bool = True):
            def wrapped(*args):
                self.set(args[leading + n :])
                out = fn(*args[: leading + n])
                return (*out, *self.values()) if returns_state else out

            return wrapped

        try:
            out = run((*state, *before), (*names, *self.labels), wrap)
        except BaseException:
            for (obj, name), value in zip(self.pairs, before):
                if has_traced(getattr(obj, name)):
                    setattr(obj, name, value)
            raise
        self.set(out[n:])
        return out[:n]
