"""Activity analysis: which names each statement reads, binds and mutates.

A name is *bound* by plain assignment (`x = ...`, `x += ...`, `for x in`, `def x`, `import x`,
`del x`) and *mutated* when its value is changed in place through a subscript or attribute
(`x[i] = v`, `x.a = v`, `x[i] += v`); both count as modifications of `x`. Names bound inside nested
functions, lambdas and comprehensions belong to those scopes; the outer names they read count as
reads where the nested scope is defined.
"""

from __future__ import annotations

import builtins
import dataclasses

import gast

from transpiler import anno, structure
from transpiler.transformer import Visitor


@dataclasses.dataclass(frozen=True)
class Activity:
    reads: frozenset[str] = frozenset()
    bound: frozenset[str] = frozenset()
    mutated: frozenset[str] = frozenset()
    attributes: frozenset[str] = frozenset()  # dotted paths assigned: "self.count", "a.b.c"

    @property
    def modified(self) -> frozenset[str]:
        return self.bound | self.mutated

    def __or__(self, other: Activity) -> Activity:
        return Activity(
            self.reads | other.reads,
            self.bound | other.bound,
            self.mutated | other.mutated,
            self.attributes | other.attributes,
        )

    def __str__(self) -> str:
        def fmt(names):
            return "{" + ", ".join(sorted(names)) + "}"

        text = f"reads={fmt(self.reads)} bound={fmt(self.bound)} mutated={fmt(self.mutated)}"
        return text + (f" attributes={fmt(self.attributes)}" if self.attributes else "")


@dataclasses.dataclass(frozen=True)
class Scope:
    """What a function's own scope looks like."""

    params: frozenset[str]
    declared: frozenset[str]  # declared global or nonlocal here
    globals: frozenset[str]  # declared global here
    closure_reads: frozenset[str]  # names its nested functions and lambdas read from it
    locals: frozenset[str]  # its parameters and the names it binds, less the declared ones
    nested: tuple[gast.FunctionDef, ...] = ()  # the functions defined in it (not in those)

    @property
    def own(self) -> frozenset[str]:
        """The names whose binding lives in this function's frame (or is declared to live in
        a module or an outer function): the only names a statement here can pass as state."""
        return self.locals | self.declared


def analyze(fn_node: gast.FunctionDef) -> None:
    """Annotates every statement of `fn_node` (and of its nested functions) with its activity."""
    _annotate_function(fn_node)


def of(node: gast.AST, writers: dict[str, frozenset[str]] | None = None) -> Activity:
    """The activity of any node (expression or statement), computed now, not annotated.

    `writers` maps the names of nested functions to the names they assign with `nonlocal`:
    code that refers to such a function (to call it) may modify those names.
    """
    collector = _Collector(writers or {})
    collector.visit(node)
    return collector.activity()


def local_names(fn_node: gast.FunctionDef | gast.Lambda) -> frozenset[str]:
    """The names local to a function: its parameters and the names its own scope binds, less
    those it declares global or nonlocal."""
    body = fn_node.body if isinstance(fn_node.body, list) else [fn_node.body]
    bound = params_of(fn_node.args) | of_block(body).bound
    declared = {
        name
        for node in walk_scope(body)
        if isinstance(node, (gast.Global, gast.Nonlocal))
        for name in node.names
    }
    return bound - declared


