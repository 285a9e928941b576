"""Rewrites `if`, `while` and `for` statements into calls of `rt__.if_stmt/while_stmt/for_stmt`.

Each statement's state (the names it modifies that are read later, or read by the statement
itself) goes in and out of plain nested functions, so the runtime can either run the statement as
Python or stage it as `lax.cond` / `lax.while_loop` / `lax.scan`:

    if x[0] > 0:                      def if_true(x):
        x = x * 2                         x = x * 2
    else:                      ->         return (x,)
        x = x - 1                     def if_false(x):
                                          x = x - 1
                                          return (x,)
                                      (x,) = rt__.if_stmt(x[0] > 0, if_true, if_false, (x,),
                                                          symbol_names=('x',))

A state variable that cannot have a value before the statement is passed in as
`rt__.Undefined('y')`, and reads of it elsewhere become `rt__.ld(y)`, which raises the
UnboundLocalError Python would raise. Statements that hold `break`, `continue` or `return` are
left as Python here (the early-exit passes run first and remove those they can).
"""

from __future__ import annotations

import gast

from transpiler import analysis, anno, loading, structure, templates
from transpiler.analysis import activity, counters, item_uses, ownership, plain
from transpiler.analysis import callees as callees_
from transpiler.context import PassContext
from transpiler.naming import RUNTIME, Namer
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.If, gast.While, gast.For)
ADDS = (gast.FunctionDef, gast.Return, gast.Call, gast.Assign)

_A = anno.Static


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Converts the control flow of `fn_node` and of the functions nested in it."""
    if ctx.analyzed is not fn_node:  # the unbound-names pass analysed it, and changed nothing
        analysis.analyze(fn_node)
    ctx.analyzed = None
    return _ControlFlow(ctx.namer, ctx.callees(fn_node)).visit(fn_node)


def _has_early_exit(node: gast.stmt) -> bool:
    """Whether `node` holds a return, or a break/continue that leaves `node` (not an inner loop);
    a `for` loop's exit guard (see `_exit_guard`) aside."""
    return any(
        any(structure.jumps_out(_without_exit_guard(block.stmts), structure.EXITS))
        for block in structure.blocks(node)
    )


def _exit_test_at(stmts: list[gast.stmt], loop_exit: str, guard: gast.If) -> None:
    """Gives the `return` of the exit-test function `loop_exit` (among `stmts`) the location
    of the `if C: break` it stands for, not the loop's: its line is the test's."""
    if not anno.hasanno(guard, _A.ORIGIN):
        return
    for stmt in stmts:
        if isinstance(stmt, gast.FunctionDef) and stmt.name == loop_exit:
            anno.setanno(stmt.body[-1], _A.ORIGIN, anno.getanno(guard, _A.ORIGIN))


def _exit_guard(node: gast.stmt) -> gast.If | None:
    """The `if C: ...; break` that starts a loop body, left by the break pass for this pass."""
    loop = isinstance(node, (gast.For, gast.While))
    if loop and node.body and anno.hasanno(node.body[0], _A.EXIT_GUARD):
        return node.body[0]
    return None


def _without_exit_guard(stmts: list[gast.stmt]) -> list[gast.stmt]:
    if stmts and anno.hasanno(stmts[0], _A.EXIT_GUARD):
        return stmts[1:]
    return stmts


def convertible(node: gast.stmt) -> bool:
    """Whether the control-flow pass rewrites `node` into a runtime call."""
    return isinstance(node, (gast.If, gast.While, gast.For)) and not _has_early_exit(node)


def state(node: gast.stmt, scope: activity.Scope) -> tuple[list[str], list[str]]:
    """(outputs, inputs): the names a converted statement passes out and in, in a stable order.

    A loop passes the same names in and out. An `if` passes out the names its branches modify
    that are read after it; it also takes in (after those) the names a branch modifies but
    reads first, which it needs but need not give back.

    Names declared `global` or `nonlocal` are state like any other (liveness keeps them live):
    the generated functions take them as parameters, and the assignment of the returned state,
    in the user's function, writes the global or nonlocal as the original statement would. A
    name only changed in place (`D[k] = v`, `obj.n = v`) is not state: the object it names is
    changed in place, aliases included (see `runtime.effects`).
    """
    # Rebound names only: an object changed in place (`stats[k] = v`, `self.n = v`) stays the
    # same object, reached through its name as it is; `runtime.effects` stages the change.
    modified = anno.getanno(node, _A.BODY_ACTIVITY).bound & scope.own
    if isinstance(node, gast.For):
        modified |= activity.of(node.target).bound
    live_out, live_in = anno.getanno(node, _A.LIVE_OUT), anno.getanno(node, _A.LIVE_IN)
    if not isinstance(node, gast.If):
        names = sorted(modified & (live_out | live_in))
        return names, names
    outputs = sorted(modified & live_out)
    return outputs, outputs + sorted((modified & live_in) - live_out)


