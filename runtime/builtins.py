"""Builtins that also accept traced values; with Python values each is exactly the builtin.

`int(x)` and `float(x)` of a traced scalar give weakly typed arrays, as JAX stages a Python
number (`bool(x)` a bool array); `min`/`max` of traced values reduce with
`jnp.minimum`/`jnp.maximum`; `enumerate`, `zip` and `reversed` over arrays give views that a
`for` loop can stage as one `lax.scan`.
"""

from __future__ import annotations

import builtins
import collections.abc
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import (
    control_flow,
    debugging,
    effects,
    errors,
    for_loops,
    identity,
    lists,
    sequences,
    staging,
)
from runtime.errors import Site, StagingError
from runtime.staging import has_staged, is_staged

_NO_DEFAULT = object()


def _scalar(x, name):
    x = jnp.asarray(x)
    if x.size != 1:
        raise errors.python_error(
            TypeError(f"only arrays with one element can be converted by {name}(), got {x.shape}")
        )
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        # Python's int() and float() take no complex number: its own TypeError.
        errors.python_call(getattr(builtins, name), 1j)
    return x.reshape(())


def int_(x=0, *args, **kwargs):
    """`int(x)`; a traced `x` -> an integer array (truncated toward zero, like `int`: its
    derivative is zero)."""
    if args or kwargs or not isinstance(x, jax.core.Tracer):
        return errors.python_call(builtins.int, x, *args, **kwargs)
    return staging.python_number(_scalar(x, "int").astype(int))


def float_(x=0.0):
    """`float(x)`; a traced `x` -> a floating-point array: a cast, whose derivative is one.

    Any tracer, also one that holds a concrete value (`jax.grad` outside `jax.jit`, where JAX
    refuses `float()`), so that a derivative is the same compiled or not."""
    if not isinstance(x, jax.core.Tracer):
        return errors.python_call(builtins.float, x)
    return staging.python_float(staging.python_number(_scalar(x, "float").astype(float)))


def round_(number, ndigits=None):
    """`round(number[, ndigits])`. JAX's for an array (`round(jnp.float32(2.6))` is an int32
    array, as outside converted code), but weakly typed where `number` stands for a Python
    number (a Python float made traced, `float(x)`): Python's round of it is a Python int (or
    float), which an int8 array meets as an int8."""
    if isinstance(number, jax.core.Tracer) and not jnp.issubdtype(number.dtype, jnp.inexact):
        rounded = _round_int(number, ndigits)  # JAX's refuses ints to decimals < 0, and bools
    else:
        rounded = errors.python_call(builtins.round, number, ndigits)
    if isinstance(number, jax.core.Tracer) and number.aval.weak_type and is_staged(rounded):
        return staging.python_number(rounded)
    return rounded


def _round_int(number, ndigits):
    """`round(number, ndigits)` of a traced int (or bool: an int), as Python's: itself for
    `ndigits` None or >= 0, else to a multiple of 10 ** -ndigits, ties to the even multiple."""
    if number.dtype == jnp.bool_:
        number = number.astype(int)
    if ndigits is None or (not is_staged(ndigits) and ndigits >= 0):
        return number
    if is_staged(ndigits):
        raise StagingError(
            f"round() of an int to a traced number of digits ({Site('round()')}) is not "
            "staged: give ndigits as a Python int."
        )
    unit = 10 ** (-ndigits)
    if unit > jnp.iinfo(number.dtype).max:  # every value is nearer 0 (or overflows anyway)
        return jnp.zeros_like(number)
    q, r = jnp.floor_divide(number, unit), jnp.remainder(number, unit)
    rest = unit - r  # (2 * r would wrap in a narrow dtype)
    up = (r > rest) | ((r == rest) & (q % 2 == 1))
    return (q + up.astype(q.dtype)) * unit


def bool_(x=False):
    """`bool(x)`; a traced `x` -> a boolean array (`x != 0`, as Python's truth test)."""
    if isinstance(x, (lists.StagedList, lists.ProbeList, for_loops.TracedRange)):
        # A list whose length may be traced (or that a loop's probe stands in for), a range with
        # a traced bound: whether it holds items, as `if x:` tests it.
        x = staging.condition(x)
        if not is_staged(x):
            return builtins.bool(x)
    if not is_staged(x):
        return errors.python_call(builtins.bool, x)
    return staging.scalar_predicate(x, Site("bool()"), "argument")


