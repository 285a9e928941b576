"""Names that own the container they hold: no other name or object can reach it.

A staged `if` (or loop) hands the containers of its state back as new objects: `best = [v, v]`
in one branch and the list `best` held before in the other come out as one list, built from
the selected values. Python's `best` is one of two objects, chosen by the condition; where
another name or object reaches the list held before (`best = init`, a parameter, an attribute),
writing through one and reading through the other would differ from Python. The runtime
refuses that case, except for the names this analysis finds: those that only ever hold a
container the function made itself and never hand on (so nothing else can see which object
it is).

`aliased_after` (for the control-flow pass) and `aliased_names` (for conditional expressions)
extend what the function changes in place to every name that may hold the same container.

Flow-insensitive and conservative: a name is owned if every assignment to it makes a new
container (a display, a comprehension, `list(...)`, `a + b`) or hands back its own (generated
`rt__.list_append(name, ...)`), and every read of it only looks inside (`best[0]`,
`best.append(v)`, `len(best)`, `jnp.stack(best)`, `for v in best`, `return best`). Parameters,
`global`/`nonlocal` names, names a nested function or lambda reads, and names assigned by
unpacking or as loop targets are not owned. The return-value variable of the return pass
(`retval = best`) counts as a return.
"""

from __future__ import annotations

from collections.abc import Iterator

import gast

from transpiler import anno, naming, structure
from transpiler.analysis import activity
from transpiler.naming import RUNTIME
from transpiler.transformer import Visitor

# Builtins that read a container without keeping it (or make a new one from it).
_READERS = frozenset(
    {
        "len",
        "sum",
        "max",
        "min",
        "sorted",
        "list",
        "tuple",
        "set",
        "dict",
        "enumerate",
        "zip",
        "reversed",
        "any",
        "all",
        "print",
        "str",
        "repr",
        "isinstance",
        "abs",
        "round",
        "int",
        "float",
        "bool",
        "range",
        "format",
    }
)
# Modules whose functions read containers without keeping them.
_READING_MODULES = frozenset({"jnp", "np", "numpy", "jax", "lax", "math"})
# Runtime operators generated code calls that read their arguments without keeping them; and
# those that change the container they are given first (the others they may keep: `append`).
_RUNTIME_READERS = frozenset(
    {
        "print_",
        "len_",
        "max_",
        "min_",
        "sum_",
        "fstring",
        "format_",
        "str_",
        "repr_",
        "percent",
        "in_",
        "not_",
        "int_",
        "float_",
        "bool_",
        "stack_list",
        "list_item",
        "ld",
        "deleted",
        "assert_",
        "pow_",
    }
)
_RUNTIME_CHANGERS = frozenset(
    {"list_append", "list_setitem", "list_update", "list_pop", "list_reverse", "list_insert"}
)
_MAKERS = (gast.List, gast.Dict, gast.Set, gast.ListComp, gast.DictComp, gast.SetComp)


def owned_names(fn_node: gast.FunctionDef, resolve=None) -> frozenset[str]:
    """The names of `fn_node` (not of functions nested in it) that own their containers; with
    `resolve` (a `callees.Callees`), those bound to new objects of dataclasses too (`s =
    Episode(0.0, 0)`) through which only fields are read or set (`_owns_new_objects`): for the
    runtime's `owned=` only, which looks at what such an object holds (`runtime.identity.
    owning`); the aliasing analyses here follow the attributes of those objects as before."""
    visitor = _Uses()
    for stmt in fn_node.body:
        visitor.visit(stmt)
    parameters = activity.params_of(fn_node.args)
    returns = {
        name
        for name, values in visitor.assigned.items()
        if any(_is_runtime_call(v, "UndefinedReturnValue") for v in values)
    }
    owned = set()
    for name, values in visitor.assigned.items():
        if name in parameters or name in visitor.escaped or name in returns:
            continue
        if all(_makes_or_keeps(value, name) for value in values):
            owned.add(name)
        elif resolve is not None and _owns_new_objects(name, values, visitor, resolve):
            owned.add(name)
    # `retval = best` is the function's return; other assignments from a name hand it on.
    for target, source in visitor.copies:
        if target not in returns:
            owned.discard(source)
    # Not the return value itself: the caller holds what it gives back, and may change it in
    # place (`e = pick(d, v); e["b"] += 1` changes `d` where `pick` returned it).
    return frozenset(owned)


