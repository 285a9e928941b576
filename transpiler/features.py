"""What a function's tree holds, so that the pipeline skips the passes that would find nothing.

Most functions have no `match`, no walrus, no `try`, no `assert`, no early `return`: a pass that
rewrites only those would walk the whole tree for nothing, and conversion time is mostly such
walks. `present(tree)` lists what the tree holds, once:

- the classes of its nodes (`gast.Break`, `gast.IfExp`, ...);
- `EARLY_RETURN` if some function in it returns other than by its last top-level statement
  (what the return pass rewrites);
- `EXTENDED_BY_DISPLAY` for an `x += [a, b]` (or a tuple display), which extends a list;
- `INDEXED` where a name is indexed by an expression (`out[k]`, not `out[0]`, a slice or a
  tuple): a traced `k` may pick the item of a list when the program runs (what the lists pass
  rewrites, for a list the function makes);
- `"call:NAME"` for each plain name called (`print(...)`: `"call:print"`), and `"call:.NAME"`
  for each method called (`out.append(x)`: `"call:.append"`).

A pass module may declare `APPLIES_TO`, what must be present for it to have work, and `ADDS`,
what it may bring into the tree that other passes look for; the pipeline runs a pass only if
something in its `APPLIES_TO` is present (a pass without one always runs), and adds its `ADDS`
when it has run. A test converts a corpus with and without skipping and compares the code.
"""

from __future__ import annotations

import gast

from transpiler import structure

EARLY_RETURN = "early return"
EXTENDED_BY_DISPLAY = "+= of a list or tuple display"
INDEXED = "a name indexed by an expression"


def present(tree: gast.AST) -> set:
    """What `tree` holds (see the module docstring)."""
    found: set = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        cls = type(node)
        found.add(cls)
        if cls is gast.Call:
            func = node.func
            if type(func) is gast.Name:
                found.add("call:" + func.id)
            elif type(func) is gast.Attribute:
                found.add("call:." + func.attr)
        elif cls is gast.FunctionDef and _returns_early(node.body):
            found.add(EARLY_RETURN)
        elif cls is gast.AugAssign and type(node.value) in (gast.List, gast.Tuple):
            found.add(EXTENDED_BY_DISPLAY)
        elif cls is gast.Subscript and picks_by_expression(node):
            found.add(INDEXED)
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                stack.extend(v for v in value if isinstance(v, gast.AST))
            elif isinstance(value, gast.AST) and not isinstance(value, gast.expr_context):
                stack.append(value)
    return found


def picks_by_expression(node: gast.Subscript) -> bool:
    """Whether `node` is a name indexed by an expression that may pick an item of a list when
    the program runs (`out[k]`): not a constant (`out[0]`, `out[-1]`), a slice, or a tuple (a
    list takes none: `x[..., :1]`, `x[i, j]` index arrays)."""
    index = node.slice
    if type(node.value) is not gast.Name or isinstance(index, (gast.Slice, gast.Tuple)):
        return False
    if isinstance(index, gast.UnaryOp) and isinstance(index.op, (gast.USub, gast.UAdd)):
        index = index.operand
    return not isinstance(index, gast.Constant)


def _returns_early(body: list[gast.stmt]) -> bool:
    """Whether a `return` of this function (not of a function nested in it) is not its last
    top-level statement."""
    stack = list(body)
    last = body[-1] if body else None
    while stack:
        node = stack.pop()
        if isinstance(node, gast.Return) and node is not last:
            return True
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)):
            continue
        if isinstance(node, gast.stmt):
            stack.extend(structure.children(node))
        elif isinstance(node, (gast.excepthandler, gast.match_case)):
            stack.extend(node.body)
    return False


def needed(pass_module, found: set) -> bool:
    """Whether the pass can have work in a tree holding `found`."""
    applies_to = getattr(pass_module, "APPLIES_TO", None)
    return applies_to is None or any(item in found for item in applies_to)