def mark_module_reads(fn_node: gast.FunctionDef, freevars=()) -> frozenset[str]:
    """Annotates (MODULE_READ) each `Name` read in `fn_node` (its nested functions, lambdas,
    classes and comprehensions included) that Python resolves in the module's namespace: not a
    name local to its scope or to an enclosing function (a parameter, `def print`, `import x as
    len`, a comprehension's variable), nor one of `freevars` (the function's closure). The passes
    tell a builtin (`print`, `len`, `range`) or a library function by this, never by the name
    alone (`reads_builtin`, `reads_global`). Returns the names marked.

    One walk records each scope's bindings and each read with the scopes around it; the reads
    are resolved after it, as Python does: the innermost scope that binds the name (and does
    not declare it global or nonlocal) holds it; a class body's names are seen only by the
    reads directly in it, not by its methods or comprehensions."""
    reads: list[tuple[gast.Name, tuple]] = []
    # Scope by scope: (the nodes to walk, the scopes they are in, innermost last).
    module = _Bindings()  # what the module binds: the function's name; `global` declarations
    pending: list[tuple[list, tuple]] = [([fn_node], (module,))]
    while pending:
        stack, scopes = pending.pop()
        here = scopes[-1]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is gast.Name:
                if type(node.ctx) is gast.Load:
                    reads.append((node, scopes))
                else:
                    here.bound.add(node.id)
                continue
            inner = _scope_parts(node)
            if inner is None:
                if kind in _BINDERS:
                    _note_binding(node, scopes)
                for field in node._fields:
                    value = getattr(node, field, None)
                    if type(value) is list:
                        stack.extend(v for v in value if isinstance(v, gast.AST))
                    elif isinstance(value, gast.AST) and not isinstance(value, gast.expr_context):
                        stack.append(value)
                continue
            scope, outer, params, body = inner
            if kind in _BINDS_ITS_NAME:
                here.bound.add(node.name)
            stack.extend(outer)
            scope.bound.update(params)
            pending.append((list(body), (*scopes, scope)))
    # A name the function assigns as a global (`global len; len = ...`) may be a global or
    # a builtin when a read runs: neither is assumed (the call is resolved when it runs).
    unsettled = frozenset(freevars) | module.declared
    marked = set()
    for node, scopes in reads:
        name = node.id
        for depth, scope in enumerate(reversed(scopes[1:])):  # the first: the module's
            if scope.is_class and depth > 0:
                continue  # a class body's names are not seen from inside its functions
            if name in scope.bound and name not in scope.declared:
                break
        else:
            if name not in unsettled:
                anno.setanno(node, anno.Static.MODULE_READ, True)
                marked.add(name)
    return frozenset(marked)


class _Bindings:
    """The names a scope binds and those it declares global or nonlocal (mark_module_reads)."""

    __slots__ = ("bound", "declared", "is_class", "is_comprehension")

    def __init__(self, is_class: bool = False, is_comprehension: bool = False):
        self.bound: set[str] = set()
        self.declared: set[str] = set()
        self.is_class, self.is_comprehension = is_class, is_comprehension


_BINDS_ITS_NAME = (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)
_COMPREHENSIONS = (gast.ListComp, gast.SetComp, gast.GeneratorExp, gast.DictComp)
# Nodes that bind or declare a name without a `Name` store (`_note_binding`).
_BINDERS = frozenset(
    {gast.Import, gast.ImportFrom, gast.Global, gast.Nonlocal, gast.NamedExpr}
    | {gast.MatchAs, gast.MatchStar, gast.MatchMapping}
)


def _scope_parts(node: gast.AST):
    """For a function, lambda, class or comprehension: (its `_Bindings`, the nodes evaluated in
    the enclosing scope (defaults, decorators, bases, the first iterable), its parameters' names,
    the nodes inside its own scope). None for any other node."""
    kind = type(node)
    if kind in _BINDS_ITS_NAME:
        body_ids = {id(stmt) for stmt in node.body}
        outer = [c for c in structure.children(node) if id(c) not in body_ids]
        if kind is gast.ClassDef:
            return _Bindings(is_class=True), outer, (), node.body
        outer = [c for c in outer if c is not node.args] + _defaults(node.args)
        return _Bindings(), outer, params_of(node.args), node.body
    if kind is gast.Lambda:
        return _Bindings(), _defaults(node.args), params_of(node.args), [node.body]
    if kind in _COMPREHENSIONS:
        first, *rest = node.generators
        elements = [node.key, node.value] if kind is gast.DictComp else [node.elt]
        inside = [first.target, *first.ifs, *rest, *elements]
        return _Bindings(is_comprehension=True), [first.iter], (), inside
    return None


