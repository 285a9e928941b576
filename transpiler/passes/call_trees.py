"""Rewrites calls into `rt__.call(f, ...)`, so the user functions they reach are converted too.

    y = helper(x, n=2)      ->   y = rt__.call(helper, x, n=2)
    y = self.layer(x)       ->   y = rt__.call(self.layer, x)
    s = jnp.sum(x)          ->   s = jnp.sum(x)              (JAX: called as it is)
    k = int(x)              ->   k = rt__.int_(x)            (a builtin that stages on tracers)
    r = range(n)            ->   r = rt__.range_(n)          (with recursive=False, only these)

Calls whose target resolves, at conversion time, to library code (a global naming a JAX, NumPy or
standard-library module or function, or a builtin) are left alone, which keeps the generated
source readable; everything else is decided by `rt__.call` when it runs. The exception is library
code that may be given a user function, which `rt__.call` converts before passing it on:

    g = jax.grad(loss_fn)              ->   g = rt__.call(jax.grad, loss_fn)
    ys = list(map(lambda v: v * 2, xs))  ->   ys = list(rt__.call(map, lambda v: v * 2, xs))

A call of a JAX function that makes an effect of the program when it runs goes through
`rt__.effect` (`jax.debug.print(...)` -> `rt__.effect(jax.debug.print, ...)`), which records it
for the code running now (see `runtime.peeling`). A library call goes through `rt__.call` when
its target declares a parameter for functions
(`libraries.takes_functions`), or, for targets without a signature (`map`, `functools.reduce`),
when an argument may be a function: a lambda, a nested `def`, a global user function, or a
parameter of the function given first (the function-first convention of `map` and `reduce`).

A `with` statement's managers go through `rt__.managed`, whose `__enter__` and `__exit__` are
called through `rt__.call` where they are the user's (Python calls them implicitly):

    with Timer() as t:      ->   with rt__.managed(rt__.call(Timer)) as t:
"""

from __future__ import annotations

import builtins

import gast

from transpiler import anno, libraries, structure, templates
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.passes import logical_expressions
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Call, gast.With)

STAGED_BUILTINS = frozenset(
    {
        "int",
        "float",
        "bool",
        "len",
        "min",
        "max",
        "sum",
        "all",
        "any",
        "next",
        "pow",
        "enumerate",
        "zip",
        "reversed",
        "range",
        "round",
        "sorted",
    }
)
"""Builtins with a runtime version that also accepts traced values: `int` -> `rt__.int_`."""

# Library functions the runtime computes its own way (`runtime.calls`), by (module, name): not
# imported here (conversion does not import JAX). `jnp.power` by a staged loop counter has the
# derivatives of the power by a Python int (`runtime.powers.jnp_power`).
_RUNTIME_VERSIONS = frozenset({("jax.numpy", "power")})

# Frame-sensitive builtins (and `super`, whose zero-argument form needs its own frame).
_NEVER_WRAPPED = frozenset({"super", "locals", "globals", "vars", "eval", "exec", "print"})