def _may_change_in_place(stmts) -> bool:
    """Whether `stmts` may change an object in place: they call something, or assign or
    delete an item or an attribute."""
    for stmt in stmts:
        for node in structure.walk_nodes(stmt):
            if isinstance(node, (gast.Call, gast.Delete)):
                return True
            if isinstance(node, (gast.Subscript, gast.Attribute)) and isinstance(
                node.ctx, gast.Store
            ):
                return True
    return False


def _item_holders(stmts, reads) -> tuple[str, ...]:
    """The variables `stmts` read whose items they index (`best["p"] = v`, `best["p"][0] += v`,
    `best["p"].append(v)`)."""
    found = set()
    for stmt in stmts:
        for node in structure.walk_nodes(stmt):
            if isinstance(node, gast.Subscript) and isinstance(node.value, gast.Name):
                found.add(node.value.id)
    return tuple(sorted(name for name in found if name in reads))


def read_inputs(node: gast.stmt, scope: activity.Scope) -> list[str]:
    """The inputs whose values the statement reads. The rest (an `if` whose branches both
    assign `y`) need no value: they are passed in as `rt__.Undefined` placeholders."""
    _, inputs = state(node, scope)
    if not isinstance(node, gast.If):
        return inputs
    return [name for name in inputs if name in anno.getanno(node, _A.LIVE_IN)]


_IF = """
    def if_true(state_args):
        prologue
        body
        return state_out_tuple
    def if_false(state_args):
        prologue
        orelse
        return state_out_tuple
    state_out = rt__.if_stmt(test, if_true, if_false, state_in_tuple, symbol_names=names)
"""

_IF_NO_ELSE = """
    def if_true(state_args):
        prologue
        body
        return state_out_tuple
    state_out = rt__.if_stmt(test, if_true, None, state_in_tuple, symbol_names=names)
"""
"""An `if` with no `else` (and no cells to write): `None` for the false branch, which gives
back what it is given; staged, the runtime traces nothing for it."""

_WHILE = """
    def loop_test(state_args):
        test_prologue
        return test
    def loop_body(state_args):
        prologue
        body
        return state_tuple
    state_out = rt__.while_stmt(loop_test, loop_body, state_tuple, symbol_names=names, **options)
"""

_FOR = """
    def loop_body(item, state_args):
        prologue
        bind_item
        body
        return state_tuple
    state_out = rt__.for_stmt(iterable, loop_body, state_tuple, symbol_names=names, **options)
"""

_WHILE_EXIT = """
    def loop_exit(state_args):
        exit_prologue
        return exit_test
"""
"""The exit test of a `while` loop: its leading `if C: break`."""

_FOR_EXIT = """
    def loop_exit(item, state_args):
        exit_prologue
        bind_item
        return exit_test
    def loop_exited(item, state_args):
        prologue
        bind_item
        exit_body
        return state_tuple
"""
"""The functions of a `for` loop's exit guard: its test, and what it does before it breaks."""

_FOR_WITH_TEST = """
    def loop_test(state_args):
        test_prologue
        return test
    def loop_body(item, state_args):
        prologue
        bind_item
        body
        return state_tuple
    state_out = rt__.for_stmt(
        iterable, loop_body, state_tuple, symbol_names=names, extra_test=loop_test, **options
    )
"""


