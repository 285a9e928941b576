"""Fresh, collision-free names for the symbols that generated code introduces."""

from __future__ import annotations

import gast

from transpiler import structure

RUNTIME = "rt__"
"""The one name through which generated code reaches the runtime; reserved as a prefix."""


def reserved(node: gast.AST) -> str | None:
    """The name `node` binds or reads (a name, a function's or a class's), if it uses the
    prefix reserved for generated code; else None."""
    name = getattr(node, "id", None) or getattr(node, "name", None)
    return name if isinstance(name, str) and name.startswith(RUNTIME) else None


def runtime_operator(func: gast.expr) -> str | None:
    """`'print_'` for the callee `rt__.print_` of generated code, else None."""
    if (
        isinstance(func, gast.Attribute)
        and isinstance(func.value, gast.Name)
        and func.value.id == RUNTIME
    ):
        return func.attr
    return None


class Namer:
    """Hands out names that clash neither with the user's names nor with each other."""

    def __init__(self, taken: set[str]):
        self._taken = set(taken)
        self.generated: set[str] = set()  # the names `new` handed out

    @classmethod
    def for_tree(cls, tree: gast.AST) -> Namer:
        taken = set()
        for node in structure.walk_nodes(tree):
            if isinstance(node, gast.Name):
                taken.add(node.id)
            elif isinstance(node, (gast.FunctionDef, gast.ClassDef)):
                taken.add(node.name)
            elif isinstance(node, (gast.Global, gast.Nonlocal)):
                taken.update(node.names)
        return cls(taken)

    def new(self, base: str) -> str:
        """A fresh name that reads like `base`: `base`, then `base_1`, `base_2`, ..."""
        name, n = base, 0
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        self.generated.add(name)
        return name
