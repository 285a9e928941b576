"""Variables Python would leave unbound: `Undefined`, and `MaybeUnbound` in staged code."""

from __future__ import annotations

import jax


class Undefined:
    """Stands for a variable that is not bound yet.

    Generated code passes `Undefined('x')` into an `if` or a loop for a variable the statement
    binds but that has no value before it. If the variable is still undefined where it is read,
    `ld` raises the error Python would have raised.
    """

    __slots__ = ("symbol_name", "deleted", "like")

    def __init__(self, symbol_name: str, *, deleted: bool = False, like=None):
        self.symbol_name = symbol_name
        self.deleted = deleted  # unbound by a `del` (see `deleted`), for errors
        # The literal the function binds it to wherever it binds it (`converged = True`), if
        # every binding is one of a kind: a staged loop sizes it by that, not a probe.
        self.like = like

    def __repr__(self) -> str:
        return f"Undefined({self.symbol_name!r})"

    def __bool__(self):
        raise _unbound(self.symbol_name)


def _unbound(name: str) -> UnboundLocalError:
    from runtime.errors import python_error

    return python_error(
        UnboundLocalError(
            f"cannot access local variable '{name}' where it is not associated with a value"
        )
    )


def deleted(value, name: str) -> Undefined:
    """Functional form of `del name`: raises as Python would if it is unbound."""
    ld(value)
    return Undefined(name, deleted=True)


def ld(value, *, checked=True):
    """Reads a variable that may be undefined: returns its value, or raises as Python would
    (for a `MaybeUnbound`, when the program runs a path where it is unbound).

    `checked=False` where Python's scoping proves the variable bound (the function as written
    binds it on every path there; its early exits, turned into flags, hide that from the
    analyses of the converted code): a `MaybeUnbound` is bound on every path the program runs,
    so its value is read without a check when it runs."""
    if isinstance(value, Undefined):
        raise _unbound(value.symbol_name)
    if isinstance(value, MaybeUnbound):
        return value.read() if checked else value.value
    return value


@jax.tree_util.register_pytree_node_class
class MaybeUnbound:
    """A variable of staged code bound on some paths only (set in one branch of a traced `if`,
    first set in a staged loop): its value where it is bound, zeros where it is not, and a
    traced flag that says which. Reading it checks the flag when the program runs, and raises
    the UnboundLocalError Python would raise on a path where it is unbound."""

    def __init__(self, value, bound, name: str):
        self.value, self.bound, self.name = value, bound, name

    def tree_flatten(self):
        return (self.value, self.bound), self.name

    @classmethod
    def tree_unflatten(cls, name, children):
        return cls(*children, name)

    def read(self):
        from runtime import errors, staging

        name, where = self.name, errors.Site("read", depth=3).location()

        def error(_):
            error = _unbound(name)
            return UnboundLocalError(f"{error} (in converted code at {where})") if where else error

        staging.check_when_run(lambda bound: bound ^ True, error, self.bound)
        return self.value

    def __repr__(self) -> str:
        return f"MaybeUnbound({self.name!r})"


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