class _Uses(Visitor):
    def __init__(self):
        self.assigned: dict[str, list] = {}  # name -> assigned values (None: not a plain one)
        self.escaped: set[str] = set()
        self.copies: list[tuple[str, str]] = []  # (target, source) of `target = source`
        self.attributes: dict[str, set[str]] = {}  # name -> the attributes read or set on it

    def _assign(self, target, value) -> None:
        if isinstance(target, gast.Name):
            self.assigned.setdefault(target.id, []).append(value)
            if isinstance(value, gast.Name):
                self.copies.append((target.id, value.id))
            return
        if (
            isinstance(target, (gast.Tuple, gast.List))
            and isinstance(value, (gast.Tuple, gast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(x, gast.Starred) for x in (*target.elts, *value.elts))
        ):
            for part, part_value in zip(target.elts, value.elts):  # `hs, ys = [], []`
                self._assign(part, part_value)
            return
        for node in structure.walk_nodes(target):  # unpacking, starred: not a plain assignment
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store):
                self.assigned.setdefault(node.id, []).append(None)

    def visit_Assign(self, node):
        for target in node.targets:
            # (`s = t = []`: one list under two names, which neither owns.)
            self._assign(target, node.value if len(node.targets) == 1 else None)
            if not isinstance(target, gast.Name):
                self.visit(target)
                if isinstance(node.value, gast.Name):  # `self.h = best`, `d[k] = best`
                    self.escaped.add(node.value.id)
        self._read(node.value, direct=not isinstance(node.value, gast.Name))

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._assign(node.target, node.value)
            self._read(node.value, direct=not isinstance(node.value, gast.Name))

    def visit_AugAssign(self, node):
        if isinstance(node.target, gast.Name):  # `best += [v]`: extends it, the same list
            self.assigned.setdefault(node.target.id, []).append(node.target)
        else:
            self.visit(node.target)
        self._read(node.value, direct=False)

    def visit_For(self, node):
        self._assign(node.target, None)
        self.generic_visit(node)

    def visit_With(self, node):
        for item in node.items:
            if item.optional_vars is not None:
                self._assign(item.optional_vars, None)
        self.generic_visit(node)

    def visit_Global(self, node):
        self.escaped.update(node.names)

    visit_Nonlocal = visit_Global

    def visit_FunctionDef(self, node):  # what a nested function reads, it may keep
        self.escaped.update(_names(node))

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Return(self, node):  # what is returned, nothing after it can change
        if node.value is not None:
            self._returned(node.value)

    def _returned(self, value) -> None:
        """`return best`, `return best, n`, `return {"loss": losses}`: the containers returned
        as they are, or as items of a tuple, list or dict made for the return."""
        if isinstance(value, (gast.Tuple, gast.List)):
            for item in value.elts:
                self._returned(item.value if isinstance(item, gast.Starred) else item)
        elif isinstance(value, gast.Dict):
            for key, item in zip(value.keys, value.values):
                if key is not None:
                    self.visit(key)
                self._returned(item)
        else:
            self._read(value, direct=False)

    def visit_Name(self, node):
        if isinstance(node.ctx, gast.Load):
            self.escaped.add(node.id)  # a read not recognised as looking inside

    def _read(self, value, direct: bool) -> None:
        """Visits `value`; `direct`: a name that is the whole value is an alias (handled by
        `copies`), not looked inside."""
        if isinstance(value, gast.Name) and not direct:
            return
        self.visit(value)

    def visit_Subscript(self, node):
        if isinstance(node.value, gast.Name):
            self.visit(node.slice)
            return
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if isinstance(node.value, gast.Name):
            # `best.append`, `best.shape`: a method or attribute of the container
            self.attributes.setdefault(node.value.id, set()).add(node.attr)
            return
        self.generic_visit(node)

    def visit_Call(self, node):
        args = [a.value if isinstance(a, gast.Starred) else a for a in node.args]
        args += [k.value for k in node.keywords]
        if _reads_only(node.func) and not _gives_back_an_argument(node):
            self._looked_inside(args)
        elif is_runtime(node.func) and node.func.attr in _RUNTIME_CHANGERS and args:
            self._looked_inside(args[:1])
            for arg in args[1:]:
                self.visit(arg)
        else:
            self.generic_visit(node)

    def _looked_inside(self, nodes) -> None:
        for value in nodes:
            if not isinstance(value, gast.Name):
                self.visit(value)

    def visit_Compare(self, node):
        self._looked_inside([node.left, *node.comparators])

    def visit_BinOp(self, node):
        self._looked_inside([node.left, node.right])

    def visit_UnaryOp(self, node):
        self._looked_inside([node.operand])

    def visit_BoolOp(self, node):
        for value in node.values:  # `view = s or default`: the value is one of them
            self.visit(value)

    def _tested(self, test) -> None:
        """Visits a test: the operands of its `and`, `or` and `not` are looked inside (its
        truth is taken, the object is not kept)."""
        for node in structure.truth_tested(test):
            if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not):
                self._tested(node.operand)
            elif not isinstance(node, gast.BoolOp):
                self._looked_inside([node])

    def visit_If(self, node):
        self._tested(node.test)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    def visit_While(self, node):
        self.visit_If(node)

    def visit_IfExp(self, node):
        self._tested(node.test)
        self.visit(node.body)
        self.visit(node.orelse)

    def visit_Assert(self, node):
        self._tested(node.test)
        if node.msg is not None:
            self.visit(node.msg)

    def visit_comprehension(self, node):
        self._assign(node.target, None)
        self._looked_inside([node.iter])
        for test in node.ifs:
            self._tested(test)


def _reads_only(func) -> bool:
    if isinstance(func, gast.Name):
        return func.id in _READERS and activity.reads_module(func)
    if is_runtime(func):
        return func.attr in _RUNTIME_READERS
    return isinstance(func, gast.Attribute) and structure.root_name(func) in _READING_MODULES


def _makes_or_keeps(value, name: str) -> bool:
    """Whether `value`, assigned to `name`, is a new container or `name`'s own."""
    if value is None:
        return False
    if isinstance(value, _MAKERS) or isinstance(value, gast.BinOp):
        return True
    if anno.hasanno(value, anno.Static.NEW_LIST):  # a comprehension, made a function's call
        return True
    if isinstance(value, gast.Name):
        return value.id == name  # `best += ...` (recorded as its own target)
    if isinstance(value, gast.Call):
        func = value.func
        if isinstance(func, gast.Name) and func.id in _NEW_CONTAINERS:
            return activity.reads_module(func)  # a `def sorted` of the user's may be no copy
        if is_runtime(func) and value.args and isinstance(value.args[0], gast.Name):
            if func.attr == "call":  # `rt__.call(dict, cfg)`: the call pass's `dict(cfg)`
                first = value.args[0]
                return first.id in _NEW_CONTAINERS and activity.reads_module(first)
            return value.args[0].id == name  # `best = rt__.list_append(best, v)`
        if is_runtime(func) and func.attr == "stack_list":
            return True  # `rows = jnp.stack(rows)`: an array, no container of anyone's
    return False