class _ControlFlow(Transformer):
    def __init__(self, namer: Namer, callees: callees_.Callees):
        self.namer = namer
        self.callees = callees  # what the calls do with the containers they are given
        self.resolvers: list[callees_.Callees] = []  # per scope: `callees`, nested ones'
        self.scopes: list[gast.FunctionDef] = []
        self.range_indices: list[frozenset[str]] = []  # of the loops over ranges around a node
        # Per `for` statement (by id), the lists built just before it (`item_uses.list_sizes`).
        self.list_sizes: dict[int, dict[str, int]] = {}
        self.hidden: list[frozenset[str] | None] = []  # per scope: `_hidden`
        # Per scope: what `ownership.aliased_after` finds, per statement, and what a store in
        # the statement must not be followed by (its `stored`).
        self.aliased: list[dict[gast.stmt, frozenset[str]]] = []
        self.stored: list[dict[gast.stmt, frozenset[str]]] = []
        # Per scope: the names that own their containers (`ownership.owned_names`), when asked.
        self.owned: list[frozenset[str] | None] = []
        self.catches: list[bool | None] = []
        # The `for` loops (by id) whose range a staged loop around them makes traced
        # (`_traced_range_bounds`): `for_stmt(outer_range=True)`.
        self.outer_ranged: set[int] = set()

    def visit_FunctionDef(self, node):
        self.scopes.append(node)
        # Per statement, the variables and attributes whose lists and dicts the function may
        # change in place after it, which other names may reach, and which a staged `if` may
        # leave holding one of two objects (see runtime.control_flow._identities).
        callees = self.callees if len(self.scopes) == 1 else self.resolvers[-1].scope(node)
        self.resolvers.append(callees)
        self.stored.append({})
        self.aliased.append(ownership.aliased_after(node, callees, self.stored[-1]))
        self.owned.append(None)
        self.catches.append(None)  # whether it has a `try` (found when a loop asks)
        self.hidden.append(None)
        node.body = self.visit_block(node.body)
        self.hidden.pop()
        self.catches.pop()
        self.aliased.pop()
        self.stored.pop()
        self.owned.pop()
        self.resolvers.pop()
        self.scopes.pop()
        return node

    def visit_block(self, stmts):
        if self.scopes and any(isinstance(stmt, gast.For) for stmt in stmts):
            # (before the block's statements change: as the user wrote them)
            self.list_sizes.update(item_uses.list_sizes(stmts, self._hidden()))
        return super().visit_block(stmts)

    def _hidden(self) -> frozenset[str]:
        """The names the nested functions and lambdas of the function being converted read:
        they may change a list the function built at any call."""
        if self.hidden[-1] is None:
            scope = self.scopes[-1]
            self.hidden[-1] = frozenset(
                n.id
                for inner in structure.walk_nodes(scope)
                if inner is not scope and isinstance(inner, structure.SCOPES + (gast.Lambda,))
                for n in structure.walk_nodes(inner)
                if isinstance(n, gast.Name)
            )
        return self.hidden[-1]

    def _catches(self) -> bool:
        """Whether the function being converted has a `try` (its handlers may read the text of
        an exception a loop raises)."""
        if self.catches[-1] is None:
            nodes = structure.walk_nodes(self.scopes[-1])
            self.catches[-1] = any(isinstance(n, gast.Try) for n in nodes)
        return self.catches[-1]

    def _state(self, node):
        """(outputs, inputs, cells) of the statement, from the annotations, which describe it as
        it was before its sub-blocks change; `cells` as `_cells` gives them."""
        scope = anno.getanno(self.scopes[-1], _A.SCOPE)
        outputs, inputs = state(node, scope)
        # Placeholders for what no branch reads: `rt__.Undefined('y')`.
        read = read_inputs(node, scope)
        inputs = [name if name in read else _placeholder(name) for name in inputs]
        return outputs, inputs, self._cells([_label(v) for v in inputs])

    def _visit_blocks(self, node):
        """Converts the sub-blocks, after the statement has taken its names: generated names
        follow source order (the outer `if` gets `if_true`, an inner one `if_true_1`)."""
        node.body = self.visit_block(node.body)
        node.orelse = self.visit_block(node.orelse)

    def visit_If(self, node):
        if not convertible(node):
            return self.generic_visit(node)
        outputs, inputs, cells = self._state(node)
        keeps = not node.orelse and not cells[1]  # no else, no cells its branch would write
        names = dict(if_true=self.namer.new("if_true"))
        if not keeps:
            names["if_false"] = self.namer.new("if_false")
        stores = self._stores_option(node, node.body + node.orelse)
        self._visit_blocks(node)
        template, blocks = _IF, dict(body=node.body, orelse=node.orelse)
        if keeps:
            template, blocks = _IF_NO_ELSE, dict(body=node.body)
        converted = self._assign_state(
            template, outputs, inputs, cells, test=node.test, **blocks, **names
        )
        # The variables it gives a value whose lists or dicts the function may change in place
        # after the statement (or attributes: `self.hist`).
        after = self.aliased[-1].get(node, frozenset())
        aliased = tuple(
            sorted(
                n
                for n in after
                if n in outputs or "." in n or n.removesuffix(ownership.ITEMS) in outputs
            )
        )
        if aliased:
            keyword = gast.keyword(arg="aliased", value=templates.constant(aliased))
            converted[-1].value.keywords.append(keyword)
        # Those that own their containers: no other name can see which object they hold.
        owned = tuple(sorted(n for n in outputs if n in self._owned()))
        if owned:
            keyword = gast.keyword(arg="owned", value=templates.constant(owned))
            converted[-1].value.keywords.append(keyword)
        # Those it takes that no branch reads (it gives them back, or binds them first), where
        # a branch may change state outside its variables (see runtime.effects.Effects).
        reads = anno.getanno(node, _A.BODY_ACTIVITY).reads
        unread = tuple(n for n in inputs if isinstance(n, str) and n not in reads)
        changing = _may_change_in_place(node.body + node.orelse)
        if unread and changing:
            keyword = gast.keyword(arg="unread", value=templates.constant(unread))
            converted[-1].value.keywords.append(keyword)
        # The dicts and lists it reads whose items it may change or rebind (`best["p"] = [...]`
        # on one path, `best["p"][0] = v` on the other): the runtime asks which of their items
        # nothing else holds as it starts (see runtime.control_flow._identities).
        holders = _item_holders(node.body + node.orelse, reads) if changing else ()
        if holders:
            keyword = gast.keyword(arg="item_holders", value=templates.constant(holders))
            converted[-1].value.keywords.append(keyword)
        converted[-1].value.keywords.extend(stores)
        if not cells[1] and plain.bindings(node.body) and plain.bindings(node.orelse):
            # (Its branches only bind names to names or numbers: a select, with no trace.)
            converted[-1].value.keywords.append(
                gast.keyword(arg="plain", value=gast.Constant(True, None))
            )
        return converted

    def _owned(self) -> frozenset[str]:
        if self.owned[-1] is None:
            self.owned[-1] = ownership.owned_names(self.scopes[-1], self.resolvers[-1])
        return self.owned[-1]

    def visit_While(self, node):
        if not convertible(node):
            return self.generic_visit(node)
        names, _, cells = self._state(node)
        options = _loop_options(node) + self._restart_options(node, names)
        options += self._aliased_option(node, names) + self._stores_option(node, node.body)
        options += self._counted_option(node, names)
        template, replacements = _WHILE, {}
        guard = _exit_guard(node)
        if guard is not None:
            # From the break pass: `if C: break` first in the body, the loop's exit.
            loop_exit = self.namer.new("loop_exit")
            template = _WHILE_EXIT + _WHILE
            replacements.update(exit_test=guard.test, loop_exit=loop_exit)
            options.append(gast.keyword(arg="exit_test", value=templates.name(loop_exit)))
            node.body = node.body[1:]
        tested = activity.of(node.test).reads
        test_reads = [n for n in names if n in tested and n not in self.namer.generated]
        compared = _only_compared(node.test)
        for option, found in (
            ("test_reads", test_reads),
            ("compared", [n for n in test_reads if n in compared]),
        ):
            if found:
                value = templates.constant(tuple(found))
                options.append(gast.keyword(arg=option, value=value))
        partners = {}
        if _short_circuits_to_true(node.test):
            partners = _compared_with(node.test, {n for n in test_reads if n in compared})
        if partners:
            each = [gast.Tuple(elts=found, ctx=gast.Load()) for found in partners.values()]
            keys = [templates.constant(name) for name in partners]
            value = templates.replace_as_expression(
                "lambda state_args: partners",
                state_args=names,
                partners=gast.Dict(keys=keys, values=each),
            )
            options.append(gast.keyword(arg="compared_with", value=value))
        loop_test, loop_body = self.namer.new("loop_test"), self.namer.new("loop_body")
        self._visit_blocks(node)
        stmts = self._assign_state(
            template,
            names,
            names,
            cells,
            body=node.body,
            test=node.test,
            loop_test=loop_test,
            loop_body=loop_body,
            options=options,
            **replacements,
        )
        if guard is not None:
            _exit_test_at(stmts, replacements["loop_exit"], guard)
        return stmts + node.orelse

    def visit_For(self, node):
        if not convertible(node):
            return self.generic_visit(node)
        # Decided on the body as the user wrote it, before its statements become functions.
        options = _loop_options(node)
        enclosing = frozenset().union(*self.range_indices)
        # (its `else:` runs after it too, as the statements after the loop)
        live_after = anno.getanno(node, _A.LIVE_OUT) | _read_names(node.orelse)
        # The item read after the loop: the runtime gives it back as Python's last item where
        # the staged loop runs every iteration (a `for i in range(300)` and `return i`); a
        # tuple of names reads it as Python items, the loop unrolled.
        last_item = isinstance(node.target, gast.Name) and node.target.id in live_after
        if last_item and node.target.id not in anno.getanno(node, _A.BODY_ACTIVITY).bound:
            live_after = live_after - {node.target.id}
            options.append(gast.keyword(arg="last_item", value=templates.constant(node.target.id)))
        # Reads of the lists built just before it, at the index, in range in every iteration.
        sizes = self.list_sizes.pop(id(node), {})
        proven, counted = item_uses.counted_reads(node, sizes)
        bounds = self._traced_range_bounds(node, enclosing)
        proven |= bounds
        if bounds:
            options.append(gast.keyword(arg="stages_ranges", value=templates.constant(True)))
        if id(node) in self.outer_ranged:
            options.append(gast.keyword(arg="outer_range", value=templates.constant(True)))
        as_python = item_uses.uses_items_as_python(
            node, live_after, enclosing, self._catches(), proven, self.scopes[-1]
        )
        if as_python:
            value = templates.constant(as_python)
            options.append(gast.keyword(arg="items_as_python", value=value))
            options += self._in_range_option(node, live_after, enclosing, proven, as_python)
        elif counted:
            options.append(gast.keyword(arg="indexed_lists", value=templates.constant(counted)))
        names, _, cells = self._state(node)
        options += self._restart_options(node, names) + self._aliased_option(node, names)
        options += self._stores_option(node, node.body)
        if not anno.hasanno(node, _A.EXTRA_TEST) and _exit_guard(node) is None:
            collects = item_uses.collected(node, names, self._owned(), sizes)
            if collects:
                options.append(gast.keyword(arg="collects", value=templates.constant(collects)))
        if anno.hasanno(node, _A.COMPREHENSION):  # the runtime's errors name it
            construct = templates.constant(anno.getanno(node, _A.COMPREHENSION))
            options.append(gast.keyword(arg="construct", value=construct))
        target = node.target
        if isinstance(target, gast.Name) and target.id not in names:
            item, bind_item = target.id, []
        else:
            item = self.namer.new("item")
            bind_item = templates.replace("target = item", target=target, item=item)
        replacements = dict(item=item, bind_item=bind_item, iterable=node.iter, options=options)
        template = _FOR
        if anno.hasanno(node, _A.EXTRA_TEST):
            # From the break pass: the loop stops fetching items once this is false.
            template = _FOR_WITH_TEST
            replacements.update(
                test=anno.getanno(node, _A.EXTRA_TEST), loop_test=self.namer.new("loop_test")
            )
        guard = _exit_guard(node)
        if guard is not None:
            # From the break pass: `if C: ...; break` first in the body, the loop's exit.
            template = _FOR_EXIT + template
            loop_exit, loop_exited = self.namer.new("loop_exit"), self.namer.new("loop_exited")
            replacements.update(
                exit_test=guard.test,
                exit_body=self.visit_block(guard.body[:-1]),
                loop_exit=loop_exit,
                loop_exited=loop_exited,
            )
            options += [
                gast.keyword(arg="exit_test", value=templates.name(loop_exit)),
                gast.keyword(arg="on_exit", value=templates.name(loop_exited)),
            ]
            node.body = node.body[1:]
        replacements["loop_body"] = self.namer.new("loop_body")
        ranged = item_uses.range_loop(node) and isinstance(target, gast.Name)
        self.range_indices.append(item_uses.index_names(node) if ranged else frozenset())
        self._visit_blocks(node)
        self.range_indices.pop()
        stmts = self._assign_state(template, names, names, cells, body=node.body, **replacements)
        if guard is not None:
            _exit_test_at(stmts, replacements["loop_exit"], guard)
        return stmts + node.orelse

    def _stores_option(self, node, stmts) -> list[gast.keyword]:
        """`stores=((statement, path), ...)`: the statements of `stmts` that store a list or
        dict the function may change in place after `node` into another container
        (`record["best"] = params`), which the runtime refuses where `node` is staged and the
        stored value is a list or dict (see runtime.effects.Effects). An `if`'s own changes
        count, before the store or after it: the staged store keeps a copy of the container as
        the branch's store found it; a loop's, as each iteration's run after the one before."""
        after = self.stored[-1].get(node, frozenset())
        if isinstance(node, gast.For) and isinstance(node.target, gast.Name):
            if item_uses.range_loop(node):  # its item is an int: no container to store
                after = frozenset(p for p in after if ownership.head(p) != node.target.id)
        if not after:
            return []
        resolve = self.resolvers[-1]
        found = {}
        for inner in activity.walk_scope(stmts):
            stored = [
                source
                for target, value, _ in ownership.bindings(inner)
                # into a container (`d["k"] = p`, `out.append(p)`) or an object (`s.prev = p`)
                if target.endswith(ownership.ITEMS) or "." in target
                for source, _ in ownership.sources(value, resolve)
            ]
            if isinstance(inner, gast.Call):  # `register(cache, params)`
                stored += [
                    path
                    for pair in resolve.joined_by(inner)
                    for path in pair
                    if not path.endswith(ownership.ITEMS)
                ]
            for path in stored:
                if path in after:
                    found.setdefault(_described(inner), path)
        if not found:
            return []
        value = templates.constant(tuple(found.items()))
        return [gast.keyword(arg="stores", value=value)]

    def _aliased_option(self, node, names) -> list[gast.keyword]:
        """`aliased=(...)`: the loop's variables whose lists and dicts other names may reach
        and change in place after it; `owned=(...)`: those whose containers no other name can
        see (see runtime.effects.Effects)."""
        after = self.aliased[-1].get(node, frozenset())
        keywords = []
        for option, found in (
            ("aliased", tuple(name for name in names if name in after)),
            ("owned", tuple(name for name in names if name in self._owned())),
        ):
            if found:
                keywords.append(gast.keyword(arg=option, value=templates.constant(found)))
        return keywords

    def _counted_option(self, node, names) -> list[gast.keyword]:
        """`counted=(counter, lambda: bound, extra)` where the loop's test bounds a counter
        (see `analysis.counters`) and the user gave no `loop_options`: the runtime bounds the
        staged loop by that count."""
        if anno.hasanno(node, _A.LOOP_OPTIONS):
            return []
        found = counters.counted_bound(node, anno.getanno(self.scopes[-1], _A.SCOPE))
        if found is None or found[0] not in names:
            return []
        counter, bound, extra = found
        value = templates.replace_as_expression(
            "(counter, lambda: bound, extra)",
            counter=templates.constant(counter),
            bound=bound,
            extra=templates.constant(extra),
        )
        return [gast.keyword(arg="counted", value=value)]

    def _traced_range_bounds(self, node, enclosing) -> frozenset[int]:
        """The ids of the bounds of the ranges of loops nested in `node` (`for j in range(n - 1
        - i)` of bubble sort) that stay exact where a staged `node` makes them traced: such a
        loop is a while loop over the traced range, its index traced as in a scan, so exact
        where its body uses the index only as an array (`item_uses.uses_items_as_python`) and
        appends to or pops from no list (it would hold a traced number of items, where Python
        knows how many); not a step (`range(0, n, i)`: Python's error for a zero step). Where
        `node`'s index reaches such a bound only, `node` may be staged; the runtime stages it so
        only where each such loop's state is arrays then, and tracing it raises nothing (see
        `for_stmt(stages_ranges=..., outer_range=...)`): a loop of Python numbers runs as
        Python over a Python range."""
        if not item_uses.range_loop(node) or not isinstance(node.target, gast.Name):
            return frozenset()
        found = set()
        indices = item_uses.index_names(node)
        inside = enclosing | indices

        def reads_index(bound):
            nodes = structure.walk_nodes(bound)
            return any(isinstance(n, gast.Name) and n.id in indices for n in nodes)

        for inner in structure.walk(node.body):
            if not (isinstance(inner, gast.For) and item_uses.range_loop(inner)):
                continue
            if not any(reads_index(bound) for bound in inner.iter.args):
                continue  # (a range of its own: the same staged or not)
            if len(inner.iter.args) == 3 and reads_index(inner.iter.args[2]):
                continue
            if not convertible(inner) or item_uses.resizes_a_list(inner.body):
                continue
            live_after = anno.getanno(inner, _A.LIVE_OUT) | _read_names(inner.orelse)
            as_python = item_uses.uses_items_as_python(
                inner, live_after, inside, self._catches(), frozenset(), self.scopes[-1]
            )
            if not as_python:
                found.update(id(bound) for bound in inner.iter.args)
                self.outer_ranged.add(id(inner))
        return frozenset(found)

    def _in_range_option(self, node, live_after, enclosing, proven, as_python):
        """`in_range=(lambda: (xs, ...), ((c, ...), ...), as_python)`: where the body uses its
        index as a Python value only to read lists the body leaves alone (`back[t]`, see
        `item_uses.checked_reads`), the lists, the offsets it reads them at, and what
        `items_as_python` is where the runtime finds those reads in range as the loop starts
        (the loop may then be staged, the lists read at the traced index)."""
        ids, offsets = item_uses.checked_reads(node)
        if not ids:
            return []
        checked = item_uses.uses_items_as_python(
            node, live_after, enclosing, self._catches(), proven | ids, self.scopes[-1]
        )
        if checked == as_python:
            return []
        lists = gast.Tuple(elts=[templates.name(name) for name, _ in offsets], ctx=gast.Load())
        value = templates.replace_as_expression(
            "(lambda: lists, offsets, checked)",
            lists=lists,
            offsets=templates.constant(tuple(c for _, c in offsets)),
            checked=templates.constant(checked),
        )
        return [gast.keyword(arg="in_range", value=value)]

    def _restart_options(self, node, names) -> list[gast.keyword]:
        """`reads=(...)`, `sums=(...)`: the state variables whose values before the loop its
        first iteration reads (the exit test of a `for` included), less those it only adds to
        first (`steps += 1`: `sums`) and the flags the passes made. The runtime restarts a
        loop that its first iteration made staged from before that iteration only where
        Python would compute that iteration the same way (see `runtime.peeling`)."""
        live = anno.getanno(node, _A.LOOP_LIVE_IN)
        if isinstance(node, gast.For):  # the item, bound before each iteration
            live = live - activity.of(node.target).bound
        read = [n for n in names if n in live and n not in self.namer.generated]
        only_added = _only_added(node.body, read)
        sums = [n for n in read if n in only_added and _adds_to_first(node.body, n)]
        # A variable the body uses as a Python value (`isinstance(n, int)`) counts as read: a
        # restart from its promoted value would compute that use differently.
        plain = [n for n in names if n not in read and n not in self.namer.generated]
        pythonic = item_uses.used_as_python(node.body, [*sums, *plain], self._catches())
        sums = [n for n in sums if n not in pythonic]
        read = [n for n in names if n in read or n in pythonic]
        keywords = []
        for option, found in (("reads", [n for n in read if n not in sums]), ("sums", sums)):
            if found:
                keywords.append(gast.keyword(arg=option, value=templates.constant(tuple(found))))
        return keywords

    def _cells(self, state):
        """The parameters for `state`, and the statements that open each generated function.

        A state variable that a nested function reads or writes (through its closure cell), or
        that is declared global or nonlocal, must live in that one place while the generated
        functions run, or the nested function would see a stale value. Such a variable enters
        under another name and is written to its cell first: `nonlocal acc; acc = acc_1`.
        """
        scope = anno.getanno(self.scopes[-1], _A.SCOPE)
        shared = scope.closure_reads | scope.declared
        params, prologue = [], []
        for name in state:
            if name not in shared:
                params.append(name)
                continue
            param = self.namer.new(name)
            params.append(param)
            declaration = gast.Global if name in scope.globals else gast.Nonlocal
            prologue.append(declaration(names=[name]))
            prologue += templates.replace("name = param", name=name, param=param)
        return params, prologue

    def _assign_state(self, template, outputs, inputs, cells, **replacements):
        """`inputs`: names, and placeholder expressions for the inputs that are not read;
        `cells`: `_cells` of them."""
        params, prologue = cells
        if template in (_IF, _IF_NO_ELSE):
            values = [templates.name(v) if isinstance(v, str) else v for v in inputs]
            replacements.update(
                state_out_tuple=templates.names_tuple(outputs),
                state_in_tuple=gast.Tuple(elts=values, ctx=gast.Load()),
            )
        else:
            replacements.update(state_tuple=templates.names_tuple(outputs))
        # The item a `for` binds before its exit test (`v = item`): the test reads it, not the
        # variable's value before the iteration.
        item_names = {
            node.id
            for stmt in replacements.get("bind_item", ())
            for node in structure.walk_nodes(stmt)
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store)
        }
        for test, key in (("test", "test_prologue"), ("exit_test", "exit_prologue")):
            if key in template:
                kept = item_names if key == "exit_prologue" else set()
                replacements[key], replacements[test] = _test_of_cells(
                    prologue, replacements[test], kept
                )
        return templates.replace(
            template,
            state_args=params,
            prologue=prologue,
            names=templates.constant(tuple(outputs)),
            state_out=outputs,  # no outputs: no assignment, just the call
            **replacements,
        )


