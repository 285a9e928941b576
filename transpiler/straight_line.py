"""Functions whose conversion would change nothing: they run as they are written.

A helper such as

    def cubic(x):
        return x * x * x - 2.0 * x - 5.0

    def log_density(x):
        return jax.nn.logsumexp(-0.5 * jnp.sum((x - MODES) ** 2, axis=1))

holds nothing a pass rewrites but its calls of JAX's numerical functions, which `rt__.call`
makes as they are. Converting it (analyses, passes, printing, compiling: about 2 ms, most of a
small helper's conversion) gives back the same computation. `unchanged(node, fn)` tells, on the
parsed definition, that the function is such a one; `transpiler.convert` then gives a function
that runs the original code (no generated file, no source map).

What passes, and nothing else:

- statements: assignments to names (tuples and lists of names), an augmented assignment to a
  name, `pass`, a docstring, a `return` as the last statement;
- expressions: names, constants, attribute and subscript reads (not an item of a list it
  makes picked by an expression, `out[k]`: see `runtime.lists.list_item`), slices, tuple and
  list displays, arithmetic and bitwise operators (`**` only with an exponent the powers pass keeps:
  a float or an int >= 0), unary `-`, `+` and `~`, one comparison (not `in`, not chained);
- calls of a function reached through modules from a global name of the function's module
  (`jnp.tanh(x)`, `jax.nn.softmax(z, axis=-1)`, `jnp.linalg.norm(v)`), taken from one of JAX's
  numerical namespaces (`NAMESPACES`), that takes no functions (`libraries.takes_functions`);
  positional and keyword arguments, none unpacked.

Left out, because a pass rewrites them or because the call machinery must see them: every other
call (builtins have staged versions, user functions and methods are converted, library code
handed user functions has them converted), `in`, chained comparisons, `and`/`or`/`not`, conditional
expressions, control flow, nested functions, lambdas and comprehensions, stores into attributes
or items, `global`/`nonlocal`, `del`, `assert`, `raise`, `try`, `with`, f-strings, `:=`.

The modules a call goes through are looked up when the function is converted, as the calls the
alias analysis follows are (`analysis.callees`); the call itself reads them as it runs, as the
original does.
"""

from __future__ import annotations

import types

import gast

from transpiler import features, libraries, naming, structure
from transpiler.analysis import activity
from transpiler.passes import powers

NAMESPACES = ("jax.numpy", "jax.nn", "jax.scipy.special")
"""The modules (and their submodules) whose functions a function run as written may call."""

_STATEMENTS = (gast.Assign, gast.AugAssign, gast.Pass, gast.Expr, gast.Return)
_OPERATORS = (
    gast.Add,
    gast.Sub,
    gast.Mult,
    gast.Div,
    gast.FloorDiv,
    gast.Mod,
    gast.MatMult,
    gast.BitAnd,
    gast.BitOr,
    gast.BitXor,
    gast.LShift,
    gast.RShift,
)
_UNARY = (gast.USub, gast.UAdd, gast.Invert)
_COMPARISONS = (gast.Eq, gast.NotEq, gast.Lt, gast.LtE, gast.Gt, gast.GtE, gast.Is, gast.IsNot)
_IDENTITY = (gast.Is, gast.IsNot)


def _makes_a_list(node: gast.FunctionDef) -> bool:
    """Whether `node` makes a list (a display: the only way a straight-line function can)."""
    return any(isinstance(n, gast.List) for n in structure.walk_nodes(node))


def unchanged(node: gast.FunctionDef, fn: types.FunctionType) -> bool:
    """Whether converting `fn`, parsed as `node`, would change nothing (the module docstring)."""
    body = node.body
    if node.decorator_list or not all(isinstance(stmt, _STATEMENTS) for stmt in body):
        return False
    if _makes_a_list(node) and features.INDEXED in features.present(node):
        return False  # `out[k]` of a list it makes: a traced `k` is the lists pass's
    # The names it binds (as `activity.local_names`, which walks every expression too: here
    # only names are assigned, by top-level statements) and its closure's.
    params = activity.params_of(node.args)
    if any(_reserved(name) for name in (node.name, *params)):
        return False
    local = set(params) | set(fn.__code__.co_freevars)
    for stmt in body:
        targets = stmt.targets if isinstance(stmt, gast.Assign) else []
        for target in [stmt.target] if isinstance(stmt, gast.AugAssign) else targets:
            local.update(_target_names(target) or ())
    for i, stmt in enumerate(body):
        if not _statement(stmt, i == len(body) - 1, i == 0, local, fn.__globals__):
            return False
    return True


