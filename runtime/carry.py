"""The state of a staged loop: what it carries, how it enters, and its checks each iteration.

Array variables are carried through the `lax` loop; other Python objects stay put and must stay
the same object. Before the loop starts, the body may be traced once, abstractly, to learn what
only it can size: a return value or a variable it binds first, and the lists it appends to.
"""

from __future__ import annotations

import contextlib
import contextvars

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import identity, staging
from runtime import lists as lists_
from runtime.errors import StagingError
from runtime.staging import describe
from runtime.variables import MaybeUnbound, Undefined, UndefinedReturnValue


class Carry:
    """The state of a staged loop: array variables are carried, other Python objects stay put.

    Before the loop starts, the body is traced once, abstractly (`probe(state)`), if the state
    holds what only the body can size: a return value not set yet (`UndefinedReturnValue`) starts
    as zeros shaped like what the body sets, and a Python list the body appends to becomes a
    `StagedList` with room for `trip_count` iterations of appends. `stops_early`: the loop may
    run fewer iterations than that (a while loop), so a list that every iteration appends to
    has a traced length after it all the same.
    """

    def __init__(
        self, state, names, site, probe, trip_count=None, probe_args=(), *, stops_early=False
    ):
        self.names, self.site = names, site
        _check_no_shared_items(state, names, site)
        self.stops_early = stops_early
        self.static_lengths: dict[int, int] = {}
        self.planned: set[int] = set()  # the lists this loop sized (and fixed)
        # Variables that enter unbound and that the body, probed, leaves unbound: the `if` that
        # binds them is Python's, never taken (`if g: z = s * c` with a Python-false `g`).
        self.never_bound: set[int] = set()
        # The lists and dicts the variables hold before the loop: where every iteration leaves
        # a variable holding the one it was given, it is that object after the loop.
        self.originals = {i: v for i, v in enumerate(state) if identity.is_container(v)}
        self.replaced: set[int] = set()
        # Of those, per variable: the ids of the ones inside that every iteration traced left
        # at their places (`identity.kept_at_their_places`); and the copies an iteration was
        # given of them and of those inside, {id(copy): (copy, original)}.
        self.kept: dict[int, set[int]] = {}
        self._copies: dict[int, tuple] = {}
        # Likewise the lists and dicts inside tuple variables (`st = NT(w, 0.0)`): {index:
        # {path: the object}}, and the (index, path) of those an iteration left another object
        # at, or changed in place.
        self.tuple_originals = {
            i: items for i, v in enumerate(state) if (items := identity.tuple_containers(v))
        }
        self.tuple_replaced: set[tuple] = set()
        self.tuple_changed: set[tuple] = set()
        self._tuples_checked = False
        # Those an iteration changed in place (None: not followed, as where iterations are not
        # given fresh containers: all count).
        self.changed: set[int] | None = None
        self._given: tuple | None = None
        # Variables the probed body binds to a list it sizes (`retval = out`): by that list's.
        self._binds_lists: dict[int, int] = {}
        state = self._size_from_body(state, probe, trip_count, probe_args)
        promotions = _PROMOTIONS.get()
        if promotions:
            state = _promote(state, promotions)
        fewer = _FEWER.get()
        if fewer:
            state = tuple(_counting_on_none(v) if i in fewer else v for i, v in enumerate(state))
        # Python bools: an int the body adds to one (`hits = hits + 1`) widens it, as Python.
        self.python_bools = {i for i, v in enumerate(state) if type(v) is bool}
        self.static: dict[int, object] = {}
        # Variables that enter unbound and that every iteration binds: bound after one.
        self.bound_by_every_iteration: set[int] = set()
        init = []
        for index, (name, value) in enumerate(zip(names, state)):
            if isinstance(value, Undefined) and index in self.never_bound:
                self.static[index] = value  # stays unbound: reading it raises, as in Python
                continue
            if isinstance(value, Undefined):
                raise Unsized(
                    f"'{name}' has no value before the {site.construct} ({site}), but the "
                    "staged loop carries it from one iteration to the next (it is read in the "
                    f"loop or after it). Give '{name}' a value before the loop."
                )
            if staging.is_array_tree(value):
                init.append(staging.as_arrays(value))
            else:
                self.static[index] = value
        self.init = tuple(init)

    def _size_from_body(self, state, probe, trip_count, probe_args):
        # Unset: a return value not set yet, or a variable the body binds first.
        unset = [i for i, v in enumerate(state) if isinstance(v, (UndefinedReturnValue, Undefined))]
        lists = [i for i, v in enumerate(state) if _growable(v)]
        if not unset and not lists:
            return state
        if not lists and all(_known_literal(state[i]) for i in unset):
            # Bound to literals only (`converged = True` before a `break`): typed as they are,
            # without tracing the body to see them (on a path Python never takes, it stays
            # unbound where the program runs: `ld` raises there, as Python would).
            state = list(state)
            for i in unset:
                zeros = staging.zeros_like(staging.shapes_of(staging.as_arrays(state[i].like)))
                state[i] = MaybeUnbound(zeros, jnp.asarray(False), self.names[i])
            return tuple(state)
        # Staged again after a `Promoted` (see `staged_with`), the loop probes the very same
        # state (the promotions are applied after): what the first probe found stands.
        sized = _SIZED.get()
        found = sized.get(id(state)) if sized is not None else None
        if found is not None and found[0] is state:
            _, sized_state, never_bound, static_lengths, planned = found
            self.never_bound |= never_bound
            self.static_lengths.update(static_lengths)
            self.planned |= planned
            return sized_state
        sized_state = self._sized(state, unset, lists, probe, trip_count, probe_args)
        if sized is not None:
            sized[id(state)] = (
                state,
                sized_state,
                set(self.never_bound),
                dict(self.static_lengths),
                set(self.planned),
            )
        return sized_state

    def _sized(self, state, unset, lists, probe, trip_count, probe_args):
        shapes, probe_state = self._probe(state, unset, lists, probe, probe_args, {})
        while len(shapes) < len(unset):
            # A value the body binds read, before that, by another it binds (`s = a` under an
            # `if` that holds from the second iteration on, `a = ...` after it): the probe read
            # it unbound. Probe again with it as bound in some earlier iteration.
            earlier = list(state)
            for i, shape in shapes.items():
                if isinstance(state[i], Undefined):
                    zeros = staging.zeros_like(shape)
                    earlier[i] = MaybeUnbound(zeros, jnp.asarray(False), self.names[i])
            if all(a is b for a, b in zip(earlier, state)):
                break  # nothing bound that was not: the same probe again would find the same
            again, probe_state = self._probe(earlier, unset, lists, probe, probe_args, {})
            if len(again) <= len(shapes):
                break
            shapes = again
        # A read of an item the list holds only when the program runs got a float32 scalar
        # stand-in, and the appends made of stand-ins (`a = st.pop(); st.append(a + b)`) are
        # float32 too: probe again with each type an append gave that is not the stand-in's,
        # in the order they came, keeping the first that every append then has (int32 items
        # stay int32); a list none settles takes what all its appends give.
        shapes, probe_state = self._retyped(
            state, unset, lists, probe, probe_args, shapes, probe_state
        )
        state = list(state)
        for i in unset:
            if i in shapes and isinstance(state[i], Undefined):
                # Bound by the body: unbound until an iteration binds it (`ld` checks it).
                zeros = staging.zeros_like(shapes[i])
                state[i] = MaybeUnbound(zeros, jnp.asarray(False), self.names[i])
            elif i in shapes:
                state[i] = staging.zeros_like(shapes[i])
        for i in lists:
            if probe_state[i].appended or probe_state[i].pops:
                state[i] = self._staged_list(i, state[i], probe_state[i], trip_count)
        for i, j in self._binds_lists.items():
            if isinstance(state[j], lists_.StagedList) and not isinstance(state[i], Undefined):
                # `return out` from inside the loop: the return value is that list, carried as
                # an empty one of its room until the return runs
                state[i] = state[j]._with(length=jnp.zeros_like(state[j].length), least=0)
        return tuple(state)

    def _retyped(self, state, unset, lists, probe, probe_args, shapes, probe_state):
        """`_sized`'s probe again, for the lists whose reads got stand-ins (see there)."""
        guessed = [i for i in lists if probe_state[i].guessed and probe_state[i].appended]
        candidates = {}
        for i in guessed:
            types = []
            for item in probe_state[i].appended:
                typed = lists_.item_type([item])
                if not _stand_in(typed) and typed not in types:
                    types.append(typed)
            candidates[i] = types
        every = {i: lists_.item_type(probe_state[i].appended) for i in guessed}
        settled: dict[int, jax.ShapeDtypeStruct] = {}
        for attempt in range(max((len(c) for c in candidates.values()), default=0)):
            trying = {
                i: c[attempt]
                for i, c in candidates.items()
                if i not in settled and attempt < len(c)
            }
            if not trying:
                break
            elements = {**settled, **trying}
            again, probed = self._probe(state, unset, lists, probe, probe_args, elements)
            settled.update(
                (i, e) for i, e in trying.items() if lists_.item_type(probed[i].appended) == e
            )
            if len(settled) == len(guessed):
                return again, probed
        rest = {i: e for i, e in every.items() if i not in settled and e is not None}
        if not settled and all(_stand_in(e) for e in rest.values()):
            return shapes, probe_state  # stand-ins all along: the probe's types stand
        return self._probe(state, unset, lists, probe, probe_args, {**rest, **settled})

    def _probe(self, state, unset, lists, probe, probe_args, elements):
        """Traces the body once, abstractly, with stand-ins for its lists; returns the shapes of
        the unset values it binds, and the state it ran on (the lists, with what they saw)."""
        probe_state = list(staging.fresh(state))
        for i in lists:
            value = state[i]
            staged = isinstance(value, lists_.StagedList)
            if staged and value.known_length() is not None:
                # Of known length (a list a loop changes at a traced index): the Python list
                # of its items, as code that reads the whole list (`jnp.stack(out)`) reads it.
                value, staged = value.items("a staged loop"), False
            elif not staged:
                # Its copy: the lists and dicts it holds are copies too, which the probe may
                # change in place (`top = stack.pop(); top[0] = x`) without the caller's seeing.
                value = probe_state[i]
            probe_state[i] = lists_.ProbeList([] if staged else value, value if staged else None)
            probe_state[i].element = elements.get(i)
        # What the loop carries enters the probe abstract, as it enters the loop: a test on it is
        # traced there too, not decided by the values the state has before the loop.
        carried = {
            i: staging.as_arrays(v)
            for i, v in enumerate(probe_state)
            if i not in lists and staging.is_array_tree(v)
        }
        found = []

        def run(carried, probe_args):
            values = [staging.released(carried.get(i, v)) for i, v in enumerate(probe_state)]
            with lists_.keeping_items(()):
                outs = probe(tuple(values), *probe_args)
            bound = [v.value if isinstance(v, MaybeUnbound) else v for v in outs]
            found.extend(i for i in unset if staging.is_array_tree(bound[i]))
            self._binds_lists = {
                i: j for i in unset for j in lists if bound[i] is probe_state[j] and i != j
            }
            self.never_bound.update(i for i in unset if outs[i] is probe_state[i])
            return [staging.as_arrays(bound[i]) for i in found]

        shapes = dict(zip(found, staging.eval_shape(run, carried, probe_args)))
        return shapes, probe_state

    def _staged_list(self, index, value, probed, trip_count):
        """The list `value` as a fixed StagedList with room for the loop's appends."""
        name, site = self.names[index], self.site
        comprehension = site.construct in _COMPREHENSIONS
        if trip_count is None and comprehension:
            raise StagingError(
                f"A {site.construct} with a filter ({site}) loops over items whose number is "
                "known only when the program runs (a range with a traced bound), so the list it "
                "builds has no fixed size. Loop over a range with a Python bound and test the "
                "traced one in the filter (`[v for v in range(N) if v < n and ...]`)."
            )
        # Every iteration pops as many items as it appends, whichever path it takes (a running
        # window: `window.pop(0); window.append(x)`): the length never changes, so the list
        # needs room for one iteration's appends only, however many iterations run.
        balanced = not (probed.conditional or probed.unbounded) and probed.count == probed.pops
        # It is only popped from (a stack worked down: `while st and ...: v = st.pop()`): it
        # needs no room beyond its items, however many iterations run.
        shrinking = not probed.appended and not probed.unbounded
        if (trip_count is None or probed.unbounded) and not (balanced or shrinking):
            where = "" if trip_count is None else " (in a nested while loop)"
            raise StagingError(
                f"'{name}' is appended to in a staged {site.construct} ({site}){where} whose "
                "number of iterations is not known, so the list has no fixed size. Put "
                "`transpiler.loop_options(max_iterations=N)` as the first statement of the loop "
                "body to bound it, or loop over a range with a Python bound (`range(N)`)."
            )
        staged = isinstance(value, lists_.StagedList)
        items = probed.appended + ([] if staged else list(value))
        how = "popped from" if shrinking else "appended to"
        lists_.check_items(items, f"'{name}', {how} in the staged {site.construct} ({site}),")
        if staged:
            element = lists_.item_type([value.buffer[0], *items], value.buffer.dtype)
        else:
            element = lists_.item_type(items)
            if element is not None:
                lists_.check_kept_items(name, value, element)
        if element is None and not items and not staged:
            raise StagingError(
                f"'{name}' is popped from in the staged {site.construct} ({site}), but it holds "
                "no items before it and the loop appends none: a list a staged loop changes the "
                "length of is one array of its items, whose type no item gives here. Keep the "
                "pops out of the loop, or make the list with its items before it."
            )
        if element is None:
            shown = [jnp.asarray(x) for x in items] + ([value.buffer[0]] if staged else [])
            kinds = ", ".join(sorted({describe(x) for x in shown}))
            raise StagingError(
                f"'{name}' {'holds' if shrinking else 'gets'} items of different shapes or "
                f"dtypes in the staged {site.construct} ({site}): {kinds}. A list a staged loop "
                "changes the length of is stacked into one array, so all its items must have "
                "one shape (and dtypes that promote to one)."
            )
        appends = probed.count if balanced or shrinking else probed.count * trip_count
        where = f" at {probed.where}" if probed.where else ""
        if comprehension:
            origin = lists_.comprehension_origin(name, site)
        elif shrinking:
            origin = lists_.Origin(name, f"is popped from in the staged {site.construct} ({site})")
        elif probed.conditional or not self.stops_early:
            origin = lists_.Origin(
                name,
                f"is appended to{where} on some paths of the staged {site.construct} ({site}) "
                "only (under a traced condition, or after a break)",
                "append on every path",
            )
        else:  # on every iteration, of a loop whose test (or a break) stops it
            origin = lists_.Origin(
                name,
                f"is appended to{where} in every iteration of the staged {site.construct} "
                f"({site}), which may stop before its bound (its test, or a break, decides "
                "when the program runs)",
            )
        if not staged:
            value = lists_.StagedList.create(value, len(value), element, origin)
        known = value.known_length()
        if known is not None and balanced:
            self.static_lengths[index] = known
        elif (
            known is not None
            and not (probed.conditional or self.stops_early)
            and trip_count is not None
        ):
            self.static_lengths[index] = known + appends - probed.pops * trip_count
        self.planned.add(index)
        carried = value.resized(value.capacity + appends, fixed=True)
        # In the loop the length is a traced count; it is known again after (static_lengths).
        # It holds as many items as now when each iteration starts, where no iteration leaves
        # it with fewer (else the loop starts again counting on none: `FewerItems`).
        least = known if known is not None else value.least
        return carried._with(static_length=None, fixed=True, origin=origin, least=least)

    def finish(self, dynamic, *, ran: bool = False, every_iteration: set | None = None):
        """The state after the loop: its lists can grow again; those that always grew get their
        length back as an int. `ran`: the loop ran at least once (a scan), so what every
        iteration binds is bound. `every_iteration`: a set, given the positions of what every
        iteration binds."""
        if every_iteration is not None:
            every_iteration.clear()
            every_iteration.update(self.bound_by_every_iteration)
        if ran:
            identity.runs_at_least_once()
        state = list(self.merge(dynamic))
        self._copies = {}  # (what it holds of the objects inside would count as a holder)
        for index, original in self.originals.items():
            if (
                index not in self.replaced
                and index not in self.planned
                and index not in self.static
            ):
                if self.changed is None or index in self.changed:  # else: what it held
                    replaced = []
                    kept = self.kept.get(index)
                    identity.update_in_place(original, state[index], kept, replaced)
                    identity.record_replaced(replaced, f"'{self.names[index]}'", self.site)
                state[index] = original
        if self._tuples_checked:
            self._restore_tuples(state)
        for index in self.planned:
            value, length = state[index], self.static_lengths.get(index)
            state[index] = value._with(static_length=length, fixed=False)
        for index in self._binds_lists:
            if isinstance(state[index], lists_.StagedList):
                state[index] = state[index]._with(fixed=False)
        if ran:
            for index in self.bound_by_every_iteration:
                state[index] = state[index].value
        return tuple(state)

    def _restore_tuples(self, state: list) -> None:
        """Each tuple variable holds, where every iteration left it holding the list or dict it
        was given (`st = st._replace(b=...)`), the object it held before the loop, as Python's
        does, its contents updated in place to the staged ones where an iteration changed it."""
        for index, items in self.tuple_originals.items():
            value = state[index]
            if index in self.static or not identity.plain_tuple(value):
                continue
            for path, original in items.items():
                key = (index, path)
                if key in self.tuple_replaced or identity.item_at(value, path) is None:
                    continue
                changed = self.changed is None or key in self.tuple_changed
                value = identity.holding_again(value, path, original, changed)
            state[index] = value

    def given(self, dynamic):
        """The state an iteration is given (fresh containers: see `check_identities`)."""
        self._given = self.merge(staging.fresh(dynamic))
        self._given_contents = {i: identity.contents(self._given[i]) for i in self.originals}
        self._copies = {
            id(c): (c, o)
            for i, original in self.originals.items()
            for o, c in identity.container_pairs(original, self._given[i])
        }
        self._given_tuples = {
            (i, path): identity.contents(identity.item_at(self._given[i], path))
            for i, items in self.tuple_originals.items()
            for path in items
        }
        return self._given

    @contextlib.contextmanager
    def giving(self, dynamic):
        """`given(dynamic)`, while the iteration is traced: its copies are known as copies
        (`identity.original_of`)."""
        given = self.given(dynamic)
        with identity.given_copies(self._copies, in_loop=True), lists_.keeping_items(()):
            yield given

    def check_identities(self, outs) -> None:
        """Where the body leaves a variable holding another variable's list (`a, b = b, a`)
        or binds a new one after changing the one it held (`h[0] = v; h = [w]`), and changes
        lists in place: refused, since the staged loop changes copies, which nothing takes
        back to the objects other names see."""
        given, self._given = self._given, None
        if given is None:
            return
        changed = {
            i for i in self.originals if identity.changed_since(given[i], self._given_contents[i])
        }
        self.changed = changed | (self.changed or set())
        self._check_tuple_identities(outs, given)
        for i in self.originals:
            if outs[i] is given[i]:
                kept = identity.kept_at_their_places(self.originals[i], outs[i], self._copies)
                self.kept[i] = self.kept[i] & kept if i in self.kept else kept
                continue
            self.replaced.add(i)
            other = next((j for j in self.originals if j != i and outs[i] is given[j]), None)
            if (other is not None and changed) or i in changed:
                kind = type(self.originals[i]).__name__
                what = (
                    f"the {kind} '{self.names[other]}' held"
                    if other is not None
                    else f"another {kind} after changing the one it held in place"
                )
                if identity.attribute_node(self.originals[i]):
                    changed_ones, named = "objects", "objects"
                    new = "(dataclasses.replace) instead of setting their attributes"
                else:
                    changed_ones, named = "lists or dicts", "lists"
                    new = "(a = [...]) instead of changing them"
                raise StagingError(
                    f"'{self.names[i]}' is given {what} in an iteration of the staged "
                    f"{self.site.construct} ({self.site}), and the loop changes {changed_ones} "
                    "in place: the staged loop changes copies of them, which nothing takes back "
                    f"to the objects other names see. Change the {named} through the names "
                    f"that hold them, or build new ones {new}."
                )

    def _check_tuple_identities(self, outs, given) -> None:
        """`check_identities` for the lists and dicts inside tuple variables: notes which the
        iteration kept where they were and which it changed; one it changed in place and then
        let go of (`st.w[0] += 1; st = NT([0.0], b)`) is refused, as for a list variable."""
        self._tuples_checked = True
        for (i, path), before in self._given_tuples.items():
            item = identity.item_at(given[i], path)
            changed = identity.is_container(item) and identity.changed_since(item, before)
            if changed:
                self.tuple_changed.add((i, path))
            out = identity.item_at(outs[i], path)
            # (The object itself, read through another name, `t = (w, k)`: kept too, where
            # nothing changed its copy.)
            if item is not None and (out is item or out is self.tuple_originals[i][path]):
                if out is item or not changed:
                    continue
            self.tuple_replaced.add((i, path))
            if changed:
                kind = type(item).__name__
                raise StagingError(
                    f"'{self.names[i]}' is given a tuple holding another {kind} at {list(path)} "
                    f"in an iteration of the staged {self.site.construct} ({self.site}), after "
                    f"the {kind} it held there was changed in place: the staged loop changes "
                    "a copy of it, which nothing takes back to the object other names see. "
                    f"Change the {kind} where it stays, or build a new one instead of changing it."
                )

    def merge(self, dynamic):
        dynamic = iter(dynamic)
        return tuple(
            self.static[i] if i in self.static else staging.released(next(dynamic))
            for i in range(len(self.names))
        )

    def check(self, outs, before):
        """The loop body's outputs as the next carry; StagingError if they changed type."""
        assert len(outs) == len(self.names), "generated code returned the wrong number of values"
        self.check_identities(outs)
        _check_no_shared_items(outs, self.names, self.site)  # made so by the body: `a[1] = a[0]`
        before = iter(before)
        result = []
        promotions = {}
        for index, (name, value) in enumerate(zip(self.names, outs)):
            if index in self.static:
                held = self.static[index]
                if _replaced_probe(held, value):
                    raise Replaced(index)
                if value is not held:
                    raise StagingError(
                        f"'{name}' is {describe(self.static[index])} before the "
                        f"{self.site.construct} and {describe(value)} after one iteration "
                        f"({self.site}). A staged loop can only carry arrays (or tuples, lists "
                        "and dicts of arrays); other Python objects must stay the same object."
                    )
                continue
            prev = next(before)
            if isinstance(value, MaybeUnbound) and not isinstance(prev, MaybeUnbound):
                raise Unbinds(index)  # a `del` on some path of the body
            if isinstance(prev, MaybeUnbound) and not isinstance(value, MaybeUnbound):
                value = MaybeUnbound(value, jnp.asarray(True), name)  # bound in this iteration
                self.bound_by_every_iteration.add(index)
            if not staging.is_array_tree(value):
                raise StagingError(
                    f"'{name}' is {describe(prev)} before the {self.site.construct} but "
                    f"{describe(value)} after one iteration ({self.site}). A staged loop can "
                    "only carry arrays (or tuples, lists and dicts of arrays)."
                )
            if (
                type(prev) is list
                and isinstance(value, lists_.StagedList)
                and value.known_length() == len(prev)
            ):
                # `out[i] = v` with the loop's traced `i`: its items' type (not a value of
                # this trace, which is thrown away)
                item = jax.ShapeDtypeStruct(
                    value.buffer.shape[1:], value.buffer.dtype, weak_type=value.weak
                )
                raise Picked(index, item)
            value = _least_as_entered(staging.as_arrays(value), prev, index)
            value = _adopt_weak_dtypes(value, prev)
            promoted = self._check_leaves(name, prev, value, index in self.python_bools)
            if promoted:
                promotions[index] = promoted
            result.append(value)
        if promotions:
            raise Promoted(promotions)
        return tuple(result)

    def _check_leaves(self, name, prev, value, python_bool=False) -> dict:
        """StagingError where `value` (a variable after an iteration) does not fit `prev` (what
        the loop carries); returns {leaf index: dtype} of the weakly typed leaves (a Python
        number, `discount = 1`; `python_bool`: a Python bool) that the body makes wider
        (`discount *= 0.9`)."""
        site, construct = self.site, self.site.construct
        tree_prev = jax.tree_util.tree_structure(prev)
        tree_value = jax.tree_util.tree_structure(value)
        held = staging.held_difference(prev, value) if tree_prev != tree_value else None
        if held is not None:
            path, x, y = held
            raise StagingError(
                f"'{name}{path}' is {x!r} before the {construct} but {y!r} after one iteration "
                f"({site}). The parts of a staged loop's variables that are not arrays must "
                "stay the very same Python object."
            )
        if tree_prev != tree_value:
            raise StagingError(
                f"'{name}' is {staging.describe_tree(prev)} before the {construct} but "
                f"{staging.describe_tree(value)} after one iteration ({site}). Loop variables "
                "must keep their structure."
            )
        promoted = {}
        leaves = jax.tree_util.tree_leaves(value)
        for j, ((path, x), y) in enumerate(zip(staging.leaf_paths(prev), leaves)):
            where = f"'{name}{path}'"
            if x.shape != y.shape:
                raise StagingError(
                    f"{where} is {describe(x)} before the {construct} but {describe(y)} after "
                    f"one iteration ({site}). Loop variables must keep their shape and dtype; "
                    f"pad {name} to a fixed size or carry its length separately."
                )
            weak = jax.typeof(x).weak_type or python_bool
            # A weakly typed value (a Python number) takes the body's dtype only where JAX's
            # promotion gives that dtype (`total = 0`, then a float32): a Python float the body
            # makes an int32, or an int it makes a bool, would be cut to it (0.5 -> 0).
            narrowed = weak and not staging.takes_dtype(x, y.dtype)
            if x.dtype != y.dtype and (not weak or narrowed):
                # (a Python number where staged it would be cut to the other type)
                before = _as_number(x) if narrowed else describe(x)
                after = _as_number(y) if narrowed and jax.typeof(y).weak_type else describe(y)
                raise StagingError(
                    f"{where} is {before} before the {construct} but {after} after "
                    f"one iteration ({site}). Loop variables must keep their dtype; give {name} "
                    f"its final dtype before the loop, or cast inside it with "
                    f".astype(jnp.{np.dtype(x.dtype).name})."
                )
            if x.dtype != y.dtype and jnp.result_type(x, y) == y.dtype:
                weak = jax.typeof(y).weak_type
                promoted[j] = staging.WeakDtype(y.dtype) if weak else y.dtype
            elif x.dtype == y.dtype and jax.typeof(x).weak_type and not jax.typeof(y).weak_type:
                # A Python number the body makes a strongly typed array (`u = 0.0`, then
                # `u = z` with z a float32): the loop carries the array's type, as a staged if
                # joins them (`lax.while_loop` would give the start's weak type after it).
                promoted[j] = y.dtype
        return promoted


