"""Refuses, up front, every construct the allow-list (`transpiler.fence`) does not let through.

Before: `def f(xs): yield from xs`. After: ConversionError("generators ('yield from') cannot be
converted ...") pointing at the `yield from`. Also refused: names with the prefix reserved for
generated code, and `return`/`break`/`continue` that leave a `finally` block (PEP 765: they
silently cancel the exception or return in flight). Nothing is rewritten.
"""

from __future__ import annotations

import gast

from transpiler import anno, fence, naming, structure
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.errors import ConversionError

_WHAT = {
    gast.Yield: "generators ('yield')",
    gast.YieldFrom: "generators ('yield from')",
    gast.Await: "'await'",
    gast.AsyncFor: "'async for'",
    gast.AsyncWith: "'async with'",
    gast.AsyncFunctionDef: "'async def'",
}


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Raises ConversionError at the first construct of `fn_node` that cannot be converted.
    A generator defined inside it (a `@contextmanager`) is left as written: it runs as Python."""
    stack = [fn_node]
    while stack:
        node = stack.pop()
        if node is not fn_node and isinstance(node, gast.FunctionDef) and _is_generator(node):
            anno.setanno(node, anno.Static.AS_WRITTEN, True)
            continue  # Python, as written: what it holds is not checked
        stack.extend(reversed(structure.children(node)))  # source order
        known = fence.decision(node)
        if known is None:
            raise ConversionError(
                f"{type(node).__name__} syntax is not supported by this version of astgraph",
                _origin(node),
                "Write the statement with other syntax, or keep it out of converted code "
                "(transpiler.do_not_convert).",
            )
        decision, hint = known
        if decision is fence.Decision.REFUSED:
            what = _WHAT.get(type(node), f"{type(node).__name__} syntax")
            raise ConversionError(
                f"{what} cannot be converted", _origin(node), hint[0].upper() + hint[1:] + "."
            )
        name = naming.reserved(node)
        if name is not None:
            raise ConversionError(
                f"the name {name!r} uses the prefix {naming.RUNTIME!r}, "
                "reserved for generated code",
                _origin(node),
                "Rename the variable.",
            )
        if isinstance(node, structure.TRY):
            _check_finally(node.finalbody)
    return fn_node


def _is_generator(fn: gast.FunctionDef) -> bool:
    return any(isinstance(n, (gast.Yield, gast.YieldFrom)) for n in activity.walk_scope(fn.body))


def _check_finally(finalbody: list[gast.stmt]) -> None:
    for jump in structure.jumps_out(finalbody, structure.EXITS):
        keyword = type(jump).__name__.lower()
        raise ConversionError(
            f"'{keyword}' inside 'finally' leaves the finally block",
            _origin(jump),
            f"A '{keyword}' there silently cancels the exception or the return in flight "
            "(PEP 765; Python 3.14 warns about it). Set a flag in the finally block and act on "
            "it after the try statement.",
        )


def _origin(node):
    return (
        anno.getanno(node, anno.Static.ORIGIN) if anno.hasanno(node, anno.Static.ORIGIN) else None
    )
