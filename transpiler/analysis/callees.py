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
a function or class defined in the function being converted (or a name bound once to a
lambda or to another function there), a closure variable or a global naming a user function
or class (or a module's or class's function: `utils.sgd`, `Opt.step`), a `functools.partial`
of one; whose source is parsed and summarised (once per function object). A few
standard-library functions that change what they are given (`heapq.heappush`,
`random.shuffle`, `operator.setitem`) are known as they are. A user function whose source
cannot be had, or that is being summarised already (recursion), may do anything to what it is
given (`UNKNOWN`). Methods of objects (`opt.update(p, g)`, `self.step(p)`) cannot be resolved
before the call runs: what they do is not followed (a documented gap).

A summary is flow-insensitive, as the analysis is: a parameter changed anywhere in the callee,
through any name that may hold its container, counts as changed; one the callee first rebinds
to a copy (`params = dict(params)`, after statements that only read it) counts only for the
containers the copy shares.
"""

from __future__ import annotations

import bisect
import builtins
import dataclasses
import functools
import heapq
import operator
import random
import types
import weakref

import gast

from transpiler import libraries, structure
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
      changes: the paths from its parameters whose containers it may change in place: `"p"`,
        `"p[*]"` (a container `p` holds), `"st.params"` (an attribute's).
      returns: (path, depth) of what it may give back: a parameter's container or one it
        reaches (`"p"`, `"p[*]"`, `"st.params"`; depth 0), or a new container holding it
        (`return (p, q)`: depth 1; 2 for deeper).
      joins: pairs of paths it may leave holding one container (`cache["best"] = p`:
        `("cache[*]", "p")`).
      unknown: what it does cannot be told: every container it is given may be changed, kept
        and given back.
      constructs: a class (the summary is its `__init__`'s): the new object it gives back
        may keep what it is given.
    """

    parameters: tuple[str, ...]
    keywords: frozenset[str] = frozenset()
    vararg: str | None = None
    kwarg: str | None = None
    changes: frozenset[str] = frozenset()
    returns: frozenset[tuple[str, int]] = frozenset()
    joins: frozenset[tuple[str, str]] = frozenset()
    unknown: bool = False
    constructs: bool = False  # a class: its new object may keep what it is given
    written_globals: frozenset[str] = frozenset()  # `global best; best = p`

    def bound(self, args, keywords) -> list[tuple[str, int, gast.expr]]:
        """(parameter, depth, argument) of a call's arguments: depth 1 where the parameter
        holds the argument (`*args`, `**kwargs`), -1 where the argument holds the parameter
        (an unpacked one: `f(*pair)`, bound to every parameter)."""
        every = [(p, 0) for p in (*self.parameters, *self.keywords)]
        every += [(p, 1) for p in (self.vararg, self.kwarg) if p is not None]
        found = []
        for index, arg in enumerate(args):
            if isinstance(arg, gast.Starred):
                found += [(p, depth - 1, arg.value) for p, depth in every]
            elif index < len(self.parameters):
                found.append((self.parameters[index], 0, arg))
            elif self.vararg is not None:
                found.append((self.vararg, 1, arg))
        for keyword in keywords:
            if keyword.arg is None:
                found += [(p, depth - 1, keyword.value) for p, depth in every]
            elif keyword.arg in self.parameters or keyword.arg in self.keywords:
                found.append((keyword.arg, 0, keyword.value))
            elif self.kwarg is not None:
                found.append((self.kwarg, 1, keyword.value))
        return found

    def shifted(self, count: int) -> Summary:
        """The summary of the function with its first `count` positional parameters given
        already (a bound method, a `functools.partial`)."""
        if self.unknown or count == 0:
            return self
        given = set(self.parameters[:count])
        return dataclasses.replace(
            self,
            parameters=self.parameters[count:],
            keywords=self.keywords | (set(self.parameters[count:]) - given),
        )


UNKNOWN = Summary(parameters=(), unknown=True)


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
_in_progress: set[int] = set()  # ids of the functions being summarised


