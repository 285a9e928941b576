"""The one place that decides what is staged, and the checks staged state must pass."""

from __future__ import annotations

import collections.abc
import contextlib
import contextvars
import logging
import numbers
import types
import typing
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jax_core

from runtime import errors as errors_
from runtime import identity
from runtime.errors import Site, StagingError
from runtime.variables import MaybeUnbound, Undefined, UndefinedReturnValue


class Retrace(Exception):  # noqa: N818 - a request, not an error
    """Internal: a staged statement must be traced again; never an error of the user's code."""


CANNOT_STAGE = (
    Retrace,
    StagingError,
    jax.errors.JAXTypeError,  # a tracer where Python needs a value, a leaked tracer
    jax.errors.JAXIndexError,
    jax.errors.JaxprTypeError,
)
"""Exceptions that say code cannot be traced as written, as opposed to exceptions that running
it would raise in Python too (a `raise` in a branch, an IndexError): they are never caught to
try another way, or to raise later."""


# What the code being traced now is inside of. Context variables: every thread (and every
# asyncio task) traces with its own.
_loop_trip_counts: contextvars.ContextVar[tuple[tuple[int | None, bool], ...]] = (
    contextvars.ContextVar("loop_trip_counts", default=())
)
_branch_predicates: contextvars.ContextVar[tuple] = contextvars.ContextVar(
    "branch_predicates", default=()
)
_trackers: contextvars.ContextVar[tuple] = contextvars.ContextVar("trackers", default=())
_watches: contextvars.ContextVar[tuple] = contextvars.ContextVar("watches", default=())
_staged_program: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "staged_program", default=False
)
# A staged argument of the converted call that started the program being staged: deferred
# effects depend on it, so that under `jax.vmap` they happen once per element.
_witness: contextvars.ContextVar = contextvars.ContextVar("witness", default=None)
# The branch predicates `branch_taken` is computing now (a loop's test, computed where an
# effect asks): the test's own checks must not compute it again (see `branch_taken`).
_computing: contextvars.ContextVar[tuple] = contextvars.ContextVar("computing", default=())


# Whether the run-time checks traced now are ordered with the program's prints: where a
# converted function that prints is being traced (see `check_when_run`).
_ordered_checks: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "ordered_checks", default=False
)


def _prints(code: types.CodeType) -> bool:
    """Whether generated `code` (or code nested in it) may print: it calls `rt__.print_`, or
    names `print` (handed to other code: `map(print, xs)`). (Not cached: a cache would keep
    the generated code, and its file, alive; a few microseconds per call, while tracing.)"""
    if {"print_", "print"} & set(code.co_names):
        return True
    return any(_prints(c) for c in code.co_consts if isinstance(c, types.CodeType))


def call_staging(fn, args, kwargs):
    """`fn(*args, **kwargs)` for a converted function: if an argument is staged, the call is
    marked as part of a program being staged, so that its effects with no value (prints) happen
    when that program runs, in order, once per element under `jax.vmap`, not while it is
    traced."""
    direct = _from_converted.get()  # called by converted code (else by JAX, or the user)
    token = _from_converted.set(False) if direct else None  # what it calls is not
    recording, returned = identity.recording(), False
    try:
        result = _ordering_checks(fn, args, kwargs, direct)
        returned = True
        return result
    finally:
        identity.stop_recording(recording, returned)
        if token is not None:
            _from_converted.reset(token)


def _ordering_checks(fn, args, kwargs, direct: bool):
    """`_call_staging`, with the checks ordered with the prints where `fn` prints (see
    `check_when_run`)."""
    code = getattr(fn, "__code__", None)
    if code is None or _ordered_checks.get() or not _prints(code):
        return _call_staging(fn, args, kwargs, direct)
    token = _ordered_checks.set(True)
    try:
        return _call_staging(fn, args, kwargs, direct)
    finally:
        _ordered_checks.reset(token)


def _call_staging(fn, args, kwargs, direct: bool):
    # (The frame that calls `fn`: `errors` tells converted code's callers by this name.)
    if _staged_program.get():
        made = _jax_dicts.get()
        if not direct and made is not None and _has_dict((args, kwargs)):
            # Called back by JAX (`lax.scan(step, carry)`, `jax.vmap(f)`): its dicts are JAX's.
            made.update(_dicts_in((args, kwargs)))
        leaves = () if direct else jax.tree_util.tree_leaves(args)
        witness = next((leaf for leaf in leaves if is_staged(leaf)), None)
        if witness is None:
            return fn(*args, **kwargs)
        # Called back by JAX, on values of a trace of its own (a `custom_vjp`'s, which must not
        # close over the caller's values): its effects are batched like them.
        witness_token = _witness.set(witness)
        try:
            return fn(*args, **kwargs)
        finally:
            _witness.reset(witness_token)
    if not (has_staged(args) or has_staged(list(kwargs.values()))):
        return fn(*args, **kwargs)
    witness = next(leaf for leaf in jax.tree_util.tree_leaves((args, kwargs)) if is_staged(leaf))
    token, witness_token = _staged_program.set(True), _witness.set(witness)
    jax_made = not direct and _has_dict((args, kwargs))
    dicts = _jax_dicts.set(_dicts_in((args, kwargs)) if jax_made else {})
    floats, written = _python_floats.set({}), _written_when_run.set({})
    try:
        result = fn(*args, **kwargs)
        _check_still_open(_written_when_run.get())
        return result
    finally:
        _written_when_run.reset(written)
        _python_floats.reset(floats)
        _jax_dicts.reset(dicts)
        _witness.reset(witness_token)
        _staged_program.reset(token)


with jax_core.take_current_trace():  # the trace of eager evaluation, wherever this is imported
    EVAL = jax_core.find_top_trace(())
    """JAX's current trace where it evaluates eagerly (JAX makes one)."""
    EVAL_TRACE = type(EVAL)
    """Its type: `eager()` compares types, which stays exact should JAX make more than one."""


class _TopTrace:
    """JAX's current trace as `.trace`, read with `jax.extend.core.find_top_trace`."""

    __slots__ = ()

    @property
    def trace(self):
        return jax_core.find_top_trace(())


