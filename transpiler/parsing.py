"""Function -> source -> gast AST, keeping the file name and line offsets for the source map."""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import textwrap
import types

import gast

from transpiler import origins, templates
from transpiler.errors import ConversionError

LAMBDA_NAME = "lambda_"
"""The name a converted lambda's `def` gets in generated code (the function keeps `<lambda>`)."""


@dataclasses.dataclass
class ParsedFunction:
    """A function's definition as an AST, with where it came from."""

    node: gast.FunctionDef
    filename: str
    line_offset: int  # parsed line + line_offset = line in `filename`


def parse_function(fn: types.FunctionType) -> ParsedFunction:
    """Parses the definition of `fn` (its decorators stripped); a lambda becomes a `def`.

    Raises:
      ConversionError: the source cannot be had (a function typed into a REPL or built by `exec`),
        or it does not hold the definition of `fn`.
    """
    code = fn.__code__
    filename = code.co_filename
    where = origins.Location(filename, code.co_firstlineno)
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
    line_offset = start - 1
    module = _parse(source)
    if module is None and code.co_name == "<lambda>":
        # A lambda in a longer expression: its lines may not parse alone; in parentheses they may.
        module = _parse(f"(\n{source}\n)")
        line_offset -= 1
    if module is None:
        raise ConversionError(f"the source found for {fn.__qualname__!r} does not parse", where)
    if code.co_name == "<lambda>":
        node = _lambda_as_function(module, code, code.co_firstlineno - line_offset, where)
    else:
        node = module.body[0] if module.body else None
        if not isinstance(node, gast.FunctionDef) or node.name != code.co_name:
            raise ConversionError(
                f"the source at {where} does not define {fn.__qualname__!r}",
                hint="The function object was probably created by a decorator or factory.",
            )
    node.decorator_list = []
    indent = len(lines[0]) - len(lines[0].lstrip())  # what textwrap.dedent removed
    origins.stamp(node, filename, line_offset, indent, linecache.getlines(filename))
    return ParsedFunction(node, filename, line_offset)


def _parse(source: str) -> gast.Module | None:
    try:
        return gast.parse(source)
    except SyntaxError:
        return None


def _lambda_as_function(module, code, lineno, where) -> gast.FunctionDef:
    """`lambda x: e` (the one on `lineno` taking code's arguments) -> `def lambda_(x): return e`."""
    n_args = code.co_argcount + code.co_kwonlyargcount
    n_args += bool(code.co_flags & inspect.CO_VARARGS) + bool(
        code.co_flags & inspect.CO_VARKEYWORDS
    )
    arg_names = code.co_varnames[:n_args]
    candidates = [
        node
        for node in gast.walk(module)
        if isinstance(node, gast.Lambda)
        and node.lineno == lineno
        and _arg_names(node.args) == sorted(arg_names)
    ]
    if len(candidates) != 1:
        raise ConversionError(
            f"cannot tell which lambda on line {where} to convert "
            f"({len(candidates)} lambdas there take the arguments {', '.join(arg_names) or '()'})",
            where,
            "Define the function with `def` and convert that.",
        )
    (lam,) = candidates
    (fn_node,) = templates.replace("def name():\n    return body", name=LAMBDA_NAME, body=lam.body)
    fn_node.args = lam.args
    fn_node.lineno = fn_node.body[0].lineno = lam.lineno
    fn_node.col_offset = fn_node.body[0].col_offset = lam.col_offset
    return fn_node


def _arg_names(args: gast.arguments) -> list[str]:
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    return sorted(p.id for p in params)