def _as_number(x) -> str:
    """A weakly typed scalar described as the Python number it stands for: `a Python int
    (int32[])`."""
    kind = {"b": "bool", "i": "int", "u": "int", "c": "complex"}.get(np.dtype(x.dtype).kind)
    return f"a Python {kind or 'float'} ({describe(x)})"


class Unsized(StagingError):
    """A variable the loop body binds first has no value before the loop, and the body gives it
    no array (a string, an object): the loop cannot carry it. (A `for` loop over a range runs
    one iteration as Python then, which binds it.)"""


class Unbinds(staging.Retrace):
    """Internal: an iteration may unbind state variable `index` (a `del` on some path): stage
    the loop again with it entering as a bound `MaybeUnbound`."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


# The constructs a loop stands for where the comprehensions pass wrote it
# (`transpiler.passes.comprehensions`): its list has a generated name.
_COMPREHENSIONS = frozenset({"list comprehension", "generator expression"})


# {state index: {leaf index: dtype}}: what the loop being staged now promotes (see `Promoted`).
_PROMOTIONS: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "promotions", default=None
)
# What the loop being staged found probing its body, by the state it probed (see
# `Carry._size_from_body`): {id(state): (state, sized state, never_bound, static_lengths,
# planned)}.
_SIZED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("sized", default=None)
# The state variables whose staged lists the loop being staged counts on none of the items of
# (see `FewerItems`).
_FEWER: contextvars.ContextVar[frozenset] = contextvars.ContextVar("fewer", default=frozenset())


class Promoted(staging.Retrace):
    """Internal: an iteration makes weakly typed state (a Python number: `G = 0`) wider than it
    entered (`G += discount * r` once `discount` is a float): stage the loop again with those
    leaves entering as the body makes them, until the types settle (each round widens one).
    `staged_with` collects them; the loop's `Carry` casts its state so as it starts (after
    sizing what the body binds first: a return value's placeholder is promoted too)."""

    def __init__(self, promotions: dict):
        super().__init__(promotions)
        self.promotions = promotions  # {state index: {leaf index: dtype or WeakDtype}}


