"""Function -> source -> gast AST, keeping the file name and line offsets for the source map."""

from __future__ import annotations
import __future__

import ast
import builtins
import dataclasses
import dis
import inspect
import linecache
import re
import textwrap
import types

import gast

from transpiler import loading, origins, structure, templates, trees
from transpiler.errors import ConversionError

LAMBDA_NAME = "lambda_"
"""The name a converted lambda's `def` gets in generated code (the function keeps `<lambda>`)."""


@dataclasses.dataclass
class ParsedFunction:
    """A function's definition as an AST, with where it came from."""

    node: gast.FunctionDef
    filename: str
    line_offset: int  # parsed line + line_offset = line in `filename`
    text: str | None = None  # the definition's lines as in the file; None for a lambda

    def as_written(self) -> str:
        """The definition as the file has it, dedented (a lambda: as a `def`, printed)."""
        if self.text is None:
            return loading.unparse(self.node)
        return textwrap.dedent(self.text)


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
        lines, start = _source_lines(code)
    except (OSError, TypeError) as e:
        raise ConversionError(
            f"cannot read the source of {fn.__qualname__!r} ({where}): {e}",
            hint=(
                "Functions typed into an interactive prompt or created with exec() have no source "
                "file. Put the function in a module (a .py file) and import it."
            ),
        ) from None
    text = "".join(lines)
    parseable, added = parseable_source(text)
    module = _parse(parseable)
    if module is None and code.co_name != "<lambda>":
        # The lines up to the last one with code were not the whole definition (it ends with
        # a `pass` in an `else:`, say): the block as the tokenizer finds it.
        lines = inspect.getblock(linecache.getlines(filename)[start - 1 :])
        text = "".join(lines)
        parseable, added = parseable_source(text)
        module = _parse(parseable)
    line_offset = start - 1 - added
    indented = bool(added)
    if module is None and code.co_name == "<lambda>":
        # A lambda in a longer expression: its lines may not parse alone; in parentheses they
        # may, or in braces (an item of a dict display: `"key": lambda x: ...,`).
        for opening, closing in ("()", "{}"):
            module, indented = _parse(f"{opening}\n{text}\n{closing}"), False
            if module is not None:
                break
        line_offset = start - 2
    if module is None:
        raise ConversionError(f"the source found for {fn.__qualname__!r} does not parse", where)
    if code.co_name == "<lambda>":
        node = _lambda_as_function(module, code, code.co_firstlineno - line_offset, where)
    else:
        body = module.body[0].body if indented else module.body
        node = body[0] if body else None
        if isinstance(node, gast.AsyncFunctionDef) and node.name == code.co_name:
            raise ConversionError(
                f"{fn.__qualname__!r} is an async function: a coroutine runs in an event loop, "
                "outside the trace JAX makes of a function, so it cannot be staged",
                where,
                hint="Convert the synchronous function it awaits, and call that.",
            )
        if not isinstance(node, gast.FunctionDef) or node.name != code.co_name:
            raise ConversionError(
                f"the source at {where} does not define {fn.__qualname__!r}",
                hint="The function object was probably created by a decorator or factory.",
            )
    node.decorator_list = []
    _check_unchanged(fn, node, where, None if indented else text)
    origins.stamp(node, filename, line_offset, linecache.getlines(filename))
    written = None if code.co_name == "<lambda>" else text
    return ParsedFunction(node, filename, line_offset, written)


# Where `inspect.findsource` stops looking upwards for the line a code object's source starts on.
_DEFINITION_START = re.compile(r"^(\s*def\s)|(\s*async\s+def\s)|(.*(?<!\w)lambda(:|\s))|^(\s*@)")


def _source_lines(code: types.CodeType) -> tuple[list[str], int]:
    """`inspect.getsourcelines(code)` (from the code object, not the function: inspect follows
    `__wrapped__` on functions), without its `inspect.getmodule`, which looks through every
    module in `sys.modules` for the one of the file: most of its time, with JAX imported."""
    filename = code.co_filename
    linecache.checkcache(filename)  # the file as it is now: `_check_unchanged` compares it
    lines = linecache.getlines(filename)
    if not lines:  # a source only a module's loader can give (a zip file): ask inspect
        return inspect.getsourcelines(code)
    start = code.co_firstlineno - 1
    if start >= len(lines):
        raise OSError("lineno is out of bounds")
    while start > 0 and not _DEFINITION_START.match(lines[start]):
        start -= 1
    if code.co_name == "<lambda>" or not hasattr(code, "co_positions"):  # (Python 3.10)
        return inspect.getblock(lines[start:]), start + 1
    # A definition ends on the last line its code (or code nested in it) comes from: no need
    # to tokenize the file from `start` to find where its block ends. (Lines after it that
    # compile to nothing, a trailing `pass`, are left out: the code is the same.) But code that
    # CPython drops as unreachable (`return -n` after a `while True:` that our
    # `loop_options(max_iterations=3)` ends) compiles to nothing too: where the block goes on
    # past that line, it is found as inspect finds it.
    end = _last_line(code)
    if _block_goes_on(lines, start, end):
        return inspect.getblock(lines[start:]), start + 1
    return lines[start:end], start + 1


