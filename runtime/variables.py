"""The `Undefined` sentinel: the value of a variable that Python would leave unbound."""

from __future__ import annotations


class Undefined:
    """Stands for a variable that is not bound yet.

    Generated code passes `Undefined('x')` into an `if` or a loop for a variable the statement
    binds but that has no value before it. If the variable is still undefined where it is read,
    `ld` raises the error Python would have raised.
    """

    __slots__ = ("symbol_name",)

    def __init__(self, symbol_name: str):
        self.symbol_name = symbol_name

    def __repr__(self) -> str:
        return f"Undefined({self.symbol_name!r})"

    def __bool__(self):
        raise _unbound(self.symbol_name)


def _unbound(name: str) -> UnboundLocalError:
    return UnboundLocalError(
        f"cannot access local variable '{name}' where it is not associated with a value"
    )


def deleted(value, name: str) -> Undefined:
    """Functional form of `del name`: raises as Python would if it is unbound."""
    ld(value)
    return Undefined(name)


def ld(value):
    """Reads a variable that may be undefined: returns its value, or raises as Python would."""
    if isinstance(value, Undefined):
        raise _unbound(value.symbol_name)
    return value


class UndefinedReturnValue:
    """The return value of a function before any of its `return` statements has run.

    The return pass assigns a real value on every path before the function returns, so user code
    never sees this. A staged branch or loop that sets the return value on some paths only gets
    zeros of the right shape on the others: those paths have not returned (`do_return` is false
    there), so the zeros are never returned either.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "UndefinedReturnValue()"