class FewerItems(staging.Retrace):
    """Internal: an iteration leaves a staged list counting on fewer items than it entered
    with (`StagedList.least`: it pops more than it appends): stage the loop again with the
    list counting on none."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


class Replaced(staging.Retrace):
    """Internal: an iteration replaces the list an outer loop's probe stands in for (a
    `ProbeList` no code appended to) with a list of its own (`best = [x, y]`): stage the loop
    again with it entering as the plain list it stands for, carried like any other."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


def _known_literal(value) -> bool:
    """Whether `value` is an unbound variable the function binds to literals of one kind only
    (`Undefined.like`)."""
    return type(value) is Undefined and value.like is not None and not value.deleted


def _stand_in(typed: jax.ShapeDtypeStruct) -> bool:
    """Whether `typed` is the type of a probe's stand-in for an item (see `lists.STAND_IN`)."""
    stand_in = lists_.STAND_IN
    return (typed.shape, typed.dtype, typed.weak_type) == (
        stand_in.shape,
        stand_in.dtype,
        stand_in.weak_type,
    )


def _check_no_shared_items(state, names, site) -> None:
    """Raises StagingError where a list or dict inside the loop's state (an item of a list, a
    value of a dict, at any depth) is one object at two places (`rows = [row, row]`, `[[0.0] *
    3] * 2`): the staged loop carries each place's items as arrays of its own, so a change
    through one place would not show through the other, as in Python it does."""
    seen: dict[int, str] = {}

    def visit(value, path: str, depth: int) -> None:
        if type(value) in (list, tuple):
            items = enumerate(value)
        elif type(value) is dict:
            items = value.items()
        elif identity.attribute_node(value):
            items = identity.attributes(value).items()
        else:
            return
        if depth and type(value) is not tuple:
            where = seen.setdefault(id(value), path)
            if where != path:
                kind = type(value).__name__
                raise StagingError(
                    f"{where} and {path} are one {kind} ({site}), which the staged "
                    f"{site.construct} carries: it carries the items of each place as arrays of "
                    f"their own, so a change through one place would not show through the "
                    f"other, as it does in Python. Make a {kind} for each place "
                    f"(`[[0.0] * m for _ in range(n)]`, not `[[0.0] * m] * n`)."
                )
        for key, item in items:
            visit(item, f"{path}[{key!r}]", depth + 1)

    for name, value in zip(names, state):
        visit(value, name, 0)


