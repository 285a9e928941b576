"""What the functions a function calls do with the lists and dicts they are given.

    def sgd(params, grads):                 summary: changes `params`
        for k in params:
            params[k] -= 0.1 * grads[k]

    def layer(params, name):                summary: gives back an item of `params`
        return params[name]

The alias analysis (`ownership`) must know that `sgd(params, g)` changes `params` in place, and
that `b = layer(params, "l1")` leaves `b` holding one of `params`' containers, or a staged `if`
that chose `best = params` would be followed by a change Python shows through `best` and the
staged program does not. A call is resolved at conversion time, as the call pass resolves it:
a function defined in the function being converted, a closure variable or a global naming a user
function (or a module's function: `utils.sgd`), whose source is parsed and summarised (once per
function object); a few standard-library functions that change what they are given
(`heapq.heappush`, `random.shuffle`, `operator.setitem`) are known as they are. Methods of
objects (`opt.update(p, g)`, `self.step(p)`) cannot be resolved before the call runs: what they
do is not followed (a documented gap).

A summary is flow-insensitive, as the analysis is: a parameter changed anywhere in the callee,
through any name that may hold its container, counts as changed; one the callee first rebinds
to a copy (`params = dict(params)`) counts only for the containers the copy shares.
"""

from __future__ import annotations

import bisect
import builtins
import dataclasses
import heapq
import operator
import random
import types
import weakref

import gast

from transpiler import libraries
from transpiler.analysis import activity, ownership
from transpiler.errors import ConversionError

ITEMS = ownership.ITEMS


@dataclasses.dataclass(frozen=True)
class Summary:
    """What a function does with its arguments' containers.

    Attributes:
      parameters: the names of its positional parameters, in order.
      keywords: the names of its keyword-only parameters.
      vararg, kwarg: the names of its `*args` and `**kwargs`, or None.
      changes: the parameters whose containers it may change in place (`"p"`), or change a
        container they hold (`"p[*]"`).
      returns: (`"p"` or `"p[*]"`, held) of what it may give back: a parameter's container or
        one it holds, or (`held`) a new container holding it (`return (p, q)`).
    """

    parameters: tuple[str, ...]
    keywords: frozenset[str] = frozenset()
    vararg: str | None = None
    kwarg: str | None = None
    changes: frozenset[str] = frozenset()
    returns: frozenset[tuple[str, bool]] = frozenset()

    def bound(self, args, keywords) -> list[tuple[str, int, gast.expr]]:
        """(parameter, depth, argument) of a call's arguments: depth 1 where the parameter
        holds the argument (`*args`, `**kwargs`); every parameter for an unpacked argument."""
        every = [(p, 0) for p in (*self.parameters, *self.keywords)]
        every += [(p, 1) for p in (self.vararg, self.kwarg) if p is not None]
        found = []
        for index, arg in enumerate(args):
            if isinstance(arg, gast.Starred):
                found += [(p, depth, arg.value) for p, depth in every]
            elif index < len(self.parameters):
                found.append((self.parameters[index], 0, arg))
            elif self.vararg is not None:
                found.append((self.vararg, 1, arg))
        for keyword in keywords:
            if keyword.arg is None:
                found += [(p, depth, keyword.value) for p, depth in every]
            elif keyword.arg in self.parameters or keyword.arg in self.keywords:
                found.append((keyword.arg, 0, keyword.value))
            elif self.kwarg is not None:
                found.append((self.kwarg, 1, keyword.value))
        return found


def _first_changed(*names: str) -> Summary:
    return Summary(parameters=names, changes=frozenset({names[0]}))


# Library functions that change the container they are given first.
_LIBRARY = {
    heapq.heappush: _first_changed("heap", "item"),
    heapq.heappop: _first_changed("heap"),
    heapq.heapify: _first_changed("x"),
    heapq.heapreplace: _first_changed("heap", "item"),
    heapq.heappushpop: _first_changed("heap", "item"),
    bisect.insort: _first_changed("a", "x"),
    bisect.insort_left: _first_changed("a", "x"),
    bisect.insort_right: _first_changed("a", "x"),
    random.shuffle: _first_changed("x"),
    operator.setitem: _first_changed("a", "b", "c"),
    operator.delitem: _first_changed("a", "b"),
    operator.iadd: _first_changed("a", "b"),
    operator.ior: _first_changed("a", "b"),
}

