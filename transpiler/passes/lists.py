"""Rewrites list mutation into assignments, so a list a loop appends to becomes loop state.

    out.append(tok)         ->   out = rt__.list_append(out, tok)
    last = out.pop()        ->   out, last = rt__.list_pop(out)
    out.pop()               ->   out, _ = rt__.list_pop(out)
    out[i] = v              ->   out = rt__.list_setitem(out, i, v)
    out[-1] += v            ->   out = rt__.list_update(out, -1, '+', v)
    out.reverse()           ->   out = rt__.list_reverse(out)
    out += [a, b]           ->   item = a; item_1 = b; out.append(item); out.append(item_1)
    out.extend((a,))        ->   out.append(a)          (then as above; out holds only lists)
    y = jnp.stack(out)      ->   y = rt__.stack_list(jnp.stack, out)   (out is appended to here)
    y = jnp.stack(out[1:])  ->   y = rt__.stack_list(jnp.stack, out, part=(1, None, None))
    log.append(x)           ->   x                  (nothing reads `log`: nothing to carry)

Only local names are rewritten: an assignment would make a global or closure variable local
(`self.items.append(x)` and `log.append(x)` for a global `log` are left alone). And only names
that hold a list no other name can see: the rewrite rebinds the name (a staged loop turns the list
into a buffer), which another reference to the same list would not see. A list the function got
from elsewhere (a parameter, an attribute, another name), or that it hands out before it is done
with it (`alias = out`, `helper(out)`, `{"h": out}`, a closure), keeps its real `append`: the
runtime then unrolls a loop that changes it, or refuses with a StagingError, as for any Python
object staged code changes. `stack`/`array`/`asarray` calls are rewritten only for names this
function appends to: a list built in a staged loop is stacked at once instead of item by item.
List comprehensions stay Python.
"""

from __future__ import annotations

import types

import gast

from transpiler import anno, features, origins, structure, templates
from transpiler.analysis import activity
from transpiler.analysis.item_uses import STACKERS
from transpiler.context import PassContext
from transpiler.naming import RUNTIME, Namer
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (
    "call:.append",
    "call:.pop",
    "call:.clear",
    gast.Delete,
    "call:.extend",
    features.EXTENDED_BY_DISPLAY,
    features.INDEXED,
)
ADDS = (gast.Assign, gast.Call)


def method_call(node: gast.AST, method: str) -> gast.Call | None:
    """`node` if it is `<name>.<method>(...)`, else None."""
    if (
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, gast.Name)
        and not node.keywords
    ):
        return node
    return None


# Builtins that read a list they are given and keep no reference to it (`min`, `max`, `sum`:
# as their only, or first, argument: `min(out, [1.0])` and `sum([], out)` give it back).
_READERS = frozenset(
    {"len", "bool", "list", "tuple", "sorted", "any", "all", "print", "str", "repr"}
)
_FIRST_READERS = frozenset({"min", "max", "sum"})
# List methods that give back no reference to the list (`out.__iadd__(x)` does).
_METHODS = frozenset(
    {"append", "pop", "index", "count", "copy", "extend", "insert", "remove", "sort", "reverse"}
    | {"clear"}
)
# Builtins that reach every local variable by name.
_FRAME_READERS = frozenset({"locals", "vars", "eval", "exec"})
# Builtins whose result refers to the list: harmless only as the iterable of a loop.
_VIEWS = frozenset({"iter", "enumerate", "zip", "reversed"})
# Modules whose functions take a list of arrays and return new values (`jnp.stack(out)`):
# not all of JAX (`jax.tree_util.Partial(f, out)` keeps it).
_ARRAY_MODULES = ("numpy", "jax.numpy", "jax.lax", "jax.nn", "transpiler")


def _rebinds_itself(targets, value) -> bool:
    """Whether an assignment binds a name to what it holds already (`recs = recs`)."""
    return (
        len(targets) == 1
        and isinstance(targets[0], gast.Name)
        and isinstance(value, gast.Name)
        and value.id == targets[0].id
    )