def _trace_context():
    """What holds JAX's current trace as its property `.trace`, read as cheaply as the public
    API allows.

    `jax.extend.core.find_top_trace(())` returns `jax.core.trace_ctx.trace` through two more
    Python calls, which cost more than a small function does: a converted function called on
    Python values asks on every call (see `transpiler._runtime_bridge`). So the context itself
    is read where JAX still offers it (deprecated, without a date) and agrees with
    `find_top_trace`; else the `find_top_trace` reader.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context = getattr(jax.core, "trace_ctx", None)
    try:
        reader = type(context).trace.fget
        agrees = reader(context) is jax_core.find_top_trace(())
    except Exception:  # noqa: BLE001 - any change in JAX: the public reader
        agrees = False
    return context if agrees else _TopTrace()


TRACE_CONTEXT = _trace_context()
READ_TRACE = type(TRACE_CONTEXT).trace.fget
"""`READ_TRACE(TRACE_CONTEXT)` is JAX's current trace, `jax.extend.core.find_top_trace(())`
(the property's getter called directly: in CPython 3.11 much cheaper than the property)."""


def raise_cannot_stage(error: BaseException, catcher: str = "try") -> None:
    """Raises the "cannot stage" error that `error` (caught by an `except` of converted code,
    or suppressed by a context manager's `__exit__`: `catcher` "with") stands for, if it stands
    for one (see `errors.as_cannot_stage`); else returns. An error a staged check raised as the
    program ran (`raised_when_run`; under `jax.vmap` without `jit`, at once) is refused there:
    it stands for some elements of a batch only."""
    if getattr(error, "_transpiler_when_run", False):
        inside, handler = {
            "try": ("a `try` whose `except` would catch it", "no `except`"),
            "with": ("a `with` whose manager's `__exit__` suppresses it", "no context manager"),
        }[catcher]
        raise StagingError(
            f"{type(error).__name__}: {error} — raised by a check the program makes when it "
            f"runs (a `raise`, an assert or an index under a traced condition), inside "
            f"{inside} ({Site(f'{catcher} statement')}). It is raised for the elements of a "
            "batch that take that path (under jax.vmap), or after the compiled function "
            f"returned (under jax.jit): {handler} around staged code can handle it for them "
            "alone. Test the condition instead of catching the error."
        ) from error
    explain_nnx(error)
    if not isinstance(error, TypeError):
        return  # the program's own (a ValueError whose text shows a tracer is still its own)
    found = errors_.as_cannot_stage(error)
    if found is not None:
        raise found from error


def explain_nnx(error: BaseException) -> None:
    """Adds to Flax NNX's error for a module, Variable or optimizer used under a trace other
    than its state's (which staging a statement makes: run as Python, there is one) what it
    means. It is raised where the branch runs, as the program's own errors are."""
    if "different trace level" in str(error) and not hasattr(error, "_transpiler_nnx"):
        error._transpiler_nnx = True
        explained = _NNX_NOTE.format(site=Site("staged statement"))
        if error.args and isinstance(error.args[0], str):  # in the text: what JAX shows of an
            error.args = (f"{error.args[0]}\n{explained}", *error.args[1:])  # error raised
        else:  # where the program runs (a callback's) carries no notes
            error.add_note(explained)


_NNX_NOTE = (
    "Flax NNX raised this while a staged statement was traced ({site}): it runs under a JAX "
    "trace of its own (a traced `if` around it, or, in a loop, a traced `break`, `continue` or "
    "`return` before it, which makes the rest of each iteration a staged branch), where NNX "
    "objects cannot be changed or split; the program raises it where that branch runs. Keep "
    "the NNX calls out of staged branches (run every iteration and mask the update with "
    "jnp.where), or use nnx.cond / nnx.while_loop."
)


def raised_when_run(error: BaseException) -> BaseException:
    """Marks `error` as raised by a staged check as the program ran (see
    `raise_cannot_stage`)."""
    error._transpiler_when_run = True
    return error


def eager() -> bool:
    """Whether JAX evaluates eagerly here: no transformation (`jit`, `grad`, `vmap`) is tracing,
    so every value is concrete and Python decides every condition, as it would unconverted."""
    return type(READ_TRACE(TRACE_CONTEXT)) is EVAL_TRACE


_quiet: contextvars.ContextVar[bool] = contextvars.ContextVar("quiet", default=False)


@contextlib.contextmanager
def quiet():
    """Traces the code inside without its effects (prints, checks): a loop body as a derivative
    recomputes it, after the program has run it once with them."""
    token = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(token)


def is_quiet() -> bool:
    """Whether the code is traced without its effects (see `quiet`)."""
    return _quiet.get()


class HostEffects:
    """What a program being traced for export does with its host callbacks, which JAX cannot
    serialize: the kinds it drops ("print", "assert", "raise", "check"), and the callbacks met
    while tracing, as (kind, the user's file:line or None, whether dropped)."""

    def __init__(self, drop=()):
        self.drop = frozenset(drop)
        self.met: list[tuple[str, str | None, bool]] = []


_host_effects: contextvars.ContextVar[HostEffects | None] = contextvars.ContextVar(
    "host_effects", default=None
)


@contextlib.contextmanager
def filtering_host_effects(effects: HostEffects):
    """Traces the code inside with the host callbacks of `effects.drop` left out, and records
    every callback in `effects.met` (for `transpiler.export`)."""
    token = _host_effects.set(effects)
    try:
        yield
    finally:
        _host_effects.reset(token)


def host_callback(fn, *args, ordered: bool = False, kind: str = "check", when=None) -> None:
    """`jax.debug.callback(fn, *args)`: an effect of the program when it runs (a print, a
    check), unless traced quietly (see `quiet`) or dropped (see `filtering_host_effects`).

    `kind` says what it is: "print", "assert", "raise" (a `raise` in a staged branch), or
    "check" (a run-time check Python makes too: an index in range, a variable bound). `when`:
    a traced bool; the call is made only where it holds (a `lax.cond`; under `jax.vmap`, whose
    `cond` of a batched predicate runs both branches, always).
    """
    if _quiet.get():
        return
    made_effect()
    if kind != "print":
        _unlogged_when_run()
    effects = _host_effects.get()
    if effects is not None:
        dropped = kind in effects.drop
        effects.met.append((kind, Site(kind).location(), dropped))
        if dropped:
            return
    if when is None:
        jax.debug.callback(fn, *args, ordered=ordered)
        return

    def call():
        jax.debug.callback(fn, *args, ordered=ordered)

    lax.cond(when, call, lambda: None)


# JAX logs the exception a callback raises ("jax.debug.callback failed", with a traceback into
# the runtime) before it raises it again from the program's call: the user's own failing assert,
# raise or check is reported once, by that exception, which names the user's line.
# JAX's loggers are named after the (private) modules of its callbacks; a test of the logged
# records catches a rename.
_CALLBACK_LOGGERS = (jax.debug.callback.__module__, jax.pure_callback.__module__)


class _RaisedWhenRun(logging.Filter):
    """Drops the records of exceptions a staged check raised as the program ran."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not getattr(error, "_transpiler_when_run", False)


def _unlogged_when_run() -> None:
    """Adds `_RaisedWhenRun` to JAX's callback loggers, once (the loggers hold it)."""
    for name in _CALLBACK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RaisedWhenRun) for f in logger.filters):
            logger.addFilter(_RaisedWhenRun())