class Picked(staging.Retrace):
    """Internal: an iteration changes an item of a Python list the loop carries at an index it
    traces (`out[i] = x * i` in `for i in range(n)`), which makes it the staged list of its
    items: stage the loop again with it entering as that staged list, of the type the
    iteration made of it (`item`: its items' type: Python numbers that an array assigned joins
    take its dtype)."""

    def __init__(self, index: int, item):
        super().__init__(index)
        self.index, self.item = index, item


def _replaced_probe(held, value) -> bool:
    return (
        isinstance(held, lists_.ProbeList)
        and not held.appended
        and not held.pops
        and type(value) is list
        and staging.is_array_tree(value)
        and staging.is_array_tree(list(held))
    )


def staged_with(stage, state, names):
    """`stage(state)`, staged again with each state variable an iteration may unbind entering
    as a `MaybeUnbound` (bound: it is bound when the loop starts), and each probe's list an
    iteration replaces entering as a plain list (see `Replaced`)."""
    promotions: dict[int, dict] = {}
    sized: dict[int, tuple] = {}
    fewer: set[int] = set()
    while True:
        token = _PROMOTIONS.set(promotions)  # for the loop's own `Carry` (see `Promoted`)
        sized_token = _SIZED.set(sized)
        fewer_token = _FEWER.set(frozenset(fewer))
        try:
            with lists_.probes_rewound(state):
                return stage(state)
        except Unbinds as request:
            i = request.index
            bound = MaybeUnbound(state[i], jnp.asarray(True), names[i])
            state = (*state[:i], bound, *state[i + 1 :])
        except Replaced as request:
            i = request.index
            state = (*state[:i], list(state[i]), *state[i + 1 :])
        except Picked as request:
            i = request.index
            picked = lists_.picked_by_program(
                state[i], "the item assigned", names[i], joining=request.item
            )
            state = (*state[:i], picked, *state[i + 1 :])
        except Promoted as request:
            for i, casts in request.promotions.items():
                promotions.setdefault(i, {}).update(casts)
        except FewerItems as request:
            assert request.index not in fewer, "a list counting on no items counts on fewer"
            fewer.add(request.index)
        finally:
            _PROMOTIONS.reset(token)
            _SIZED.reset(sized_token)
            _FEWER.reset(fewer_token)


