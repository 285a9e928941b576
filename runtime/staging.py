"""The one place that decides what is staged, and the checks staged state must pass."""

from __future__ import annotations

import contextlib
import numbers

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime.errors import Site, StagingError
from runtime.variables import Undefined

_loop_trip_counts: list[int | None] = []  # staged loops being traced, outermost first


def loop_trip_counts() -> list[int | None]:
    """Trip counts (None: unknown) of the staged loops whose bodies are being traced now."""
    return _loop_trip_counts


@contextlib.contextmanager
def tracing_loop(trip_count: int | None):
    """Marks the code inside as running in the body of a staged loop being traced."""
    _loop_trip_counts.append(trip_count)
    try:
        yield
    finally:
        _loop_trip_counts.pop()


def is_traced(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def is_staged(value) -> bool:
    """Whether Python cannot decide `value` now, so the construct it controls must be staged.

    Python and NumPy values, and tracers that still hold a concrete value (`jax.grad` outside
    `jax.jit`), are decided by Python; abstract tracers (`jax.jit`, `jax.vmap`) are staged.
    """
    if not is_traced(value):
        return False
    if getattr(value, "size", 1) != 1:
        return True  # Python could not decide it either; the staged path says why
    try:
        bool(value)
    except jax.errors.ConcretizationTypeError:
        return True
    return False


def has_traced(tree) -> bool:
    return any(is_traced(leaf) for leaf in jax.tree_util.tree_leaves(tree))


def describe(value) -> str:
    """A short type for error messages: `float32[3]`, `int32[]`, `list`, `None`."""
    if isinstance(value, Undefined):
        return "undefined"
    if value is None:
        return "None"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        dims = ",".join(str(d) for d in value.shape)
        return f"{np.dtype(value.dtype).name}[{dims}]"
    if isinstance(value, bool | numbers.Number):
        return f"Python {type(value).__name__} {value!r}"
    return f"a {type(value).__name__}"


_PYTHON_ZERO = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}  # by dtype kind


def dtype_like(x):
    """Something `jnp.result_type` promotes as it would promote `x`, weak type included."""
    if not jax.typeof(x).weak_type:
        return x.dtype
    return _PYTHON_ZERO[np.dtype(x.dtype).kind]


def describe_tree(value) -> str:
    """Like `describe`, through tuples, lists and dicts: `(float32[], int32[3])`."""
    if isinstance(value, list):
        return "[" + ", ".join(describe_tree(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(describe_tree(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe_tree(v)}" for k, v in value.items()) + "}"
    return describe(value)


def shapes_of(tree):
    """The tree of `jax.ShapeDtypeStruct` (weak types kept) of an array tree."""
    return jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=jax.typeof(x).weak_type), tree
    )


def zeros_like(shapes):
    """Zeros shaped like a tree of `jax.ShapeDtypeStruct`: a placeholder never read. A weakly
    typed one stays weakly typed, so it promotes like the Python number it stands in for."""

    def zeros(s):
        if getattr(s, "weak_type", False):
            return lax.full(s.shape, _PYTHON_ZERO[np.dtype(s.dtype).kind])
        return jnp.zeros(s.shape, s.dtype)

    return jax.tree_util.tree_map(zeros, shapes)


def is_array_leaf(value) -> bool:
    return isinstance(value, jax.Array | np.ndarray | np.generic | bool | int | float | complex)


def is_array_tree(value) -> bool:
    """Whether `value` can be staged state: a pytree (maybe empty) whose leaves are all arrays."""
    if isinstance(value, Undefined):
        return False
    return all(is_array_leaf(leaf) for leaf in jax.tree_util.tree_leaves(value))


def as_arrays(tree):
    """Python numbers and NumPy arrays in `tree` -> JAX arrays (numbers stay weakly typed)."""
    return jax.tree_util.tree_map(jnp.asarray, tree)


def fresh(tree):
    """A copy of the containers of `tree` (same leaves): staged code never mutates the caller's."""
    leaves, treedef = jax.tree_util.tree_flatten(tree, is_leaf=lambda x: x is None)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def scalar_predicate(pred, site: Site, role: str):
    """A staged predicate as a boolean scalar, as Python's truth test would read it."""
    pred = jnp.asarray(pred)
    if pred.shape != ():
        raise StagingError(
            f"the {role} is {describe(pred)} ({site}); a condition must be a scalar. "
            "Reduce it first, e.g. with jnp.any(...) or jnp.all(...)."
        )
    return pred if pred.dtype == jnp.bool_ else pred != 0


def leaf_paths(tree) -> list[tuple[str, object]]:
    """(path, leaf) pairs, the path written as Python would index into `tree`."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in flat]