_summaries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # function -> Summary
_in_progress: set[int] = set()  # ids of the functions and definitions being summarised


class Callees:
    """Resolves the calls of one function (`fn_node`) at conversion time: through the
    functions defined in it, then its closure's values, its globals and the builtins."""

    def __init__(self, fn_node: gast.FunctionDef, globals_: dict, closure: dict | None = None):
        self.globals = globals_
        self.closure = closure or {}
        self.local: dict[str, gast.FunctionDef] = {}
        for node in gast.walk(fn_node):
            if isinstance(node, gast.FunctionDef) and node is not fn_node:
                # A name defined twice could be either definition: neither is followed.
                self.local[node.name] = None if node.name in self.local else node
        self._local_summaries: dict[int, Summary | None] = {}

    def changed_by(self, call: gast.Call) -> list[str]:
        """The caller's variables, attributes and items (`"p"`, `"p[*]"`) whose containers
        `call` may change in place."""
        summary, args, keywords = self._resolved(call)
        if summary is None or not summary.changes:
            return []
        found = []
        for parameter, depth, arg in summary.bound(args, keywords):
            for change in summary.changes:
                level = _level(change, parameter)
                if level is None or level < depth:
                    continue  # another parameter's, or the `*args` tuple's own
                for path, held in ownership.sources(arg, self):
                    if level == depth:  # the argument's container
                        found += [] if held else [path]
                    else:  # one it holds, at some depth
                        found += [path, ownership.items(path)] if held else [ownership.items(path)]
        return found

    def given_back(self, call: gast.Call) -> list[tuple[str, bool]]:
        """(path, held) of the caller's containers `call`'s value may be or hold."""
        summary, args, keywords = self._resolved(call)
        if summary is None or not summary.returns:
            return []
        found = []
        for parameter, depth, arg in summary.bound(args, keywords):
            for returned, returned_held in summary.returns:
                level = _level(returned, parameter)
                if level is None:
                    continue
                for path, held in ownership.sources(arg, self):
                    if level < depth:  # the `*args` tuple holding the argument
                        found.append((path, True))
                    elif level == depth:  # the argument itself
                        found.append((path, held or returned_held))
                    elif held:  # an item of a display: one of its items, or inside one
                        found += [(path, returned_held), (ownership.items(path), returned_held)]
                    else:
                        found.append((ownership.items(path), returned_held))
        return found

    def _resolved(self, call: gast.Call):
        func, args = call.func, list(call.args)
        if ownership.is_runtime(func):
            if func.attr != "call" or not args:
                return None, [], []
            func, args = args[0], args[1:]
        return self.summary(func), args, call.keywords

    def summary(self, func: gast.expr) -> Summary | None:
        """The summary of the function `func` names, or None where it cannot be resolved."""
        if isinstance(func, gast.Name) and self.local.get(func.id) is not None:
            node = self.local[func.id]
            if id(node) not in self._local_summaries:
                self._local_summaries[id(node)] = None  # a recursive call: not followed
                self._local_summaries[id(node)] = summarize(node, self)
            return self._local_summaries[id(node)]
        value = self._value(func)
        if value is None:
            return None
        try:
            known = _LIBRARY.get(value)
        except TypeError:  # not hashable
            return None
        if known is not None:
            return known
        if isinstance(value, types.FunctionType) and libraries.is_user_function(value):
            return summary_of(value)
        return None

    def _value(self, func: gast.expr):
        """The object `func` (a name, or a module's or class's attributes) names now."""
        names = []
        while isinstance(func, gast.Attribute):
            names.append(func.attr)
            func = func.value
        if not isinstance(func, gast.Name) or func.id in self.local:
            return None
        if func.id in self.closure:
            value = self.closure[func.id]
        elif func.id in self.globals:
            value = self.globals[func.id]
        else:
            value = getattr(builtins, func.id, None)
        for name in reversed(names):
            if not isinstance(value, (types.ModuleType, type)):
                return None  # an object's attribute: a method, bound when the call runs
            value = getattr(value, name, None)
        return value