_NEW_CONTAINERS = frozenset({"list", "dict", "set", "sorted"})  # builtins that make a new one


def _owns_new_objects(name: str, values, visitor, resolve) -> bool:
    """Whether `name` is bound only to new containers and new objects of dataclasses
    (`Episode(0.0, 0)`, as the call pass writes it: `rt__.call(Episode, 0.0, 0)`; see
    `callees.Callees.new_object_fields`), and only those objects' fields are read or set
    through it (`s.ret`: not a method, a property or `__dict__`, which may hand on `self`)."""
    fields = None
    for value in values:
        if _makes_or_keeps(value, name):
            continue
        if not isinstance(value, gast.Call):
            return False
        func, _ = called(value)
        if not isinstance(func, (gast.Name, gast.Attribute)):
            return False
        made = resolve.new_object_fields(func)
        if made is None:
            return False
        fields = made if fields is None else fields & made
    return fields is not None and visitor.attributes.get(name, set()) <= fields


def _gives_back_an_argument(call: gast.Call) -> bool:
    """Whether `call` (of a reader) may give back one of its arguments itself: `max(a, b,
    key=len)`, `min(a, b)`."""
    func = call.func
    name = func.attr if is_runtime(func) else getattr(func, "id", None)
    return name in ("max", "min", "max_", "min_") and len(call.args) > 1


def is_runtime(func) -> bool:
    """`rt__.<operator>`, as generated code calls the runtime."""
    return (
        isinstance(func, gast.Attribute)
        and isinstance(func.value, gast.Name)
        and (func.value.id == RUNTIME)
    )


def called(call: gast.Call) -> tuple[gast.expr, list[gast.expr]]:
    """(function, positional arguments) of a call as the user wrote it: `(f, [x])` of
    `rt__.call(f, x)`, the call pass's form, and of `f(x)`."""
    func, args = call.func, list(call.args)
    if is_runtime(func) and func.attr == "call" and args:
        return args[0], args[1:]
    return func, args


def _is_runtime_call(value, attr: str) -> bool:
    return isinstance(value, gast.Call) and is_runtime(value.func) and value.func.attr == attr


def _names(node) -> set[str]:
    return {n.id for n in structure.walk_nodes(node) if isinstance(n, gast.Name)}


# Methods that change a list, dict or set in place.
_CHANGING_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "update",
        "setdefault",
        "sort",
        "reverse",
        "popitem",
        "add",
        "discard",
        "__setitem__",
        "__delitem__",
    }
)


def changed_in_place(
    fn_node: gast.FunctionDef,
    owned: frozenset[str] = frozenset(),
    nested: bool = False,
    resolve=None,
) -> frozenset[str]:
    """The variables and attributes (`"opts"`, `"self.hist"`) whose list or dict `fn_node`'s own
    code (with `nested`, its nested functions' too) changes in place: an item stored or deleted
    (`opts[k] = v`, `self.hist[0] += 1`, `del h[0]`), an augmented assignment of a container
    (`buf += [v]` extends the list itself), a changing method called (`h.append(v)`, as
    generated code writes it too: `rt__.list_append(h, v)`), a function `resolve`d called
    that changes what it is given (`sgd(params, g)`, see `callees`); those of `owned` names
    aside (nothing else reaches their lists). Which list one of them holds after a staged
    `if` can show in what the function does."""
    nodes = structure.walk_nodes(fn_node) if nested else activity.walk_scope(fn_node.body)
    return _changes(nodes, owned, resolve)


def _changes(nodes, owned: frozenset[str], resolve, deep: bool = False) -> frozenset[str]:
    found = set()
    for node in nodes:
        found.update(changed_paths(node, owned, deep))
        if resolve is not None and isinstance(node, gast.Call):
            found.update(path for path in resolve.changed_by(node) if head(path) not in owned)
    return frozenset(found)


def changed_paths(node, owned, deep: bool = False) -> list[str]:
    """The variables and attributes whose containers `node` changes in place, but those of
    `owned`: `h` of `h[0] = v` and `h.append(v)`; with `deep`, also the items changed (`st[*]`
    of `st["log"].append(v)` and `st.get("k")["w"] = v`, `p[*][*]` of `p["a"]["b"]["c"] = v`)."""
    if isinstance(node, gast.Subscript) and isinstance(node.ctx, (gast.Store, gast.Del)):
        changed = node.value
    elif (
        isinstance(node, gast.AugAssign)
        and isinstance(node.target, gast.Name)
        and isinstance(node.value, _MAKERS)  # `buf += [v]`, not `i += 1`
    ):
        changed = node.target
    elif (
        isinstance(node, gast.AugAssign)
        and isinstance(node.target, gast.Subscript)
        and isinstance(node.op, (gast.Add, gast.BitOr))
        and not _arithmetic(node.value)
    ):
        changed = node.target  # `layers[0] |= {"w": v}`: the item itself
    elif isinstance(node, gast.Call):
        changed = _changed_by(node)
    else:
        return []
    if changed is None:
        return []
    base, depth = changed, 0
    while isinstance(base, gast.Subscript):
        base, depth = base.value, depth + 1
    found = []
    for path, held in [(_path(base), 0)] if _path(base) is not None else sources(base):
        if depth < held:
            continue  # a new display changed
        found.append(path)
        if deep:
            for _ in range(depth - held):
                path = items(path)
            found.append(path)
    return list(dict.fromkeys(p for p in found if head(p) not in owned))