def _reserved(name: str) -> bool:
    """A name with the prefix of generated code, which the fence pass refuses: so must this
    function's conversion. (Names are all a function that passes here can hold it in: its
    own, its parameters', those it assigns and those it reads.)"""
    return name.startswith(naming.RUNTIME)


def _target_names(target) -> list[str] | None:
    """The names an assignment target binds; None if it is not names (an attribute, an item,
    a starred name, a reserved name)."""
    if isinstance(target, gast.Name):
        return None if _reserved(target.id) else [target.id]
    if isinstance(target, (gast.Tuple, gast.List)):
        names = []
        for element in target.elts:
            inner = _target_names(element)
            if inner is None:
                return None
            names += inner
        return names
    return None


def _statement(stmt, last: bool, first: bool, local: set, globals_: dict) -> bool:
    if isinstance(stmt, gast.Pass):
        return True
    if isinstance(stmt, gast.Expr):  # a docstring only: another expression would be a call
        return first and isinstance(stmt.value, gast.Constant) and type(stmt.value.value) is str
    if isinstance(stmt, gast.Return):
        return last and (stmt.value is None or _expression(stmt.value, local, globals_))
    if isinstance(stmt, gast.AugAssign):
        return (
            isinstance(stmt.target, gast.Name)
            and _target_names(stmt.target) is not None  # not a reserved name
            and _operator(stmt.op, stmt.value)
            and _expression(stmt.value, local, globals_)
        )
    return all(_target_names(t) is not None for t in stmt.targets) and _expression(
        stmt.value, local, globals_
    )


def _expression(node, local: set, globals_: dict) -> bool:
    kind = type(node)
    if kind is gast.Name:
        return not _reserved(node.id)
    if kind is gast.Constant:
        return True
    if kind is gast.Attribute:
        return _expression(node.value, local, globals_)
    if kind is gast.Subscript:
        return _expression(node.value, local, globals_) and _expression(node.slice, local, globals_)
    if kind is gast.Slice:
        parts = (node.lower, node.upper, node.step)
        return all(p is None or _expression(p, local, globals_) for p in parts)
    if kind is gast.Tuple or kind is gast.List:
        return all(_expression(e, local, globals_) for e in node.elts)
    if kind is gast.BinOp:
        return (
            _operator(node.op, node.right)
            and _expression(node.left, local, globals_)
            and _expression(node.right, local, globals_)
        )
    if kind is gast.Compare:  # one comparison, not `in`: the logical pass keeps it
        return (
            len(node.ops) == 1
            and isinstance(node.ops[0], _COMPARISONS)
            # `a is b` of two values is `rt__.is_` (`x is None` is kept)
            and not (
                isinstance(node.ops[0], _IDENTITY)
                and not isinstance(node.left, gast.Constant)
                and not isinstance(node.comparators[0], gast.Constant)
            )
            and _expression(node.left, local, globals_)
            and _expression(node.comparators[0], local, globals_)
        )
    if kind is gast.UnaryOp:
        return isinstance(node.op, _UNARY) and _expression(node.operand, local, globals_)
    if kind is gast.Call:
        return (
            _numerical_function(node.func, local, globals_)
            and all(
                type(a) is not gast.Starred and _expression(a, local, globals_) for a in node.args
            )
            and all(
                k.arg is not None and _expression(k.value, local, globals_) for k in node.keywords
            )
        )
    return False


def _operator(op, right) -> bool:
    """Whether `left op right` is computed as written: `**` only where the powers pass keeps it."""
    if isinstance(op, gast.Pow):
        return powers.typed_alike(right)
    return isinstance(op, _OPERATORS)


def _numerical_function(func, local: set, globals_: dict) -> bool:
    """Whether `func` is `module.attr...name`, from a global module of the function's, to a
    function of `NAMESPACES` that takes no functions."""
    path = []
    while type(func) is gast.Attribute:
        path.append(func.attr)
        func = func.value
    if type(func) is not gast.Name or func.id in local or not path:
        return False
    value = globals_.get(func.id)
    owner = None
    for attr in reversed(path):
        if not isinstance(value, types.ModuleType):
            return False
        owner, value = value, getattr(value, attr, None)
    if not _numerical(owner.__name__) or value is None:
        return False
    return (
        libraries.is_library(value)
        and libraries.takes_functions(value) is False
        and not libraries.makes_effects(value)
        and not libraries.host_effect(value)
    )


def _numerical(module_name: str) -> bool:
    return any(module_name == n or module_name.startswith(n + ".") for n in NAMESPACES)