def check_when_run(failing, error, *operands, kind: str = "check") -> None:
    """A check Python makes, made when the program runs, where the code making it runs (in a
    staged branch: when the branch is taken): `error(*values)` is raised if `failing(*values)`
    holds anywhere, `values` being the concrete values of `operands`.

    In a converted function that prints, ordered with the prints (`ordered_effects`): the first
    check that fails ends the run there, as Python's exception would, and the prints after it
    are not made (unordered, XLA may make a print the code makes after a failing check first,
    and report a later failing check). Elsewhere unordered: JAX refuses ordered effects in a
    program for more than one device (`shard_map`, `pmap`, sharded inputs), as it refuses the
    prints."""

    def check(taken, *values):
        if np.any(np.logical_and(taken, failing(*values))):
            raise raised_when_run(error(*values))

    taken = branch_taken()
    fails = _failing(failing, taken, operands)
    if fails is False:
        return  # it cannot fail: `failing` is false of the values, known now
    host_callback(check, taken, *operands, ordered=ordered_effects(), kind=kind, when=fails)


def _failing(failing, taken, operands):
    """Whether the check fails, computed in the program (a traced bool); False where that is
    known now; None where `failing` computes on NumPy values only. A host call costs tens of
    microseconds of every run of a small program (and a transfer from a GPU): the program makes
    it only where the check fails (see `host_callback`'s `when`)."""
    try:
        fails = jnp.any(jnp.logical_and(taken, failing(*operands)))
    except Exception:  # noqa: BLE001 - NumPy's functions of tracers, `bool` of one: on the host
        return None
    if not is_staged(fails):
        return False if not fails else None
    return fails


def ordered_effects() -> bool:
    """Whether a run-time check traced now is ordered with the prints (see `check_when_run`):
    inside a converted function that prints. (A staged `raise` always is: JAX hands an ordered
    callback's exception back with the notes that name the user's line.)"""
    return _ordered_checks.get()


def in_staged_program() -> bool:
    """Whether the code running now is being traced into a program (see `call_staging`)."""
    return _staged_program.get() or bool(_trackers.get())


def loop_trip_counts() -> tuple[int | None, ...]:
    """Trip counts (None: unknown) of the staged loops whose bodies are being traced now,
    outermost first; a loop that may stop early counts its most iterations."""
    return tuple(count for count, _ in _loop_trip_counts.get())


def loops_stopping_early() -> tuple[bool, ...]:
    """For each loop of `loop_trip_counts`, whether it may run fewer iterations (a while)."""
    return tuple(early for _, early in _loop_trip_counts.get())


@contextlib.contextmanager
def tracing_loop(trip_count: int | None, *, stops_early: bool = False):
    """Marks the code inside as running in the body of a staged loop being traced, of
    `trip_count` iterations (at most, if it `stops_early`)."""
    token = _loop_trip_counts.set((*_loop_trip_counts.get(), (trip_count, stops_early)))
    try:
        yield
    finally:
        _loop_trip_counts.reset(token)


_refusing_raises: contextvars.ContextVar[bool] = contextvars.ContextVar("refusing", default=False)


@contextlib.contextmanager
def refusing_raises():
    """Marks the code inside as traced only where it raises nothing: a staged branch that
    raises while traced refuses the staging (`errors.OuterRangeRefused`) rather than raising
    when the program runs it."""
    token = _refusing_raises.set(True)
    try:
        yield
    finally:
        _refusing_raises.reset(token)


def raises_refused() -> bool:
    """Whether the code is traced under `refusing_raises`."""
    return _refusing_raises.get()


@contextlib.contextmanager
def tracing_branch(predicate, when: bool = True):
    """Marks the code inside as a staged branch, taken when the traced bool `predicate` is
    `when`."""
    token = _branch_predicates.set((*_branch_predicates.get(), (predicate, when)))
    try:
        yield
    finally:
        _branch_predicates.reset(token)


@contextlib.contextmanager
def tracing_loop_body(test, trip_count: int | None = None):
    """Marks the code inside as the body of a staged `while` (of at most `trip_count`
    iterations, if known), which runs while `test()` (a traced bool, computed only if an effect
    asks) holds: under `jax.vmap` the loop goes on while any element's test holds, and the
    body's effects are made only for those."""
    with tracing_loop(trip_count, stops_early=True), tracing_branch(test):
        yield


def branch_taken():
    """A traced bool: whether the staged branches being traced now are all taken (True outside
    any). Effects with no value (a print) are made on condition of it: under `jax.vmap` a `cond`
    runs both branches, for every element."""
    taken = True
    witness = _witness.get()
    if witness is not None:  # True, but batched like the program's inputs
        first = jnp.ravel(jnp.asarray(witness))[:1]
        taken = jnp.logical_or(jnp.any(first != first), True)
    for predicate, when in _branch_predicates.get():
        if callable(predicate):  # computed where it is needed (see `tracing_loop_body`)
            if any(predicate is p for p in _computing.get()):
                # A check inside that test (`st[-1]` in `while len(st) > 0 and st[-1] > v`):
                # it is made where the test is evaluated, whose own branches decide it.
                continue
            token = _computing.set((*_computing.get(), predicate))
            try:
                with quiet():
                    predicate = predicate()
            finally:
                _computing.reset(token)
        taken = both(taken, predicate if when else negated(predicate))
    return taken


@contextlib.contextmanager
def tracking(tracker):
    """Marks the code inside as a staged block whose Python effects `tracker` records."""
    token = _trackers.set((*_trackers.get(), tracker))
    try:
        yield
    finally:
        _trackers.reset(token)


def trackers() -> tuple:
    """The effect trackers of the staged blocks being traced now, outermost first."""
    return _trackers.get()


@contextlib.contextmanager
def watching(watch):
    """Marks the code inside as run as Python under `watch` (a `runtime.effects.Watch`): what
    it does that running it again, staged, would do again is recorded there."""
    token = _watches.set((*_watches.get(), watch))
    try:
        yield
    finally:
        _watches.reset(token)


def watches() -> tuple:
    """The watches of the code running now (see `watching`), outermost first."""
    return _watches.get()


def made_effect(unseen: bool = False) -> None:
    """Records, in every watch of the code running now, that it made an effect of the program
    (a host callback: a print, a check) or, `unseen`, may have made one (library code)."""
    for watch in _watches.get():
        watch.effects = True
        if not unseen:
            watch.made_effect = True


def condition(value):
    """`value` as the condition of an if, a while or and/or/not: itself, or, for an object that
    knows its truth only as a traced bool (a list of traced length), that bool."""
    truth = getattr(type(value), "__staged_truth__", None)
    return value if truth is None else truth(value)