def private_lists(
    scope: gast.FunctionDef, names: frozenset[str], globals_: dict, return_values=()
) -> frozenset[str]:
    """The names of `names` that hold a list no other reference can reach.

    Such a name is bound only to new lists (`[...]`, a list comprehension, `list(...)`) and read
    only where no reference stays behind: a method called on it, an item or slice of it, `len`
    and other builtins that read it, JAX and NumPy functions (`jnp.stack(out)`), a loop over it,
    a test, a comparison, `return`. Anything else (`alias = out`, `f(out)`, `(out, 1)`,
    `obj.attr = out`, a nested function that reads it) may keep a reference.
    """
    shared = set(activity.params_of(scope.args))  # the caller's lists
    allowed: set[int] = set()  # ids of the reads of the names that keep no reference
    nodes = list(activity.walk_scope(scope.body))
    # The earlier passes' runtime calls (`rt__.print_(out)`) read their arguments and keep
    # none; the lambdas they are given (an assert's message) are read as part of this scope.
    thunks = {
        id(arg)
        for node in nodes
        if isinstance(node, gast.Call) and structure.root_name(node.func) == RUNTIME
        for arg in node.args
        if isinstance(arg, gast.Lambda)
    }
    nodes += [n for node in nodes if id(node) in thunks for n in activity.walk_scope([node.body])]
    # The function the comprehensions pass made of a comprehension only iterates its argument
    # (its code is a nested function's: the names it reads may keep references).
    allowed.update(
        id(arg)
        for node in nodes
        if isinstance(node, gast.Call) and anno.hasanno(node, anno.Static.NEW_LIST)
        for arg in node.args
    )
    # A generator expression keeps an iterator of the list until it is consumed: harmless only
    # where a builtin consumes it at once (`sum(v * v for v in out)`).
    consumed = {
        id(arg)
        for node in nodes
        if isinstance(node, gast.Call) and _builtin(node.func, _READERS | _FIRST_READERS, globals_)
        for arg in node.args
        if isinstance(arg, gast.GeneratorExp)
    }
    lazy = {
        id(generator)
        for node in nodes
        if isinstance(node, gast.GeneratorExp) and id(node) not in consumed
        for generator in node.generators
    }
    if any(
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Name)
        and node.func.id in _FRAME_READERS  # a local of the name too: it may be the builtin
        for node in nodes
    ):
        return frozenset()  # `locals()["out"]`: every name may be reached
    for node in nodes:
        if isinstance(node, gast.Lambda) and id(node) in thunks:
            allowed.add(id(node.body))  # what it returns is read (printed), not kept
            continue
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
            shared.update(n.id for n in structure.walk_nodes(node) if isinstance(n, gast.Name))
        elif isinstance(node, gast.Assign) and all(
            isinstance(t, gast.Name) and t.id in return_values for t in node.targets
        ):
            allowed.update(map(id, _returned(node.value)))  # the return pass's `retval_ = out`
        elif isinstance(node, (gast.Assign, gast.AnnAssign)):
            targets = node.targets if isinstance(node, gast.Assign) else [node.target]
            if _rebinds_itself(targets, node.value):  # `recs = recs`: the same list, no alias
                allowed.update((id(targets[0]), id(node.value)))
            elif len(targets) == 1 and _new_list(node.value, globals_):
                allowed.add(id(targets[0]))
            elif len(targets) == 1 and (  # a new value, which no list's reference is
                _plain_operation(node.value, names, globals_)  # `rows = rows + 1`
                or isinstance(node.value, gast.Call)
                and _stacks(node.value, globals_)  # `rows = jnp.stack(rows)`
            ):
                allowed.add(id(targets[0]))
            elif all(isinstance(t, (gast.Tuple, gast.List)) for t in targets) and isinstance(
                node.value, gast.Name
            ):
                allowed.add(id(node.value))  # `a, b = best`: its items, not the list
            elif (  # `losses, sizes = [], []`
                len(targets) == 1
                and isinstance(targets[0], gast.Tuple)
                and isinstance(node.value, gast.Tuple)
                and len(targets[0].elts) == len(node.value.elts)
            ):
                for target, value in zip(targets[0].elts, node.value.elts):
                    if isinstance(target, gast.Name) and _new_list(value, globals_):
                        allowed.add(id(target))
        elif isinstance(node, gast.Call):
            allowed.update(id(a) for a in _reading_call_args(node, globals_))
            if isinstance(node.func, gast.Attribute) and node.func.attr in _METHODS:
                allowed.add(id(node.func.value))  # `out.append(x)`, `out.index(x)`
        elif isinstance(node, (gast.For, gast.comprehension)):
            if id(node) in lazy:
                continue
            allowed.add(id(node.iter))
            if isinstance(node.iter, gast.Call) and _builtin(node.iter.func, _VIEWS, globals_):
                allowed.update(id(a) for a in node.iter.args)
        elif isinstance(node, gast.Subscript):
            allowed.add(id(node.value))
        elif isinstance(node, gast.Attribute) and not hasattr(list, node.attr):
            allowed.add(id(node.value))  # `rows.sum()` of `rows = jnp.stack(rows)`: no list's
        elif isinstance(node, gast.FormattedValue):
            allowed.add(id(node.value))  # `f"{out}"` formats it, keeps nothing
        elif isinstance(node, gast.Compare):
            allowed.update(id(e) for e in (node.left, *node.comparators))
        elif _plain_operation(node, names, globals_):  # `out + [v]`, `2 * out`: a new list
            allowed.update((id(node.left), id(node.right)))
        elif isinstance(node, (gast.If, gast.While, gast.IfExp, gast.Assert)):
            allowed.update(map(id, structure.truth_tested(node.test)))
        elif isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not):
            allowed.update(map(id, structure.truth_tested(node.operand)))
        elif isinstance(node, gast.Return):
            allowed.update(map(id, _returned(node.value)))
        elif isinstance(node, gast.Expr):
            allowed.add(id(node.value))
        elif isinstance(node, gast.Delete):
            allowed.update(id(t) for t in node.targets)
    allowed |= _handed_over_last(nodes, names, allowed)
    allowed |= _reads_of_the_stacked(scope.body, names, globals_)
    for node in nodes:
        if isinstance(node, gast.Name) and node.id in names and id(node) not in allowed:
            shared.add(node.id)  # a binding to something else, or a read that may keep it
    return names - shared