def _test_of_cells(
    prologue: list[gast.stmt], test: gast.expr, kept: set[str]
) -> tuple[list, gast.expr]:
    """(the part of `prologue` a loop test needs, the test): a test that calls nothing reads
    the parameters for the variables that live in cells (`i_1 < n`) and writes no cell; one
    that calls something (a closure that may read them) writes them all. The runtime refuses
    a test that changes Python state, and a cell it wrote would hold a changed value. `kept`:
    the names the test function binds itself before the test (a `for` loop's item)."""
    nodes = list(structure.walk_nodes(test))
    if any(isinstance(n, gast.Call) for n in nodes) or any(
        isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load) for n in nodes
    ):
        return prologue, test
    params = {
        assignment.targets[0].id: assignment.value.id
        for assignment in prologue[1::2]
        if assignment.targets[0].id not in kept
    }
    test = templates.clone(test)
    for node in structure.walk_nodes(test):
        if isinstance(node, gast.Name) and node.id in params:
            node.id = params[node.id]
    return [], test


def _short_circuits_to_true(test: gast.expr) -> bool:
    """Whether `test` may be Python's True where some of what it reads is traced: an `or`
    (`err > tol or it < 5`), or a `not` of an `and` (`not (err <= tol and it >= 5)`)."""
    for node in structure.walk_nodes(test):
        if isinstance(node, gast.BoolOp) and isinstance(node.op, gast.Or):
            return True
        if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not):
            inner = structure.walk_nodes(node.operand)
            if any(isinstance(n, gast.BoolOp) and isinstance(n.op, gast.And) for n in inner):
                return True
    return False