def len_(obj):
    """`len(obj)`; for a list appended to under a traced condition, its traced length."""
    if isinstance(obj, lists.ProbeList):
        return obj.traced_length()
    if isinstance(obj, lists.StagedList):
        known = obj.known_length()
        return obj.length if known is None else known
    if isinstance(obj, for_loops.TracedRange):
        return obj.trip_count()
    if isinstance(obj, (sequences.OneShot, for_loops.CountedIterator)):  # Python's iterators
        raise errors.python_error(TypeError(f"object of type '{obj.type_name}' has no len()"))
    return errors.python_call(builtins.len, obj)


# What `min`/`max` take the items of as Python's do: iterators, a dict's views, sets (a dict,
# its keys).
_ITERATED = (
    collections.abc.Iterator,
    collections.abc.MappingView,
    collections.abc.Set,
    collections.abc.Mapping,
)


def _extreme(python_fn, args, key, default):
    """`min`/`max` as Python computes them, on traced values too: the first item that no later
    one beats (`v > best` for max), so ties keep the first (and the gradient goes to it) and a
    NaN counts only where it comes first."""
    if len(args) == 1 and isinstance(args[0], lists.ProbeList):
        args = (args[0].read_typed(),)  # the list a staged loop is sizing: its items
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and type(args[0]) not in (list, tuple):
        args = (list(args[0]),)  # a list subclass: its items
    elif (
        len(args) == 1
        and isinstance(args[0], lists.StagedList)
        and args[0].known_length() is not None
    ):
        args = (list(args[0]),)  # a staged list of known length: its items
    elif len(args) == 1 and isinstance(args[0], _ITERATED):
        # `max(v for v in xs)`, `max(d.values())`: its items, taken as Python's max would.
        args = (list(args[0]),)
    if default is not _NO_DEFAULT and len(args) == 1 and type(args[0]) in (list, tuple):
        if not args[0]:
            return default
        default = _NO_DEFAULT  # Python's does not use it: the items are there
    elif default is not _NO_DEFAULT and len(args) == 1 and is_staged(args[0]):
        if jnp.ndim(args[0]) > 0 and jnp.shape(args[0])[0] == 0:
            return default  # a traced array of no rows: its length is static
        default = _NO_DEFAULT
    beats = lax.gt if python_fn is builtins.max else lax.lt
    kwargs = {} if default is _NO_DEFAULT else {"default": default}
    if key is not None and not has_staged(args):
        # Python items, keys maybe traced (`min(range(k), key=lambda j: dist(p, c[j]))`): each
        # key computed once, as Python does; the item whose key wins.
        items = list(args[0]) if len(args) == 1 else list(args)
        if not items:
            # The default, or Python's ValueError.
            return errors.python_call(python_fn, items, key=key, **kwargs)
        keys = [key(item) for item in items]
        if not has_staged(keys):
            return items[python_fn(range(len(items)), key=keys.__getitem__)]
        return _best_by_key(items, keys, beats, Site(f"{python_fn.__name__}()"))
    traced_length = (
        len(args) == 1 and isinstance(args[0], lists.StagedList) and args[0].known_length() is None
    )
    if (default is not _NO_DEFAULT and not traced_length) or not has_staged(args):
        try:
            return errors.python_call(python_fn, *args, key=key, **kwargs)
        except jax.errors.TracerBoolConversionError:
            # Concrete arrays, compared where JAX traces every operation (a branch traced
            # inside `jax.vmap`): the comparison is traced. As staged values, then; a
            # comparison has no effect to repeat (a key function may: its error stands).
            if key is not None or default is not _NO_DEFAULT:
                raise
    if len(args) == 1:
        (items,) = args
        if isinstance(items, lists.StagedList) and items.known_length() is None:
            # A list of traced length: its items, the padding made to never win.
            name = python_fn.__name__
            if key is not None:
                raise StagingError(
                    f"{name}(..., key=...) of '{items.origin.name}', a list whose length is "
                    f"traced ({Site(f'{name}()')}), is not supported: the key would be computed "
                    "on the padding after its last item too. Compute the keys as an array "
                    "(`transpiler.padded`) and pick with jnp.argmax/argmin."
                )
            if items.buffer.ndim != 1:
                raise errors.python_error(
                    ValueError(
                        f"{name}() of '{items.origin.name}', a list of arrays of shape "
                        f"{items.buffer.shape[1:]}, compares arrays: the truth value of an array "
                        "with more than one element is ambiguous"
                    )
                )
            best = _first_best(items.masked(_never_best(items.buffer.dtype, beats)), beats)
            if default is not _NO_DEFAULT:
                return _or_default(best, default, items.length > 0, f"{name}()")
            items.check_not_empty(f"{name}()")
            return best
        if is_staged(items) and key is None:
            if jnp.ndim(items) == 0:
                raise errors.python_error(TypeError("iteration over a 0-d array"))
            if jnp.ndim(items) != 1:
                raise errors.python_error(
                    ValueError(
                        f"{python_fn.__name__}() of a {jnp.ndim(items)}-d array compares its rows: "
                        "the truth value of an array with more than one element is ambiguous. Use "
                        f"jnp.{python_fn.__name__}(x, axis=...)"
                    )
                )
            if items.shape[0] == 0:
                raise errors.python_error(
                    ValueError(f"{python_fn.__name__}() arg is an empty sequence")
                )
            return _first_best(items, beats)
        args = tuple(items)
    keys = [value if key is None else key(value) for value in args]
    return _best_by_key(args, keys, beats, Site(f"{python_fn.__name__}()"))