def is_traced(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def is_staged(value) -> bool:
    """Whether Python cannot know `value` now: the one test of what is staged.

    Python and NumPy values, and tracers that still hold a concrete value (`jax.grad` outside
    `jax.jit`), are Python's to decide; abstract tracers (`jax.jit`, `jax.vmap`) are staged.
    """
    return isinstance(value, jax.core.Tracer) and value.to_concrete_value() is None


def has_staged(tree) -> bool:
    """Whether any leaf of `tree` is staged (see `is_staged`)."""
    if type(tree) in (tuple, list):  # the common case, fast: a statement's state
        for value in tree:
            if type(value) in _PLAIN:
                continue
            if isinstance(value, jax.core.Tracer):
                if value.to_concrete_value() is None:
                    return True
            elif has_staged(value):
                return True
        return False
    if type(tree) in _PLAIN or isinstance(tree, collections.abc.Iterator):
        return False  # an iterator (a generator): what it yields is not there yet
    return any(is_staged(leaf) for leaf in jax.tree_util.tree_leaves(tree, is_leaf=_iterator))


_PLAIN = frozenset({int, float, bool, complex, str, type(None)})


def _iterator(value) -> bool:
    # Told apart before JAX flattens it: JAX warns that it will refuse iterators as leaves.
    return isinstance(value, collections.abc.Iterator)


def describe(value) -> str:
    """A short type for error messages: `float32[3]`, `int32[]`, `list`, `None`."""
    if isinstance(value, Undefined):
        return "undefined"
    if isinstance(value, MaybeUnbound):
        return f"bound on some paths only (to {describe(value.value)})"
    if isinstance(value, UndefinedReturnValue):
        return "nothing yet (that path has not returned)"
    if value is None:
        return "None"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        dims = ",".join(str(d) for d in value.shape)
        return f"{np.dtype(value.dtype).name}[{dims}]"
    if isinstance(value, str):
        return f"the str {value!r}" if len(value) <= 40 else "a str"
    if isinstance(value, bool | numbers.Number):
        return f"Python {type(value).__name__} {value!r}"
    return f"a {type(value).__name__}"


def check_same_dtypes(a, b, what: str, site) -> None:
    """Raises StagingError where arrays `a` and `b` (of one shape), one of which a traced
    choice gives (`min(a, b)`, `a or b`), have different dtypes, neither a Python number's: the
    result's dtype would depend on which is chosen, where Python gives each its own type. (A
    Python number promotes to the other's dtype, as in a staged `if`.)"""
    given = (a, b)
    a, b = jnp.asarray(a), jnp.asarray(b)
    weak = jax.typeof(a).weak_type, jax.typeof(b).weak_type
    target = jnp.result_type(dtype_like(a), dtype_like(b))
    for value, w in zip(given, weak):
        if w:  # a Python number takes the other's dtype (the same one too): its value must fit
            check_fits(value, target)
    if a.dtype == b.dtype:
        return
    note = ""
    if any(weak):
        if all(joins_as(jax.typeof(v), target) for v in (a, b)):
            return
        note = _join_note(a, b, target)
    cast_to = np.dtype(target if any(weak) else a.dtype).name
    raise StagingError(
        f"{what} are {describe(a)} and {describe(b)} ({site}); with traced values the result "
        "is one of them, chosen in the graph, so they must have the same dtype (Python would "
        f"give each its own){note}; cast the array, e.g. with .astype(jnp.{cast_to})."
    )


_PYTHON_ZERO = types.MappingProxyType({"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j})  # by kind


def keeps_dtype(dtype, target) -> bool:
    """Whether a strongly typed array of `dtype` may become `target` where a weakly typed value
    (a Python number's) joins it in a staged choice: only where it stays `dtype`. Python gives
    the array back as it is where it takes the array's path, and an int16 made a float32 (by a
    Python float on the other path) computes differently afterwards (`c * 1000` wraps as an
    int16, not as a float32), and so does a float32 made a complex64. The one exception: a bool
    made an int, which keeps its values, 0 and 1 (a Python bool that became traced is counted
    up that way, `hits = False` ... `hits = hits + 1`; `~` of it differs, documented)."""
    dtype, target = np.dtype(dtype), np.dtype(target)
    return dtype == target or (dtype.kind == "b" and target.kind in "iu")


def _join_note(a, b, target) -> str:
    """Why arrays `a` and `b`, one weakly typed, cannot be joined as `target`."""
    weak = jax.typeof(a).weak_type, jax.typeof(b).weak_type
    if all(weak):  # a Python bool and a Python float
        return (
            f" (the Python bool would become a {np.dtype(target).name}, which prints and "
            "computes as a float: `False * u8` is a uint8 in Python, `0.0 * u8` a float32)"
        )
    strong = np.dtype((b if weak[0] else a).dtype).name
    return (
        f" (the Python number would make the {strong} a {np.dtype(target).name}, which "
        f"computes differently from the {strong} Python gives back where it takes it)"
    )


def joins_as(aval, target) -> bool:
    """Whether a value of `aval` may become `target` where a staged choice joins it with another
    (see `keeps_dtype`): a Python number widens to it (`1` to a float32), but a bool, also a
    Python bool (`x > 0` of a Python float), becomes only an int: `False` made `0.0` would
    compute and print as a float (`False * u8` is a uint8 in Python, `0.0 * u8` a float32)."""
    if aval.weak_type and np.dtype(aval.dtype).kind != "b":
        return True
    return keeps_dtype(aval.dtype, target)


def check_fits(x, dtype) -> None:
    """Raises StagingError if `x`, a value known while tracing (a Python number), changes its
    value made a `dtype`: 300 is 44 as a uint8, 70000 is 4464 as an int16, 0.5 is 0 as an
    int32, 1e6 is inf as a float16, 1j is 0 as a float32, where Python keeps the number.
    (Rounding a float to a narrower float is the weak type's promotion, as JAX's.) A traced
    value is not known: JAX's cast."""
    known = (jax.Array, np.ndarray, np.generic, int, float, complex)
    if isinstance(x, (jax.core.Tracer, bool)) or not isinstance(x, known):
        return
    dtype = np.dtype(dtype)
    if isinstance(x, int):
        if not jnp.issubdtype(dtype, jnp.number) or _int_fits(x, dtype):
            return
        value = np.asarray(x, object)
    else:
        value = np.asarray(x)
        numeric = jnp.issubdtype(value.dtype, jnp.number) and jnp.issubdtype(dtype, jnp.number)
        if not numeric or value.size == 0:  # (bfloat16's NumPy kind is "V": ask JAX)
            return
        if _fits(value, dtype):
            return
    shown = value.item() if value.size == 1 else f"an array of {value.dtype}"
    where = errors_.calling_line()
    raise StagingError(
        f"the Python number {shown} would be made a {dtype.name} here"
        f"{' (' + where + ')' if where else ''}, whose values do not include it: it takes the "
        f"dtype of the {dtype.name} array it is chosen with or joins (in a staged if, a "
        "conditional expression, min/max, and/or, a loop's state), or JAX's default dtype as "
        "staged state, and would wrap, be cut, overflow or underflow, "
        f"where Python keeps the number. Cast the array first (x.astype(jnp.int32), "
        "x.astype(jnp.float32)), or use a number the dtype holds."
    )


def _int_fits(x: int, dtype: np.dtype) -> bool:
    """Whether the Python int `x` keeps its value made a `dtype`: in range for an integer
    dtype; exactly for a floating-point one (16777217 is 16777216 as a float32: an int is a
    number Python keeps exact, where a float rounds as JAX's weak type rounds it)."""
    if jnp.issubdtype(dtype, jnp.integer):
        info = np.iinfo(dtype)
        return int(info.min) <= x <= int(info.max)
    real = np.empty(0, dtype).real.dtype  # of a complex dtype, its parts
    try:
        cast = np.asarray(float(x)).astype(real)
    except OverflowError:  # beyond every float
        return False
    return bool(np.isfinite(cast)) and int(cast) == x


def _fits(value: np.ndarray, dtype: np.dtype) -> bool:
    """Whether the known numbers `value` keep their values made a `dtype` (see `check_fits`):
    in range and whole for an integer dtype, with no imaginary part for a real one."""
    if value.dtype.kind == "c" and not jnp.issubdtype(dtype, jnp.complexfloating):
        if np.any(value.imag):
            return False
        value = value.real
    parts = (value.real, value.imag) if value.dtype.kind == "c" else (value,)
    if jnp.issubdtype(dtype, jnp.integer):
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):  # NaN: not whole, not in range
            return all(
                np.all((p >= info.min) & (p <= info.max) & (p == np.trunc(p))) for p in parts
            )
    # Rounded, as the weak type's promotion rounds; not overflowing to inf, nor underflowing
    # to 0 or to a subnormal far from it (1e-8 as a float16).
    largest = float(jnp.finfo(dtype).max)
    real = np.empty(0, dtype).real.dtype  # of a complex dtype, its parts
    for p in parts:
        p = np.asarray(p, np.float64)
        finite = np.isfinite(p)
        if not np.all(~finite | (np.abs(p) <= largest)):
            return False
        # Subnormals too: XLA's CPU backend flushes float32 and bfloat16 ones to 0. (An
        # infinity or NaN is kept as it is: `cast - p` is NaN there, and not counted.)
        tiny = float(jnp.finfo(real).tiny)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            cast = p.astype(real).astype(np.float64)
            error = np.abs(cast - p) > 0.01 * np.abs(p)
        if np.any(finite & (p != 0) & ((np.abs(p) < tiny) | error)):
            return False
    return True


def dtype_like(x):
    """Something `jnp.result_type` promotes as it would promote `x` (an array or a Python
    number), weak type included."""
    aval = jax.typeof(x)
    if not aval.weak_type:
        return x.dtype  # (a Python number is weakly typed)
    return _PYTHON_ZERO[np.dtype(aval.dtype).kind]


def joins_strongly(types, dtype) -> bool:
    """Whether a staged choice between values of `types` (their avals) that gives `dtype` is
    strongly typed: one of them is a strongly typed array of that dtype, which keeps its type
    (a Python number joined with a float32 is a float32). Otherwise the choice is weakly typed
    and computes afterwards as either value would: two Python numbers, or a bool array and a
    Python int (`y * u8` is a uint8 whichever was chosen, as in Python)."""
    return any(not t.weak_type and t.dtype == dtype for t in types)


def takes_dtype(x, dtype) -> bool:
    """Whether JAX's promotion of `x` with `dtype` gives `dtype`: a weakly typed `x` (a Python
    number's type) widened to it (`0` made a float32), not cut to it (`0.5` made an int32)."""
    return jnp.result_type(dtype_like(x), dtype) == dtype


class WeakDtype(typing.NamedTuple):
    """A dtype to cast to that stays weakly typed, as the Python number it stands for."""

    dtype: np.dtype


_PYTHON_ONE = types.MappingProxyType({"b": True, "i": 1, "u": 1, "f": 1.0, "c": 1 + 0j})


def cast_leaves(tree, casts: dict):
    """`tree` as arrays (see `as_arrays`), its leaves at the positions `casts` names cast to
    theirs (dtypes or `WeakDtype`s); a Python number among them that would change its value is
    refused (`check_fits`: its value is known as the number it is, not as the array it makes)."""
    given = jax.tree_util.tree_leaves(tree)
    leaves, treedef = jax.tree_util.tree_flatten(as_arrays(tree))
    for j, number in enumerate(given if len(given) == len(leaves) else ()):
        if j in casts:
            dtype = casts[j]
            check_fits(number, dtype.dtype if isinstance(dtype, WeakDtype) else dtype)
    leaves = [cast(leaf, casts[j]) if j in casts else leaf for j, leaf in enumerate(leaves)]
    return in_key_order(jax.tree_util.tree_unflatten(treedef, leaves), tree)


def cast(x, dtype):
    """`x` as `dtype` (a strong cast), or as the weakly typed `WeakDtype.dtype`: a weakly typed
    `x` times the Python one of that kind, which JAX promotes to it and keeps weak (exact).
    A number known now (a Python number's) must keep its value (see `check_fits`)."""
    check_fits(x, dtype.dtype if isinstance(dtype, WeakDtype) else dtype)
    if not isinstance(dtype, WeakDtype):
        return lax.convert_element_type(x, dtype)
    if not jax.typeof(x).weak_type:
        return python_number(x, dtype.dtype)
    if x.dtype == dtype.dtype:
        return x
    return x * _PYTHON_ONE[np.dtype(dtype.dtype).kind]


def python_number(x, dtype=None):
    """`x` (an array) as the Python number of its kind (or of `dtype`'s) stands in staged code:
    weakly typed, of JAX's dtype for that kind of Python number (`int(h)` is a weakly typed
    int32, which an int8 array meets as an int8: `int(h) * i8` is an int8, as in Python). A bool
    stays a (strong) bool array; a dtype that is not JAX's for its kind (a float16) is a strong
    cast. `lax.full_like` of a Python zero casts a scalar `x` to the zero's weak type (an array
    element by element: `jax.vmap` of it over each axis, which is one weak cast)."""
    zero = _PYTHON_ZERO[np.dtype(dtype or x.dtype).kind]
    if type(zero) is bool or (dtype is not None and jnp.result_type(zero) != dtype):
        return lax.convert_element_type(x, dtype or x.dtype)

    def weakly(e):
        return lax.full_like(zero, e, shape=())

    for _ in range(jnp.ndim(x)):
        weakly = jax.vmap(weakly)
    return weakly(x)


def describe_tree(value) -> str:
    """Like `describe`, through tuples, lists and dicts: `(float32[], int32[3])`."""
    if isinstance(value, list):
        return "[" + ", ".join(describe_tree(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(describe_tree(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe_tree(v)}" for k, v in value.items()) + "}"
    return describe(value)


def shapes_of(tree):
    """The tree of `jax.ShapeDtypeStruct` (weak types kept) of an array tree."""
    return jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=jax.typeof(x).weak_type), tree
    )


def zeros_like(shapes):
    """Zeros shaped like a tree of `jax.ShapeDtypeStruct`: a placeholder never read. A weakly
    typed one stays weakly typed, so it promotes like the Python number it stands in for."""

    def zeros(s):
        if getattr(s, "weak_type", False):
            return lax.full(s.shape, _PYTHON_ZERO[np.dtype(s.dtype).kind])
        return jnp.zeros(s.shape, s.dtype)

    return jax.tree_util.tree_map(zeros, shapes)


def is_array_leaf(value) -> bool:
    return isinstance(value, jax.Array | np.ndarray | np.generic | bool | int | float | complex)


def is_array_tree(value) -> bool:
    """Whether `value` can be staged state: a pytree (maybe empty) whose leaves are all arrays,
    or a container of arrays and other Python objects that are held as they are (an Equinox
    module's activation function): see `Held`."""
    if isinstance(value, Undefined):
        return False
    leaves = jax.tree_util.tree_leaves(value)
    arrays = [is_array_leaf(leaf) for leaf in leaves]
    if all(arrays):
        return True
    return any(arrays) and not (len(leaves) == 1 and leaves[0] is value)


@jax.tree_util.register_pytree_node_class
class Held:
    """A leaf of staged state that is not an array (a function in a model): a tree node with no
    children, the object in its structure. `lax` passes it through, and trees holding different
    objects have different structures, so staged state keeps the very same object or is refused
    (as a branch or an iteration that replaces it is). Generated code never sees one: `released`
    puts the object back."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        if not isinstance(other, Held):
            return NotImplemented
        same = self.obj is other.obj
        if not same and type(self.obj) is type(other.obj) and isinstance(self.obj, str | bytes):
            same = self.obj == other.obj
        return same

    def __hash__(self):
        return hash(self.obj) if isinstance(self.obj, str | bytes) else id(self.obj)

    def __repr__(self):
        return f"Held({self.obj!r})"

    def tree_flatten(self):
        return (), self

    @classmethod
    def tree_unflatten(cls, held, children):
        return held


def as_arrays(tree):
    """Python numbers and NumPy arrays in `tree` -> JAX arrays (numbers stay weakly typed);
    other leaves -> `Held`."""
    out = jax.tree_util.tree_map(
        lambda leaf: _as_array(leaf) if is_array_leaf(leaf) else Held(leaf), tree
    )
    return in_key_order(out, tree)


def _as_array(leaf):
    """A JAX array of `leaf`; a Python number it would change (1e39 is inf as a float32, 2**31
    no int32) is refused, where Python keeps the number."""
    if type(leaf) in (int, float, complex):
        check_fits(leaf, jnp.result_type(type(leaf)))
    elif isinstance(leaf, (np.generic, np.ndarray)):  # an int64 made an int32 without x64
        check_fits(leaf, jax.dtypes.canonicalize_dtype(leaf.dtype))
    return jnp.asarray(leaf)


def released(tree):
    """`tree` with the objects `as_arrays` held put back."""
    if not any(isinstance(x, Held) for x in _nodes(tree)):
        return tree
    out = jax.tree_util.tree_map(
        lambda x: x.obj if isinstance(x, Held) else x, tree, is_leaf=lambda x: isinstance(x, Held)
    )
    return in_key_order(out, tree)


def _nodes(tree):
    return jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, Held))


def jaxpr_of(fn, *args) -> jax_core.ClosedJaxpr:
    """`jax.make_jaxpr(fn)(*args)`: `fn` (giving a list of arrays) traced on abstract values
    of `args`' leaves (or on the leaves, where they are abstract values: `ShapedArray`s); what
    it closes over (the enclosing trace's values) are the constants. Traced directly, without
    the `jax.jit` that `jax.make_jaxpr` builds around `fn` each call (its signature, caches and
    argument checks cost a few times what a small branch's own operations do); `jax.make_jaxpr`
    where JAX no longer offers the direct way."""
    if _trace_to_jaxpr is None:
        return jax.make_jaxpr(fn)(*jax.tree_util.tree_map(_as_struct, args))
    leaves, tree = jax.tree_util.tree_flatten(args)
    debug = jax_core.DebugInfo("a staged branch or loop", "staged code", None, None)

    def flat(*leaves_):
        return fn(*jax.tree_util.tree_unflatten(tree, leaves_))

    abstract = jax.core.ShapedArray
    avals = [leaf if isinstance(leaf, abstract) else jax.typeof(leaf) for leaf in leaves]
    jaxpr, _, consts = _trace_to_jaxpr(_linear_util.wrap_init(flat, debug_info=debug), avals)
    return jax_core.ClosedJaxpr(jaxpr, consts)


def _as_struct(leaf):
    """A `ShapedArray` leaf as the `jax.ShapeDtypeStruct` `jax.make_jaxpr` takes; others as they
    are."""
    if isinstance(leaf, jax.core.ShapedArray):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, weak_type=leaf.weak_type)
    return leaf


def eval_shape(fn, *args):
    """`jax.eval_shape(fn, *args)` (the types of what `fn` gives, as `jax.ShapeDtypeStruct`s),
    traced as `jaxpr_of` traces."""
    trees = []
    closed = jaxpr_of(flattened(fn, trees), *args)
    shapes = [
        jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.out_avals
    ]
    return jax.tree_util.tree_unflatten(trees[0], shapes)


try:
    from jax.extend import linear_util as _linear_util
    from jax.interpreters.partial_eval import trace_to_jaxpr_dynamic as _trace_to_jaxpr
except ImportError:  # pragma: no cover - a JAX without them: `jax.make_jaxpr`
    _trace_to_jaxpr = None


def flattened(fn, trees: list):
    """`fn` giving the leaves of its output, each call's tree structure appended to `trees`:
    traced so (`jax.make_jaxpr`), the shapes JAX gives back are leaves, not the output's
    objects built of `ShapeDtypeStruct`s (a dataclass whose `__post_init__` makes its field an
    array cannot be)."""

    def run(*args):
        leaves, tree = jax.tree_util.tree_flatten(fn(*args))
        trees.append(tree)
        return leaves

    return run


def fresh(tree):
    """A copy of the containers of `tree` (same leaves): staged code never mutates the caller's."""
    leaves, treedef = jax.tree_util.tree_flatten(tree, is_leaf=lambda x: x is None)
    return in_key_order(jax.tree_util.tree_unflatten(treedef, leaves), tree)


def key_orders(tree):
    """The order of the keys of every dict in `tree` (through lists, tuples, dicts and the other
    pytree nodes: dataclasses, modules), as a hashable value; None where it holds no dict. JAX
    rebuilds a dict with its keys sorted; Python keeps them in the order they were inserted,
    which `list(d)`, `d.values()` and printing show. (A variable bound on some paths only has
    the order of its value.)"""
    if not _has_dict(tree):
        return None
    return _orders(tree)


def _orders(tree):
    if isinstance(tree, MaybeUnbound):
        return _orders(tree.value)
    if isinstance(tree, dict):
        return ("dict", tuple(tree), tuple(_orders(v) for v in tree.values()))
    children = _children(tree)
    if not children:
        return None
    inner = tuple(_orders(v) for v in children)
    return ("items", (), inner) if any(o is not None for o in inner) else None


def _has_dict(tree) -> bool:
    leaves = jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, dict))
    return any(isinstance(leaf, dict) for leaf in leaves)


def _children(node) -> list | None:
    """The nodes directly under a pytree node (None: a leaf)."""
    if isinstance(node, (list, tuple)):
        return list(node)
    if isinstance(node, dict):
        return list(node.values())
    if node is None or is_array_leaf(node) or isinstance(node, str):
        return None
    children, _ = jax.tree_util.tree_flatten(node, is_leaf=lambda x: x is not node)
    return None if len(children) == 1 and children[0] is node else children


def in_key_order(tree, template):
    """`tree` (a tree JAX rebuilt from `template`'s structure, or one of the same structure)
    with the keys of each of its dicts put in the order of `template`'s dict in its place, in
    place; returns `tree`."""
    if _has_dict(template):
        _reorder(tree, template)
    return tree


def _reorder(tree, template) -> None:
    if isinstance(tree, MaybeUnbound):
        tree = tree.value
    if isinstance(template, MaybeUnbound):
        template = template.value
    if isinstance(tree, dict) and isinstance(template, dict):
        if tree is not template and made_by_jax(template):
            _jax_dicts.get()[id(tree)] = tree  # a copy of one JAX made, as a branch gets it
        if list(tree) != list(template) and tree.keys() == template.keys():
            items = [(key, tree[key]) for key in template]
            tree.clear()
            tree.update(items)
        for key, value in tree.items():
            if key in template:
                _reorder(value, template[key])
        return
    if isinstance(tree, dict) or isinstance(template, dict):
        return
    if not (isinstance(tree, (list, tuple)) and isinstance(template, (list, tuple))):
        if type(tree) is not type(template):
            return
    mine, theirs = _children(tree), _children(template)
    if mine and theirs and len(mine) == len(theirs):
        for value, like in zip(mine, theirs):
            _reorder(value, like)


_from_converted: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "from_converted", default=False
)


@contextlib.contextmanager
def calling_converted():
    """Around a call converted code makes of a converted function (`rt__.call`): the dicts it
    is given are the caller's, not ones JAX rebuilt."""
    token = _from_converted.set(True)
    try:
        yield
    finally:
        _from_converted.reset(token)


# The dicts JAX rebuilt (their keys sorted) as it handed the program being staged its
# arguments, and the copies the runtime made of them, by id (held: no id is reused meanwhile).
_jax_dicts: contextvars.ContextVar[dict | None] = contextvars.ContextVar("jax_dicts", default=None)


# The traced values `float(x)` made of traced arrays in the program being staged, by id (held:
# no id is reused meanwhile).
_python_floats: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "python_floats", default=None
)