def _defaults(args: gast.arguments) -> list[gast.AST]:
    """What a function's signature evaluates where it is defined: defaults and annotations."""
    found = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    found += [p.annotation for p in params if p is not None and p.annotation is not None]
    return found


def _note_binding(node: gast.AST, scopes: tuple) -> None:
    """Records what a statement binds or declares without a `Name` store: imports, `global`
    and `nonlocal`, match captures; a `:=` in a comprehension binds in the function around it."""
    kind = type(node)
    if kind is gast.Import or kind is gast.ImportFrom:
        scopes[-1].bound.update(
            a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"
        )
    elif kind is gast.Global or kind is gast.Nonlocal:
        scopes[-1].declared.update(node.names)
        if kind is gast.Global:
            scopes[0].declared.update(node.names)  # the module's: names made globals
    elif kind is gast.MatchAs or kind is gast.MatchStar:
        if node.name is not None:
            scopes[-1].bound.add(node.name)
    elif kind is gast.MatchMapping:
        if node.rest is not None:
            scopes[-1].bound.add(node.rest)
    elif kind is gast.NamedExpr and isinstance(node.target, gast.Name):
        # In a comprehension, it binds in the function around it (the `Name` binds it here).
        for scope in reversed(scopes):
            if not scope.is_comprehension:
                scope.bound.add(node.target.id)
                break


def reads_module(node: gast.AST) -> bool:
    """Whether `node` is a read that Python resolves in the module's namespace (a global or a
    builtin), as `mark_module_reads` marked it: not a local or closure variable of the name."""
    return anno.hasanno(node, anno.Static.MODULE_READ)


def is_builtin_name(name: str, globals_: dict) -> bool:
    """Whether `name`, read from a module whose globals are `globals_`, is a builtin's."""
    return name not in globals_ and hasattr(builtins, name)


def reads_builtin(node: gast.AST, globals_: dict, names=None) -> bool:
    """Whether `node` is a `Name` that reads a builtin (one of `names`, if given): marked by
    `mark_module_reads`, and not a global of the module (`globals_`)."""
    return (
        isinstance(node, gast.Name)
        and (names is None or node.id in names)
        and reads_module(node)
        and is_builtin_name(node.id, globals_)
    )


def reads_global(node: gast.AST, globals_: dict) -> bool:
    """Whether `node` is a `Name` that reads a global of the module (`globals_`)."""
    return isinstance(node, gast.Name) and node.id in globals_ and reads_module(node)


def params_of(args: gast.arguments) -> frozenset[str]:
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    return frozenset(p.id for p in params)


def _annotate_function(fn_node: gast.FunctionDef) -> None:
    declared: set[str] = set()
    globals_: set[str] = set()
    closure_reads: set[str] = set()
    nested = []
    for node in walk_scope(fn_node.body):  # once: what the scope declares and defines
        if isinstance(node, (gast.Global, gast.Nonlocal)):
            declared.update(node.names)
            if isinstance(node, gast.Global):
                globals_.update(node.names)
        elif isinstance(node, (gast.FunctionDef, gast.Lambda)):
            closure_reads |= _free_reads(node)
            if isinstance(node, gast.FunctionDef):
                nested.append(node)
    writers = _nonlocal_writers(nested)
    # Innermost statements first: each statement's activity joins those of the statements it
    # holds, computed once (not once per enclosing statement: linear in the nesting depth).
    whole = _annotate_block(fn_node.body, writers, {})
    params = params_of(fn_node.args)
    anno.setanno(
        fn_node,
        anno.Static.SCOPE,
        Scope(
            params,
            frozenset(declared),
            frozenset(globals_),
            frozenset(closure_reads),
            (params | whole.bound) - declared,  # `local_names`
            tuple(nested),
        ),
    )
    for node in nested:
        _annotate_function(node)