MAX_SORTED_ITEMS = 64
"""At most this many items in a `sorted()` of traced keys: it compares every pair of items."""


def sorted_(iterable, /, *, key=None, reverse=False):
    """`sorted(iterable, key=key, reverse=reverse)`, as Python sorts, on traced keys too: a
    stable sort (items of equal keys keep their order, with `reverse` too), each key computed
    once, in order. With traced keys the order is decided in the graph: item `i` goes to the
    place that counts the items before it (those whose keys are smaller, and, of the equal
    ones, those earlier), and each place selects its item; so the items must be arrays of one
    shape and dtype, at most `MAX_SORTED_ITEMS` of them. Keys that are NaN, for which Python's
    order depends on its algorithm, raise a ValueError when the program runs."""
    site = Site("sorted()")
    if isinstance(iterable, lists.ProbeList):
        iterable = iterable.read_typed()  # the list a staged loop is sizing: its items
    elif isinstance(iterable, _ITERATED) and not isinstance(iterable, lists.StagedList):
        iterable = list(iterable)  # a generator, a dict's view, a set: its items, taken once
    if isinstance(iterable, lists.StagedList) and iterable.known_length() is not None:
        iterable = list(iterable)
    if not (has_staged(iterable) or key is not None) or isinstance(iterable, lists.StagedList):
        return errors.python_call(builtins.sorted, iterable, key=key, reverse=reverse)
    items = list(iterable)
    keys = items if key is None else [key(item) for item in items]
    if not has_staged(keys):
        try:
            order = builtins.sorted(range(len(items)), key=keys.__getitem__, reverse=reverse)
            return [items[i] for i in order]
        except jax.errors.TracerBoolConversionError:
            pass  # concrete arrays compared where JAX traces every operation (inside vmap)
    if len(items) > MAX_SORTED_ITEMS:
        raise StagingError(
            f"sorted() of {len(items)} items with traced keys ({site}): the order is decided in "
            f"the graph, comparing every pair of items, which is staged for at most "
            f"{MAX_SORTED_ITEMS}. Stack the keys and sort with jnp.argsort (stable=True)."
        )
    _check_choosable(items, site)
    _check_single_elements(keys, site, "keys")
    nans = [jnp.isnan(p) for whole in keys for p in _tuple_parts(whole) if _inexact(p)]
    if nans:
        staging.check_when_run(
            lambda *flags: any(bool(f) for f in flags),
            lambda *_: ValueError(
                f"sorted() of keys holding a NaN ({site}): Python's order then depends on how "
                "its sort compares them, which the staged sort does not follow. Replace the "
                "NaN keys first (jnp.nan_to_num)."
            ),
            *nans,
        )
    first = lax.gt if reverse else lax.lt  # key a goes before key b

    def before(j, i):  # whether item j goes before item i
        if j < i:  # earlier: before, unless i's key goes first
            return jnp.logical_not(_key_beats(first, keys[i], keys[j]))
        return _key_beats(first, keys[j], keys[i])

    n = len(items)
    places = [
        sum(jnp.asarray(before(j, i), jnp.int32) for j in range(n) if j != i) for i in range(n)
    ]
    out = []
    for place in range(n):
        chosen = items[0]
        for i in range(1, n):
            at = jnp.reshape(places[i] == place, ())
            chosen = jax.tree_util.tree_map(lambda v, c, at=at: _chosen(at, v, c), items[i], chosen)
        _record_picked(items, chosen, site, f"the item at {place} of {site.construct}")
        out.append(chosen)
    return out


