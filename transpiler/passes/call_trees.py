"""Rewrites calls into `rt__.call(f, ...)`, so the user functions they reach are converted too.

    y = helper(x, n=2)      ->   y = rt__.call(helper, x, n=2)
    y = self.layer(x)       ->   y = rt__.call(self.layer, x)
    s = jnp.sum(x)          ->   s = jnp.sum(x)              (JAX: called as it is)
    k = int(x)              ->   k = rt__.int_(x)            (a builtin that stages on tracers)
    r = range(n)            ->   r = rt__.range_(n)          (with recursive=False, only these)

Calls whose target resolves, at conversion time, to library code (a global naming a JAX, NumPy or
standard-library module or function, or a builtin) are left alone, which keeps the generated
source readable; everything else is decided by `rt__.call` when it runs.
"""

from __future__ import annotations

import builtins

import gast

from transpiler import libraries, templates
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

STAGED_BUILTINS = frozenset(
    {
        "int",
        "float",
        "bool",
        "len",
        "min",
        "max",
        "sum",
        "next",
        "enumerate",
        "zip",
        "reversed",
        "range",
    }
)
"""Builtins with a runtime version that also accepts traced values: `int` -> `rt__.int_`."""

# Frame-sensitive builtins (and `super`, whose zero-argument form needs its own frame).
_NEVER_WRAPPED = frozenset({"super", "locals", "globals", "vars", "eval", "exec", "print"})


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Rewrites the calls in `fn_node` (and its nested functions); `ctx.globals` resolves names.
    With `ctx.recursive` off, only builtins are rewritten."""
    return _CallTrees(ctx.globals, frozenset(ctx.freevars), ctx.recursive).visit(fn_node)


class _CallTrees(Transformer):
    def __init__(self, globals_: dict, freevars: frozenset[str], convert_calls: bool):
        self.globals = globals_
        self.freevars = freevars
        self.convert_calls = convert_calls
        self.local_names: list[frozenset[str]] = []
        self.self_name: str | None = None  # the method's first parameter, for `super()`

    def visit_FunctionDef(self, node):
        if not self.local_names and "__class__" in self.freevars and node.args.args:
            self.self_name = node.args.args[0].id
        self.local_names.append(activity.local_names(node))
        node.body = [self.visit(stmt) for stmt in node.body]
        self.local_names.pop()
        return node

    def visit_Lambda(self, node):
        self.local_names.append(activity.params_of(node.args))
        node.body = self.visit(node.body)
        self.local_names.pop()
        return node

    def visit_Call(self, node):
        node = self.generic_visit(node)
        func = node.func
        if isinstance(func, gast.Name):
            if func.id == "super" and not node.args and self.self_name is not None:
                # Zero-argument super() finds its class and instance in its own frame; generated
                # functions nested in the method (a branch, a loop body) have neither.
                node.args = [templates.name("__class__"), templates.name(self.self_name)]
                return node
            if func.id in _NEVER_WRAPPED or func.id.startswith(RUNTIME):
                return node
            if self._is_builtin(func.id):
                if func.id not in STAGED_BUILTINS:
                    return node
                node.func = templates.replace_as_expression(f"{RUNTIME}.{func.id}_")
                return node
        if not self.convert_calls or self._is_library(func) or _root_name(func) == RUNTIME:
            return node
        call = templates.replace_as_expression(f"{RUNTIME}.call(func)", func=func)
        call.args += node.args
        call.keywords = node.keywords
        return call

    def _is_local(self, name: str) -> bool:
        return name in self.freevars or any(name in scope for scope in self.local_names)

    def _is_builtin(self, name: str) -> bool:
        return not self._is_local(name) and name not in self.globals and hasattr(builtins, name)

    def _is_library(self, func: gast.expr) -> bool:
        """Whether `func` is a global (or an attribute path from one) that is library code."""
        path = []
        while isinstance(func, gast.Attribute):
            path.append(func.attr)
            func = func.value
        if not isinstance(func, gast.Name) or self._is_local(func.id):
            return False
        if func.id not in self.globals:
            return False
        value = self.globals[func.id]
        # Follow module attributes (`jax.numpy.sum`): a module's contents are fixed enough.
        for attr in reversed(path):
            if not libraries.is_library(value) or not hasattr(value, attr):
                break
            value = getattr(value, attr)
        return libraries.is_library(value)


def _root_name(func: gast.expr) -> str | None:
    while isinstance(func, gast.Attribute):
        func = func.value
    return func.id if isinstance(func, gast.Name) else None