def aliased_names(fn_node: gast.FunctionDef, nested: bool = False, resolve=None) -> frozenset[str]:
    """What `changed_in_place` finds, and the names and attributes that may hold one of those
    containers (see `Sharing`): after `b = p`, a change through `p` shows through `b`, and one
    through `b` through `p`; a staged conditional expression that leaves `b` holding `p` on one
    path only must be refused as surely as one that leaves `p` holding two objects (see
    runtime.control_flow._identities)."""
    changed = changed_in_place(fn_node, owned_names(fn_node), nested, resolve)
    return Sharing(fn_node, nested, resolve).closure(changed, owned=frozenset())


def aliased_after(
    fn_node: gast.FunctionDef, resolve=None, stored: dict | None = None
) -> dict[gast.stmt, frozenset[str]]:
    """For each `if`, `while` and `for` statement of `fn_node`'s own code: the names and
    attributes whose containers may be changed in place after it (by the statements after it,
    those of the loops around it, which run again, and the nested functions, which may be
    called anywhere), with the names that may hold those containers too (`Sharing`). A change
    before the statement cannot show in which object a variable holds after it; a change made
    inside it is followed by the statement itself (an `if`'s changes count as they are, for
    `runtime.control_flow._check_not_changed_then_replaced`). `stored`, where given, gets per
    statement what a store inside it must not be followed by: the same, and for a loop its
    body's own changes too, each iteration's run after the one before (a store `rows[1] =
    rows[0]`, then `rows[0][0] += x` in the next iteration)."""
    owned = owned_names(fn_node)
    changes: dict[gast.stmt, frozenset[str]] = {}
    nested: set[str] = set()

    def collect(stmts) -> frozenset[str]:
        total: set[str] = set()
        for stmt in stmts:
            mine = set(own_changes(stmt, nested, resolve))
            for block in structure.blocks(stmt):
                mine |= collect(block.stmts)
            changes[stmt] = frozenset(mine)
            total |= mine
        return frozenset(total)

    if not collect(fn_node.body) and not nested:
        return {}
    sharing = Sharing(fn_node, nested=False, resolve=resolve)
    found: dict[gast.stmt, frozenset[str]] = {}

    def annotate(stmts, after: frozenset[str]) -> None:
        following = set(after)
        for stmt in reversed(stmts):
            now = frozenset(following)
            own = {path for path in changes[stmt] if path.split(".")[0] not in owned}
            if isinstance(stmt, (gast.While, gast.For)):
                found[stmt] = sharing.closure(now, owned)
                if stored is not None:
                    stored[stmt] = sharing.closure(now | own, owned)
            elif isinstance(stmt, gast.If):
                found[stmt] = sharing.closure(now, owned) | own
                if stored is not None:
                    stored[stmt] = found[stmt]
            # A loop's body runs again after itself; a `try`'s handlers run after its body.
            again = isinstance(stmt, (gast.While, gast.For, gast.AsyncFor, gast.Try))
            for block in structure.blocks(stmt):
                annotate(block.stmts, now | changes[stmt] if again else now)
            following |= changes[stmt]

    annotate(fn_node.body, frozenset(nested))
    return found