def list_sort(target: list, /, *, key=None, reverse=False) -> None:
    """`target.sort(key=key, reverse=reverse)` of a Python list: in place, in the order
    `sorted_` gives (staged where the keys are traced)."""
    target[:] = sorted_(target, key=key, reverse=reverse)


def item_(x):
    """`x.item()` of a traced array: the Python number of its kind it stands for (`int(x)`,
    `float(x)`, `bool(x)`, a complex; each staged), as `x.item()` of a concrete one gives: a
    constant to derivatives (`jax.grad` of `x.item() ** 2` is 0, as eager JAX's)."""
    if jnp.size(x) != 1:
        raise errors.python_error(
            ValueError("can only convert an array of size 1 to a Python scalar")
        )
    x = lax.stop_gradient(jnp.reshape(x, ()))
    kind = np.dtype(x.dtype).kind
    if kind == "b":
        return bool_(x)
    if kind == "c":
        return staging.python_number(x)
    return int_(x) if kind in "iu" else float_(x)


def _inexact(value) -> bool:
    return staging.is_array_leaf(value) and jnp.issubdtype(jnp.result_type(value), jnp.inexact)


def _check_choosable(items, site) -> None:
    """Raises StagingError unless `items` can be chosen among in the graph: arrays (or tuples
    of arrays) of one structure, shape and dtype (a Python number joins an array's dtype, as in
    a staged `if`)."""
    base = jax.tree_util.tree_structure(items[0])
    for value in items[1:]:
        leaves = jax.tree_util.tree_leaves(value), jax.tree_util.tree_leaves(items[0])
        if jax.tree_util.tree_structure(value) != base or any(
            not (staging.is_array_leaf(v) and staging.is_array_leaf(b)) and v is not b
            for v, b in zip(*leaves)
        ):
            raise StagingError(
                f"the items compared are {staging.describe_tree(items[0])} and "
                f"{staging.describe_tree(value)} ({site}); with traced keys the item is chosen "
                "in the graph, which holds arrays only, so the items must be arrays (or tuples "
                "of arrays) of one structure: keep the Python values out of them."
            )
        for v, b in zip(*leaves):
            staging.check_same_dtypes(b, v, "the items compared", site)
            if jnp.shape(v) != jnp.shape(b):  # Python gives one of them, with its own shape
                raise StagingError(
                    f"the items compared are of shapes {jnp.shape(b)} and {jnp.shape(v)} "
                    f"({site}); with traced values the result is one of them, chosen in the "
                    "graph, so they must have one shape (Python would give each its own): "
                    "reshape one of them."
                )


def _or_default(best, default, nonempty, name: str):
    """`best` where the list has items, else `default` (`max(out, default=-1.0)`), one dtype."""
    site = Site(name)
    if not staging.is_array_tree(default) or jax.tree_util.tree_structure(default).num_leaves != 1:
        raise StagingError(
            f"{name} of a list whose length is traced, with default={default!r} ({site}): the "
            "result is the default or an item, chosen in the graph, so the default must be a "
            "number or an array of the items' shape."
        )
    staging.check_same_dtypes(best, default, f"the items and the default of {name}", site)
    dtype = jnp.result_type(staging.dtype_like(best), staging.dtype_like(jnp.asarray(default)))
    chosen = jnp.where(nonempty, best, jnp.asarray(default, dtype))
    if all(jax.typeof(jnp.asarray(v)).weak_type for v in (best, default)):
        return staging.python_number(chosen)  # an item or the default: Python numbers both
    return chosen