class Callees:
    """Resolves the calls of one scope (`fn_node`, nested in `parent`'s) at conversion time:
    through the names bound in it, then in the scopes around it, its closure's values, its
    globals and the builtins."""

    def __init__(
        self,
        fn_node: gast.FunctionDef,
        globals_: dict,
        closure: dict | None = None,
        parent: Callees | None = None,
    ):
        self.globals = globals_
        self.closure = closure or {}
        self.parent = parent
        # name -> its one definition (a def, class or lambda node, or the name of another
        # function); None for a name bound otherwise, or more than once.
        self.local: dict[str, gast.AST | str | None] = _local_definitions(fn_node)
        self._local_summaries: dict[int, Summary] = {}
        self._scopes: dict[int, Callees] = {}
        self._resolving: set[str] = set()  # the names `step = sgd` leads through now

    def scope(self, fn_node: gast.FunctionDef) -> Callees:
        """The resolver of a function nested in this one."""
        if id(fn_node) not in self._scopes:
            self._scopes[id(fn_node)] = Callees(fn_node, self.globals, self.closure, self)
        return self._scopes[id(fn_node)]

    def new_object_fields(self, func: gast.expr) -> frozenset[str] | None:
        """The fields of the new object calling `func` gives, where it is a dataclass of a
        module's whose `__init__` only stores its arguments (the generated one, no
        `__post_init__`) and whose objects are new (`type`'s, `object.__new__`): nothing but
        the name it is bound to holds it, as long as only those fields of it are read or set
        (a method, a property, `__dict__` may hand on `self`); else None."""
        value = self._value(func)
        if not (isinstance(value, type) and type(value) is type):
            return None
        if value.__new__ is not object.__new__ or not _generated_init(value):
            return None
        if hasattr(value, "__post_init__"):
            return None
        names = frozenset(field.name for field in dataclasses.fields(value))
        if any(not isinstance(getattr(value, n, None), _PLAIN_DEFAULTS) for n in names):
            return None  # a field a descriptor of the class's own stands for
        return names

    def changed_by(self, call: gast.Call) -> list[str]:
        """The caller's variables, attributes and items (`"p"`, `"p[*]"`) whose containers
        `call` may change in place."""
        summary, args, keywords = self._resolved(call)
        if summary is None:
            return []
        if summary.unknown:
            return [
                path
                for arg in _arguments(args, keywords)
                for source, held in ownership.sources(arg, self)
                for path in ([source, ownership.items(source)] if not held else [source])
            ]
        found = []
        for parameter, depth, arg in _bound(summary, args, keywords):
            arg_sources = ownership.sources(arg, self)
            for change in summary.changes:
                found += _translated(change, parameter, depth, arg_sources, changes=True)
        return [path for path, _ in found]

    def given_back(self, call: gast.Call) -> list[tuple[str, int]]:
        """(path, depth) of the caller's containers `call`'s value may be or hold (see
        `ownership.sources`)."""
        summary, args, keywords = self._resolved(call)
        if summary is None:
            return []
        if summary.unknown or summary.constructs:
            # A class's new object may keep what it is given (`Holder(params)`).
            return [
                (source, 1)
                for arg in _arguments(args, keywords)
                for source, _ in ownership.sources(arg, self)
            ]
        found = []
        for parameter, depth, arg in _bound(summary, args, keywords):
            arg_sources = ownership.sources(arg, self)
            for returned, held in summary.returns:
                found += [
                    (path, min(held + inner, 2))
                    for path, inner in _translated(returned, parameter, depth, arg_sources)
                ]
        return found

    def joined_by(self, call: gast.Call) -> list[tuple[str, str]]:
        """Pairs of the caller's paths `call` may leave holding one container."""
        summary, args, keywords = self._resolved(call)
        if summary is None or summary.unknown or not summary.joins:
            return []
        bound = [
            (parameter, depth, ownership.sources(arg, self))
            for parameter, depth, arg in _bound(summary, args, keywords)
        ]

        def ends(path):  # a global's path is the caller's too
            if _head(path) in summary.written_globals:
                return [path]
            return [p for x in bound for p, _ in _translated(path, *x, changes=True)]

        return [(x, y) for a, b in summary.joins for x in ends(a) for y in ends(b)]

    def _resolved(self, call: gast.Call):
        func, args = ownership.called(call)
        if ownership.is_runtime(func):
            return None, [], []
        if args and _maps(self._value(func)):
            # `map(bump, layers)`, `jax.tree.map(bump, params)`: `bump` given each item
            inner = self.summary(args[0])
            return (_Mapped(inner) if inner is not None else None), args[1:], []
        return self.summary(func), args, call.keywords

    def summary(self, func: gast.expr) -> Summary | None:
        """The summary of the function `func` names, or None where it cannot be resolved."""
        if isinstance(func, gast.Call):  # `functools.partial(sgd, lr=0.1)(params, g)`
            maker, given = ownership.called(func)
            if self._value(maker) is functools.partial and given:
                inner = self.summary(given[0])
                return inner.shifted(len(given) - 1) if inner is not None else None
            return None
        if isinstance(func, gast.Name):
            found, scope = self._local(func.id)
            if scope is not None:
                return scope._summary_of_local(found)
        if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name):
            found, scope = self._local(func.value.id)
            if isinstance(found, gast.ClassDef):  # `Opt.step(params)`, `Opt` defined here
                return scope._summary_of_method(found, func.attr)
        return _summary_of_value(self._value(func))

    def _summary_of_method(self, cls: gast.ClassDef, name: str) -> Summary | None:
        methods = [n for n in cls.body if isinstance(n, gast.FunctionDef) and n.name == name]
        if len(methods) != 1:
            return None if not methods else UNKNOWN
        method = methods[0]
        if id(method) not in self._local_summaries:
            self._local_summaries[id(method)] = UNKNOWN  # a recursive call
            summary = summarize(method, self.scope(method))
            decorators = {structure.root_name(d) for d in method.decorator_list} | {
                d.attr for d in method.decorator_list if isinstance(d, gast.Attribute)
            }
            self._local_summaries[id(method)] = (
                summary.shifted(1) if "classmethod" in decorators else summary
            )
        return self._local_summaries[id(method)]

    def _local(self, name: str):
        """(definition, scope) of a name bound in this scope or one around it; (None, None)
        where none binds it."""
        scope = self
        while scope is not None:
            if name in scope.local:
                return scope.local[name], scope
            scope = scope.parent
        return None, None

    def _summary_of_local(self, found) -> Summary | None:
        if found is None:
            return None  # bound otherwise (a variable holding who knows what): not followed
        if found is _EITHER:
            return UNKNOWN
        if isinstance(found, str):  # `step = sgd`
            if found in self._resolving:
                return UNKNOWN  # `a = b` and `b = a`
            self._resolving.add(found)
            try:
                name = gast.Name(id=found, ctx=gast.Load(), annotation=None, type_comment=None)
                return self.summary(name)
            finally:
                self._resolving.discard(found)
        if id(found) not in self._local_summaries:
            self._local_summaries[id(found)] = UNKNOWN  # a recursive call
            if isinstance(found, gast.ClassDef):
                init = [
                    n
                    for n in found.body
                    if isinstance(n, gast.FunctionDef) and n.name == "__init__"
                ]
                summary = summarize(init[0], self.scope(init[0])).shifted(1) if init else _NEW
                summary = dataclasses.replace(summary, constructs=True)
            else:
                function = _as_function(found)
                summary = summarize(function, self.scope(function))
            self._local_summaries[id(found)] = summary
        return self._local_summaries[id(found)]

    def _value(self, func: gast.expr):
        """The object `func` (a name, or a module's or class's attributes) names now."""
        names = []
        while isinstance(func, gast.Attribute):
            names.append(func.attr)
            func = func.value
        if not isinstance(func, gast.Name) or self._local(func.id)[1] is not None:
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