# The files and buffers (`io.StringIO`) the program being staged writes to when it runs (a
# print to a file, `fh.write(...)`), by id, with the user's line of the first such write.
_written_when_run: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "written_when_run", default=None
)


def written_when_run(target) -> None:
    """Records that the program being staged writes to `target` when it runs, here."""
    written = _written_when_run.get()
    if written is not None and id(target) not in written:
        written[id(target)] = (target, Site("write").location())


def writes_when_run() -> bool:
    """Whether the program being staged writes to a file or buffer when it runs."""
    return bool(_written_when_run.get())


def refuse_read_of_written(target, what: str) -> None:
    """StagingError if the program being staged writes to `target` when it runs (see
    `written_when_run`): `what` (`buf.getvalue()`), traced now, would read it without that
    text."""
    written = _written_when_run.get()
    found = written.get(id(target)) if written else None
    if found is None or found[0] is not target:
        return
    where = f" (at {found[1]})" if found[1] else ""
    raise StagingError(
        f"{what} reads or changes the {type(target).__name__} that the program writes to{where} "
        "when it runs: a write in staged code (a print to a file, a write call) is made when "
        "the compiled program runs, after the code that reads it here was traced, so the read "
        "would not see it. Read it after the converted function returns, or build the text as "
        "a string (or a list of strings) and return it."
    )