def _best_by_key(items, keys, beats, site):
    """The first item whose key no later one beats, staged. Tuple keys compare as Python's
    tuples do, item by item (`min((abs(x - c), i) for i, c in enumerate(cs))`)."""
    elementwise = f"jnp.{'maximum' if beats is lax.gt else 'minimum'}"
    _check_single_elements(keys, site, "values", f" Use {elementwise} for elementwise.")
    _check_comparable(keys, site)
    best, best_key = items[0], keys[0]
    for value, value_key in zip(items[1:], keys[1:]):
        if not (has_staged(value_key) or has_staged(best_key)):
            # Two Python keys (`max(1e5, 2e5, x)`): Python decides, as it would; unless they
            # are concrete arrays compared where JAX traces every operation (a branch traced
            # inside `jax.vmap`): their comparison is traced, and staged below.
            try:
                wins = bool((value_key > best_key) if beats is lax.gt else (value_key < best_key))
            except jax.errors.TracerBoolConversionError:
                wins = None
            if wins is not None:
                if wins:
                    best, best_key = value, value_key
                continue
        _check_choosable([best, value], site)
        # (a scalar: keys of one item, `key=lambda v: v.reshape(1)`, must not reshape the items)
        wins = _key_beats(beats, value_key, best_key)
        wins = wins if jnp.shape(wins) == () else jnp.reshape(wins, ())

        def pick(v, b, wins=wins):
            return b if v is b else _chosen(wins, v, b)

        same = value_key is value and best_key is best  # no key function: the items decide
        if not same and jax.tree_util.tree_structure(value_key) != jax.tree_util.tree_structure(
            best_key
        ):
            raise StagingError(
                f"the keys compared are {staging.describe_tree(best_key)} and "
                f"{staging.describe_tree(value_key)} ({site}); with traced keys the best one "
                "is chosen in the graph and compared with the next, so the keys must have one "
                "structure (tuples or lists of one length)."
            )
        best = jax.tree_util.tree_map(pick, value, best)
        best_key = best if same else jax.tree_util.tree_map(pick, value_key, best_key)
    _record_picked(items, best, site)
    return best


def _record_picked(items, best, site, label=None) -> None:
    """Where a staged choice made `best` a new object (a list, dict, tuple, pytree class) in
    place of one of `items` (Python's `min`/`max`/`sorted` gives that very object), watches the
    items and the new one (`identity.detached`): a change in place through either, while
    `best` lives, is refused, and so is `best is item`."""
    if staging.is_array_leaf(best) or any(best is item for item in items):
        return
    label = label or f"the value of {site.construct}"
    identity.detached(label, site, best, [best, *items], how="picked", now=True, among=tuple(items))


def _check_single_elements(keys, site, what: str, hint: str = "") -> None:
    """Python's ValueError where a key (or a part of a tuple key) is an array of more than one
    element: Python's `value > best` of it has no truth value."""
    for key in (part for whole in keys for part in _tuple_parts(whole)):
        if staging.is_array_leaf(key) and jnp.size(key) != 1:
            raise errors.python_error(
                ValueError(
                    f"The truth value of an array with more than one element is ambiguous: "
                    f"{site.construct} compares {what} of shape {jnp.shape(key)} ({site}).{hint}"
                )
            )


def _check_comparable(keys, site) -> None:
    """StagingError where a tuple key holds a dict or another object that is not a number
    (`min(zip(losses, params))`): Python compares it only where the items before it are equal
    (raising a TypeError for dicts), which traced items decide when the program runs."""
    for key in keys:
        if type(key) not in (tuple, list):
            continue
        for index, part in enumerate(_tuple_parts(key)):
            if part is None or isinstance(part, str) or staging.is_array_leaf(part):
                continue
            raise StagingError(
                f"{site.construct} compares keys holding {staging.describe(part)} (at "
                f"{index}, {site}): Python compares it only where the items before it are "
                "equal (and raises a TypeError for a dict), which traced items decide when "
                "the program runs. Compare by the numbers only (`key=lambda t: t[0]`)."
            )


def _key_beats(beats, a, b):
    """Whether key `a` beats key `b` (`a > b` for max), as Python compares them: numbers, or
    tuples (lists) item by item (the first items that differ decide; where all are equal, the
    longer one is greater). A traced bool, or Python's where both are Python's."""
    if type(a) not in (tuple, list) or type(a) is not type(b):
        return staging.compare(beats, a, b)  # (a tuple and a list: Python's TypeError there)
    result, equal_so_far = jnp.asarray(False), jnp.asarray(True)
    for x, y in zip(a, b):
        if x is y:
            continue  # equal (a NaN, None): the next items decide, as in Python
        equal = jnp.asarray(staging.equal_truth(x, y))
        differs_here = jnp.logical_and(equal_so_far, jnp.logical_not(equal))
        result = jnp.logical_or(result, jnp.logical_and(differs_here, _key_beats(beats, x, y)))
        equal_so_far = jnp.logical_and(equal_so_far, equal)
    longer = len(a) > len(b) if beats is lax.gt else len(a) < len(b)
    return jnp.logical_or(result, jnp.logical_and(equal_so_far, longer))


