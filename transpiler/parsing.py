"""Function -> source -> gast AST, keeping the file name and line offsets for the source map."""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import textwrap
import types

import gast

from transpiler import origins
from transpiler.errors import ConversionError


@dataclasses.dataclass
class ParsedFunction:
    """A function's definition as an AST, with where it came from."""

    node: gast.FunctionDef
    filename: str
    line_offset: int  # parsed line + line_offset = line in `filename`


def parse_function(fn: types.FunctionType) -> ParsedFunction:
    """Parses the definition of `fn` (its decorators stripped).

    Raises:
      ConversionError: the source cannot be had (a function typed into a REPL or built by `exec`),
        or it does not hold the definition of `fn`.
    """
    code = fn.__code__
    filename = code.co_filename
    where = origins.Location(filename, code.co_firstlineno)
    if code.co_name == "<lambda>":
        raise ConversionError(
            f"cannot convert lambda functions directly (the lambda at {where})",
            hint="Define the function with `def` and convert that.",
        )
    try:
        # From the code object, not the function: inspect follows `__wrapped__` on functions.
        lines, start = inspect.getsourcelines(code)
    except (OSError, TypeError) as e:
        raise ConversionError(
            f"cannot read the source of {fn.__qualname__!r} ({where}): {e}",
            hint=(
                "Functions typed into an interactive prompt or created with exec() have no source "
                "file. Put the function in a module (a .py file) and import it."
            ),
        ) from None
    source = textwrap.dedent("".join(lines))
    try:
        module = gast.parse(source)
    except SyntaxError as e:
        raise ConversionError(
            f"the source found for {fn.__qualname__!r} does not parse: {e.msg}", where
        ) from None
    node = module.body[0] if module.body else None
    if not isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)) or node.name != code.co_name:
        raise ConversionError(
            f"the source at {where} does not define {fn.__qualname__!r}",
            hint="The function object was probably created by a decorator or factory.",
        )
    node.decorator_list = []
    line_offset = start - 1 if start > 0 else 0
    all_lines = linecache.getlines(filename)
    origins.stamp(node, filename, line_offset, all_lines)
    return ParsedFunction(node, filename, line_offset)