_NEW = Summary(parameters=(), vararg="args", kwarg="kwargs")  # a class with no `__init__`
# What a dataclass's class holds at a field's name: nothing, or the field's default value.
_PLAIN_DEFAULTS = (type(None), bool, int, float, complex, str, tuple, frozenset)


class _Mapped(Summary):
    """A function's summary as `map` calls it: with an item of each argument."""

    def __init__(self, inner: Summary):
        super().__init__(**{f.name: getattr(inner, f.name) for f in dataclasses.fields(inner)})


def _bound(summary: Summary, args, keywords) -> list[tuple[str, int, gast.expr]]:
    """`summary.bound`; for a function `map` calls, each parameter holds an item of the
    argument at its position (depth -1)."""
    if isinstance(summary, _Mapped):
        names = [*summary.parameters, *([summary.vararg] * len(args) if summary.vararg else [])]
        return [(name, -1, arg) for name, arg in zip(names, args)]
    return summary.bound(args, keywords)


def _maps(value) -> bool:
    """Whether `value` is `map`, or JAX's `tree.map` (which may call with containers too,
    given `is_leaf`)."""
    if value is map:
        return True
    module, name = getattr(value, "__module__", "") or "", getattr(value, "__name__", "")
    return module.startswith("jax") and name in ("map", "tree_map")


