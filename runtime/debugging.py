"""`print` and `assert` in converted code: Python for Python values, staged for traced ones.

A traced `print` becomes a `jax.debug.callback` that prints on the host, formatted as Python's
print would format the values, once per execution and in program order (`ordered=True`).

A traced `assert` becomes a host callback too (`jax.debug.callback`) that raises when the test is
false, with the message and the user's file:line. JAX's `checkify` was the alternative; it needs
every caller to wrap the function in `checkify.checkify` and handle the returned error, or
`jax.jit` rejects the check. A callback works in any jitted function as written; the failure
surfaces as the exception JAX raises for a failed callback (`jax.errors.JaxRuntimeError`), whose
message carries ours. Under `python -O` asserts do nothing, as in Python.
"""

from __future__ import annotations

import builtins
import sys
import types

import jax
import numpy as np

from runtime import staging
from runtime.errors import Site


def print_(*args, sep=" ", end="\n", file=None, flush=False):
    """Functional form of `print(*args, ...)`.

    Prints at once, as Python, unless it is part of a program being staged (an argument is
    traced, or the converted function was called with traced values): then it prints when the
    compiled program runs it, in order, with the values it has then (`jax.debug.callback`); in
    a staged branch, only when the branch is taken.
    """
    staged = [i for i, arg in enumerate(args) if _has_staged(arg)]
    if not staged and not staging.in_staged_program():
        builtins.print(*args, sep=sep, end=end, file=file, flush=flush)
        return
    values = [_values(args[i]) for i in staged]
    # What is not traced is shown as it is now (print calls str), not as it is when the program
    # runs: a list printed, then appended to, prints its items of now.
    now = [None if i in staged else str(arg) for i, arg in enumerate(args)]

    def host_print(taken, *concrete):
        if not np.all(taken):
            return
        shown = list(now)
        for i, value in zip(staged, concrete):
            shown[i] = _shown(args[i], value)
        builtins.print(*shown, sep=sep, end=end, file=file or sys.stdout, flush=flush)

    jax.debug.callback(host_print, staging.branch_taken(), *values, ordered=True)


def fstring(*parts) -> str:
    """An f-string: `f"a {x!r:>8} b"` is `fstring("a ", (x, "r", ">8"), " b")`.

    With Python values it is exactly the f-string. With traced values it is a `FormattedText`:
    the text Python makes of it now, which `print_` prints with the values the program has when
    it runs.
    """
    if not any(isinstance(p, tuple) and staging.is_staged(p[0]) for p in parts):
        return "".join(p if isinstance(p, str) else _field(*p) for p in parts)
    return FormattedText(parts)


class FormattedText(str):
    """An f-string of traced values: its text shows the tracers; printed, the values."""

    def __new__(cls, parts):
        text = "".join(p if isinstance(p, str) else _field_now(*p) for p in parts)
        self = super().__new__(cls, text)
        self.parts = parts
        return self

    def values(self) -> list:
        return [p[0] for p in self.parts if isinstance(p, tuple)]

    def render(self, values) -> str:
        values = iter(values)
        return "".join(
            p if isinstance(p, str) else _field(np.asarray(next(values))[()], *p[1:])
            for p in self.parts
        )


_CONVERSIONS = types.MappingProxyType({"": lambda v: v, "s": str, "r": repr, "a": ascii})


def _field(value, conversion: str, spec: str) -> str:
    return format(_CONVERSIONS[conversion](value), spec)


def _field_now(value, conversion, spec) -> str:
    if staging.is_staged(value):
        return _CONVERSIONS[conversion or "r"](value)  # a tracer has no format spec
    return _field(value, conversion, spec)


def _has_staged(leaf) -> bool:
    if isinstance(leaf, FormattedText):
        return any(staging.is_staged(v) for v in leaf.values())
    return staging.is_staged(leaf)


def _values(leaf):
    return leaf.values() if isinstance(leaf, FormattedText) else leaf


def _shown(leaf, value):
    if isinstance(leaf, FormattedText):
        return leaf.render(value)
    return np.asarray(value)


def assert_(test, msg=None):
    """Functional form of `assert test, msg()`; a traced test is checked when the program runs
    (in a staged branch, when the branch is taken)."""
    if not __debug__:
        return
    if not staging.is_staged(test):
        if not test:
            raise AssertionError(msg()) if msg is not None else AssertionError()
        return
    site = Site("assert")
    text = str(msg()) if msg is not None else "assertion failed"
    where = site.location()
    message = f"{text} ({where})" if where else text

    def check(taken, value):
        if np.all(taken) and not np.all(value):
            raise AssertionError(message)

    jax.debug.callback(check, staging.branch_taken(), test)