def _reads_of_the_stacked(
    stmts: list[gast.stmt], names: frozenset[str], globals_: dict
) -> set[int]:
    """The ids of the reads of a name that holds an array there, not a list: those in the
    statements after `name = jnp.stack(...)` in its block, up to one that binds the name again
    (`new = jnp.stack(new)`, then `c = new`: an alias of the array; the list is let go of)."""
    found: set[int] = set()
    for stmt in stmts:
        for block in structure.blocks(stmt):
            found |= _reads_of_the_stacked(block.stmts, names, globals_)
    holding: set[str] = set()
    for stmt in stmts:
        nodes = list(activity.walk_scope([stmt]))
        bound = {name for node in nodes for name in _bound_names(node) if name in names}
        if holding - bound:
            found.update(
                id(node)
                for node in nodes
                if isinstance(node, gast.Name) and node.id in holding - bound
            )
        holding -= bound
        stacked = _stacked_name(stmt, globals_)
        if stacked in names:
            holding.add(stacked)
    return found


def _handed_over_last(nodes: list[gast.AST], names: frozenset[str], allowed: set[int]) -> set[int]:
    """The ids of the lists handed to other code (`postprocess(out)`) once they are done: no
    append, pop or item store of the list comes after the call, nor in a loop around it. What
    the callee keeps then is the list as it ends (as the Python list, or the buffer it stands
    for, which refuses an append made through another name)."""
    handed = [
        (holder, arg)
        for holder in nodes
        for arg in _handed_items(holder)
        if isinstance(arg, gast.Name) and arg.id in names and id(arg) not in allowed
    ]
    if not handed:
        return set()
    changes: dict[str, list[gast.AST]] = {}
    for node in nodes:
        for method in ("append", "pop"):
            call = method_call(node, method)
            if call is not None and call.func.value.id in names:
                changes.setdefault(call.func.value.id, []).append(call)
        if (  # `out[k] = v`, `out[k] += 1`, `del out[k]`: a change of the list too
            isinstance(node, gast.Subscript)
            and not isinstance(node.ctx, gast.Load)
            and isinstance(node.value, gast.Name)
            and node.value.id in names
        ):
            changes.setdefault(node.value.id, []).append(node)
    loops = [
        {id(n) for n in structure.walk_nodes(loop)}
        for loop in nodes
        if isinstance(loop, (gast.For, gast.While))
    ]
    found = set()
    for holder, arg in handed:
        where = _position(holder)
        if where is None:
            continue
        done = all(
            (_position(change) or where) < where
            and not any(id(holder) in loop and id(change) in loop for loop in loops)
            for change in changes.get(arg.id, ())
        )
        if done and all(_position(c) is not None for c in changes.get(arg.id, ())):
            found.add(id(arg))
    return found


def _handed_items(node: gast.AST) -> list[gast.expr]:
    """What `node` hands to other code as it is: the arguments of a call, the items of a list,
    tuple or set display and the values of a dict display (`{"loss": losses}`)."""
    if isinstance(node, gast.Call):
        return [*node.args, *(k.value for k in node.keywords)]
    if isinstance(node, (gast.List, gast.Tuple)) and isinstance(node.ctx, gast.Load):
        return list(node.elts)  # (not an unpacking's targets)
    if isinstance(node, gast.Set):
        return list(node.elts)
    if isinstance(node, gast.Dict):
        return list(node.values)
    return []


def _position(node: gast.AST) -> tuple[int, int] | None:
    lineno = getattr(node, "lineno", None)
    return None if lineno is None else (lineno, getattr(node, "col_offset", 0))


def _returned(value: gast.expr | None) -> list[gast.expr]:
    """`return out`, `return y, out` and `return {"loss": out}` hand the list out as the
    function ends: it, or an item of a tuple, list or dict made for the return."""
    found, todo = [], [value]
    while todo:
        node = todo.pop()
        if isinstance(node, (gast.Tuple, gast.List)):
            todo.extend(e.value if isinstance(e, gast.Starred) else e for e in node.elts)
        elif isinstance(node, gast.Dict):
            todo.extend(node.values)
        else:
            found.append(node)
    return found


def _new_list(value: gast.expr, globals_: dict) -> bool:
    if isinstance(value, (gast.List, gast.ListComp)) or anno.hasanno(value, anno.Static.NEW_LIST):
        return True
    return isinstance(value, gast.Call) and _builtin(value.func, {"list", "sorted"}, globals_)


def _builtin(func: gast.expr, names, globals_: dict) -> bool:
    """Whether `func` names one of the builtins `names` (not a local or global of that name)."""
    return activity.reads_builtin(func, globals_, names)


def _reading_call_args(call: gast.Call, globals_: dict) -> list[gast.expr]:
    """The arguments of `call` it reads without keeping: all of them for a builtin of
    `_READERS` or a function of JAX or NumPy, none for any other call."""
    if _builtin(call.func, _READERS, globals_) or structure.root_name(call.func) == RUNTIME:
        if isinstance(call.func, gast.Attribute) and call.func.attr == "fstring":
            # `f"got {out}"`: `rt__.fstring("got ", (out, '', ''))` formats each field's value.
            return [a.elts[0] if isinstance(a, gast.Tuple) and a.elts else a for a in call.args]
        # `print(*out)`: the items, not the list
        args = [a.value if isinstance(a, gast.Starred) else a for a in call.args]
        return [*args, *(k.value for k in call.keywords)]
    if _builtin(call.func, _FIRST_READERS, globals_):
        if len(call.args) == 1 and isinstance(call.args[0], gast.Starred):
            return [call.args[0].value]  # `max(*counts)`: its items
        first_only = call.func.id == "sum" or len(call.args) == 1
        return call.args[:1] if first_only else []
    if _array_function(call.func, globals_):
        return [*call.args, *(k.value for k in call.keywords)]
    return []