def _promote(state, promotions):
    """`state` with the leaves `promotions` names cast (see `Promoted`)."""
    state = list(state)
    for i, casts in promotions.items():
        state[i] = staging.released(staging.cast_leaves(state[i], casts))
    return tuple(state)


def _least_as_entered(value, prev, index: int):
    """`value` (state variable `index` after an iteration) with the staged lists in it counting
    on as many items as those of `prev` (the iteration's input) do: appends in the body count on
    more (`StagedList.least`), which the next iteration, given the list as it entered, must
    not. A list the body leaves counting on fewer (it pops more than it appends) sends the loop
    back to start with it counting on none (`FewerItems`)."""
    is_list = lambda v: isinstance(v, lists_.StagedList)  # noqa: E731
    if not any(map(is_list, jax.tree_util.tree_leaves(value, is_leaf=is_list))):
        return value

    def entered(v, p):
        if isinstance(v, lists_.StagedList) and isinstance(p, lists_.StagedList):
            if v.least < p.least:
                raise FewerItems(index)
            return v._with(least=p.least)
        return v

    try:
        return jax.tree_util.tree_map(entered, value, prev, is_leaf=is_list)
    except ValueError:  # structures differ: the check of the leaves says how
        return value


def _counting_on_none(value):
    """`value` with the staged lists in it counting on no items (see `StagedList.least`)."""
    return jax.tree_util.tree_map(
        lambda v: v._with(least=0) if isinstance(v, lists_.StagedList) else v,
        value,
        is_leaf=lambda v: isinstance(v, lists_.StagedList),
    )


