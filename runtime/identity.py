"""Lists and dicts that staged state hands back as new objects, given back their identity.

A staged branch or loop carries a list or dict as the arrays in it, and hands back a new object
built from them. Where Python's variable still holds the object it held before (both branches,
every iteration leave it there), the object is updated in place and handed back instead, so
other names that reach it see the change, as in Python.
"""

from __future__ import annotations

import jax


def changed(copy_, original) -> bool:
    """Whether the branch changed `copy_`, a copy of `original` (its nested containers too)."""
    return changed_since(copy_, contents(original))


def contents(value) -> tuple:
    """What `value` holds now, to compare with later (`changed_since`)."""
    return jax.tree_util.tree_flatten(value)


def changed_since(value, before: tuple) -> bool:
    """Whether `value` holds other objects, or a different structure, than `before`."""
    leaves, tree = jax.tree_util.tree_flatten(value)
    return tree != before[1] or any(a is not b for a, b in zip(leaves, before[0]))


def update_in_place(target, value) -> None:
    """`target` (a list or dict) given the contents of `value` (alike), nested lists and dicts
    updated in place too."""
    if type(target) is list and type(value) is list and len(target) == len(value):
        for i, item in enumerate(value):
            if type(target[i]) in (list, dict) and type(item) is type(target[i]):
                update_in_place(target[i], item)
            else:
                target[i] = item
    elif type(target) is dict and type(value) is dict and target.keys() == value.keys():
        for key, item in value.items():
            if type(target[key]) in (list, dict) and type(item) is type(target[key]):
                update_in_place(target[key], item)
            else:
                target[key] = item
    elif type(target) is list:
        target[:] = value
    else:
        target.clear()
        target.update(value)
