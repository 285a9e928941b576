"""`call`: calls from converted code convert the user functions they reach, once each.

Generated code writes `helper(x)` as `rt__.call(helper, x)`. What is called as it is: functions of
JAX, NumPy and the standard library, builtins, classes, code already converted (and the functions
nested in it), and anything marked with `do_not_convert`. Everything else written in Python —
functions, lambdas, bound methods, `functools.partial` objects, objects with a Python `__call__`,
`jax.custom_jvp`/`custom_vjp` functions (their rules too) — is converted by the converter that
`transpiler` passes to `caller`, which caches. A function whose source cannot be had runs
unconverted, with one warning.

One rule covers JAX's transformations and control flow: when library code is called, the user
functions among its arguments (directly, or as items of a list, tuple or dict argument) are
converted first. `jax.grad(loss_fn)`, `jax.vmap(f)`, `lax.scan(step, ...)`,
`lax.switch(i, [f, g], x)`, `jax.tree.map(fn, tree)`, `functools.reduce(fn, xs)` all receive the
converted functions, so the control flow in them is staged when JAX traces them. Callable objects
are not converted there: they may be pytrees of data (an Equinox module given to `jax.grad`'s
result), which conversion would turn into bound methods. `lax.while_loop` (and `lax.fori_loop`
with traced bounds) called from converted code is the reverse-differentiable loop of
`runtime.checkpointed`.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import sys
import types
import weakref
from collections.abc import Callable

import jax
import numpy as np

from runtime import builtins as builtins_
from runtime import (
    checkpointed,
    debugging,
    effects,
    errors,
    identity,
    lists,
    powers,
    staging,
    text,
)
from runtime.errors import Site, StagingError

_DO_NOT_CONVERT = "__transpiler_do_not_convert__"  # set by transpiler.do_not_convert
# Converted objects that JAX calls back on values of a trace of its own: what they call is
# called by JAX, not by converted code (see `staging.call_staging`).
_CALLED_BACK = (jax.custom_jvp, jax.custom_vjp)


class ConversionRefused(Exception):
    """Raised by a converter for a function it cannot convert: it is called as written."""


def caller(
    converter: Callable,
    is_library: Callable[[object], bool],
    makes_effects: Callable[[object], bool] = lambda fn: False,
    host_effect: Callable[[object], bool] = lambda fn: False,
    takes_functions: Callable[[object], bool | None] = lambda fn: None,
) -> Callable:
    """The `call` operator of generated code, converting user functions with `converter`.

    `converter(fn)` returns the function to call (the converted one, or `fn` itself for library
    code), or raises `ConversionRefused` to leave `fn` unconverted (with one warning).
    `is_library(fn)` tells library callables, whose function arguments are converted;
    `makes_effects(fn)` those that make effects of the program when it runs (`jax.debug.print`);
    `host_effect(fn)` the standard library's whose effect is on the host (`logging.info`,
    `warnings.warn`), made when the program runs (`debugging.host_call`); `takes_functions(fn)`
    whether a library callable declares a parameter that receives functions (None: unknown).
    """
    unconvertible: weakref.WeakSet = weakref.WeakSet()  # functions that failed to convert
    custom_rules = _CustomRules()
    warned: set = set()  # their code objects: one warning each

    def convert_function(fn: types.FunctionType):
        if (
            getattr(fn, _DO_NOT_CONVERT, False)
            or getattr(fn, "__transpiler_converted__", False)
            or errors.is_generated(fn.__code__.co_filename)
            or fn in unconvertible
        ):
            return fn
        try:
            return converter(fn)
        except ConversionRefused as e:
            unconvertible.add(fn)
            if fn.__code__ not in warned:
                warned.add(fn.__code__)
                errors.warn_at_user_line(
                    f"{fn.__qualname__} is called unconverted: {str(e).splitlines()[0]}",
                    stacklevel=4,
                )
            return fn

    def resolve(fn):
        if isinstance(fn, types.FunctionType):
            return convert_function(fn)  # the converter caches
        if isinstance(fn, types.MethodType):
            func = resolve(fn.__func__)
            return fn if func is fn.__func__ else types.MethodType(func, fn.__self__)
        if isinstance(fn, functools.partial):  # jax.tree_util.Partial too: the type is kept
            func = resolve(fn.func)
            return fn if func is fn.func else type(fn)(func, *fn.args, **fn.keywords)
        if isinstance(fn, (jax.custom_jvp, jax.custom_vjp)):
            return custom_rules.get(fn, resolve)
        if isinstance(fn, type) or inspect.isbuiltin(fn) or not callable(fn):
            return fn
        func, owner = getattr(fn, "__func__", None), getattr(fn, "__self__", None)
        if isinstance(func, types.FunctionType) and owner is not None:
            # A library's bound method of its own (Equinox's `BoundMethod`, which its modules'
            # `self.method` gives): called, it is `__func__(__self__, ...)`.
            converted = resolve(func)
            if converted is not func:
                return types.MethodType(converted, owner)
        call_method = type(fn).__call__
        if isinstance(call_method, types.FunctionType):
            converted = resolve(call_method)
            return fn if converted is call_method else types.MethodType(converted, fn)
        return fn

    def resolve_function(value):
        """`value` converted if it is a user function (not a callable object), its staged
        version if it is a builtin that has one (`map(print, xs)`), else itself."""
        if _staged_builtin(value):
            return builtins_.STAGED[value]
        if isinstance(value, types.MethodType):
            if not isinstance(value.__func__, types.FunctionType):
                return value
        elif not isinstance(
            value, (types.FunctionType, functools.partial, jax.custom_jvp, jax.custom_vjp)
        ):
            return value
        resolved = resolve(value)
        if resolved is not value and (staging.trackers() or staging.watches()):
            effects.called(resolved)
        return resolved

    def resolve_argument(value, dtypes=False):
        if dtypes and _is_dtype_builtin(value):
            return value  # `x.astype(float)`: a dtype, not a function to call
        if isinstance(value, lists.ProbeList):
            # The list a staged loop's probe stands in for: to library code (`jax.grad(loss)
            # (params, x)`), the list it holds (JAX takes lists, not subclasses of them).
            return resolve_argument(value.read(), dtypes)
        if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
            if any(isinstance(item, lists.ProbeList) for item in value):
                value = type(value)(
                    item.read() if isinstance(item, lists.ProbeList) else item for item in value
                )
            items = [resolve_function(item) for item in value]
            if any(new is not old for new, old in zip(items, value)):
                return type(value)(items)
            return value
        if type(value) is dict:
            items = {key: resolve_function(item) for key, item in value.items()}
            if any(items[key] is not item for key, item in value.items()):
                return items
            return value
        return resolve_function(value)

    def call(fn, /, *args, **kwargs):
        """`fn(*args, **kwargs)`, with `fn` converted first if it is user code, and the user
        functions given to it converted if it is library code."""
        if isinstance(fn, functools.partial) and _staged_builtin(fn.func):
            # `functools.partial(print, "loss")(x)`: the staged version's partial.
            fn = functools.partial(builtins_.STAGED[fn.func], *fn.args, **fn.keywords)
            resolved = fn
        elif _sort_of_a_list(fn):
            fn = resolved = functools.partial(builtins_.list_sort, fn.__self__)
        elif isinstance(fn, (type, types.BuiltinFunctionType)):
            # A builtin reached under another name (`r = range; r(n)`): its staged version.
            fn = builtins_.STAGED.get(fn, fn)
            resolved = fn
        elif _item_of_a_tracer(fn) and not (args or kwargs):
            fn = resolved = functools.partial(builtins_.item_, fn.__self__)
        else:
            resolved = resolve(fn)
            if staging.trackers() or staging.watches():
                # A staged block is being traced, or Python code watched: what fn reaches too.
                effects.called(resolved)
        if resolved is fn and staging.watches():
            handed = [*args, *kwargs.values()]  # a partial of jax.debug.print given to lax.cond
            handed += [x for a in handed if type(a) in (list, tuple) for x in a]
            effects.called_as_is(
                _jax_or_standard(fn) or _user_class(fn),
                makes_effects(fn) or any(makes_effects(a) for a in handed if callable(a)),
            )
        if resolved is fn and host_effect(fn):
            return debugging.host_call(fn, *args, **kwargs)
        text.check_made((*args, *kwargs.values()))
        if resolved is fn and staging.writes_when_run():
            _refuse_reads_of_written(fn, args, kwargs)
        if resolved is fn and is_library(fn):
            resolved = _REVERSIBLE.get(fn, fn)
            # JAX's and NumPy's functions and arrays' methods take Python's types as dtypes
            # (`x.astype(float)`, `jnp.zeros(3, int)`), unless they take functions too.
            dtypes = (
                any(_is_dtype_builtin(v) for v in (*args, *kwargs.values()))
                and _takes_dtypes(fn)
                and not takes_functions(fn)
            )
            args = tuple(resolve_argument(arg, dtypes) for arg in args)
            kwargs = {name: resolve_argument(value, dtypes) for name, value in kwargs.items()}
        # What the objects staged statements detached hold before the call (None: none, or
        # a function of JAX's or NumPy's, which change no list or dict in place).
        held = identity.held() if identity.recorded() and not _array_library(fn) else None
        try:
            if resolved is fn and staging.trackers() and _state_of_its_own(fn, is_library):
                result = effects.call_with_state_of_its_own(fn, args, kwargs)
            elif resolved is not fn and not isinstance(resolved, _CALLED_BACK):
                # a converted user function: the arguments are ours
                with staging.calling_converted():
                    result = resolved(*args, **kwargs)
            else:
                result = resolved(*args, **kwargs)
        except Exception as e:
            if isinstance(e, jax.errors.TracerBoolConversionError) and identity.recorded():
                _refuse_identity_search(fn, (*args, *kwargs.values()))
            errors.raised_by_callee(e)  # `math.sqrt(-1)`: the program's error, to raise as it runs
            raise
        if held:
            identity.check_unchanged(held, fn)
        if isinstance(fn, type) and (staging.trackers() or staging.watches()) and _user_class(fn):
            effects.made(result)
        return result

    call.managed = functools.partial(managed, call, is_library)  # `rt__.managed`
    return call


def managed(call, is_library, manager):
    """`manager` as the context manager of a `with` in converted code: one whose `__enter__`
    and `__exit__` are those Python's `with` would call (looked up on its type, bound as
    descriptors bind: a static method gets no instance), called through `call` where the class
    is the user's, converted as the code around them is: their prints are staged, in order with
    the statement's (Python calls them implicitly, as they are: under `jax.jit` a print in
    them printed while the function was traced, before everything the program prints).
    A library's (`contextlib.contextmanager`, `open`) are called as they are.

    An exception of the converter's own (`staging.CANNOT_STAGE`: a refusal, a retrace, JAX's
    error for a tracer where Python needs a value) leaves the statement whatever `__exit__`
    returns: a `contextlib.suppress(Exception)` or an `__exit__` returning True would swallow
    what tells that the code cannot be staged as written (the refusal, or the fall back to
    Python that it starts), and the program would go on without the body's changes."""
    kind = type(manager)
    enter, exit_ = _special(manager, kind, "__enter__"), _special(manager, kind, "__exit__")
    users = any(_users_code(method, is_library) for method in (enter, exit_))
    return _Managed(call if users else None, enter, exit_)


