"""Rejects syntax the transpiler cannot convert, up front, with the user's file:line.

Before: `def f(xs): yield from xs`. After: ConversionError("generators (yield from) are not
supported ...") pointing at the `yield from`. Nothing is rewritten.
"""

from __future__ import annotations

import gast

from transpiler import anno, naming
from transpiler.context import PassContext
from transpiler.errors import ConversionError

_REJECTED = {
    gast.Yield: ("generators ('yield')", "Return a list or an array instead of yielding."),
    gast.YieldFrom: ("generators ('yield from')", "Return a list or an array instead."),
    gast.Await: ("'await'", "Converted functions run synchronously; call them outside async code."),
    gast.AsyncFor: ("'async for'", "Use a plain for loop."),
    gast.AsyncWith: ("'async with'", "Use a plain with statement."),
    gast.AsyncFunctionDef: ("'async def'", "Convert a plain (synchronous) function."),
}


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Raises ConversionError at the first unsupported construct in `fn_node`."""
    for node in gast.walk(fn_node):
        rejected = _REJECTED.get(type(node))
        if rejected is not None:
            what, hint = rejected
            raise ConversionError(f"{what} cannot be converted", _origin(node), hint)
        name = getattr(node, "id", None) or getattr(node, "name", None)
        if isinstance(name, str) and name.startswith(naming.RUNTIME):
            raise ConversionError(
                f"the name {name!r} uses the prefix {naming.RUNTIME!r}, "
                "reserved for generated code",
                _origin(node),
                "Rename the variable.",
            )
    return fn_node


def _origin(node):
    return (
        anno.getanno(node, anno.Static.ORIGIN) if anno.hasanno(node, anno.Static.ORIGIN) else None
    )
