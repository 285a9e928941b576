"""`and`, `or`, `not`: Python's lazy semantics for Python values, `jnp.logical_*` for tracers.

`a and b` is written `and_(a, lambda: b)`: the left operand is always evaluated, the right one
only when Python would evaluate it. A traced left operand cannot be decided while tracing, so the
right operand is traced too and the result is chosen by the left operand's truthiness in the
graph: one `and`/`or` for booleans; otherwise the operand is chosen as a conditional expression
chooses it (Python returns an operand, not a bool: `x or default` is `x if x else default`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from runtime import control_flow, errors, for_loops, identity, lists, sequences, staging
from runtime.errors import Site, StagingError
from runtime.staging import describe, is_staged


def and_(a, b, lazy=False, truth=False):
    """Functional form of `a and b()`. With a traced boolean `a`, `b()` is computed alongside
    (the `and` of two booleans: one operation); with another traced `a` (`x or default`), or if
    `lazy` (it may have effects: it calls user code), `b()` is chosen as a conditional
    expression chooses (`b() if a else a`). `truth`: only the result's truth is tested
    (an `if` test), which is the `and` of the operands' truths, whatever their shapes and
    dtypes."""
    if truth:  # only its truth is used: that of a list of traced length, a traced range
        a = staging.condition(a)
    if is_staged(a):
        site = Site("'and' expression")
        if truth:
            return _truths(a, b, lazy, "and", site)
        if lazy or not _boolean(a):
            # In a branch taken where `a` is true: a select where that is cheap and safe in a
            # gradient (no NaN from `b()` where it is not taken), else a cond; `b()` evaluated
            # once (its effects, a `jax.debug.print` in it, happen once).
            return control_flow.if_exp(a, b, lambda: a, construct=site.construct)
        truth = staging.scalar_predicate(a, site, "left operand")
        right = _evaluated_where(b, truth, True)
        if right is _RAISES:  # where Python evaluates it: in a branch, raised where it runs
            return control_flow.if_exp(a, b, lambda: a, construct=site.construct)
        return _staged_select(a, truth, right, "and", site)
    return a and b()


def or_(a, b, lazy=False, truth=False):
    """Functional form of `a or b()`; see `and_`."""
    if truth:
        a = staging.condition(a)
    if is_staged(a):
        site = Site("'or' expression")
        if truth:
            return _truths(a, b, lazy, "or", site)
        if lazy or not _boolean(a):  # (see `and_`)
            return control_flow.if_exp(a, lambda: a, b, construct=site.construct)
        truth = staging.scalar_predicate(a, site, "left operand")
        right = _evaluated_where(b, truth, False)
        if right is _RAISES:
            return control_flow.if_exp(a, lambda: a, b, construct=site.construct)
        return _staged_select(a, truth, right, "or", site)
    return a or b()


def and_or(a, b, c, lazy=False, lazy_else=False):
    """Functional form of `a and b() or c()`, Python's conditional idiom: `b()` where `a` and
    `b()` are true, else `c()` (where `a` is false, `a and b()` is `a`, which `or` passes
    over). `lazy`, `lazy_else`: as `and_`'s `lazy`, for `b` and `c`.

    With a traced `a`, `a and b()` alone is an operand of one type or another (a bool or
    `b()`'s float), which no staged value holds; the whole expression is not: it is `b()` or
    `c()`, chosen in the graph as conditional expressions choose (`(b() if b() else c()) if a
    else c()`, `b()` evaluated once, in the branch where `a` is true): a select where that is
    cheap and safe (no NaN from the branch not taken in a gradient), else a `cond`."""
    if not is_staged(a):
        return or_(and_(a, b, lazy), c, lazy_else)

    def where_a():  # `b()` if it is true, else `c()`: the branches exclude each other
        value = b()
        return control_flow.if_exp(value, lambda: value, c, construct=_AND_OR)

    return control_flow.if_exp(a, where_a, c, construct=_AND_OR)


_AND_OR = "'a and b or c' expression"


def _truths(a, b, lazy: bool, op: str, site: Site):
    """The truth of `a and b()` (`a or b()`) for a traced `a`: `b()` is evaluated where Python
    evaluates it (where `a` is true for `and`), in a `lax.cond` branch if `lazy`."""
    when = op == "and"
    left = staging.scalar_predicate(a, site, "left operand")
    if lazy:

        def taken():  # a branch of the cond
            return jnp.asarray(_truth(b(), site))

        def skipped():
            return jnp.asarray(not when)

        if when:
            return control_flow.if_exp(left, taken, skipped, construct=site.construct)
        return control_flow.if_exp(left, skipped, taken, construct=site.construct)
    right = _evaluated_where(b, left, when)
    if right is _RAISES:  # where Python evaluates it: in a branch, raised where it runs
        return _truths(a, b, True, op, site)
    right = _truth(right, site)
    if not is_staged(right):  # Python's answer is known now, or it is the left operand's
        if when:
            return left if right else False
        return True if right else left
    return staging.both(left, right) if when else staging.either(left, right)


def _truth(value, site: Site):
    """Python's truth of `value` (None, 0, [] are false), or a traced bool where it is traced."""
    value = staging.condition(value)
    if is_staged(value):
        return staging.scalar_predicate(value, site, "right operand")
    return bool(value)


def _evaluated_where(b, truth, when: bool):
    """`b()`, computed alongside, its checks (an index into a list of traced length, a
    placeholder read) made only where Python evaluates it: where `truth` (the left operand's)
    is `when` (`len(out) == 0 or out[-1] != v` reads `out[-1]` only where the list has items).
    `_RAISES` where computing it raised what Python raises where it evaluates it (`2**31 !=
    jnp.sum(v)`, an OverflowError): the caller evaluates it in a branch instead, where the
    error is raised only where Python would raise it."""
    with staging.tracing_branch(truth, when):
        try:
            return b()
        except staging.CANNOT_STAGE:
            raise
        except Exception as e:  # noqa: BLE001 - the program's error, raised where b() runs
            staging.raise_cannot_stage(e)
            if not errors.is_users(e):
                raise
            return _RAISES


_RAISES = object()  # `_evaluated_where`: the right operand raised


def match_guard(value):
    """A guard of a `match` that runs as Python (sequence, mapping or class patterns), as its
    case tests it; a StagingError where it is traced: Python's `match` tests it while the
    function is traced, and cannot branch on a value known only when the program runs."""
    value = staging.condition(value)
    if is_staged(value):
        raise StagingError(
            f"a case's guard is {describe(value)}, traced ({Site('match statement')}), in a "
            "`match` whose patterns run as Python (sequence, mapping or class patterns): "
            "Python's `match` decides which case runs while the function is traced, and "
            "cannot branch on a value known only when the program runs. Test it in the "
            "case's body (`case {...}: if cond: ...`), which is staged, or match values only."
        )
    return value


def not_(a):
    """Functional form of `not a`."""
    a = staging.condition(a)
    if is_staged(a):
        return staging.negated(staging.scalar_predicate(a, Site("'not' expression"), "operand"))
    return not a


def in_(item, container):
    """Functional form of `item in container`.

    In a traced array: `jnp.any(container == item)`. A traced item, or traced elements, in a
    Python list, tuple, set, range or dict's keys: True if the item is one of them, else `==`
    with each element (as `in` does), combined with `or`.
    """
    if isinstance(container, lists.StagedList):
        return container.contains(item)
    if isinstance(container, sequences.OneShot):
        return _in_iterator(item, container)
    if isinstance(container, for_loops.CountedIterator):
        raise errors.python_error(
            TypeError(
                f"`in` of {container.kind}: it has a traced length, so only a for statement can "
                "take its items (staged as a while loop); test the item in such a loop"
            )
        )
    if isinstance(container, lists.ProbeList):
        # A staged loop's list, probed: in the loop its items are traced, so is what `in`
        # decides (a Python answer now could leave an append under it uncounted).
        found = _equal_to_any(item, container)
        if container.base is not None:
            found = jnp.logical_or(found, container.base.contains(item))
        return jnp.logical_and(found, container.traced_length() >= 0)
    if isinstance(container, for_loops.TracedRange):
        return for_loops.in_range(item, container.start, container.stop, container.step)
    if is_staged(container) or (is_staged(item) and isinstance(container, jax.Array)):
        # As JAX's `Array.__contains__`: a scalar in a vector.
        if jnp.ndim(container) != 1:
            raise errors.python_error(
                ValueError(
                    "Array.__contains__: search array must be one-dimensional, got "
                    f"arr.shape={jnp.shape(container)}."
                )
            )
        if jnp.ndim(item) != 0:
            raise errors.python_error(
                ValueError(
                    "Array.__contains__: query value must be a scalar, got "
                    f"query.shape={jnp.shape(item)}."
                )
            )
        return jnp.any(jnp.asarray(container) == item)
    python_container = isinstance(container, (list, tuple, set, frozenset, dict, range))
    if python_container and (is_staged(item) or staging.has_staged(list(container))):
        if isinstance(container, range):
            return for_loops.in_range(item, container.start, container.stop, container.step)
        if any(element is item for element in container):
            return True  # Python's `in` tests identity first: `x in [x]` even for a NaN
        return _equal_to_any(item, container)
    return item in container


def _in_iterator(item, items: sequences.OneShot):
    """`item in items` of an iterator (`enumerate(x)`, `zip(x, y)`, `reversed(x)`): it takes
    items until one is equal, as Python's `in` does; where an equality is traced, every item,
    the `or` of them, and where the iterator stands after it is the program's to decide."""
    found = None
    for element in items:
        equal = staging.equal_truth(item, element)
        if not is_staged(equal):
            if equal and found is None:
                return True
            if not equal:
                continue
        found = equal if found is None else staging.either(found, equal)
    if found is None:
        return False
    items.forget_position("`in` took its items up to an equal one, which the program decides")
    return found


def _equal_to_any(item, elements):
    """`item == e` for some of `elements`, staged: the `or` of the comparisons' truths."""
    found = jnp.asarray(False)
    among = identity.one_of(item) if identity.recorded() else None
    if among:
        elements = list(elements)
        if among <= {id(e) for e in elements}:
            return jnp.asarray(True)  # Python's is one of them: `in` asks identity first
    for element in elements:
        if item is element:  # Python's `in` asks identity first
            return jnp.asarray(True)
        if type(item) in (list, tuple, dict) and type(element) in (list, tuple, dict):
            found = jnp.logical_or(found, _equal_containers(item, element))
            continue
        equal = jnp.asarray(item == element)
        if equal.size != 1:  # Python's `in` takes the truth of `item == element`
            raise errors.python_error(
                ValueError(
                    "The truth value of an array with more than one element is ambiguous: "
                    f"`in` compares values of shapes {jnp.shape(item)} and "
                    f"{jnp.shape(element)} ({Site('in', depth=3)})"
                )
            )
        found = jnp.logical_or(found, equal.reshape(()))
    return found


def _equal_containers(a, b):
    """`a == b` of two lists, tuples or dicts holding traced values, staged: Python compares
    them item by item (each item's truth), which a traced item cannot give."""
    if type(a) is not type(b) or len(a) != len(b):
        return jnp.asarray(False)
    if type(a) is dict:
        if a.keys() != b.keys():
            return jnp.asarray(False)
        a, b = list(a.values()), [b[key] for key in a]
    return _equal_to_any(a[0], [b[0]]) if len(a) == 1 else _all_equal(a, b)


def _all_equal(a, b):
    found = jnp.asarray(True)
    for x, y in zip(a, b):
        found = jnp.logical_and(found, _equal_to_any(x, [y]))
    return found


def is_(a, b):
    """Functional form of `a is b`: Python's answer, but refused where one of them is the
    object a staged `if` or loop left in place of one of several (`st = w if c else [0.0]`,
    then `st is w`): which object Python's is, the program decides when it runs."""
    if identity.recorded():
        for value, other in ((a, b), (b, a)):
            entry = identity.chosen_between(value, other)
            if entry is not None:
                raise StagingError(
                    f"`is` compares {entry.label} (or a list or dict it holds), which the "
                    f"staged {entry.site.construct} ({entry.site}) left holding a new "
                    f"{type(value).__name__} where Python's holds one of several objects, with "
                    f"one of those ({Site('is comparison')}): Python's answer depends on the "
                    f"{'keys' if entry.how == 'picked' else 'condition'}, which the staged "
                    "program decides when it runs. Compare the "
                    "values (==), or keep one object on every path."
                )
    # A staged branch's copy of a list, dict or object is the object itself, as Python has it;
    # a loop iteration's stands for what the variable held as the iteration began.
    (first, in_loop), (second, other_in_loop) = identity.original_of(a), identity.original_of(b)
    carried = (in_loop or other_in_loop) and a is not b
    if carried and identity.is_container(a) and identity.is_container(b):
        raise StagingError(
            f"`is` compares a {type(a).__name__} that a staged loop carries with another "
            f"({Site('is comparison')}): in Python the variable holds, in each iteration, the "
            "object the one before left it (the one it entered with, until an iteration binds "
            "another), which the staged loop cannot follow. Compare the values (==), or keep "
            "a flag of your own."
        )
    return first is second


def is_not(a, b):
    """Functional form of `a is not b` (see `is_`)."""
    return not is_(a, b)


def not_in(item, container):
    """Functional form of `item not in container`."""
    return not_(in_(item, container))


def _staged_select(a, truth, b, op, site):
    """`a and b` (`a or b`) for a traced boolean `a` whose truth is `truth`: one of the
    operands, chosen in the graph (booleans: the `and`/`or` of them)."""
    # A Python bool on the right of a traced bool: Python's answer is known now, or it is `a`.
    # (`traced and x.shape == y.shape`: a branch Python never runs is not traced at all.)
    if type(b) is bool and jnp.result_type(a) == jnp.bool_ and jnp.ndim(a) == 0:
        if op == "and":
            return a if b else False
        return True if b else a
    if not staging.is_array_leaf(b):
        raise StagingError(
            f"the right operand of '{op}' is {describe(b)} while the left one is traced "
            f"({site}); with a traced left operand both operands must be arrays."
        )
    given = b  # a Python number as it is: its value is known (see `staging.check_fits`)
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.dtype == jnp.bool_ and b.dtype == jnp.bool_ and b.shape == ():
        return staging.both(a, b) if op == "and" else staging.either(a, b)
    if a.shape != b.shape:
        raise StagingError(
            f"the operands of '{op}' are {describe(a)} and {describe(b)} ({site}); with a traced "
            "left operand the result is one of them, chosen in the graph, so they must have the "
            "same shape."
        )
    staging.check_same_dtypes(a, given, f"the operands of '{op}'", site)
    return staging.where(truth, b, a) if op == "and" else staging.where(truth, a, b)


def _boolean(a) -> bool:
    return jnp.result_type(a) == jnp.bool_
