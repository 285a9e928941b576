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
import functools
import io
import sys

import jax
import numpy as np

from runtime import effects, errors, staging, text
from runtime.errors import Site, StagingError


def print_(*args, sep=" ", end="\n", file=None, flush=False):
    """Functional form of `print(*args, ...)`.

    Prints at once, as Python, unless it is part of a program being staged (an argument holds a
    traced value, or the converted function was called with traced values): then it prints when
    the compiled program runs it, in order, with the values it has then (`jax.debug.callback`);
    in a staged branch, only when the branch is taken. Arguments are shown as `str` shows them
    when `print` runs; traced values in them (in lists, dicts, `text.DeferredText`) as their
    values when the program runs.
    """
    if not staging.in_staged_program() and not text.has_staged(args):
        builtins.print(*args, sep=sep, end=end, file=file, flush=flush)
        return
    shown = [text.str_(arg) for arg in args]  # str() of each argument, once, as print does
    staged, values = text.traced_parts(shown)

    def host_print(taken, *concrete):
        if not np.all(taken):
            return
        line = [str(arg) for arg in text.made_again(shown, staged, concrete)]
        builtins.print(*line, sep=sep, end=end, file=file or sys.stdout, flush=flush)

    staging.host_callback(host_print, staging.branch_taken(), *values, ordered=True, kind="print")
    if file is not None:
        staging.written_when_run(file)


def host_call(fn, /, *args, **kwargs):
    """`fn(*args, **kwargs)` for a standard-library function whose effect is on the host (a
    logging call, `warnings.warn`, `sys.stdout.write`): made at once, as Python, unless it is
    part of a program being staged; then when the program runs it (in a staged branch, only
    when the branch is taken), with the traced values in its arguments (and in text made from
    them) as their values then. Gives None there (the call's own result is the host's), but for
    a stream's `write` of text known while tracing: its length, as the stream's write gives
    (of text made from traced values the length is known only when the program runs: None)."""
    items = [*args, *kwargs.values()]
    if not staging.in_staged_program() and not text.has_staged(items):
        return fn(*args, **kwargs)
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, io.IOBase):
        if fn.__name__ == "writelines" and args and not isinstance(args[0], (list, tuple)):
            # Lines from a generator or another iterable: taken now, as the write takes them.
            args = (list(args[0]), *args[1:])
            items = [*args, *kwargs.values()]
        _check_written(owner, fn.__name__, args)
    traced, operands = text.traced_parts(items, arrays=True)

    def run(taken, *concrete):
        if not np.all(taken):
            return
        values = text.made_again(items, traced, concrete)
        fn(*values[: len(args)], **dict(zip(kwargs, values[len(args) :])))

    staging.host_callback(run, staging.branch_taken(), *operands, ordered=True, kind="print")
    if isinstance(owner, io.IOBase):  # `fh.write(text)`: a file, a buffer, sys.stdout
        staging.written_when_run(owner)
        if fn.__name__ == "write" and len(items) == 1 and type(items[0]) in (str, bytes):
            return len(items[0])  # what a text or byte stream's write gives
    return None


def _check_written(stream: io.IOBase, method: str, args) -> None:
    """Python's TypeError, raised while tracing, for what `stream.write`/`writelines` would
    refuse when the program runs (there it would be JAX's error from a host callback): text for
    a text stream, bytes for a binary one."""
    if method not in ("write", "writelines") or len(args) != 1:
        return
    texts = [args[0]] if method == "write" else list(args[0])
    binary = not isinstance(stream, io.TextIOBase)
    wanted = (bytes, bytearray, memoryview) if binary else str
    for value in texts:
        if not isinstance(value, wanted):
            kind = "a bytes-like object" if binary else "str"
            raise errors.python_error(
                TypeError(f"{method}() argument must be {kind}, not {type(value).__name__}")
            )


def effect(fn, /, *args, **kwargs):
    """`fn(*args, **kwargs)` for one of JAX's functions that make an effect of the program when
    it runs (`jax.debug.print`, `jax.debug.callback`, `io_callback`, checkify): called as it is,
    and recorded for code that must not be run again (see `runtime.peeling`)."""
    staging.made_effect()
    if staging.is_quiet() and _prints(fn):
        return None  # a loop body as a derivative recomputes it: the program printed already
    return fn(*args, **kwargs)


def _prints(fn) -> bool:
    """Whether `fn` is `jax.debug.print` or `jax.debug.callback` (or a partial of one): an
    effect with no value, which a quiet trace (`staging.quiet`) leaves out, as it leaves out
    converted prints. (`io_callback` gives values the computation uses: it stays.)"""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn is jax.debug.print or fn is jax.debug.callback


def _message(msg, where: str | None):
    """`msg()`, the message of an assert whose test is traced: made now, while the program is
    traced, where Python makes it only if the assertion fails. So it must do nothing else:
    change no Python state, print nothing (`log.append(...) or "bad x"` is refused). Library
    code it calls (`eqx.tree_pformat(...)`) is taken to make text only. A message that raises
    (`d['missing']`) raises only if the assertion fails, as in Python (as the text of the
    AssertionError then)."""
    watch = effects.Watch((msg,), ())
    try:
        with staging.watching(watch):
            message = msg()
    except (StagingError, staging.Retrace):
        raise
    except Exception as e:  # noqa: BLE001 - made the message of the failure, as Python would raise
        message = f"(making the assert's message raised {type(e).__name__}: {e})"
    # (A container too large to copy is not watched: a message that reads one is not refused.)
    if watch.made_effect or watch.snapshot.changes():
        raise errors.StagingError(
            "the message of an assert whose test is traced changes Python state or prints "
            f"({where or 'assert'}); Python makes the message only when the assertion fails, "
            "but the staged assert makes it while the program is traced, whatever the test "
            "gives. Make the message a plain text (an f-string of values), and do the rest "
            "outside the assert."
        )
    return message


def assert_(test, msg=None):
    """Functional form of `assert test, msg()`; a traced test is checked when the program runs
    (in a staged branch, when the branch is taken)."""
    if not __debug__:
        return
    test = staging.condition(test)  # a list of traced length, a range with a traced bound
    if not staging.is_staged(test):
        if not test:
            raise errors.python_error(
                AssertionError(msg()) if msg is not None else AssertionError()
            )
        return
    site = Site("assert")
    test = staging.scalar_predicate(test, site, "assert's test")  # Python's ValueError if not
    where = site.location()
    shown = text.str_(_message(msg, where)) if msg is not None else "assertion failed"
    values = shown.values if isinstance(shown, text.DeferredText) else []

    def error(_, *concrete):
        message = shown.render(list(concrete)) if values else shown
        return AssertionError(f"{message} ({where})" if where else message)

    staging.check_when_run(lambda value, *_: value ^ True, error, test, *values, kind="assert")