def _check_still_open(written: dict) -> None:
    for target, where in written.values():
        if getattr(target, "closed", False):
            place = f" at {where}" if where else ""
            raise StagingError(
                f"The program writes to a {type(target).__name__}{place} when it runs, but the "
                "file is closed before then (a `with` block or a close() around staged code "
                "closes it while the program is traced, before it runs). Open the file outside "
                "the converted function and pass it in, or return the text and write it after."
            )


def python_float(value):
    """`value`, the traced result of `float(x)`, marked as such: text shows it as Python shows
    the float of `x`'s value (every digit of a float32's value, `2.7111098766326904`), where
    another Python float in staged code shows as its shortest text (see `text`)."""
    made = _python_floats.get()
    if made is not None:
        made[id(value)] = value
    return value


def is_python_float(value) -> bool:
    """Whether `value` is a traced `float(x)` of the program being staged (`python_float`)."""
    made = _python_floats.get()
    return made is not None and made.get(id(value)) is value


def made_by_jax(value) -> bool:
    """Whether `value` is a dict JAX rebuilt (its keys sorted) as it handed the program being
    staged its arguments (`jax.jit`, `jax.grad`, `jax.vmap` of a converted function), or a copy
    the runtime made of one (a loop body's, a branch's)."""
    made = _jax_dicts.get()
    return made is not None and id(value) in made