def _arguments(args, keywords) -> list[gast.expr]:
    return [a.value if isinstance(a, gast.Starred) else a for a in args] + [
        k.value for k in keywords
    ]


def _translated(path, parameter, depth, arg_sources, changes=False) -> list[tuple[str, int]]:
    """The caller's (path, depth) for a callee's `path` from `parameter` (`"p"`, `"p[*]"`,
    `"p.attr"`), given the sources of the argument bound to it at `depth` (see
    `Summary.bound`). With `changes`, what changing `path` changes: a new display the
    argument is changes nothing of the caller's."""
    head = _head(path)
    if head != parameter:
        return []
    rest = path[len(head) :]  # "", "[*]", "[*][*]", ".attr", ".attr[*]"
    found = []
    for source, held in arg_sources:
        level = depth + held  # how far below the parameter `source` is
        if level < 0:  # the argument holds the parameter: `f(*pair)`
            source, level = ownership.items(source), 0
        if level == 0:
            if rest.startswith("."):
                found.append((source + rest if not source.endswith(ITEMS) else source, 0))
            else:
                for _ in range(rest.count(ITEMS)):
                    source = ownership.items(source)
                found.append((source, 0))
        elif rest.startswith(ITEMS):  # the argument is one of the containers `p` holds
            deeper = ownership.items(source)
            found += [(source, 0), (deeper, 0), (ownership.items(deeper), 0)]
        elif not changes and not rest:  # `return args`: a tuple holding the argument
            found.append((source, 1))
    return found


def _summary_of_value(value) -> Summary | None:
    """The summary of a function object (or class, partial, bound method), None where it is
    not user code (library code changes nothing of the caller's, but `_LIBRARY`)."""
    if value is None:
        return None
    try:
        known = _LIBRARY.get(value)
    except TypeError:  # not hashable
        return None
    if known is not None:
        return known
    if isinstance(value, functools.partial):
        inner = _summary_of_value(value.func)
        return inner.shifted(len(value.args)) if inner is not None else None
    if isinstance(value, types.MethodType):  # `Opt.step` of a classmethod
        inner = _summary_of_value(value.__func__)
        return inner.shifted(1) if inner is not None else None
    if isinstance(value, type):
        if libraries.is_library(value):
            return None
        init = value.__init__
        if _generated_init(value):
            summary = _NEW if not hasattr(value, "__post_init__") else UNKNOWN
        elif isinstance(init, types.FunctionType) and libraries.is_user_function(init):
            summary = summary_of(init).shifted(1)
        else:
            summary = _NEW
        return dataclasses.replace(summary, constructs=True)
    if isinstance(value, types.FunctionType) and libraries.is_user_function(value):
        return summary_of(value)
    return None