def _block_goes_on(lines: list[str], start: int, end: int) -> bool:
    """Whether the first line after line `end` that is not blank or a comment is indented
    deeper than the definition on line `start + 1`: still in its block."""
    indent = len(lines[start]) - len(lines[start].lstrip())
    for line in lines[end:]:
        text = line.lstrip()
        if text and not text.startswith("#"):
            return len(line) - len(text) > indent
    return False


def _last_line(code: types.CodeType) -> int:
    """The last line of the file that `code` or the code nested in it was compiled from."""
    last, todo = code.co_firstlineno, [code]
    while todo:
        c = todo.pop()
        last = max([last, *(end for _, end, _, _ in c.co_positions() if end is not None)])
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return last


def _parse(source: str) -> gast.Module | None:
    try:
        return trees.to_gast(ast.parse(source))
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
        for node in structure.walk_nodes(module)
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


def _check_unchanged(
    fn: types.FunctionType, node: gast.FunctionDef, where, text: str | None = None
) -> None:
    """Raises ConversionError unless `node` compiles to the code `fn` runs.

    The source is read from the file now, not when the module was imported: if the file was
    edited since, converting what it says now would run code the user never imported. `text`:
    the definition's source, where it compiles alone as it did in its module (a function at
    the top level of its module), which saves converting the tree.
    """
    code = fn.__code__
    flags = future_flags(code)
    imports = "".join(f"import {name}\n" for name in _imported_names(fn))
    if text is not None and code.co_name != "<lambda>" and not code.co_freevars:
        compiled_from = imports + text
    else:
        definition = node
        if code.co_name == "<lambda>":
            definition = node.body[0].value if isinstance(node.body[0], gast.Return) else None
            definition = gast.Lambda(args=node.args, body=definition) if definition else None
        # Not copied: the factory holds the definition; neither it nor compiling changes it.
        module = loading.factory_module(definition, code.co_freevars, fn.__qualname__)
        compiled_from = ast.fix_missing_locations(trees.to_ast(module))
        compiled_from.body[:0] = ast.parse(imports).body
    try:
        compiled = compile(compiled_from, code.co_filename, "exec", flags=flags, dont_inherit=True)
        parsed = loading.function_code(compiled, code.co_name)
    except (SyntaxError, LookupError):
        parsed = None
    # pytest compiles test modules from rewritten asserts: there, only names can be compared.
    rewriter = fn.__globals__.get("@pytest_ar")
    if parsed is not None and _same_code(parsed, code):
        return  # the common case, told without disassembling
    if parsed is None or _fingerprint(parsed, rewriter) != _fingerprint(code, rewriter):
        raise ConversionError(
            f"the source of {fn.__qualname__!r} in {origins.display_path(code.co_filename)} "
            "is not the code that runs: the file changed after it was imported",
            where,
            "Re-import the module (or restart the interpreter) so that the code that runs is the "
            "code in the file, then convert again.",
        )


def _imported_names(fn: types.FunctionType) -> list[str]:
    """The global names `fn` reads that its module probably imported: bound to a module, or to
    a class or function of another module.

    CPython 3.11 compiles `jnp.abs(x)` with one instruction where `jnp` is imported in the
    module and another where it is not: compiled after `import jnp`, the definition compiles as
    it did in its module and `_same_code` can tell so. A name guessed wrong only costs
    `_fingerprint`'s slower comparison."""
    names, todo = set(), [fn.__code__]
    while todo:
        code = todo.pop()
        names.update(code.co_names)
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    found = []
    for name in sorted(names):
        if not name.isidentifier():  # pytest's rewritten asserts read `@pytest_ar`
            continue
        value = fn.__globals__.get(name)
        if isinstance(value, types.ModuleType) or (
            isinstance(value, type | types.FunctionType)
            and getattr(value, "__module__", None) != fn.__module__
        ):
            found.append(name)
    return found


_FUTURES = tuple(getattr(__future__, name) for name in __future__.all_feature_names)


