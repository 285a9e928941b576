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

import jax
import numpy as np

from runtime.errors import Site
from runtime.staging import has_traced, is_traced


def print_(*args, sep=" ", end="\n", file=None, flush=False):
    """Functional form of `print(*args, ...)`; traced arguments print when the program runs."""
    if not has_traced(args):
        builtins.print(*args, sep=sep, end=end, file=file, flush=flush)
        return
    traced = [i for i, a in enumerate(args) if is_traced(a)]

    def host_print(*values):
        shown = list(args)
        for i, value in zip(traced, values):
            shown[i] = np.asarray(value)
        builtins.print(*shown, sep=sep, end=end, file=file or sys.stdout, flush=flush)

    jax.debug.callback(host_print, *(args[i] for i in traced), ordered=True)


def assert_(test, msg=None):
    """Functional form of `assert test, msg()`; a traced test is checked when the program runs."""
    if not __debug__:
        return
    if not is_traced(test):
        if not test:
            raise AssertionError(msg()) if msg is not None else AssertionError()
        return
    site = Site("assert")
    text = str(msg()) if msg is not None else "assertion failed"
    where = site.location()
    message = f"{text} ({where})" if where else text

    def check(value):
        if not np.all(value):
            raise AssertionError(message)

    jax.debug.callback(check, test)