def _generated_init(cls: type) -> bool:
    """Whether `cls.__init__` is a dataclass's, which only stores its arguments."""
    init = getattr(cls.__init__, "__code__", None)
    return dataclasses.is_dataclass(cls) and init is not None and init.co_filename.startswith("<")


def summary_of(fn: types.FunctionType) -> Summary:
    """The summary of a user function (parsed once per function object); `UNKNOWN` where its
    source cannot be had, or while it is being summarised (a recursive call)."""
    known = _summaries.get(fn)
    if known is not None and known[0] is fn.__code__:
        return known[1]
    if id(fn) in _in_progress:
        return UNKNOWN
    _in_progress.add(id(fn))
    try:
        from transpiler import parsing

        try:
            node = parsing.parse_function(fn).node
        except (ConversionError, OSError, SyntaxError):
            summary = UNKNOWN
        else:
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


_EITHER = "<either of two definitions>"


def _local_definitions(fn_node: gast.FunctionDef) -> dict:
    """The names bound in `fn_node`'s own scope (not in a class's body), each to its one
    definition: a def, a class, a lambda (`step = lambda p: ...`), another name (`step =
    sgd`); `_EITHER` where bound to several definitions; None where bound otherwise."""
    found: dict = {}

    def bind(name, definition):
        if name not in found:
            found[name] = definition
        elif found[name] is None or definition is None:
            found[name] = None
        else:  # two definitions (one in each branch of an `if`): either may be called
            found[name] = _EITHER

    stack = list(fn_node.body) if fn_node.body is not None else []
    args = fn_node.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None:
            bind(arg.id, None)
    while stack:
        node = stack.pop()
        if isinstance(node, (gast.FunctionDef, gast.ClassDef)):
            bind(node.name, node)
            continue
        if isinstance(node, (gast.AsyncFunctionDef, gast.Lambda)):
            if isinstance(node, gast.AsyncFunctionDef):
                bind(node.name, None)
            continue
        if isinstance(node, gast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, gast.Name) and isinstance(value, gast.Lambda):
                bind(target.id, value)
                continue
            if isinstance(target, gast.Name) and isinstance(value, gast.Name):
                bind(target.id, value.id)
                continue
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Del)):
            bind(node.id, None)
        if isinstance(node, (gast.Global, gast.Nonlocal)):
            for name in node.names:
                bind(name, None)
        stack.extend(structure.children(node))
    return found


def _head(path: str) -> str:
    """The variable a path starts from: `p` of `p.attr[*]`."""
    return ownership.head(path)


def _as_function(node) -> gast.FunctionDef:
    """A def, or a lambda as one (`return` of its expression)."""
    if not isinstance(node, gast.Lambda):
        return node
    return gast.FunctionDef(
        name="lambda_",
        args=node.args,
        body=[gast.Return(value=node.body)],
        decorator_list=[],
        returns=None,
        type_comment=None,
        type_params=[],
    )