def future_flags(code: types.CodeType) -> int:
    """The compiler flags of the `from __future__ import ...` that `code` was compiled under
    (`annotations`: annotations are kept as text), for code compiled in its place."""
    return sum(f.compiler_flag for f in _FUTURES if code.co_flags & f.compiler_flag)


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """Whether `a` and `b` are the same code: bytes, names and constants, recursively (their
    positions aside). Where this says no, `_fingerprint` still may say they compile alike."""
    if (
        a.co_code != b.co_code
        or a.co_names != b.co_names
        or a.co_varnames != b.co_varnames
        or a.co_freevars != b.co_freevars
        or len(a.co_consts) != len(b.co_consts)
    ):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType):
            if not (isinstance(y, types.CodeType) and _same_code(x, y)):
                return False
        elif _constant(x) != _constant(y):  # typed: the constant 1 is not True
            return False
    return True


def _fingerprint(code: types.CodeType, rewriter=None) -> tuple:
    """What compiling the same source gives again: instructions, constants and names,
    recursively. Positions are left out (they moved if lines were added above), and so is how an
    attribute is loaded: CPython 3.11 loads `np.sum` in `np.sum(x)` as a method or as an
    attribute depending on whether the module has an `import np` anywhere."""
    nested = tuple(
        _fingerprint(c, rewriter) for c in code.co_consts if isinstance(c, types.CodeType)
    )
    if rewriter is not None:

        def own(names):  # less what a rewritten assert adds (`@py_assert1`, `locals`, ...)
            return tuple(
                n
                for n in names
                if not (n.startswith("@") or hasattr(rewriter, n) or hasattr(builtins, n))
            )

        return own(code.co_names), own(code.co_varnames), nested
    # EXTENDED_ARG prefixes come and go with jump distances in bytes, and PUSH_NULL with how a
    # method is loaded: jumps (and their targets) are counted in instructions without them.
    instructions, position = [], {}
    for ins in dis.get_instructions(code):
        position[ins.offset] = len(instructions)
        if ins.opname not in ("EXTENDED_ARG", "PUSH_NULL"):
            instructions.append(ins)
    jumps = set(dis.hasjrel) | set(dis.hasjabs)
    ops = []
    for ins, after in zip(instructions, [*instructions[1:], None]):
        name = "LOAD_ATTR" if ins.opname == "LOAD_METHOD" else ins.opname
        if ins.opcode in jumps:
            arg = position.get(ins.argval)
        elif isinstance(ins.argval, types.CodeType):
            arg = None  # compared in `nested`
        elif after is not None and _names_code(after):
            # A qualified name depends on where the definition was compiled (in our factory
            # or in the user's module): only its last part is the code's.
            arg = str(ins.argval).rsplit(".", 1)[-1]
        else:
            arg = _constant(ins.argval)
        ops.append((name, arg))
    return tuple(ops), code.co_varnames, code.co_freevars, nested


def _names_code(ins: dis.Instruction) -> bool:
    """Whether `ins` consumes a qualified name just loaded (a function's, or a class body's)."""
    return ins.opname == "MAKE_FUNCTION" or (
        ins.opname == "STORE_NAME" and ins.argval == "__qualname__"
    )


def _constant(value) -> tuple:
    if isinstance(value, frozenset):  # its order depends on how it was built
        return ("frozenset", tuple(sorted(repr(v) for v in value)))
    return (type(value).__name__, repr(value))


def parseable_source(text: str) -> tuple[str, int]:
    """`text` (a definition's lines), made to parse alone, and how many lines were added above
    it: an indented definition (a method, a nested function) parses inside an `if` block, with
    its columns and its multi-line strings as they are (dedenting would change those strings)."""
    if text[:1].isspace():
        return f"if True:\n{text}", 1
    return text, 0


def deepest_location(fn: types.FunctionType) -> origins.Location | None:
    """Where the most deeply nested node of `fn`'s source is (None without a source)."""
    try:
        lines, start = inspect.getsourcelines(fn.__code__)
        parseable, added = parseable_source("".join(lines))
        tree = ast.parse(parseable)
        offset = start - 1 - added  # parsed line + offset: the line in the file
    except (OSError, TypeError, SyntaxError, RecursionError, ValueError):
        return None
    deepest, depth_of = tree, {id(tree): 0}
    todo = [tree]
    while todo:  # iterative: the tree is too deep for recursion
        node = todo.pop()
        depth = depth_of[id(node)]
        if depth > depth_of[id(deepest)] and hasattr(node, "lineno"):
            deepest = node
        for child in ast.iter_child_nodes(node):
            depth_of[id(child)] = depth + 1
            todo.append(child)
    line = max(getattr(deepest, "lineno", 1) + offset, start)
    text = lines[line - start].strip() if line - start < len(lines) else ""
    return origins.Location(fn.__code__.co_filename, line, 0, text)