def _annotate_block(stmts: list[gast.stmt], writers: dict, known: dict[int, Activity]) -> Activity:
    """Annotates `stmts` and the statements nested in them; returns their joint activity.
    `known`: the activities computed so far, by statement id."""
    result = Activity()
    for stmt in stmts:
        inner = {}
        for block in structure.blocks(stmt):
            inner[block.field, id(block.owner)] = _annotate_block(block.stmts, writers, known)
        collector = _Collector(writers, known, root=stmt)
        collector.visit(stmt)
        activity = known[id(stmt)] = collector.activity()
        anno.setanno(stmt, anno.Static.ACTIVITY, activity)
        if isinstance(stmt, gast.If):
            body = inner["body", id(stmt)] | inner["orelse", id(stmt)]
            anno.setanno(stmt, anno.Static.BODY_ACTIVITY, body)
        elif isinstance(stmt, (gast.While, gast.For)):
            # A loop's else block runs once, after it: not part of what the loop carries.
            anno.setanno(stmt, anno.Static.BODY_ACTIVITY, inner["body", id(stmt)])
        result = result | activity
    return result


def of_block(stmts: list[gast.stmt], writers: dict | None = None) -> Activity:
    result = Activity()
    for stmt in stmts:
        result = result | of(stmt, writers)
    return result


def _nonlocal_writers(nested: list[gast.FunctionDef]) -> dict[str, frozenset[str]]:
    """The functions `nested` in a scope -> the names of that scope they assign through
    `nonlocal`."""
    writers = {}
    for node in nested:
        declared = {
            name
            for inner in walk_scope(node.body)
            if isinstance(inner, gast.Nonlocal)
            for name in inner.names
        }
        if declared:
            assigned = of_block(node.body).bound & declared
            if assigned:
                writers[node.name] = frozenset(assigned)
    return writers


def function_scopes(fn_node: gast.FunctionDef):
    """`fn_node` and every function nested in it, at any depth, outermost first."""
    yield fn_node
    for node in walk_scope(fn_node.body):
        if isinstance(node, gast.FunctionDef):
            yield from function_scopes(node)


def walk_scope(stmts):
    """Every node of this scope; nested function and lambda nodes are yielded but not entered."""
    stack = list(reversed(stmts))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
            continue
        stack.extend(reversed(structure.children(node)))


def _free_reads(node: gast.FunctionDef | gast.Lambda) -> frozenset[str]:
    """Names a nested function reads that are not its own locals."""
    inner = _Collector({})
    body = node.body if isinstance(node.body, list) else [node.body]
    for stmt in body:
        inner.visit(stmt)
    own = params_of(node.args) | inner.bound
    declared_nonlocal = {
        n for s in walk_scope(body) if isinstance(s, (gast.Nonlocal, gast.Global)) for n in s.names
    }
    return frozenset(inner.reads - (own - declared_nonlocal)) | frozenset(declared_nonlocal)