def _users_code(method, is_library) -> bool:
    """Whether `method` (bound, or a static method's function) is a function of the user's."""
    function = getattr(method, "__func__", method)
    return isinstance(function, types.FunctionType) and not is_library(function)


def _special(manager, kind, name):
    """`manager`'s special method `name`, as Python's `with` finds it: on its type."""
    for base in kind.__mro__:
        if name in vars(base):
            method = vars(base)[name]
            get = getattr(type(method), "__get__", None)
            return get(method, manager, kind) if get is not None else method
    raise errors.python_error(
        TypeError(f"'{kind.__name__}' object does not support the context manager protocol")
    )


class _Managed:
    """A context manager's `__enter__` and `__exit__`, bound; called through `call` (the
    user's, converted) or as they are (a library's, `call` None)."""

    __slots__ = ("_call", "_enter", "_exit")

    def __init__(self, call, enter, exit_):
        self._call, self._enter, self._exit = call, enter, exit_

    def __enter__(self):
        return self._enter() if self._call is None else self._call(self._enter)

    def __exit__(self, *exc):
        error = exc[1]
        if isinstance(error, staging.CANNOT_STAGE):  # the converter's own: it goes on
            try:
                self._leave(*exc)
            except Exception:  # noqa: BLE001 - the manager's, raised on its way: ours wins
                pass
            return False
        suppress = self._leave(*exc)
        if suppress and error is not None:
            staging.raise_cannot_stage(error, "with")  # (a check made at once, under vmap)
        return suppress

    def _leave(self, *exc):
        return self._exit(*exc) if self._call is None else self._call(self._exit, *exc)