def _compared_with(test: gast.expr, names: set[str]) -> dict[str, list[gast.expr]]:
    """Per variable of `names`, copies of what `test` compares it with (`n_warm` of `it <
    n_warm`, `frac * total` of `step < frac * total`: the other operands of its comparisons),
    where each is a constant, a name or an attribute of one, or arithmetic of those (nothing
    evaluating them again could change); a variable compared with anything else is left out.
    The runtime stages a loop from before iterations its test decided as Python only where a
    Python int among them meets ints, which int32 compares as Python does (`peeling.again`)."""
    found: dict[str, list[gast.expr]] = {}
    unknown = set()
    for node in structure.walk_nodes(test):
        if not isinstance(node, gast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for name in {o.id for o in operands if isinstance(o, gast.Name) and o.id in names}:
            others = [o for o in operands if not (isinstance(o, gast.Name) and o.id == name)]
            if all(_plain_value(o) for o in others):
                found.setdefault(name, []).extend(templates.clone(o) for o in others)
            else:
                unknown.add(name)
    return {name: partners for name, partners in found.items() if name not in unknown}


def _plain_value(node: gast.expr) -> bool:
    if isinstance(node, (gast.Constant, gast.Name)):
        return True
    if isinstance(node, gast.Attribute):
        return isinstance(node.value, gast.Name)
    if isinstance(node, gast.UnaryOp):
        return _plain_value(node.operand)
    if isinstance(node, gast.BinOp):
        return _plain_value(node.left) and _plain_value(node.right)
    return False


def _only_compared(test: gast.expr) -> set[str]:
    """The names `test` reads only as operands of comparisons (`i < n`, not `2 ** i < n`)."""
    compared, other = set(), set()
    operands = set()
    for node in structure.walk_nodes(test):
        if isinstance(node, gast.Compare):
            operands.update(id(x) for x in (node.left, *node.comparators))
    for node in structure.walk_nodes(test):
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load):
            (compared if id(node) in operands else other).add(node.id)
    return compared - other