def _plain_operation(node: gast.expr, names: frozenset[str], globals_: dict) -> bool:
    """Whether `node` is an operator on lists, numbers and arrays only (`out + [v]`, `rows +
    1`, `2 * jnp.stack(rows)`): its operands are the lists `names`, constants, displays or
    arrays a JAX or NumPy function made. Such an operation makes a new value and keeps none
    of its operands; a user object's `__add__` may hand back a list of its own, or keep one."""
    if not isinstance(node, gast.BinOp):
        return False
    displays = (gast.List, gast.ListComp)
    sides = (node.left, node.right)
    if isinstance(node.op, gast.Mult) and any(isinstance(side, displays) for side in sides):
        # `[0] * n_classes`, `[0] * (cap + 1)`, `[0.0] * len(xs)`: a list display repeated a
        # number of times is a new list (`base * 3` may be a user object's `__mul__`, which may
        # give back a list it keeps)
        return True
    for operand in sides:
        if isinstance(operand, gast.Name):
            if operand.id not in names:
                return False
        elif isinstance(operand, gast.Call):
            if not _array_function(operand.func, globals_):
                return False
        elif not (
            isinstance(operand, (gast.Constant, gast.List, gast.ListComp, gast.Tuple))
            or _plain_operation(operand, names, globals_)
        ):
            return False
    return True


def _arrays_only(scope: gast.FunctionDef, globals_: dict) -> set[str]:
    """The names every binding of which in `scope` is an array stacked by JAX or NumPy
    (`table = jnp.stack(rows)`, `_stacks`): never a list."""
    stacked, other, seen = set(), set(), set()
    for node in activity.walk_scope(scope.body):
        name = _stacked_name(node, globals_)
        if name is not None:
            stacked.add(name)
            seen.add(id(node.targets[0]))
        elif id(node) not in seen:
            other.update(_bound_names(node))
    return stacked - other - set(activity.params_of(scope.args))


def _reads_after_stacking(scope: gast.FunctionDef, globals_: dict) -> set[int]:
    """The ids of the reads `back[t]` that follow, in the function's own statements, a
    `back = jnp.stack(back)` after which nothing binds `back` again: an array's items (the list
    it was is gone)."""
    found: set[int] = set()
    for k, stmt in enumerate(scope.body):
        name, later = _stacked_name(stmt, globals_), scope.body[k + 1 :]
        if name is None:
            continue
        nodes = [n for s in later for n in structure.walk_nodes(s)]
        if any(name in _bound_names(n) for n in nodes):
            continue  # bound again: a read after may be of something else
        found.update(
            id(n)
            for n in nodes
            if isinstance(n, gast.Subscript)
            and isinstance(n.value, gast.Name)
            and n.value.id == name
            and isinstance(n.ctx, gast.Load)
        )
    return found


def _stacked_name(node: gast.AST, globals_: dict) -> str | None:
    """The name `node` binds to an array stacked by JAX or NumPy (`table = jnp.stack(rows)`,
    `_stacks`), if it is such a binding."""
    if (
        isinstance(node, gast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], gast.Name)
        and isinstance(node.value, gast.Call)
        and _stacks(node.value, globals_)
    ):
        return node.targets[0].id
    return None