class Sharing:
    """Which variables, attributes and items may hold the same container (flow-insensitive):
    those a binding joins, `b = p`, `b = p if c else q`, `b = p or q`, `(b := p)`, `with p as
    b`, and, one level down (`ITEMS`), what a container holds with what is put in or taken
    out: `b = st["k"]` and `b = st.get("k")` (`b` with `st[*]`), `st["k"] = p`, `pair = (p,
    q)` and `best = dict(params)` (`st[*]` with `p`, `pair[*]` with `p` and `q`, `best[*]`
    with `params[*]`), `for b in ps` and `b, c = pair` (`b` with `ps[*]`, `pair[*]`); and
    what `resolve`d functions give back (`b = get(p)`, see `callees`)."""

    def __init__(self, fn_node, nested: bool, resolve=None):
        self.parent: dict[str, str] = {}
        self.exposed: set[str] = set()  # the variables another name takes a container from
        nodes = structure.walk_nodes(fn_node) if nested else activity.walk_scope(fn_node.body)
        for node in nodes:
            if resolve is not None and isinstance(node, gast.Call):
                for a, b in resolve.joined_by(node):  # `register(cache, p)`
                    self.join(a, b)
            # A loop's target holds an item of what it iterates (a key of a dict), not it.
            whole = not isinstance(node, (gast.For, gast.AsyncFor, gast.comprehension))
            for target, value, item in bindings(node):
                for source, held in sources(value, resolve):
                    if item:  # the target is an item of the value: of `source`, or it
                        source, held = (source, held - 1) if held else (items(source), 0)
                    holder = target
                    for _ in range(held):  # `t = ({"w": x},)`: `t[*][*]` with `x`
                        holder = items(holder)
                    self.join(holder, source)
                    if whole:
                        self.exposed.add(head(source))

    def join(self, a: str, b: str) -> None:
        """Joins `a` and `b`, and what they hold (`a[*]` and `b[*]`): one container holds
        the same items under every name."""
        while True:
            ra, rb = self.root(a), self.root(b)
            if ra != rb:
                self.parent[ra] = rb
            if items(a) == a and items(b) == b:
                return
            a, b = items(a), items(b)

    def root(self, path: str) -> str:
        head, dot, rest = path.partition(".")
        if dot:  # `n.params` where `n = m`: `m.params`
            path = f"{self.root(head)}.{rest}"
        while self.parent.get(path, path) != path:
            path = self.parent[path]
        return path

    def known(self) -> set[str]:
        """The paths some binding joins."""
        return {*self.parent, *self.parent.values()}

    def roots(self) -> set[str]:
        """One path of each set of paths that may hold one container."""
        return {self.root(path) for path in self.known()}

    def changed_roots(self, changed) -> set[str]:
        """The roots of the containers `changed` (paths) are, and of those holding them: a
        change through `m.params` changes what `m` holds (and what an object made from it
        keeps: `m = Holder(p)` holds `p` as `m[*]`), one through `b` of `b = st["k"]` one of
        `st`'s items, which shows through every name holding `st`."""
        roots = {self.root(prefix) for path in changed for prefix in _prefixes(path)}
        roots |= {self.root(items(path.split(".")[0])) for path in changed if "." in path}
        known = {*self.known(), *changed}
        holders = [
            (self.root(path), self.root(path.removesuffix(ITEMS)))
            for path in known
            if path.endswith(ITEMS)
        ]
        grown = True
        while grown:
            grown = False
            for item, holder in holders:
                if item in roots and holder not in roots:
                    roots.add(holder)
                    grown = True
        return roots

    def closure(self, changed, owned: frozenset[str]) -> frozenset[str]:
        """`changed` (but the `owned` names no other name takes a container from), and every
        name that may hold one of their containers, or a container that holds one (`st` of
        `st["k"] = p`)."""
        joined = {*self.parent, *self.parent.values()}
        joined |= {p.removesuffix(ITEMS) for p in joined}  # `best` of `best[*]`
        joined |= {p.removesuffix(ITEMS) for p in joined}  # and of `best[*][*]`
        changed = {
            path
            for path in changed
            if path.split(".")[0] not in owned or path.split(".")[0] in self.exposed
        }
        if not changed or not self.parent:
            return frozenset(changed)
        roots = self.changed_roots(changed)
        return frozenset({*changed, *(path for path in joined if self.root(path) in roots)})


def _prefixes(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def own_changes(stmt, nested: set[str], resolve=None) -> Iterator[str]:
    """The containers `stmt` itself changes in place (`changed_in_place`'s changes, and an
    augmented assignment of a name, which may be a list's `+=` or a dict's `|=`), not counting
    the statements nested in it; those that functions and lambdas defined in it change go to
    `nested`."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
            body = node.body if isinstance(node.body, list) else [node.body]
            nested.update(_changes(activity.walk_scope(body), frozenset(), resolve, deep=True))
            continue
        if isinstance(node, gast.stmt) and node is not stmt:
            continue
        yield from changed_paths(node, frozenset(), deep=True)
        if resolve is not None and isinstance(node, gast.Call):
            yield from resolve.changed_by(node)
        stack.extend(structure.children(node))
    if (
        isinstance(stmt, gast.AugAssign)
        and isinstance(stmt.target, gast.Name)
        and isinstance(stmt.op, (gast.Add, gast.BitOr))
        and not _arithmetic(stmt.value)
    ):
        yield stmt.target.id  # `buf += more`, `opts |= more` (not `w -= lr * g`, `v += lr * g`)


def _arithmetic(value) -> bool:
    """Whether `value` is arithmetic of numbers or arrays, which no list or dict can be added
    to in place: an operator or a constant with no display or comprehension in it (`lr * g`,
    `-g`, `1`; `[v] * 3` may be a list)."""
    return isinstance(value, (gast.BinOp, gast.UnaryOp, gast.Constant)) and not any(
        isinstance(node, (*_MAKERS, gast.GeneratorExp)) for node in structure.walk_nodes(value)
    )


ITEMS = "[*]"
"""A path's suffix for the containers a container holds (`params[*]`: the inner dicts of
`params`), which a shallow copy shares (`best = dict(params)`)."""


def bindings(node) -> list[tuple[str, gast.expr, bool]]:
    """(target, value, item) of each variable, attribute or container item (`st[*]` of
    `st["k"] = p`) `node` binds to a value, or (`item`) to an item of one: `b = p`,
    `self.best = p`, `b, c = p, q` (item by item), `b, c = pair` and `for b in ps` (items),
    `(b := p)`, `with p as b`."""
    if isinstance(node, gast.Assign) and _popped(node):
        # `out, last = rt__.list_pop(out)`: the list itself, and an item of it
        (target,) = node.targets
        pairs = [(target.elts[0], node.value, False), (target.elts[1], node.value, True)]
    elif isinstance(node, gast.Assign):
        pairs = [(target, node.value, False) for target in node.targets]
    elif isinstance(node, (gast.AnnAssign, gast.NamedExpr)) and node.value is not None:
        pairs = [(node.target, node.value, False)]
    elif isinstance(node, (gast.For, gast.AsyncFor, gast.comprehension)):
        pairs = [(_item_target(node.target, node.iter), node.iter, True)]
    elif isinstance(node, (gast.With, gast.AsyncWith)):
        pairs = [(i.optional_vars, i.context_expr, False) for i in node.items if i.optional_vars]
    elif isinstance(node, gast.AugAssign) and isinstance(node.op, (gast.Add, gast.BitOr)):
        pairs = [(_as_item(node.target), node.value, True)]  # `buf += more`: more's items
    elif isinstance(node, gast.Call):
        pairs = _filled(node)
    else:
        return []
    found = []
    while pairs:
        target, value, item = pairs.pop()
        if isinstance(target, gast.Starred):
            target = target.value
        if isinstance(target, (gast.Tuple, gast.List)):
            if (
                not item
                and isinstance(value, (gast.Tuple, gast.List))
                and len(value.elts) == len(target.elts)
            ):
                pairs.extend((t, v, False) for t, v in zip(target.elts, value.elts))
            else:
                pairs.extend((t, value, True) for t in target.elts)
            continue
        path = (
            _path(target)
            if isinstance(target, (gast.Name, gast.Attribute, gast.Subscript))
            else None
        )
        if path is not None:
            found.append((_deep_path(target), value, item))
        elif isinstance(target, gast.Subscript):  # `vars(h)["p"] = v`: what the base may be
            base = target
            while isinstance(base, gast.Subscript):
                base = base.value
            found += [(items(p), value, item) for p, _ in sources(base)]
    return found


def _popped(node: gast.Assign) -> bool:
    """Whether `node` is a pop as the lists pass writes it: `out, last = rt__.list_pop(out)`."""
    (target, *more), value = node.targets, node.value
    return (
        not more
        and isinstance(target, gast.Tuple)
        and len(target.elts) == 2
        and isinstance(value, gast.Call)
        and naming.runtime_operator(value.func) == "list_pop"
    )


def _item_target(target: gast.expr, iterated: gast.expr) -> gast.expr:
    """The part of a loop's target that takes containers: the value of `k, v` over
    `d.items()` (a key is never a list or dict), the item of `i, x` over `enumerate(xs)`."""
    if not isinstance(target, gast.Tuple) or len(target.elts) != 2:
        return target
    func = called(iterated)[0] if isinstance(iterated, gast.Call) else None
    if is_runtime(func) and func.attr == "enumerate_":
        return target.elts[1]
    if isinstance(func, gast.Attribute) and func.attr == "items":
        return target.elts[1]
    if isinstance(func, gast.Name) and func.id == "enumerate":
        return target.elts[1]
    return target


def _as_item(target: gast.expr) -> gast.expr:
    """`target[...]`: stands for an item of `target`'s container in `bindings`."""
    return gast.Subscript(value=target, slice=gast.Constant(value=0, kind=None), ctx=gast.Store())