def _level(path: str, parameter: str) -> int | None:
    """How deep below `parameter`'s container `path` ("p" or "p[*]") is: 0, 1, or None for
    another parameter's."""
    if path == parameter:
        return 0
    if path == parameter + ITEMS:
        return 1
    return None


def summary_of(fn: types.FunctionType) -> Summary | None:
    """The summary of a user function (parsed once per function object), or None where its
    source cannot be had."""
    known = _summaries.get(fn)
    if known is not None and known[0] is fn.__code__:
        return known[1]
    if id(fn) in _in_progress:
        return None  # a recursive call: its own changes are summarised where it is defined
    _in_progress.add(id(fn))
    try:
        from transpiler import parsing

        try:
            node = parsing.parse_function(fn).node
        except (ConversionError, OSError, SyntaxError):
            return None
        summary = summarize(node, Callees(node, fn.__globals__, closure_of(fn)))
    finally:
        _in_progress.discard(id(fn))
    _summaries[fn] = (fn.__code__, summary)
    return summary


def closure_of(fn: types.FunctionType) -> dict:
    """The values of `fn`'s closure variables (those bound)."""
    found = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            found[name] = cell.cell_contents
        except ValueError:  # not bound yet
            pass
    return found


def summarize(fn_node: gast.FunctionDef, callees: Callees) -> Summary:
    """What `fn_node` does with its parameters' containers (see `Summary`)."""
    args = fn_node.args
    parameters = tuple(a.id for a in (*args.posonlyargs, *args.args))
    keywords = frozenset(a.id for a in args.kwonlyargs)
    vararg = args.vararg.id if args.vararg is not None else None
    kwarg = args.kwarg.id if args.kwarg is not None else None
    every = [*parameters, *keywords, *(p for p in (vararg, kwarg) if p is not None)]
    nested: set[str] = set()
    changed: set[str] = set()
    for stmt in gast.walk(fn_node):
        if isinstance(stmt, gast.stmt) and stmt is not fn_node:
            changed.update(ownership.own_changes(stmt, nested, callees))
    changed |= nested
    sharing = ownership.Sharing(fn_node, nested=True, resolve=callees)
    roots = sharing.changed_roots(changed) if changed else set()
    copied = _copied_first(fn_node, set(every))
    changes = set()
    for parameter in every:
        if parameter not in copied and sharing.root(parameter) in roots:
            changes.add(parameter)
        if sharing.root(parameter + ITEMS) in roots:
            changes.add(parameter + ITEMS)
    returns = set()
    for node in activity.walk_scope(fn_node.body):
        if not isinstance(node, gast.Return) or node.value is None:
            continue
        for path, held in ownership.sources(node.value, callees):
            root = sharing.root(path)
            for parameter in every:
                if parameter not in copied and root == sharing.root(parameter):
                    returns.add((parameter, held))
                elif root == sharing.root(parameter + ITEMS):
                    returns.add((parameter + ITEMS, held))
    return Summary(parameters, keywords, vararg, kwarg, frozenset(changes), frozenset(returns))


def _copied_first(fn_node: gast.FunctionDef, parameters: set[str]) -> set[str]:
    """The parameters the function's first statement naming them rebinds to a new container
    (`params = dict(params)`): the container given is reached only through its items after."""
    found, seen = set(), set()
    for stmt in fn_node.body:
        names = {n.id for n in gast.walk(stmt) if isinstance(n, gast.Name)} & parameters
        for name in names - seen:
            if (
                isinstance(stmt, gast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], gast.Name)
                and stmt.targets[0].id == name
                and not any(
                    path == name and not held for path, held in ownership.sources(stmt.value)
                )
                and not any(
                    isinstance(n, gast.Name) and n.id == name and isinstance(n.ctx, gast.Store)
                    for later in fn_node.body[fn_node.body.index(stmt) + 1 :]
                    for n in gast.walk(later)
                )
            ):
                found.add(name)
        seen |= names
    return found