def _adds_to_first(body: list[gast.stmt], name: str) -> bool:
    """Whether, on every path through `body`, `name` is first added to (`name += e`, `name -= e`,
    `name = name + e`, `name = name - e`, `e` not reading `name`), bound, or not used at all:
    its value before the body is never read but to add to it."""
    return _first_use(body, name) != "reads"


def _only_added(body: list[gast.stmt], names) -> frozenset[str]:
    """Those of `names` that `body` reads only to add to them (`steps += 1`): a restart computes
    the sum in the dtype it is staged with (int32, float32), exactly where the value after the
    first iteration fits it, but what else the iteration computes from it (`c * c`, `t + 0.5`)
    Python computes with its own numbers (unbounded ints, float64)."""
    wanted = set(names)
    added = set()  # the left operands of `name = name + e`
    for node in activity.walk_scope(body):
        if (
            isinstance(node, gast.Assign)
            and isinstance(node.value, gast.BinOp)
            and isinstance(node.value.left, gast.Name)
            and node.value.left.id in wanted
            and _increments(node, node.value.left.id)
        ):
            added.add(id(node.value.left))
    read_otherwise = {
        node.id
        for stmt in body
        for node in structure.walk_nodes(stmt)
        if isinstance(node, gast.Name)
        and node.id in wanted
        and isinstance(node.ctx, gast.Load)
        and id(node) not in added
    }
    return frozenset(wanted - read_otherwise)