def _filled(call: gast.Call) -> list[tuple[gast.expr, gast.expr, bool]]:
    """(target item, value, item) of what a changing method puts in its container:
    `h.append(v)`, `h.insert(0, v)`, `d.setdefault(k, v)`, `d.update(k=v)` (`v`); `h.extend(vs)`,
    `d.update(other)` (items of `vs`, `other`); also as `rt__.list_append(h, v)` and
    `dict.update(d, other)` write them."""
    func, args = called(call)
    if is_runtime(func):
        if func.attr == "list_append" and len(args) == 2:
            return [(_as_item(args[0]), args[1], False)]
        if func.attr == "list_insert" and len(args) == 3:
            return [(_as_item(args[0]), args[2], False)]
        return []
    if isinstance(func, gast.Name) and func.id == "setattr" and len(args) == 3:
        return [(_as_item(args[0]), args[2], False)]  # `setattr(h, "p", v)`: kept by `h`
    if not isinstance(func, gast.Attribute) or func.attr not in _FILLERS:
        return []
    if isinstance(func.value, gast.Name) and func.value.id in _CONTAINER_TYPES:
        if not args:
            return []
        receiver, args = args[0], args[1:]  # `dict.update(d, other)`
    else:
        receiver = func.value
    target = _as_item(receiver)
    keywords = [(target, k.value, False) for k in call.keywords if k.arg is not None]
    keywords += [(target, k.value, True) for k in call.keywords if k.arg is None]
    if func.attr in ("extend", "update", "__ior__", "__iadd__"):
        return [(target, arg, True) for arg in args] + keywords
    if func.attr in ("append", "add") and args:
        return [(target, args[0], False)]
    if func.attr == "insert" and len(args) == 2:
        return [(target, args[1], False)]
    if func.attr in ("setdefault", "__setitem__") and len(args) == 2:
        return [(target, args[1], False)]
    return keywords


_FILLERS = frozenset(
    {
        "append",
        "add",
        "insert",
        "extend",
        "update",
        "setdefault",
        "__setitem__",
        "__ior__",
        "__iadd__",
    }
)


def items(path: str) -> str:
    """The path of the containers `path`'s container holds: `params[*]` (the inner dicts of
    `params`), `params[*][*]` (what they hold, and every level further down)."""
    return path if path.endswith(ITEMS + ITEMS) else path + ITEMS


def head(path: str) -> str:
    """The variable a path starts from: `p` of `p.attr[*]` and `p[*][*]`."""
    return path.split(".")[0].split("[")[0]


def _deep_path(node) -> str | None:
    """`_path`, with one `ITEMS` per subscript taken (two at most): `params[*][*]` of
    `params["l1"]["w"]`, `st[*]` of `st["log"]`."""
    path = _path(node)
    if path is None:
        return None
    while isinstance(node, gast.Subscript):
        path, node = items(path), node.value
    return path