def _tuple_parts(key) -> list:
    """The items of a tuple (or list) key, through nested ones (`(loss, (step, i))`); a key
    itself."""
    if type(key) not in (tuple, list):
        return [key]
    return [part for item in key for part in _tuple_parts(item)]


def _chosen(wins, v, b):
    """`jnp.where(wins, v, b)`, typed as a staged `if` joins them (`staging.joins_strongly`):
    `max(x, 0.5)` of a float32 `x` is a float32 (weakly typed, a float16 times it would be a
    float16 on `x`'s path too); `max(h, 2)` of a bool `h` a weakly typed int."""
    chosen = staging.where(wins, v, b)
    if jax.typeof(chosen).weak_type and staging.joins_strongly(
        (jax.typeof(v), jax.typeof(b)), chosen.dtype
    ):
        chosen = lax.convert_element_type(chosen, chosen.dtype)
    return chosen


def _never_best(dtype, beats):
    """A value no item beats for `beats` (ties keep the first item, a real one): -inf for
    `max` of floats (not the float's lowest: a real -inf would lose to it), False for `max` of
    booleans, the lowest integer for `max` of integers; their opposites for `min`."""
    low = beats is lax.gt
    if jnp.issubdtype(dtype, jnp.floating):
        return -jnp.inf if low else jnp.inf
    if jnp.issubdtype(dtype, jnp.bool_):
        return not low
    info = jnp.iinfo(dtype)
    return info.min if low else info.max


def _first_best(items, beats):
    """Python's `max`/`min` of a traced vector: the first item no later one beats."""
    if jnp.issubdtype(items.dtype, jnp.floating):
        # Python compares `v > best`: a NaN never beats, and once first, is never beaten.
        never = -jnp.inf if beats is lax.gt else jnp.inf
        later = jnp.arange(items.shape[0]) > 0
        items = jnp.where(later & jnp.isnan(items), never, items)
    index = jnp.argmax(items) if beats is lax.gt else jnp.argmin(items)
    return items[index]


def min_(*args, key=None, default=_NO_DEFAULT):
    """`min(...)`, as Python computes it (the first smallest), on traced values too."""
    if _a_traced_range(args, key, default):
        return args[0].extreme(False, None if default is _NO_DEFAULT else default)
    return _extreme(builtins.min, args, key, default)


def max_(*args, key=None, default=_NO_DEFAULT):
    """`max(...)`, as Python computes it (the first largest), on traced values too."""
    if _a_traced_range(args, key, default):
        return args[0].extreme(True, None if default is _NO_DEFAULT else default)
    return _extreme(builtins.max, args, key, default)


def _a_traced_range(args, key, default) -> bool:
    """`min(r)`, `max(r)` of a range with a traced bound: computed from its bounds. Its
    `default` must be an int: Python gives it, of its own type, where the range is empty."""
    if not (len(args) == 1 and key is None and isinstance(args[0], for_loops.TracedRange)):
        return False
    integer = isinstance(default, int) and not isinstance(default, bool)
    integer = integer or (
        staging.is_array_leaf(default) and jnp.issubdtype(jnp.result_type(default), jnp.integer)
    )
    if not (default is _NO_DEFAULT or integer):
        raise StagingError(
            "the default of min() or max() of a range with a traced bound is "
            f"{staging.describe(default)} ({Site('min() or max()')}): where the range is "
            "empty Python gives the default, of its own type, and an int from the range "
            "elsewhere, which one staged value cannot hold. Give an int default, or test "
            "`len(r) > 0`."
        )
    return True


def next_(iterator, *default):
    """`next(iterator, *default)`; refused for an iterator a staged block would advance."""
    if staging.trackers() or staging.watches():
        effects.check_consumed(iterator, "next()")
    return builtins.next(iterator, *default)


def sum_(iterable, /, start=0):
    """`sum(iterable, start)`; of a list of traced length, the sum of its items (the padding
    masked out)."""
    if isinstance(iterable, lists.StagedList) and iterable.known_length() is None:
        return _sum_in_order(iterable, start)
    if isinstance(iterable, for_loops.TracedRange):
        return iterable.total(start)
    return errors.python_call(builtins.sum, iterable, start)


