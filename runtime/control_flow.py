"""Functional forms of `if` statements and `a if p else b`: a Python path and a staged path each.

Generated code passes an `if` statement's state (the variables it modifies that are used later)
in and out explicitly. With a Python predicate the call does exactly what the statement does; with
a traced one it builds `lax.cond`, after checking that both branches produce the same structure,
shapes and dtypes. Loops live in `runtime.loops`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from runtime import staging
from runtime.attributes import Attributes
from runtime.errors import Site, StagingError
from runtime.staging import describe, describe_tree, is_staged
from runtime.variables import Undefined, UndefinedReturnValue


def if_stmt(pred, if_true, if_false, state, *, symbol_names, attributes=None):
    """Functional form of an if statement.

    Same semantics as::

        if pred:
            state = if_true(*state)
        else:
            state = if_false(*state)

    A traced `pred` lowers to `jax.lax.cond`: both branches are traced, and each variable in the
    state must come out of both with the same structure, shape and dtype (Python scalars are
    promoted the way JAX promotes weakly typed values). `attributes` names the object attributes
    the branches assign (see `runtime.attributes`); they are staged with the state.
    """
    if is_staged(pred):
        site = Site("if statement")
        if not attributes:
            return staged_cond(pred, if_true, if_false, state, symbol_names, site)
        return Attributes(attributes).around(
            state,
            symbol_names,
            lambda state, names, wrap: staged_cond(
                pred, wrap(if_true), wrap(if_false), state, names, site
            ),
        )
    return if_true(*state) if pred else if_false(*state)


def if_exp(pred, if_true, if_false):
    """Functional form of `if_true() if pred else if_false()`; a traced `pred` -> `lax.cond`."""
    if is_staged(pred):
        site = Site("conditional expression")
        (value,) = staged_cond(
            pred, lambda: (if_true(),), lambda: (if_false(),), (), ("<value>",), site
        )
        return value
    return if_true() if pred else if_false()


_branch_depth = 0  # how many staged branches are being traced right now, one inside the other


def branch_depth() -> int:
    """How deep inside traced `lax.cond` branches the caller runs (0: not inside any)."""
    return _branch_depth


class _Retrace(Exception):
    """Internal: trace the branches again, casting these leaves and filling these placeholders."""

    def __init__(self, casts, placeholders):
        self.casts = casts  # {(variable index, leaf index): dtype}
        self.placeholders = placeholders  # {variable index: tree of ShapeDtypeStruct}


def staged_cond(pred, if_true, if_false, state, names, site):
    """`lax.cond` over functions of the state; returns the new state. `names` label the state."""
    pred = staging.scalar_predicate(pred, site, "condition")
    casts, placeholders = {}, {}
    for _ in range(3):  # at most: fill placeholders, then cast
        try:
            return _cond_once(pred, if_true, if_false, state, names, site, casts, placeholders)
        except _Retrace as retrace:
            casts = {**casts, **retrace.casts}
            placeholders = {**placeholders, **retrace.placeholders}
    raise AssertionError("retracing the branches did not converge")


def _cond_once(pred, if_true, if_false, state, names, site, casts, placeholders):
    traced: list[tuple[str, list]] = []  # (branch, outputs) for each branch traced so far

    def branch(fn, which):
        def run():
            global _branch_depth
            _branch_depth += 1
            try:
                outs = list(fn(*staging.fresh(state)))
            finally:
                _branch_depth -= 1
            assert len(outs) == len(names), "generated code returned the wrong number of values"
            dynamic = []
            for index, value in enumerate(outs):
                if isinstance(value, UndefinedReturnValue) and index in placeholders:
                    value = staging.zeros_like(placeholders[index])
                if staging.is_array_tree(value):
                    leaves, treedef = jax.tree_util.tree_flatten(staging.as_arrays(value))
                    leaves = [
                        lax.convert_element_type(leaf, casts[index, j])
                        if (index, j) in casts
                        else leaf
                        for j, leaf in enumerate(leaves)
                    ]
                    value = jax.tree_util.tree_unflatten(treedef, leaves)
                    dynamic.append(value)
                outs[index] = value
            if traced:
                _compare_branches(traced[0], (which, outs), names, site)
            traced.append((which, outs))
            return dynamic

        return run

    dynamic = iter(lax.cond(pred, branch(if_true, "true"), branch(if_false, "false")))
    _, outs = traced[0]
    return tuple(next(dynamic) if staging.is_array_tree(value) else value for value in outs)


def _label(name: str, site: Site) -> str:
    """How messages call a state variable: `'x'`, `the value`, `the return value of 'f'`."""
    if name == "<value>":
        return "the value"
    returned = site.return_value(name.split("[")[0])
    if returned is not None:
        return f"the return value of '{returned[0]}'{name[len(name.split('[')[0]) :]}"
    return f"'{name}'"


def _returns_note(name: str, site: Site) -> str:
    returned = site.return_value(name)
    return f" Its return statements: {', '.join(returned[1])}." if returned else ""


def _compare_branches(first, second, names, site):
    """Raises StagingError where the branches disagree on a variable; _Retrace where JAX would
    promote (weak types), or where a return value is set on one path only (a placeholder)."""
    casts, placeholders = {}, {}
    for index, name in enumerate(names):
        values = {first[0]: first[1][index], second[0]: second[1][index]}
        a, b = values["true"], values["false"]
        unset = [w for w, v in values.items() if isinstance(v, UndefinedReturnValue)]
        other = a if unset == ["false"] else b
        if len(unset) == 1 and staging.is_array_tree(other):
            placeholders[index] = staging.shapes_of(staging.as_arrays(other))
            continue
        undefined = [w for w, v in values.items() if isinstance(v, Undefined)]
        if len(undefined) == 1:
            defined = "false" if undefined == ["true"] else "true"
            raise StagingError(
                f"'{name}' is set in the {defined} branch but not in the {undefined[0]} branch "
                f"({site}), and it is used after the if. With a traced condition both branches "
                f"run in the graph, so '{name}' needs a value on both paths: give it one before "
                "the if, or in both branches."
            )
        array_a, array_b = staging.is_array_tree(a), staging.is_array_tree(b)
        if not (array_a or array_b) and a is b:
            continue  # the same Python object either way: nothing to stage
        if not (array_a and array_b):
            _raise_mismatch(name, a, b, site)
        a, b = staging.as_arrays(a), staging.as_arrays(b)
        if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
            _raise_mismatch(name, a, b, site)
        for j, dtype in _compare_leaves(name, a, b, site).items():
            casts[index, j] = dtype
    if casts or placeholders:
        raise _Retrace(casts, placeholders)


def _compare_leaves(name, a, b, site) -> dict[int, np.dtype]:
    """Checks shapes and dtypes leaf by leaf; returns the casts weak-type promotion asks for."""
    casts = {}
    leaves_b = jax.tree_util.tree_leaves(b)
    for j, ((path, x), y) in enumerate(zip(staging.leaf_paths(a), leaves_b)):
        where = _label(name + path, site)
        if x.shape == y.shape and x.dtype == y.dtype:
            continue
        if x.shape == y.shape and (jax.typeof(x).weak_type or jax.typeof(y).weak_type):
            casts[j] = jnp.result_type(_dtype_like(x), _dtype_like(y))
            continue
        mismatch = "shape and dtype" if x.shape != y.shape else "dtype"
        fix = (
            ""
            if x.shape != y.shape
            else (f"; cast one of them, e.g. with .astype(jnp.{np.dtype(x.dtype).name})")
        )
        raise StagingError(
            f"{where} is {describe(x)} in the true branch but {describe(y)} in the false branch "
            f"({site}). With a traced condition both branches must give {where} the same "
            f"{mismatch}{fix}.{_returns_note(name, site)}"
        )
    return casts


def _raise_mismatch(name, a, b, site):
    returned = site.return_value(name)
    if returned is not None:
        function, returns = returned
        raise StagingError(
            f"'{function}' returns {describe_tree(a)} on one path and {describe_tree(b)} on "
            f"another (the paths meet at {site.location()}). Its return statements: "
            f"{', '.join(returns)}. With traced conditions every path must return the same "
            "structure, shapes and dtypes."
        )
    label = _label(name, site)
    raise StagingError(
        f"{label} is {describe_tree(a)} in the true branch but {describe_tree(b)} in the false "
        f"branch ({site}). With a traced condition both branches must give {label} the same "
        "structure: arrays (or tuples, lists, dicts of arrays), or the very same Python object."
    )


def _dtype_like(x):
    """Something `jnp.result_type` promotes as it would promote `x`, weak type included."""
    if not jax.typeof(x).weak_type:
        return x.dtype
    return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}[np.dtype(x.dtype).kind]