def sources(value, resolve=None) -> list[tuple[str, int]]:
    """(path, depth) of the containers `value` may be (depth 0: `p`, `st[*]` of `st["k"]`,
    `st.get("k")` and `next(iter(st.values()))`, `p` of what `resolve` says `get(p)` gives
    back) or hold (depth 1: `p` and `q` of `(p, q)`, `xs[*]` of `[xs[0], 0.0]`, `params[*]`
    of `dict(params)`, `{**params}`, `params.values()`, `enumerate(params)` and `{k: v for k,
    v in params.items()}`; depth 2, deeper: `x` of `({"w": x}, {"m": 0})`)."""
    found, todo = [], [(value, 0)]

    def inside(node, depth):  # the containers `node`'s container holds, at `depth`
        nonlocal found
        found += [
            (path, min(depth + inner - 1, 2)) if inner else (items(path), depth)
            for path, inner in sources(node, resolve)
        ]

    while todo:
        node, held = todo.pop()
        deeper = min(held + 1, 2)
        if isinstance(node, (gast.Name, gast.Attribute, gast.Subscript)):
            path = _path(node)
            if path is not None:
                found.append((_deep_path(node), held))
            elif isinstance(node, gast.Subscript):  # `rt__.call(st.get, "k")["w"]`
                inside(node.value, held)
        elif isinstance(node, gast.IfExp):
            todo += [(node.body, held), (node.orelse, held)]
        elif isinstance(node, gast.BoolOp):
            todo += [(v, held) for v in node.values]
        elif isinstance(node, gast.NamedExpr):
            todo.append((node.value, held))
        elif isinstance(node, (gast.Tuple, gast.List, gast.Set)):
            for item in node.elts:
                if isinstance(item, gast.Starred):  # `[*ps]`: holds what `ps` holds
                    inside(item.value, deeper)
                else:
                    todo.append((item, deeper))
        elif isinstance(node, gast.Dict):
            for key, item in zip(node.keys, node.values):
                if key is None:  # `{**p}`
                    inside(item, deeper)
                else:
                    todo.append((item, deeper))
        elif isinstance(node, (gast.ListComp, gast.SetComp, gast.GeneratorExp)):
            todo.append((node.elt, deeper))  # its targets are joined to what they iterate
        elif isinstance(node, gast.DictComp):
            todo.append((node.value, deeper))
        elif isinstance(node, gast.BinOp) and isinstance(node.op, _JOINING_OPS):
            # `xs + ys`, `[v] * 2`, `d | other`: what they hold (not `p["w"] * 2`, `x + 1`:
            # an array's arithmetic)
            for operand in (node.left, node.right):
                if isinstance(node.op, gast.Mult) and not isinstance(operand, _SEQUENCES):
                    continue
                if not isinstance(operand, (gast.Subscript, gast.Constant)):
                    inside(operand, deeper)
        elif isinstance(node, gast.Call):
            copied = _shallow_copy_of(node)
            if copied is not None:
                found.append((items(copied), deeper))  # a new container holding the same items
                continue
            for source, kind in _call_sources(node):
                if kind == _ITEM:  # an item of `source`'s container: `st.get("k")`
                    inside(source, held)
                elif kind == _HOLDS_ITEMS:  # `st.values()`, `enumerate(st)`
                    inside(source, deeper)
                elif kind == _HOLDS:  # `dict(l1=inner)`
                    todo.append((source, deeper))
                else:
                    todo.append((source, held))
            if resolve is not None:
                found += [(path, min(held + gives, 2)) for path, gives in resolve.given_back(node)]
    return found


_COPIERS = frozenset({"dict", "list", "copy"})


def _shallow_copy_of(call: gast.Call) -> str | None:
    """The variable `call` makes a shallow copy of (`dict(p)`, `list(p)`, `copy.copy(p)`,
    `p.copy()`, as the call pass writes them: `rt__.call(dict, p)`), or None."""
    func, args = called(call)
    if isinstance(func, gast.Attribute) and func.attr == "copy" and not args:
        source = func.value  # `p.copy()`
    elif (
        len(args) == 1
        and not call.keywords
        and (
            (isinstance(func, gast.Name) and func.id in _COPIERS and activity.reads_module(func))
            or (isinstance(func, gast.Attribute) and func.attr == "copy")
        )
    ):
        source = args[0]
    else:
        return None
    return _path(source) if isinstance(source, (gast.Name, gast.Attribute)) else None