def _first_use(stmts: list[gast.stmt], name: str) -> str | None:
    """How the statements first use `name`, path by path through `if`s: "adds" (or binds),
    "reads", or None (not at all)."""
    for i, stmt in enumerate(stmts):
        if _increments(stmt, name):
            return "adds"
        if (
            isinstance(stmt, gast.If)
            and name not in activity.of(stmt.test).modified | activity.of(stmt.test).reads
        ):
            uses = {_first_use(stmt.body, name), _first_use(stmt.orelse, name)}
            if "reads" in uses:
                return "reads"
            if uses == {None}:
                continue
            if None in uses:  # a path that does not use it goes on after the `if`
                return "reads" if _first_use(stmts[i + 1 :], name) == "reads" else "adds"
            return "adds"
        act = anno.getanno(stmt, _A.ACTIVITY)
        if name in act.reads:
            return "reads"
        if name in act.bound:
            return "adds"
    return None


def _increments(stmt: gast.stmt, name: str) -> bool:
    if isinstance(stmt, gast.AugAssign):
        target, op, value = stmt.target, stmt.op, stmt.value
    elif (
        isinstance(stmt, gast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.value, gast.BinOp)
        and isinstance(stmt.value.left, gast.Name)
        and stmt.value.left.id == name
    ):
        (target,), op, value = stmt.targets, stmt.value.op, stmt.value.right
    else:
        return False
    return (
        isinstance(target, gast.Name)
        and target.id == name
        and isinstance(op, (gast.Add, gast.Sub))
        and name not in activity.of(value).reads
    )