def _refuse_identity_search(fn, args) -> None:
    """StagingError where `fn` (`ps.remove(best)`, `ps.index(best)`), which looks for an
    argument among items by identity first and then by `==`, was given an object a staged
    statement made in place of one of several (`best = min(ps, key=loss)`): Python finds it by
    identity; the new object is found by comparing traced values, which has no truth here."""
    for arg in args:
        entry = identity.standing_for(arg)
        if entry is None:
            continue
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        raise StagingError(
            f"{name}() ({Site('call')}) was given {entry.label}, a new {entry.kind} the staged "
            f"{entry.site.construct} ({entry.site}) made in place of one of several objects: "
            "Python finds that very object among the items by identity, where the staged "
            "program has a copy, which only comparing traced values could find. Work with the "
            "index instead (`i = jnp.argmin(losses)`), or keep the choice apart from the list."
        )


# A stream's methods that neither read nor move it: called while its writes wait for the run.
_STREAM_QUERIES = frozenset({"fileno", "isatty", "readable", "writable", "seekable"})


def _refuse_reads_of_written(fn, args, kwargs) -> None:
    """StagingError where `fn`, called as it is while a program is staged, reads or changes a
    file or buffer that program writes to when it runs (`buf.getvalue()` after a staged
    `print(..., file=buf)`): it would not see the text."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    owner = getattr(fn, "__self__", None)
    if name in _STREAM_QUERIES:
        return
    if owner is not None and not isinstance(owner, types.ModuleType):
        staging.refuse_read_of_written(owner, f"`{type(owner).__name__}.{name}()`")
    for value in (*args, *kwargs.values()):
        staging.refuse_read_of_written(value, f"`{name}(...)`")


_DTYPE_BUILTINS = (builtins.int, builtins.float, builtins.bool, builtins.complex)


def _is_dtype_builtin(value) -> bool:
    return isinstance(value, type) and value in _DTYPE_BUILTINS


def _takes_dtypes(fn) -> bool:
    """Whether `fn` is a function of JAX's or NumPy's or a method of an array (JAX's or
    NumPy's): one that reads `int`, `float`, `bool` given to it as dtypes."""
    owner = getattr(fn, "__self__", None)
    return _array_library(fn) or isinstance(owner, (jax.Array, np.ndarray, np.generic))


def _sort_of_a_list(fn) -> bool:
    """Whether `fn` is `out.sort` of a Python list (staged where its keys are traced)."""
    return (
        isinstance(fn, types.BuiltinFunctionType)
        and type(getattr(fn, "__self__", None)) is list
        and fn.__name__ == "sort"
    )


def _item_of_a_tracer(fn) -> bool:
    """Whether `fn` is `x.item` of a traced array (`loss.item()`: staged as `float(loss)`)."""
    owner = getattr(fn, "__self__", None)
    return (
        isinstance(fn, types.MethodType)
        and isinstance(owner, jax.core.Tracer)
        and getattr(type(owner), "item", None) is getattr(fn, "__func__", None)
    )


def _staged_builtin(fn) -> bool:
    return isinstance(fn, (type, types.BuiltinFunctionType)) and fn in builtins_.STAGED


def _state_of_its_own(fn, is_library) -> bool:
    """Whether `fn`, called as it is, is an object of the user's that is not a function, a
    method or a class (`functools.lru_cache` of a user function): its own state (the cache) is
    out of every snapshot's reach."""
    if isinstance(fn, (types.FunctionType, types.MethodType, type, types.BuiltinFunctionType)):
        return False
    return not (is_library(fn) or _jax_or_standard(fn))


_JAX_AND_NUMPY = frozenset({"jax", "jaxlib", "numpy", "ml_dtypes", "opt_einsum", "runtime"})


def _jax_or_standard(fn) -> bool:
    """Whether `fn` is JAX's, NumPy's or the standard library's (whose effects
    `runtime.effects.called_as_is` knows), not another installed package's or the user's."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", None)
    if not isinstance(module, str):  # a builtin method: its object's type tells
        owner = getattr(fn, "__self__", None)
        module = type(fn if owner is None else owner).__module__
    root = module.split(".")[0]
    return root in _JAX_AND_NUMPY or root in sys.stdlib_module_names or root == "builtins"


def _array_library(fn) -> bool:
    """Whether `fn` is a function of JAX's or NumPy's (not a builtin method, a user's)."""
    module = getattr(fn, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] in _ARRAY_LIBRARIES


_ARRAY_LIBRARIES = frozenset({"jax", "jaxlib", "numpy"})


def _user_class(fn) -> bool:
    """Whether `fn` is a class of the user's (not of an installed package)."""
    if not isinstance(fn, type):
        return False
    file = getattr(sys.modules.get(fn.__module__), "__file__", None) or ""
    return not ("site-packages" in file or "dist-packages" in file)


# `lax` loops whose reverse-mode derivative JAX does not have: converted code calls this
# module's versions, the same loops when nobody differentiates them.
_REVERSIBLE = types.MappingProxyType(
    {
        jax.lax.while_loop: checkpointed.lax_while_loop,
        jax.lax.fori_loop: checkpointed.lax_fori_loop,
        jax.numpy.power: powers.jnp_power,
    }
)


class _CustomRules:
    """`jax.custom_jvp`/`custom_vjp` functions remade from their converted parts, once each.

    The remade function is cached on the original, keyed by the parts it was made from: a rule
    defined after the first call (`f.defjvp(...)` later) makes a new one.
    """

    def __init__(self):
        self._made: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get(self, fn, resolve: Callable):
        names = ("fun", "jvp") if isinstance(fn, jax.custom_jvp) else ("fun", "fwd", "bwd")
        parts = tuple(getattr(fn, name, None) for name in names)
        made = self._made.get(fn)
        if made is not None and all(a is b for a, b in zip(made[0], parts)):
            return made[1]
        converted = [part if part is None else resolve(part) for part in parts]
        if all(a is b for a, b in zip(converted, parts)):
            remade = fn
        else:
            remade = _remake(fn, *converted)
        self._made[fn] = (parts, remade)
        return remade


def _remake(fn, fun, *rules):
    kind = type(fn)
    remade = kind(fun, nondiff_argnums=fn.nondiff_argnums)
    functools.update_wrapper(remade, fn.__wrapped__)
    if isinstance(fn, jax.custom_jvp):
        (jvp,) = rules
        if jvp is not None:
            remade.defjvp(jvp, symbolic_zeros=fn.symbolic_zeros)
    else:
        fwd, bwd = rules
        if fwd is not None:
            remade.defvjp(
                fwd, bwd, symbolic_zeros=fn.symbolic_zeros, optimize_remat=fn.optimize_remat
            )
    return remade


class Runtime(types.SimpleNamespace):
    """What generated code sees as `rt__`: the runtime's operators, by name."""