def _call_sources(call: gast.Call) -> list[tuple[gast.expr, str]]:
    """(expression, kind) of what a call gives back (some of): `_ITEM`, an item of the
    container whose accessor it calls (`st.get("k")`, `st.pop("k")`, `next(it)`);
    `_HOLDS_ITEMS`, a view or iterator of its items (`st.values()`, `st.items()`, `iter(xs)`,
    `enumerate(xs)`, `zip(xs, ys)`, `reversed(xs)`, `sorted(xs)`); `_ITSELF`, of the
    runtime's operators, the list a list operation gives back (`rt__.list_append(out, v)`).
    What other functions give back only `callees` knows (a function `resolve`d): following
    every argument (`p = opt.update(p, g)`) would join most of a training step's names."""
    func, args = called(call)  # also `rt__.call(st.get, "k")`
    if is_runtime(func):
        if func.attr in _RUNTIME_CHANGERS or func.attr == "handed_list":
            return [(arg, _ITSELF) for arg in args[:1]]
        elif func.attr in _RUNTIME_ITERATORS:
            return [(arg, _HOLDS_ITEMS) for arg in args if not isinstance(arg, gast.Starred)]
        elif func.attr == "next_":
            return [(arg, _ITEM) for arg in args[:1]]
        elif func.attr in ("min_", "max_"):  # `min(layers, key=...)`, `max(a, b)`
            kind = _ITEM if len(args) == 1 else _ITSELF
            return [(arg, kind) for arg in args if not isinstance(arg, gast.Starred)]
        else:
            return []
    if isinstance(func, gast.Attribute) and func.attr in _ACCESSORS:
        return [(func.value, _ITEM)]
    if isinstance(func, gast.Attribute) and func.attr in _VIEWS:
        if isinstance(func.value, gast.Name) and func.value.id in _CONTAINER_TYPES:
            return [(arg, _HOLDS_ITEMS) for arg in args[:1]]  # `dict.values(params)`
        return [(func.value, _HOLDS_ITEMS)]
    if isinstance(func, gast.Name) and func.id in _ITERATORS:
        found = [(a.value if isinstance(a, gast.Starred) else a, _HOLDS_ITEMS) for a in args]
        # `dict(l1=inner)`, `dict(**p)`: what is given by keyword, it holds
        return found + [(k.value, _HOLDS if k.arg else _HOLDS_ITEMS) for k in call.keywords]
    if (
        isinstance(func, gast.Attribute)
        and func.attr == "fromkeys"
        and isinstance(func.value, gast.Name)
        and func.value.id == "dict"
    ):
        return [(arg, _HOLDS) for arg in args[1:]]  # `dict.fromkeys(keys, inner)`
    if (
        isinstance(func, gast.Attribute)
        and structure.root_name(func) in ("jax", "jtu")
        and (func.attr in ("map", "tree_map"))
    ):
        # `jax.tree.map(f, params)` builds new containers; given `is_leaf`, it may hold
        # what `f` gives back, which may be what it is given (`lambda d: d`).
        leaves = any(k.arg == "is_leaf" for k in call.keywords)
        if not leaves or (args and not _gives_back_a_parameter(args[0])):
            return []
        return [(arg, _HOLDS_ITEMS) for arg in args[1:]]
    if isinstance(func, gast.Attribute) and (
        structure.root_name(func) in ("itertools", "collections")
        or (structure.root_name(func) == "heapq" and func.attr in ("nsmallest", "nlargest"))
        or (func.attr in ("leaves", "tree_leaves") and call.keywords)  # given `is_leaf`
    ):
        # `itertools.islice(xs, 2)`, `collections.deque(xs)`, `heapq.nsmallest(2, xs)`
        return [(arg, _HOLDS_ITEMS) for arg in args if not isinstance(arg, gast.Starred)]
    if isinstance(func, gast.Name) and func.id in ("min", "max"):
        kind = _ITEM if len(args) == 1 else _ITSELF  # `min(layers, key=...)`, `max(a, b)`
        return [(arg, kind) for arg in args if not isinstance(arg, gast.Starred)]
    if isinstance(func, gast.Name) and func.id == "next":
        return [(arg, _ITEM) for arg in args[:1]]
    if isinstance(func, gast.Name) and func.id == "vars":
        return [(arg, _ITSELF) for arg in args[:1]]  # `vars(h)`: `h`'s attributes
    return []


def _gives_back_a_parameter(function: gast.expr) -> bool:
    """Whether the function `function` names may give back what it is given: a lambda whose
    value may be one of its parameters (`lambda d: d`, `lambda a, b: a or b`); any function
    but a library one or a lambda computing a new value (`jnp.copy`, `lambda p, g: p - g`)."""
    if isinstance(function, gast.Lambda):
        given = {a.id for a in function.args.args}
        return any(head(path) in given for path, _ in sources(function.body))
    return not (
        isinstance(function, gast.Attribute) and structure.root_name(function) in _READING_MODULES
    )


_ITSELF, _ITEM, _HOLDS, _HOLDS_ITEMS = "itself", "item", "holds", "holds items"
_JOINING_OPS = (gast.Add, gast.Mult, gast.BitOr)
_SEQUENCES = (gast.List, gast.Tuple, gast.ListComp)
_ACCESSORS = frozenset({"get", "pop", "setdefault", "popitem", "__getitem__"})
_VIEWS = frozenset({"values", "items"})
# Builtins giving back a container, view or iterator of their arguments' items.
_ITERATORS = frozenset(
    {
        "iter",
        "reversed",
        "enumerate",
        "zip",
        "sorted",
        "filter",
        "map",
        "list",
        "dict",
        "tuple",
        "set",
        "frozenset",
    }
)
_RUNTIME_ITERATORS = frozenset({"enumerate_", "zip_", "reversed_", "sorted_"})


def _changed_by(call: gast.Call):
    """The container `call` changes in place (`h` of `h.append(v)`, of `list.append(h, v)`),
    or None."""
    func, args = called(call)  # also `rt__.call(d.update, ...)`
    if is_runtime(func) and func.attr in _RUNTIME_CHANGERS:
        return args[0] if args else func
    if isinstance(func, gast.Attribute) and func.attr in _CHANGING_METHODS:
        if isinstance(func.value, gast.Name) and func.value.id in _CONTAINER_TYPES:
            return args[0] if args else None  # `dict.update(params, w=v)`
        return func.value
    return None


_CONTAINER_TYPES = frozenset({"dict", "list", "set"})


def _path(node) -> str | None:
    """The variable or attribute an expression of items and attributes reaches a container
    through: `st` of `st[0][1]`, `self.hist` of `self.hist[0]`."""
    while isinstance(node, gast.Subscript):
        node = node.value
    parts = []
    while isinstance(node, gast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, gast.Name) else None