def _described(node) -> str:
    """A statement or call as the user wrote it (`best.append(p)` for the lists pass's
    `rt__.list_append(best, p)`)."""
    if isinstance(node, gast.Call):
        func, args = ownership.called(node)
        if ownership.is_runtime(func) and func.attr.startswith("list_") and args:
            method = gast.Attribute(value=args[0], attr=func.attr[len("list_") :], ctx=gast.Load())
            func, args = method, args[1:]
        node = gast.Call(func=func, args=args, keywords=node.keywords)
    return loading.unparse(node).strip()


def _read_names(stmts: list[gast.stmt]) -> frozenset[str]:
    """The names `stmts` read anywhere in them."""
    return frozenset(
        n.id
        for stmt in stmts
        for n in structure.walk_nodes(stmt)
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)
    )


def _placeholder(name: str) -> gast.expr:
    return templates.replace_as_expression(
        f"{RUNTIME}.Undefined(label)", label=templates.constant(name)
    )


def _label(value) -> str:
    """The name an input stands for: itself, or the label of its placeholder."""
    return value if isinstance(value, str) else value.args[0].value


def _loop_options(node: gast.stmt) -> list[gast.keyword]:
    """The loop's `transpiler.loop_options(...)`, as keywords of its runtime call."""
    if not anno.hasanno(node, _A.LOOP_OPTIONS):
        return []
    return [
        gast.keyword(arg=name, value=value)
        for name, value in anno.getanno(node, _A.LOOP_OPTIONS).items()
    ]