def _sum_in_order(items: lists.StagedList, start):
    """`sum(items, start)` of a list of traced length as Python adds it: to `start`, one item
    after the other, each sum in the type of `start + item` (`0 + int8` is an int8, which wraps;
    `0 + True` a weakly typed int). `jnp.sum` adds in its own order and accumulator (pairwise,
    int32 for small ints, float32 for float16): another result where rounding or wrapping
    differs (`sum([4.0, 4.0], 1e8)` is 1e8 in Python, 100000008 totalled first)."""
    buffer, length = items.buffer, items.length
    typed = jax.eval_shape(lambda s, v: s + v, start, buffer[0])
    first = jnp.broadcast_to(jnp.asarray(start), typed.shape)
    dtype = staging.WeakDtype(typed.dtype) if typed.weak_type else typed.dtype
    acc = staging.cast(first, dtype)

    def add(i, acc):
        return jnp.where(i < length, acc + buffer[i], acc)  # the padding is not added

    return lax.fori_loop(0, items.capacity, add, acc)


def all_(iterable, /, *, lazy=False):
    """`all(iterable)`. Python items decide as in Python (a false one ends it, unread items
    unread); traced ones are combined with a logical and (each read as Python's truth test
    reads a value: a single element), so the result is traced if any item read was. `lazy` (a
    generator that calls user code): after a traced item, the rest is taken in a `cond` branch
    that runs only where that item is true, as Python takes it."""
    return _all_or_any(iterable, lazy, stops_on=False, site=Site("all()"))


def any_(iterable, /, *, lazy=False):
    """`any(iterable)`: like `all_`, with a true item ending it and a logical or."""
    return _all_or_any(iterable, lazy, stops_on=True, site=Site("any()"))


def _all_or_any(iterable, lazy, stops_on, site):
    if isinstance(iterable, lists.StagedList) and iterable.known_length() is None:
        return _all_or_any_of_traced_length(iterable, stops_on, site)
    if isinstance(iterable, for_loops.TracedRange):
        return iterable.any_item() if stops_on else iterable.all_items()
    combine = jnp.logical_or if stops_on else jnp.logical_and
    source = _source_iterator(iterable)
    items = iter(iterable)
    staged = None
    for item in items:
        if not is_staged(item):
            if bool(item) is stops_on:
                return stops_on
            continue
        truth = staging.scalar_predicate(item, site, "item")
        if lazy:
            result = _rest_in_a_branch(truth, items, stops_on, site)
            _position_unknown(source)
            return result
        staged = truth if staged is None else combine(staged, truth)
    if staged is not None:
        _position_unknown(source)
    return (not stops_on) if staged is None else staged


def _source_iterator(iterable):
    """What `any`/`all` take items from: `iterable`, or the iterator a generator expression
    over it reads (`any(v > 0 for v in it)`: `it`), so that an iterator they leave where the
    program decides is known to be so. CPython keeps that iterator in the generator's hidden
    local `.0` (before it starts); elsewhere, `iterable` itself."""
    if isinstance(iterable, types.GeneratorType) and iterable.gi_frame is not None:
        return iterable.gi_frame.f_locals.get(".0", iterable)
    return iterable


def _position_unknown(source) -> None:
    """After `any`/`all` took every item where Python stops at the first deciding one, known only
    when the program runs: the iterator they took them from (`enumerate(x)`) stands where the
    program decides."""
    if isinstance(source, sequences.OneShot):
        source.forget_position(
            "any() or all() took its items up to one that decides, known at run time"
        )


def _all_or_any_of_traced_length(items: lists.StagedList, stops_on, site):
    """`any(items)` (`all(items)`) of a list of traced length: the truths of its items, the
    padding past its length left out. Each item is read as Python's truth test reads it: one
    element (an item of more, which Python refuses, is refused whatever the length)."""
    buffer, length = items.buffer, items.length
    if math.prod(buffer.shape[1:]) != 1:
        staging.scalar_predicate(buffer[0], site, "item")  # raises: not a single value
    truths = staging.truths(buffer.reshape(-1))
    kept = jnp.arange(buffer.shape[0]) < length
    if stops_on:
        return jnp.any(truths & kept)
    return jnp.all(truths | ~kept)