def _dicts_in(tree) -> dict[int, dict]:
    found, todo = {}, [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            found[id(node)] = node
        todo.extend(_children(node) or ())
    return found


def scalar_predicate(pred, site: Site, role: str):
    """A staged predicate as a boolean scalar, as Python's truth test would read it."""
    pred = jnp.asarray(condition(pred))
    if pred.size != 1:
        line = site.source_line()
        raise StagingError(
            f"the {role} is {describe(pred)} ({site}{f': `{line}`' if line else ''}); a "
            "condition must be a single value, as in Python. Reduce it first, e.g. with "
            "jnp.any(...) or jnp.all(...)."
        )
    if pred.shape:
        pred = pred.reshape(())
    return truths(pred)


def equal_truth(a, b):
    """The truth of `a == b` as Python's `in` and tuple comparison take it: the same object is
    equal to itself (a NaN, None); tuples item by item (`(3, 3.0) in enumerate(x)`); a Python
    bool where Python decides it, else a traced one."""
    if a is b:
        return True
    if type(a) is tuple and type(b) is tuple:
        if len(a) != len(b):
            return False
        truths = [equal_truth(x, y) for x, y in zip(a, b)]
        if not any(is_staged(t) for t in truths):
            return all(truths)
        result = True
        for truth in truths:
            result = both(jnp.asarray(result), jnp.asarray(truth))
        return result
    equal = a == b
    if not is_staged(equal):
        return bool(equal)
    return scalar_predicate(equal, Site("=="), "comparison")


def truths(values):
    """The truth of each element of `values` (an array), as Python's truth test reads a
    number."""
    return values if values.dtype == jnp.bool_ else _nonzero(values)


# The signed integer of each floating-point width, for `_nonzero`.
_BITS = types.MappingProxyType({2: jnp.int16, 4: jnp.int32, 8: jnp.int64})


def _nonzero(x):
    """`x != 0`, as Python's truth test reads a number. A real float is read by its bits:
    XLA on a CPU flushes a subnormal to zero in a comparison (`1e-40 != 0` is false there),
    where Python's `bool(1e-40)` is true. NaN is true, -0.0 false.

    The bits, as a signed integer, are nonzero and not the sign bit alone (-0.0, the smallest
    integer) exactly where `abs` of them is positive (that of the smallest integer wraps to
    itself). The plainer `bits & 0x7fff... != 0` is turned back into a float comparison with
    0.0 by LLVM wherever the kernel XLA fuses it into also reads `x` as a float (`x or y`: a
    select of `x`), and that comparison flushes subnormals."""
    dtype = np.dtype(x.dtype)
    if not (jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize in _BITS):
        return x != 0
    bits = lax.bitcast_convert_type(x, _BITS[dtype.itemsize])
    return lax.abs(bits) > 0


def both(a, b, *, tested: bool = False):
    """`a & b` of two traced booleans, as one `and` (`jnp.logical_and` would go through its own
    jitted function and cast a weakly typed operand first: more to trace, more in the graph),
    typed as `jnp.logical_and` types it. `tested`: the result is only tested (a loop's
    condition), so it may stay weakly typed where both operands are, with no cast."""
    pair = _bools(a, b, tested)
    return jnp.logical_and(a, b) if pair is None else lax.bitwise_and(*pair)


def either(a, b, *, tested: bool = False):
    """`a | b` of two traced booleans (see `both`)."""
    pair = _bools(a, b, tested)
    return jnp.logical_or(a, b) if pair is None else lax.bitwise_or(*pair)


def negated(a):
    """`~a` of a traced boolean (see `both`)."""
    if isinstance(a, jax.Array) and a.dtype == jnp.bool_:
        return lax.bitwise_not(a)
    return jnp.logical_not(a)


def where(pred, x, y):
    """`jnp.where(pred, x, y)`, typed as it types it; one `select` where `pred` is a boolean
    scalar or array of the shape of `x` and `y` (see `_one_dtype`), without `jnp.where`'s
    jitted function (a trace of its own for each new combination of types, and a call in the
    graph)."""
    pair = _one_dtype(x, y)
    if pair is None or not (
        isinstance(pred, jax.Array)
        and pred.dtype == jnp.bool_
        and pred.shape in ((), pair[0].shape)
    ):
        return jnp.where(pred, x, y)
    return lax.select_n(pred, pair[1], pair[0])


def compare(op, a, b):
    """`op(a, b)` for `op` one of `lax.lt`, `lax.gt`, `lax.le`, `lax.ge`, `lax.eq`, `lax.ne`,
    as the `jnp` comparison of that name computes it (`jnp.less(a, b)` ...), without its
    jitted function where `a` and `b` promote to one dtype as `_one_dtype` tells."""
    pair = _one_dtype(a, b)
    if pair is None or np.dtype(pair[0].dtype).kind == "c":  # jnp orders complex numbers
        return _JNP_COMPARISONS[op](a, b)
    return op(*pair)


_JNP_COMPARISONS = types.MappingProxyType(
    {
        lax.lt: jnp.less,
        lax.gt: jnp.greater,
        lax.le: jnp.less_equal,
        lax.ge: jnp.greater_equal,
        lax.eq: jnp.equal,
        lax.ne: jnp.not_equal,
    }
)


def _one_dtype(x, y):
    """(x, y) as JAX arrays of one shape and one dtype, as `jnp`'s promotion makes them: of one
    dtype already (weakly typed or not: an operation of the two is strongly typed where one is),
    or one of them weakly typed (a Python number) and promoted to the other's dtype by a strong
    cast. None where they are of two shapes, or need another promotion (`jnp` does it)."""
    if type(x) in (int, float, bool):
        x = jnp.asarray(x)
    if type(y) in (int, float, bool):
        y = jnp.asarray(y)
    if not (isinstance(x, jax.Array) and isinstance(y, jax.Array) and x.shape == y.shape):
        return None
    if x.dtype == y.dtype:
        return x, y
    dtype, weak = jax.dtypes.result_type(x, y, return_weak_type_flag=True)
    if weak:
        return None
    if dtype == y.dtype and jax.typeof(x).weak_type:
        return lax.convert_element_type(x, dtype), y
    if dtype == x.dtype and jax.typeof(y).weak_type:
        return x, lax.convert_element_type(y, dtype)
    return None


def _bools(a, b, tested: bool):
    """(a, b) as arrays of booleans of one shape, for a `lax` operation; None where they are
    not (`jnp` broadcasts and casts), or where both are weakly typed and the result may not
    be (see `both`)."""
    if isinstance(a, bool):
        a = jnp.asarray(a)
    if isinstance(b, bool):
        b = jnp.asarray(b)
    if not (
        isinstance(a, jax.Array)
        and isinstance(b, jax.Array)
        and a.dtype == b.dtype == jnp.bool_
        and a.shape == b.shape
    ):
        return None
    if not tested and jax.typeof(a).weak_type and jax.typeof(b).weak_type:
        return None
    return a, b


def leaf_paths(tree, *, held: bool = False) -> list[tuple[str, object]]:
    """(path, leaf) pairs, the path written as Python would index into `tree`; with `held`,
    the `Held` objects too."""
    is_leaf = (lambda x: isinstance(x, Held)) if held else None
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in flat]


def held_difference(a, b) -> tuple[str, object, object] | None:
    """(path, object in `a`, object in `b`) of the first place two array trees (`as_arrays`)
    alike but for the objects they hold hold different ones; None if there is none."""
    paths_a, paths_b = leaf_paths(a, held=True), leaf_paths(b, held=True)
    if [p for p, _ in paths_a] != [p for p, _ in paths_b]:
        return None
    for (path, x), (_, y) in zip(paths_a, paths_b):
        if isinstance(x, Held) and isinstance(y, Held) and x != y:
            return path, x.obj, y.obj
    return None