def _bound_names(node: gast.AST) -> list[str]:
    """The names `node` itself binds (a store, a `del`, an import, a nested definition)."""
    if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load):
        return [node.id]
    if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
        return [node.name]
    if isinstance(node, (gast.Import, gast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    return []


def _stacks(call: gast.Call, globals_: dict) -> bool:
    """Whether `call` makes an array of its argument (`jnp.stack(rows)`, `np.asarray(rows)`):
    a JAX or NumPy function of `STACKERS`, which keeps no reference to the list."""
    return (
        isinstance(call.func, gast.Attribute)
        and call.func.attr in STACKERS
        and _array_function(call.func, globals_)
    )


def _array_function(func: gast.expr, globals_: dict) -> bool:
    """Whether `func` names a function of JAX or NumPy (`jnp.stack`, `jax.numpy.stack`), of
    the module a global names (not a local of the same name)."""
    path = activity.dotted_path(func)
    parts = path.split(".") if path else [None]
    root = func
    while isinstance(root, gast.Attribute):
        root = root.value
    value = globals_.get(parts[0], None) if activity.reads_global(root, globals_) else None
    for part in parts[1:-1]:  # `jax.numpy.stack`: the module that holds the function
        value = getattr(value, part, None) if isinstance(value, types.ModuleType) else None
    if isinstance(value, types.ModuleType):
        module = value.__name__
    else:
        module = getattr(value, "__module__", None) if callable(value) else None
    return isinstance(module, str) and any(
        module == m or module.startswith(m + ".") for m in _ARRAY_MODULES
    )


class _Lists(Transformer):
    def __init__(self, namer: Namer, globals_: dict, return_values):
        self.namer = namer
        self.globals = globals_
        self.return_values = return_values
        # The names of the functions being visited that hold a list no other reference sees.
        self.scopes: list[frozenset[str]] = []
        self.appended: list[frozenset[str]] = []  # the local names they append to
        self.unread: list[frozenset[str]] = []  # of those, the lists nothing reads
        self.stacked_reads: list[set[int]] = []  # reads of arrays a list was stacked into

    def visit_FunctionDef(self, node):
        lists = _always_lists(node, self.globals)
        if lists:
            node.body = _extends_as_appends(node.body, lists, self.namer)
        appended, popped, indexed = set(), set(), set()
        for call in activity.walk_scope(node.body):
            if method_call(call, "append") is not None:
                appended.add(call.func.value.id)
            elif method_call(call, "pop") is not None or method_call(call, "clear") is not None:
                popped.add(call.func.value.id)
            elif isinstance(call, gast.Delete):  # `del out[i]`: a pop
                popped.update(
                    t.value.id
                    for t in call.targets
                    if isinstance(t, gast.Subscript)
                    and isinstance(t.value, gast.Name)
                    and not isinstance(t.slice, gast.Slice)
                )
            elif isinstance(call, gast.Subscript) and features.picks_by_expression(call):
                indexed.add(call.value.id)  # `out[k]`: a traced `k` picks the item at run time
        # (`table = jnp.stack(rows)`, then `table[t]`: an array's item, never a list's.)
        indexed -= _arrays_only(node, self.globals)
        self.stacked_reads.append(_reads_after_stacking(node, self.globals))
        mutated = (appended | popped | indexed) & activity.local_names(node)
        private = private_lists(node, mutated, self.globals, self.return_values)
        self.scopes.append(private)
        # (Those only popped from too: one a staged loop pops from is a list again after it.)
        self.appended.append(frozenset(appended | popped) & private)
        self.unread.append(_never_read(node, frozenset(appended) & private))
        body = []
        for stmt in node.body:
            body += self._handed_over(stmt)  # before the statement: it reads the original
            body += _as_list(self.visit(stmt))
        node.body = body
        self.scopes.pop()
        self.stacked_reads.pop()
        self.appended.pop()
        self.unread.pop()
        return node

    def _handed_over(self, stmt: gast.stmt) -> list[gast.stmt]:
        """`out = rt__.handed_list(out, 'helper')` for each list this function builds (and
        appends to) that `stmt`, a statement of the function's own body, hands to other code
        once it is done (`helper(out)`, `jax.tree_util.tree_leaves(out)`, `isinstance(out,
        list)`): from there on the name holds the Python list it stands for, which the callee
        may keep or change as Python lets it. Not where `stmt` changes the list itself."""
        appended = self.appended[-1]
        if not appended or isinstance(stmt, (gast.FunctionDef, gast.ClassDef)):
            return []
        nodes = list(activity.walk_scope([stmt]))
        changed = {
            node.func.value.id
            for node in nodes
            if isinstance(node, gast.Call)
            and isinstance(node.func, gast.Attribute)
            and isinstance(node.func.value, gast.Name)
        }
        handed: dict[str, str] = {}
        for holder in nodes:
            if isinstance(holder, gast.Call) and structure.root_name(holder.func) != RUNTIME:
                reading = {id(a) for a in _reading_call_args(holder, self.globals)}
                callee = (
                    holder.func.id
                    if isinstance(holder.func, gast.Name)
                    else activity.dotted_path(holder.func) or "a function"
                )
            elif isinstance(
                holder, (gast.List, gast.Tuple, gast.Set, gast.Dict)
            ) and not isinstance(
                stmt, gast.Return
            ):  # (a return's: `runtime.lists.as_python_lists`)
                reading, callee = set(), f"a {type(holder).__name__.lower()} display"
            else:
                continue
            for arg in _handed_items(holder):
                if (
                    isinstance(arg, gast.Name)
                    and arg.id in appended
                    and arg.id not in changed
                    and id(arg) not in reading
                ):
                    handed.setdefault(arg.id, callee)
        return [
            templates.replace(
                f"target = {RUNTIME}.handed_list(target, callee)",
                target=name,
                callee=gast.Constant(callee, None),
            )[0]
            for name, callee in handed.items()
        ]

    def _local(self, call: gast.Call | None) -> gast.Call | None:
        return call if call is not None and call.func.value.id in self.scopes[-1] else None

    def visit_Expr(self, node):
        node = self.generic_visit(node)
        append = self._local(method_call(node.value, "append"))
        if append is not None and len(append.args) == 1:
            starred = isinstance(append.args[0], gast.Starred)
            if append.func.value.id in self.unread[-1] and not starred:
                # Nothing reads the list: its item is evaluated, as Python would, and dropped
                # (a staged `while` would otherwise carry a list it cannot size).
                node.value = append.args[0]
                return node
            return templates.replace(
                f"target = {RUNTIME}.list_append(target, item)",
                target=append.func.value.id,
                item=append.args[0],
            )
        pop = self._local(method_call(node.value, "pop"))
        if pop is not None:
            return self._pop(pop, self.namer.new("_"))
        hoisted = self._hoist_pops(node)
        if hoisted:
            return hoisted + _as_list(self.visit_Expr(node))
        clear = self._local(method_call(node.value, "clear"))
        if clear is not None and not clear.args and not clear.keywords:
            return templates.replace(
                f"target = {RUNTIME}.list_clear(target)", target=clear.func.value.id
            )
        reverse = self._local(method_call(node.value, "reverse"))
        if reverse is not None and not reverse.args:
            return templates.replace(
                f"target = {RUNTIME}.list_reverse(target)", target=reverse.func.value.id
            )
        return node

    def visit_Delete(self, node):
        # `del out[i]` of a list this function keeps private: `out` rebound to the list without
        # the item (a staged `if` or loop then sees the list change, as it sees a pop's).
        # `del out[0], x` deletes left to right: one statement per target.
        node = self.generic_visit(node)
        if not any(self._item(target) is not None for target in node.targets):
            return node
        stmts = []
        for target in node.targets:
            item = self._item(target)
            if item is None:
                stmts.append(gast.Delete(targets=[target]))
                continue
            stmts += templates.replace(
                f"target = {RUNTIME}.list_delete(target, index)",
                target=item.value.id,
                index=item.slice,
            )
        return stmts

    def visit_Assign(self, node):
        node = self.generic_visit(node)
        pop = self._local(method_call(node.value, "pop"))
        if pop is not None and len(node.targets) == 1:
            return self._pop(pop, node.targets[0])
        hoisted = self._hoist_pops(node)
        if hoisted:
            return hoisted + _as_list(self.visit_Assign(node))
        if len(node.targets) == 1 and self._unpacks_into_items(node.targets[0]):
            return self._unpacked(node)
        item = self._item(node.targets[0]) if len(node.targets) == 1 else None
        if item is None:
            return node
        if _simple(item.slice):
            return templates.replace(
                f"target = {RUNTIME}.list_setitem(target, index, value)",
                target=item.value.id,
                index=item.slice,
                value=node.value,
            )
        # Python evaluates the value before the index: first, into a name of its own.
        value = self.namer.new("item")
        return templates.replace(
            f"""
            value = value_expr
            target = {RUNTIME}.list_setitem(target, index, value)
            """,
            value=value,
            value_expr=node.value,
            target=item.value.id,
            index=item.slice,
        )

    def _unpacks_into_items(self, target: gast.expr) -> bool:
        """Whether `target` is a tuple (or list) of targets, without a starred one, that
        stores into an item of a private list (`out[i], out[j] = out[j], out[i]`)."""
        if not isinstance(target, (gast.Tuple, gast.List)):
            return False
        if any(isinstance(e, gast.Starred) for e in target.elts):
            return False
        return any(self._item(e) is not None or self._unpacks_into_items(e) for e in target.elts)

    def _unpacked(self, node: gast.Assign) -> list[gast.stmt]:
        """`a, out[i] = value` as Python runs it: the value unpacked into names of its own, then
        each target assigned in turn, left to right (an item's list and index evaluated just
        before its store), each as the statement it would be on its own."""
        target = node.targets[0]
        names = [self.namer.new("unpacked") for _ in target.elts]
        unpack = gast.Assign(
            targets=[
                type(target)(
                    elts=[gast.Name(n, gast.Store(), None, None) for n in names], ctx=gast.Store()
                )
            ],
            value=node.value,
            type_comment=None,
        )
        stmts = [unpack]
        for name, element in zip(names, target.elts):
            assign = gast.Assign(
                targets=[element], value=gast.Name(name, gast.Load(), None, None), type_comment=None
            )
            stmts.extend(_as_list(self.visit_Assign(assign)))
        if anno.hasanno(node, anno.Static.ORIGIN):
            for stmt in stmts:
                origins.fill_missing(stmt, anno.getanno(node, anno.Static.ORIGIN))
        return stmts

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if (
            isinstance(node.ctx, gast.Load)
            and features.picks_by_expression(node)
            and node.value.id in self.scopes[-1]
            and id(node) not in self.stacked_reads[-1]
        ):
            # `out[k]`: a traced `k` picks the item when the program runs (`rt__.list_item`).
            return templates.replace_as_expression(
                f"{RUNTIME}.list_item(target, index)", target=node.value.id, index=node.slice
            )
        return node

    def visit_AugAssign(self, node):
        node = self.generic_visit(node)
        # Python reads the name before it evaluates the value, which a pop cannot change.
        hoisted = self._hoist_pops(node) if isinstance(node.target, gast.Name) else []
        if hoisted:
            return hoisted + _as_list(self.visit_AugAssign(node))
        item = self._item(node.target)
        # Python reads the item before it evaluates the value: a value that calls nothing but
        # JAX's and NumPy's functions (`+= jnp.uint8(1)`) cannot tell the difference.
        if (
            item is None
            or type(node.op) not in _AUGMENTED
            or any(
                isinstance(n, _EFFECTFUL)
                and not (isinstance(n, gast.Call) and _array_function(n.func, self.globals))
                for n in structure.walk_nodes(node.value)
            )
        ):
            return node
        update = templates.replace(
            f"target = {RUNTIME}.list_update(target, index, op, value)",
            target=item.value.id,
            index=item.slice,
            op=gast.Constant(_AUGMENTED[type(node.op)], None),
            value=node.value,
        )
        if _simple(item.slice):
            return update
        # `counts[labels[i]] += 1`: Python evaluates the index once, before the item is read
        # and the value evaluated: first, into a name of its own.
        index = self.namer.new("index")
        update[0].value.args[1] = gast.Name(index, gast.Load(), None, None)
        return templates.replace("index = index_expr", index=index, index_expr=item.slice) + update

    def _item(self, target: gast.expr) -> gast.Subscript | None:
        """`target` if it is an item (not a slice) of a list this function keeps private."""
        if (
            isinstance(target, gast.Subscript)
            and isinstance(target.value, gast.Name)
            and target.value.id in self.scopes[-1]
            and not isinstance(target.slice, gast.Slice)
        ):
            return target
        return None

    def _hoist_pops(self, stmt) -> list[gast.stmt]:
        """The pops of private lists inside `stmt`'s value (`s += stack.pop()`, `s = s + 2 *
        st.pop(0)`, `print(st.pop())`), each made a statement of its own before it (`stack,
        popped = rt__.list_pop(stack)`) and read from there, where Python evaluates nothing
        before it that could tell (a call, or a read of the list) and evaluates it once, always
        (no `and`, conditional expression, chained comparison, lambda or comprehension around
        it); only names and constants are evaluated before it (no operation that may raise
        before the pop, which Python would then not make). Changes `stmt.value`; returns the
        statements, or none."""
        value = stmt.value
        if any(
            isinstance(n, _CONDITIONAL) or isinstance(n, gast.Compare) and len(n.ops) > 1
            for n in structure.walk_nodes(value)
        ):
            return []  # (`a < b < c` evaluates `c` where `a < b` only)
        hoisted, before = [], set()  # the pops, in order; names read before the next one
        for node in _evaluation_order(value):
            pop = self._local(method_call(node, "pop"))
            if pop is not None and pop.func.value.id not in before:
                hoisted.append(pop)
                before.add(pop.func.value.id)  # a later pop of it reads the list too
            elif isinstance(node, gast.Name):
                before.add(node.id)
            elif not isinstance(node, gast.Constant) and structure.root_name(node) != RUNTIME:
                # A call may read the list or change what the pop gives; an operation, an
                # item or an attribute may raise first (`d["k"] + st.pop()` in a `try`).
                break
        if not hoisted:
            return []
        names = {id(pop): self.namer.new("popped") for pop in hoisted}

        class Reads(gast.NodeTransformer):
            def visit_Call(self, node):
                if id(node) in names:
                    return gast.Name(names[id(node)], gast.Load(), None, None)
                return self.generic_visit(node)

        stmt.value = Reads().visit(value)
        return [s for pop in hoisted for s in self._pop(pop, names[id(pop)])]

    def _pop(self, call, item_target):
        stmt = templates.replace(
            f"target, item = {RUNTIME}.list_pop(target)",
            target=call.func.value.id,
            item=item_target,
        )
        stmt[0].value.args += call.args
        return stmt

    def visit_Call(self, node):
        node = self.generic_visit(node)
        func = node.func
        if not (isinstance(func, gast.Attribute) and func.attr in STACKERS and node.args):
            return node
        target, part = node.args[0], None
        if (
            isinstance(target, gast.Subscript)
            and isinstance(target.slice, gast.Slice)
            and isinstance(target.ctx, gast.Load)
        ):
            # `jnp.stack(hs[1:])`: a slice of the staged list's rows, not a list of its items
            bounds = (target.slice.lower, target.slice.upper, target.slice.step)
            part = gast.Tuple([b or templates.constant(None) for b in bounds], gast.Load())
            target = target.value
        if isinstance(target, gast.Name) and target.id in self.appended[-1]:
            call = templates.replace_as_expression(
                f"{RUNTIME}.stack_list(stack, target)", stack=func, target=target
            )
            call.args += node.args[1:]
            call.keywords = node.keywords
            if part is not None:
                call.keywords = [*call.keywords, gast.keyword(arg="part", value=part)]
            return call
        return node


# Augmented assignments to an item that `rt__.list_update` makes, by the operator's symbol.
_AUGMENTED = {
    gast.Add: "+",
    gast.Sub: "-",
    gast.Mult: "*",
    gast.Div: "/",
    gast.FloorDiv: "//",
    gast.Mod: "%",
    gast.Pow: "**",
    gast.MatMult: "@",
    gast.BitAnd: "&",
    gast.BitOr: "|",
    gast.BitXor: "^",
    gast.LShift: "<<",
    gast.RShift: ">>",
}
_EFFECTFUL = (gast.Call, gast.NamedExpr, gast.Await, gast.Yield, gast.YieldFrom)

# Expressions that evaluate a part of themselves on some runs only, or more than once.
_CONDITIONAL = (
    gast.BoolOp,
    gast.IfExp,
    gast.Lambda,
    gast.ListComp,
    gast.SetComp,
    gast.DictComp,
    gast.GeneratorExp,
    gast.NamedExpr,
    gast.Await,
    gast.Yield,
    gast.YieldFrom,
    gast.Dict,  # (its keys and values are evaluated in turns, not in field order)
)


def _evaluation_order(node: gast.expr):
    """The nodes of an expression in the order Python finishes evaluating them: each after
    the nodes under it, in field order (the order Python evaluates them in, for the nodes
    `_hoist_pops` walks: no `_CONDITIONAL` ones); of a method call, `out.pop(i)`, not the
    method's list (no read of it other than the call's)."""
    children = structure.children(node)
    if method_call(node, "pop") is not None:
        children = node.args
    for child in children:
        yield from _evaluation_order(child)
    yield node


def _simple(index: gast.expr) -> bool:
    """Whether evaluating `index` can do nothing but read a name: a name, a constant, `-1`."""
    if isinstance(index, gast.UnaryOp) and isinstance(index.op, (gast.USub, gast.UAdd)):
        index = index.operand
    return isinstance(index, (gast.Name, gast.Constant))


def _never_read(scope: gast.FunctionDef, names: frozenset[str]) -> frozenset[str]:
    """Those of `names` (lists no other reference sees) that `scope` reads only to append to
    them (`log.append(x)`, and nothing else: no `len(log)`, no `return log`), bound once, by a
    statement of the function's own body before every append (so each append finds it bound:
    dropping one drops no UnboundLocalError)."""
    found = set(names)
    stores: dict[str, list[int]] = {}  # name -> the statements of the body binding it
    first_append: dict[str, int] = {}  # name -> the first statement of the body appending to it
    for i, stmt in enumerate(scope.body):
        appending = set()
        for node in activity.walk_scope([stmt]):
            call = method_call(node, "append")
            if call is not None and call.func.value.id in names:
                appending.add(id(call.func.value))
                first_append.setdefault(call.func.value.id, i)
        for node in activity.walk_scope([stmt]):
            if isinstance(node, gast.Name) and node.id in names and id(node) not in appending:
                if isinstance(node.ctx, gast.Store):
                    stores.setdefault(node.id, []).append(i)
                else:
                    found.discard(node.id)  # read: `len(log)`, `return log`
    return frozenset(
        name
        for name in found
        if len(stores.get(name, ())) == 1
        and _binds_only(scope.body[stores[name][0]], name)
        and stores[name][0] < first_append.get(name, -1)
    )


def _binds_only(stmt: gast.stmt, name: str) -> bool:
    """Whether `stmt` is `name = ...`."""
    return (
        isinstance(stmt, gast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], gast.Name)
        and stmt.targets[0].id == name
    )


def _always_lists(scope: gast.FunctionDef, globals_: dict) -> frozenset[str]:
    """The local names of `scope` that `+=` or `.extend` a display (`out += [x]`) and that hold
    a list whenever they are bound: every other binding of them is `name = <a new list>`."""
    extended, stores, lists = set(), {}, set()
    for node in activity.walk_scope(scope.body):
        target = _extended(node)
        if target is not None:
            extended.add(target.id)
            lists.add(id(target))  # an extension keeps the list it extends
        elif isinstance(node, gast.Assign) and len(node.targets) == 1:
            if isinstance(node.targets[0], gast.Name) and _new_list(node.value, globals_):
                lists.add(id(node.targets[0]))
        if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load):
            stores.setdefault(node.id, []).append(id(node))
    candidates = extended & (activity.local_names(scope) - activity.params_of(scope.args))
    return frozenset(name for name in candidates if all(i in lists for i in stores[name]))