# The builtins `rt__.call` stages (`runtime.builtins.STAGED`), reached as attributes of the
# `builtins` module.
_STAGED_BUILTIN_OBJECTS = tuple(getattr(builtins, name) for name in (*STAGED_BUILTINS, "print"))


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Rewrites the calls in `fn_node` (and its nested functions); `ctx.globals` resolves names.
    With `ctx.recursive` off, only builtins are rewritten."""
    calls = _CallTrees(ctx.globals, frozenset(ctx.freevars), ctx.recursive)
    fn_node = calls.visit(fn_node)
    ctx.hands_functions = ctx.hands_functions or calls.hands_functions
    return fn_node


class _CallTrees(Transformer):
    def __init__(self, globals_: dict, freevars: frozenset[str], convert_calls: bool):
        self.globals = globals_
        self.freevars = freevars
        self.convert_calls = convert_calls
        self.function_names: list[frozenset[str]] = []  # locals bound to a def or a lambda
        self.unknown_names: list[frozenset[str]] = []  # parameters: any value at all
        # The first parameter of each function being visited, innermost last, for `super()`.
        self.first_params: list[str | None] = []
        self.hands_functions = False  # a library call given a function (`jax.vmap(f)`)

    def visit_FunctionDef(self, node):
        self._enter(node, _function_names(node.body), activity.params_of(node.args))
        node.body = [self.visit(stmt) for stmt in node.body]
        self._leave()
        return node

    def visit_Lambda(self, node):
        params = activity.params_of(node.args)
        self._enter(node, frozenset(), params)
        node.body = self.visit(node.body)
        self._leave()
        return node

    def _enter(self, node, function_names: frozenset[str], params: frozenset[str]) -> None:
        positional = [*node.args.posonlyargs, *node.args.args]
        self.first_params.append(positional[0].id if positional else None)
        self.function_names.append(function_names)
        self.unknown_names.append(params if self.unknown_names else params | self.freevars)

    def _leave(self) -> None:
        self.first_params.pop()
        self.function_names.pop()
        self.unknown_names.pop()

    def visit_With(self, node):
        """`with m:` as `with rt__.managed(m):`: a user's context manager has its `__enter__`
        and `__exit__` run converted (`runtime.calls.managed`), as Python calls them where
        the statement is, not while the function is traced."""
        node = self.generic_visit(node)
        if self.convert_calls:
            for item in node.items:
                item.context_expr = templates.replace_as_expression(
                    f"{RUNTIME}.managed(manager)", manager=item.context_expr
                )
        return node

    def visit_Call(self, node):
        node = self.generic_visit(node)
        func = node.func
        if isinstance(func, gast.Name):
            if activity.reads_builtin(func, self.globals, ("super",)) and not node.args:
                # Zero-argument super() finds its class and the first argument of the function
                # it is written in (a method, or a function nested in one) in its own frame;
                # the functions generated around its code (a branch, a loop body) have neither.
                first = self.first_params[-1] if self.first_params else None
                if "__class__" in self.freevars and first is not None:
                    node.args = [templates.name("__class__"), templates.name(first)]
                return node
            if func.id.startswith(RUNTIME):
                return node
            if activity.reads_builtin(func, self.globals, _NEVER_WRAPPED):
                return node
            if activity.reads_builtin(func, self.globals):
                if func.id in STAGED_BUILTINS:
                    node.func = templates.replace_as_expression(f"{RUNTIME}.{func.id}_")
                    if func.id in ("all", "any") and _lazy_generator(node):
                        # `all(check(v) for v in xs)`: Python stops at the first false item,
                        # and check runs no further; staged, the rest runs in a cond branch.
                        node.keywords.append(
                            gast.keyword(arg="lazy", value=templates.constant(True))
                        )
                    return node
                target = getattr(builtins, func.id)
                if not (self.convert_calls and self._given_functions(target, node)):
                    return node
        if not self.convert_calls or structure.root_name(func) == RUNTIME:
            return node
        library = self._library_value(func)
        if library is not _UNKNOWN and libraries.makes_effects(library):
            operator = "effect"  # the runtime records that the code running now makes one
        elif library is not _UNKNOWN and libraries.host_effect(library):
            operator = "call"  # `logging.info(...)`: made when the program runs, if staged
        elif library is not _UNKNOWN and any(library is b for b in _STAGED_BUILTIN_OBJECTS):
            operator = "call"  # `builtins.print(x)`, `builtins.len(xs)`: their staged versions
        elif library is not _UNKNOWN and _runtime_version(library):
            operator = "call"  # `jnp.power(x, k)`: the runtime's version
        elif library is not _UNKNOWN and not self._given_functions(library, node):
            return node
        else:
            operator = "call"
            self.hands_functions = self.hands_functions or library is not _UNKNOWN
        call = templates.replace_as_expression(f"{RUNTIME}.{operator}(func)", func=func)
        call.args += node.args
        call.keywords = node.keywords
        if anno.hasanno(node, anno.Static.NEW_LIST):  # a comprehension's: a new list still
            anno.setanno(call, anno.Static.NEW_LIST, True)
        return call

    def _library_value(self, func: gast.expr):
        """The library code that `func` names (a global, or an attribute path from one), or
        _UNKNOWN when it is not library code or cannot be resolved now."""
        value = self._global_value(func)
        return value if value is not _UNKNOWN and libraries.is_library(value) else _UNKNOWN

    def _global_value(self, node: gast.expr):
        """The value of a global name or attribute path now, or _UNKNOWN."""
        path = []
        while isinstance(node, gast.Attribute):
            path.append(node.attr)
            node = node.value
        if not activity.reads_global(node, self.globals):
            return _UNKNOWN  # a local, a closure variable, a builtin
        value = self.globals[node.id]
        # Follow module attributes (`jax.numpy.sum`): a module's contents are fixed enough.
        for attr in reversed(path):
            if not libraries.is_library(value) or not hasattr(value, attr):
                return _UNKNOWN
            value = getattr(value, attr)
        return value

    def _given_functions(self, library, node: gast.Call) -> bool:
        """Whether the call `node` of library code may pass it a user function."""
        declared = libraries.takes_functions(library)
        if declared is not None:
            return declared
        arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
        if arguments and self._is_unknown(arguments[0]):
            return True  # function-first: map(fn, xs), functools.reduce(fn, xs)
        return any(self._may_be_function(argument) for argument in arguments)

    def _is_unknown(self, node: gast.expr) -> bool:
        if isinstance(node, gast.Starred):
            node = node.value
        return (
            isinstance(node, gast.Name)
            and not (node.id == self.first_params[0] and "__class__" in self.freevars)
            and any(node.id in scope for scope in self.unknown_names)
        )

    def _may_be_function(self, node: gast.expr) -> bool:
        if isinstance(node, gast.Starred):
            return self._may_be_function(node.value)
        if isinstance(node, gast.Lambda):
            return True
        if isinstance(node, (gast.List, gast.Tuple, gast.Set)):
            return any(self._may_be_function(item) for item in node.elts)
        if isinstance(node, gast.Dict):
            return any(self._may_be_function(item) for item in node.values)
        if isinstance(node, gast.Name) and any(node.id in s for s in self.function_names):
            return True
        if activity.reads_builtin(node, self.globals, ("print", *STAGED_BUILTINS)):
            return True  # `map(print, xs)`: the staged version is given
        value = self._global_value(node)
        return value is not _UNKNOWN and libraries.is_user_function(value)


_UNKNOWN = object()


def _function_names(body: list[gast.stmt]) -> frozenset[str]:
    """The names a function body binds to a nested `def` or a lambda."""
    names = set()
    for node in activity.walk_scope(body):
        if isinstance(node, gast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, gast.Assign) and isinstance(node.value, gast.Lambda):
            names.update(t.id for t in node.targets if isinstance(t, gast.Name))
    return frozenset(names)


def _lazy_generator(call: gast.Call) -> bool:
    """Whether `call` (of `all` or `any`, its inner calls rewritten) takes a generator
    expression that calls user code: its items must be computed only as far as Python would."""
    if len(call.args) != 1 or not isinstance(call.args[0], gast.GeneratorExp):
        return False
    return logical_expressions.may_have_effects(call.args[0])


def _runtime_version(library) -> bool:
    """Whether `library` is one of the functions the runtime has its own version of."""
    key = (getattr(library, "__module__", None), getattr(library, "__name__", None))
    return key in _RUNTIME_VERSIONS
