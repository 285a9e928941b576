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
        if isinstance(node, gast.Call):
            _check_frame_reads(node, ctx.globals)
    return fn_node


# Builtins that read the variables of the frame they are called in, and the number of
# arguments up to which they do (`vars(obj)`, `eval(text, namespace)` do not).
_FRAME_READS = {"locals": 0, "vars": 0, "dir": 0, "eval": 1, "exec": 1}


def _check_frame_reads(call: gast.Call, globals_: dict) -> None:
    """Refuses `locals()`, `vars()`, `dir()`, and `eval(text)`, `exec(text)` without a namespace:
    converted code keeps the function's variables in the functions it generates (one per staged
    block, each with the state it passes on) and closes over the runtime (`rt__`), so the frame
    they read is not Python's. (A function with nothing to convert runs as written: see
    `straight_line`.)"""
    func = call.func
    if not activity.reads_builtin(func, globals_, _FRAME_READS):
        return
    if len(call.args) + len(call.keywords) > _FRAME_READS[func.id]:
        return
    if any(isinstance(a, gast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return  # (unknown: a `*args` may hold a namespace)
    instead = (
        f"give {func.id} a namespace of its own ({func.id}(text, {{'y': y}}))"
        if func.id in ("eval", "exec")
        else "build what you need from the variables explicitly ({'y': y, ...})"
    )
    raise ConversionError(
        f"{func.id}() reads the variables of the frame it runs in, which converted code does "
        "not keep as Python does (each staged block is a function of its own, given the "
        "variables it uses, and the runtime is a variable of the function): its answer would "
        "differ from Python's",
        _origin(call),
        f"{instead[0].upper()}{instead[1:]}, or keep the function out of converted code "
        "(transpiler.do_not_convert).",
    )


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