def _rest_in_a_branch(truth, items, stops_on, site):
    """`truth or any(items)` (`truth and all(items)`), the rest of the items taken only in the
    branch where they decide."""
    taken = []

    def rest():
        if taken:  # traced again: the items it took are gone
            raise StagingError(
                f"{site.construct} over a generator in staged code ({site}) changes Python "
                "state as it gives items after a traced one: they would be taken twice. Make "
                "the items a list first, or keep the state out of the generator."
            )
        taken.append(True)
        return _all_or_any(items, True, stops_on, site)

    def decided():
        return stops_on

    if_true, if_false = (decided, rest) if stops_on else (rest, decided)
    return control_flow.if_exp(truth, if_true, if_false)


def enumerate_(iterable, start=0):
    """`enumerate(iterable, start)`; over an array, a view a `for` loop can scan; over a list
    of traced length, one it can loop over staged."""
    if isinstance(iterable, lists.StagedList) and iterable.known_length() is None:
        return for_loops.EnumeratedList(iterable, start)
    if isinstance(iterable, for_loops.TracedRange):
        return for_loops.EnumeratedRange(iterable, start)
    if isinstance(iterable, for_loops.ReversedRange):  # it takes the reversed range's items
        iterable.moved("enumerate()")
        return for_loops.EnumeratedRange(iterable.items, start)
    if isinstance(iterable, for_loops.ZippedCounted):
        return for_loops.EnumeratedZip(iterable, start)
    base = sequences.as_sequence(iterable)
    if base is None and is_staged(start):  # a traced start: the indices are traced ints
        start = for_loops.python_int(start)
        return builtins.map(lambda pair: (start + pair[0], pair[1]), builtins.enumerate(iterable))
    if base is None:
        return builtins.enumerate(iterable, start)
    if isinstance(base, sequences.OneShot):  # `enumerate(zip(a, b))`: it takes zip's items
        base = base.rest("enumerate()")
    return sequences.Enumerated(base, start)


def zip_(*iterables, strict=False):
    """`zip(*iterables)`; over arrays (and ranges), a view a `for` loop can scan; with a range
    with a traced bound or a list of traced length among them, one it can loop over staged."""
    traced_length = (
        for_loops.TracedRange,
        for_loops.EnumeratedRange,
        for_loops.EnumeratedList,
        for_loops.ReversedRange,
    )
    if not strict and any(
        isinstance(it, traced_length)
        or (isinstance(it, lists.StagedList) and it.known_length() is None)
        for it in iterables
    ):
        zipped = for_loops.ZippedCounted.of(iterables)
        if zipped is not None:
            return zipped
    bases = [sequences.as_sequence(it) for it in iterables]
    if strict or not bases or any(b is None for b in bases):
        return builtins.zip(*iterables, strict=strict) if strict else builtins.zip(*iterables)
    if not any(isinstance(b, sequences.ArraySequence) for b in bases):
        return builtins.zip(*iterables)
    # `zip(enumerate(x), y)`: the zip takes the items of the iterators among them.
    bases = [b.rest("zip()") if isinstance(b, sequences.OneShot) else b for b in bases]
    return sequences.Zipped(bases)


def reversed_(seq):
    """`reversed(seq)`; a range stays a range (a traced one too), an array gives a view a `for`
    loop can scan."""
    if isinstance(seq, range):  # Python's range iterator, last first
        backwards = sequences.RangeSequence(seq[::-1])
        return sequences.Iterated(backwards, "reversed()", "range_iterator")
    if isinstance(seq, for_loops.TracedRange):
        return for_loops.ReversedRange(seq.reversed())
    base = sequences.as_sequence(seq)
    if isinstance(base, sequences.ArraySequence):
        return sequences.Reversed(base)
    if isinstance(base, sequences.OneShot):  # an iterator, as Python's enumerate() is
        raise errors.python_error(TypeError(f"'{base.type_name}' object is not reversible"))
    return builtins.reversed(seq)


STAGED = types.MappingProxyType(
    {
        builtins.int: int_,
        builtins.float: float_,
        builtins.bool: bool_,
        builtins.round: round_,
        builtins.len: len_,
        builtins.min: min_,
        builtins.max: max_,
        builtins.sorted: sorted_,
        builtins.sum: sum_,
        builtins.all: all_,
        builtins.any: any_,
        builtins.next: next_,
        builtins.enumerate: enumerate_,
        builtins.zip: zip_,
        builtins.reversed: reversed_,
        builtins.range: for_loops.range_,
        builtins.print: debugging.print_,
    }
)
"""Builtins -> the versions that also accept traced values, for calls that reach them under
another name (`r = range`; `fn = len`)."""