def dotted_path(node: gast.expr) -> str | None:
    """`"a.b.c"` for an attribute chain of names, else None."""
    parts = []
    while isinstance(node, gast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not parts or not isinstance(node, gast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _base_name(node: gast.expr) -> str | None:
    while isinstance(node, (gast.Attribute, gast.Subscript, gast.Starred)):
        node = node.value
    return node.id if isinstance(node, gast.Name) else None


class _Collector(Visitor):
    """Collects what a node reads, binds and mutates. `known`: activities of statements already
    computed (by id), used for the statements nested in `root` instead of visiting them again."""

    def __init__(self, writers: dict[str, frozenset[str]], known=None, root=None):
        self.writers = writers
        self.known = known or {}
        self.root = root
        self.reads: set[str] = set()
        self.bound: set[str] = set()
        self.mutated: set[str] = set()
        self.attributes: set[str] = set()

    def visit(self, node):
        if self.known and node is not self.root:
            found = self.known.get(id(node))
            if found is not None:
                self.reads |= found.reads
                self.bound |= found.bound
                self.mutated |= found.mutated
                self.attributes |= found.attributes
                return None
        return super().visit(node)

    def activity(self) -> Activity:
        return Activity(
            frozenset(self.reads),
            frozenset(self.bound),
            frozenset(self.mutated),
            frozenset(self.attributes),
        )

    def visit_Name(self, node):
        if isinstance(node.ctx, gast.Load):
            self.reads.add(node.id)
            self.bound |= self.writers.get(node.id, frozenset())
        elif isinstance(node.ctx, gast.Store):
            self.bound.add(node.id)
        elif isinstance(node.ctx, gast.Del):
            self.reads.add(node.id)
            self.bound.add(node.id)
        if node.annotation is not None:
            self.visit(node.annotation)

    def _visit_target_container(self, node):
        # x[i] = v and x.a = v read x (and i), and mutate x in place.
        if not isinstance(node.ctx, gast.Load):
            base = _base_name(node)
            if base is not None:
                self.mutated.add(base)
                self.reads.add(base)
            path = dotted_path(node)
            if path is not None:
                self.attributes.add(path)
        self.visit(node.value)
        if isinstance(node, gast.Subscript):
            self.visit(node.slice)

    visit_Subscript = _visit_target_container
    visit_Attribute = _visit_target_container

    def visit_AugAssign(self, node):
        if isinstance(node.target, gast.Name):
            self.reads.add(node.target.id)
            self.bound.add(node.target.id)
        else:
            self.visit(node.target)
            path = dotted_path(node.target)
            if path is not None:
                self.reads.add(path.split(".")[0])
        self.visit(node.value)

    def visit_AnnAssign(self, node):
        # Annotations of local variables are never evaluated (PEP 526).
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_FunctionDef(self, node):
        self.bound.add(node.name)
        for expr in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if expr is not None:
                self.visit(expr)
        self.reads |= _free_reads(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        for expr in [*node.args.defaults, *node.args.kw_defaults]:
            if expr is not None:
                self.visit(expr)
        self.reads |= _free_reads(node)

    def visit_ClassDef(self, node):
        self.bound.add(node.name)
        for expr in [*node.bases, *node.keywords, *node.decorator_list]:
            self.visit(expr)
        inner = _Collector({})
        for stmt in node.body:
            inner.visit(stmt)
        self.reads |= inner.reads - inner.bound

    def _visit_comprehension(self, node):
        inner = _Collector({})
        for gen in node.generators:
            inner.visit(gen)
        for field in ("elt", "key", "value"):
            if getattr(node, field, None) is not None:
                inner.visit(getattr(node, field))
        self.reads |= inner.reads - inner.bound
        # `:=` in a comprehension binds in the enclosing function (PEP 572).
        self.bound |= {
            n.target.id
            for n in structure.walk_nodes(node)
            if isinstance(n, gast.NamedExpr) and isinstance(n.target, gast.Name)
        }

    visit_ListComp = _visit_comprehension
    visit_SetComp = _visit_comprehension
    visit_DictComp = _visit_comprehension
    visit_GeneratorExp = _visit_comprehension

    def _visit_capture(self, node):
        # Patterns bind plain strings, not Name nodes: `case Point(x=v)`, `case [*rest]`.
        for field in ("name", "rest"):
            captured = getattr(node, field, None)
            if captured is not None:
                self.bound.add(captured)
        self.generic_visit(node)

    visit_MatchAs = _visit_capture
    visit_MatchStar = _visit_capture
    visit_MatchMapping = _visit_capture

    def visit_alias(self, node):
        self.bound.add((node.asname or node.name).split(".")[0])

    def visit_ExceptHandler(self, node):
        if node.type is not None:
            self.visit(node.type)
        if node.name is not None:
            self.visit(node.name)
        for stmt in node.body:
            self.visit(stmt)