def summarize(fn_node: gast.FunctionDef, callees: Callees) -> Summary:
    """What `fn_node` does with its parameters' containers (see `Summary`)."""
    args = fn_node.args
    parameters = tuple(a.id for a in (*args.posonlyargs, *args.args))
    keywords = frozenset(a.id for a in args.kwonlyargs)
    vararg = args.vararg.id if args.vararg is not None else None
    kwarg = args.kwarg.id if args.kwarg is not None else None
    every = {*parameters, *keywords, *(p for p in (vararg, kwarg) if p is not None)}
    # Module globals it rebinds (`global best; best = p`): joined with the caller's names.
    written = {
        name
        for node in structure.walk_nodes(fn_node)
        if isinstance(node, gast.Global)
        for name in node.names
    }
    nested: set[str] = set()
    changed: set[str] = set()
    for stmt in structure.walk_nodes(fn_node):
        if isinstance(stmt, gast.stmt) and stmt is not fn_node:
            changed.update(ownership.own_changes(stmt, nested, callees))
    changed |= nested
    sharing = ownership.Sharing(fn_node, nested=True, resolve=callees)
    copied = _copied_first(fn_node, every, callees)

    candidates = sharing.known() | changed
    candidates |= {p for q in every | written for p in (q, q + ITEMS, q + ITEMS + ITEMS)}

    def reaching(root: str) -> set[str]:
        """The paths from parameters whose container is `root`'s."""
        found = set()
        for path in candidates:
            head = _head(path)
            if head not in every | written or sharing.root(path) != root:
                continue
            if head in copied and not path.startswith(head + ITEMS):
                continue  # the copy's, not the container given
            found.add(path)
        return found

    changes = set()
    for root in sharing.changed_roots(changed) if changed else ():
        changes |= reaching(root)
    returns = set()
    for node in activity.walk_scope(fn_node.body):
        if isinstance(node, (gast.Return, gast.Yield, gast.YieldFrom)) and node.value is not None:
            # A generator gives back an iterator holding what it yields.
            held_by = 0 if isinstance(node, gast.Return) else 1
            for path, held in ownership.sources(node.value, callees):
                if isinstance(node, gast.YieldFrom):  # it yields the items of its value
                    path, held = (path, held - 1) if held else (ownership.items(path), 0)
                found = reaching(sharing.root(path))
                returns |= {(one, min(held + held_by, 2)) for one in found}
    joins = set()
    for root in sharing.roots():
        paths = sorted(reaching(root))
        joins |= {(a, b) for a in paths for b in paths if a < b}
    return Summary(
        parameters,
        keywords,
        vararg,
        kwarg,
        frozenset(c for c in changes if _head(c) in every),
        frozenset(r for r in returns if _head(r[0]) in every),
        frozenset(joins),
        written_globals=frozenset(written),
    )


def _copied_first(fn_node: gast.FunctionDef, parameters: set[str], callees: Callees) -> set[str]:
    """The parameters the function rebinds to a new container (`params = dict(params)`)
    before anything but reads of them (`if g is None: return params`): the container given
    is reached only through its items after that."""
    found = set()
    for name in parameters:
        for index, stmt in enumerate(fn_node.body):
            if (
                isinstance(stmt, gast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], gast.Name)
                and stmt.targets[0].id == name
            ):
                rebinds_later = any(
                    isinstance(n, gast.Name) and n.id == name and isinstance(n.ctx, gast.Store)
                    for later in fn_node.body[index + 1 :]
                    for n in structure.walk_nodes(later)
                )
                keeps = any(path == name for path, _ in ownership.sources(stmt.value))
                if not rebinds_later and not keeps:
                    found.add(name)
                break
            if not _only_reads(stmt, name, callees):
                break
    return found


def _only_reads(stmt: gast.stmt, name: str, callees: Callees) -> bool:
    """Whether `stmt` at most reads `name`'s container: it changes it in no way the analysis
    sees, hands it to no call but one that only reads it (`norm(params)`), binds no other
    name to it and stores it nowhere (but a `return`, which ends the function)."""
    for node in structure.walk_nodes(stmt):
        if isinstance(node, gast.Return):
            continue
        if isinstance(node, gast.Name) and node.id == name and not isinstance(node.ctx, gast.Load):
            return False
        if isinstance(node, gast.Call) and any(
            isinstance(arg, gast.Name) and arg.id == name
            for arg in _arguments(node.args, node.keywords)
        ):
            summary = callees._resolved(node)[0]
            if summary is None or summary.unknown or summary.constructs or summary.joins:
                return False  # handed to a function, which may change or keep it
            if any(_head(p) == name for p in callees.changed_by(node)):
                return False
            if any(_head(p) == name for p, _ in callees.given_back(node)):
                return False  # given back: whatever holds the call's value holds it
        if any(
            source == name or source.startswith(name + ".")
            for _, value, item in ownership.bindings(node)
            if not item  # `for k in params`: the items, followed through `params[*]`
            for source, _ in ownership.sources(value)
        ):
            return False
        if any(_head(p) == name for p in ownership.changed_paths(node, frozenset())):
            return False
    return True