def _extended(node: gast.AST) -> gast.Name | None:
    """`out` of `out += [a, b]` or `out.extend((a, b))` (a display, no `*`), else None."""
    if isinstance(node, gast.AugAssign) and isinstance(node.op, gast.Add):
        target, display = node.target, node.value
    else:
        call = method_call(node.value, "extend") if isinstance(node, gast.Expr) else None
        if call is None or len(call.args) != 1:
            return None
        target, display = call.func.value, call.args[0]
    if (
        isinstance(target, gast.Name)
        and isinstance(display, (gast.List, gast.Tuple))
        and not any(isinstance(e, gast.Starred) for e in display.elts)
    ):
        return target
    return None


def _extends_as_appends(stmts: list[gast.stmt], lists: frozenset[str], namer: Namer) -> list:
    """`stmts` with each `out += [a, b]` and `out.extend([a, b])` of `lists` written as the
    appends it makes: the items first (Python evaluates the display before it extends), then
    one `out.append(item)` each, which the pass stages as it stages any append."""
    out = []
    for stmt in stmts:
        for block in structure.blocks(stmt):
            block.stmts = _extends_as_appends(block.stmts, lists, namer)
        target = _extended(stmt)
        if target is None or target.id not in lists:
            out.append(stmt)
            continue
        items = (stmt.value if isinstance(stmt, gast.AugAssign) else stmt.value.args[0]).elts
        names = [namer.new("item") for _ in items] if len(items) > 1 else []
        new = [templates.replace("name = value", name=n, value=v)[0] for n, v in zip(names, items)]
        for item in names or items:
            new += templates.replace("target.append(item)", target=target.id, item=item)
        if anno.hasanno(stmt, anno.Static.ORIGIN):
            for n in new:
                origins.fill_missing(n, anno.getanno(stmt, anno.Static.ORIGIN))
        out += new or [gast.Pass()]
    return out


def _as_list(result) -> list:
    return result if isinstance(result, list) else [result]


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _Lists(ctx.namer, ctx.globals, frozenset(ctx.return_values)).visit(fn_node)


def _as_list(stmts) -> list:
    return stmts if isinstance(stmts, list) else [stmts]