def _adopt_weak_dtypes(value, prev):
    """`value` with each weakly typed leaf (a Python number assigned in the loop, `total = 0`)
    cast to the type the loop carries there, where JAX's promotion would give that dtype (a
    Python int into a float32 array variable; not a float result into an int variable), and made
    strongly typed where the loop carries a strongly typed array (`u = y` before the loop,
    `u = -0.25` in it: after no iteration Python's `u` is `y`, a strong float32; `lax.while_loop`
    would give the body's weak type)."""
    if jax.tree_util.tree_structure(value) != jax.tree_util.tree_structure(prev):
        return value  # reported by the structure check

    def adopt(y, x):
        if not jax.typeof(y).weak_type or y.shape != x.shape:
            return y
        if jax.typeof(x).weak_type:
            return y  # two Python numbers: `Carry._check_leaves` promotes or refuses
        if y.dtype != x.dtype:
            return lax.convert_element_type(y, x.dtype) if staging.takes_dtype(y, x.dtype) else y
        return lax.convert_element_type(y, x.dtype)

    return jax.tree_util.tree_map(adopt, value, prev)


def _growable(value) -> bool:
    """A list a loop may append to: a Python list, or a staged list not sized by a loop."""
    return type(value) is list or (isinstance(value, lists_.StagedList) and not value.fixed)
