"""AST -> source -> code object, registered with `linecache` and the runtime's source maps.

The converted function is rebuilt from its code object with the *original* function's globals
dict and closure cells, so it sees module globals and closure variables as they are at call time.
Generated code reaches the runtime through one extra closure cell named `rt__`.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import itertools
import linecache
import os
import shutil
import tempfile
import types
import weakref
from collections.abc import Callable

import gast

from transpiler import origins, structure, templates
from transpiler.naming import RUNTIME

_counter = itertools.count()
_directory: str | None = None


def _generated_path(name: str, suffix: str) -> str:
    """A real file for generated code, so every traceback printer and debugger can show it."""
    global _directory
    if _directory is None:
        _directory = tempfile.mkdtemp(prefix="astgraph-")
        atexit.register(shutil.rmtree, _directory, ignore_errors=True)
    return os.path.join(_directory, f"{name}_{next(_counter)}{suffix}")


def unparse(node: gast.AST) -> str:
    """Python source for a gast tree, printed by the standard library's `ast.unparse`."""
    return ast.unparse(to_ast(node))


def to_ast(node: gast.AST) -> ast.AST:
    """The standard library's tree for a gast tree (a new one: `node` is left as it is)."""
    return ast.fix_missing_locations(gast.gast_to_ast(node))


_FACTORY = """
    def rt__factory(free_variables):
        declare
        definition
"""

_METHOD_FACTORY = """
    def rt__factory(free_variables):
        declare_owner
        class owner:
            declare
            definition
"""


def factory_module(
    fn_node: gast.FunctionDef | gast.Lambda, freevars: tuple[str, ...], qualname: str
) -> gast.Module:
    """A module that compiles `fn_node` with the scope it had in the user's code.

        def rt__factory(rt__, <free variables>):   <- they compile as free variables
            global Model
            class Model:                           <- a method: `self.__x` is name-mangled
                global fn                          <- `fn`, `Model` in fn stay global lookups
                def fn(...): ...

    (The factory never runs.) A lambda is compiled as the value of an expression statement.
    """
    params = [RUNTIME, *freevars]
    if isinstance(fn_node, gast.Lambda):
        declare, definition = [], [gast.Expr(value=fn_node)]
    else:
        # The `def` binds the function's name in the factory; declared global there, a
        # recursive reference stays the global lookup it is in the user's module.
        declare = [] if fn_node.name in freevars else [gast.Global(names=[fn_node.name])]
        definition = [fn_node]
    owner = enclosing_class(qualname)
    template = _FACTORY if owner is None else _METHOD_FACTORY
    extra = {}
    if owner is not None:  # and the class's own name stays a global, as the function's does
        declare_owner = [] if owner in freevars else [gast.Global(names=[owner])]
        extra = {"owner": owner, "declare_owner": declare_owner}
    body = templates.replace(
        template, free_variables=params, declare=declare, definition=definition, **extra
    )
    return gast.Module(body=body, type_ignores=[])


def _unparse_around(module: gast.Module, fn_node: gast.FunctionDef, printed: ast.AST) -> str:
    """`unparse(module)`, where `module` holds `fn_node`, whose `ast` tree is `printed`: only
    the rest of the module is converted."""
    placeholder = gast.Pass()
    _swap(module.body, fn_node, placeholder)
    try:
        skeleton = to_ast(module)
    finally:
        _swap(module.body, placeholder, fn_node)
    _swap(skeleton.body, None, printed)  # the skeleton's only `pass` is the placeholder
    return ast.unparse(skeleton)


def _swap(stmts: list, old, new) -> bool:
    """Replaces the statement `old` (None: the first `pass`) of `stmts` or of a block nested in
    them with `new`; whether it was found."""
    for i, stmt in enumerate(stmts):
        if stmt is old or (old is None and type(stmt).__name__ == "Pass"):
            stmts[i] = new
            return True
        if any(_swap(block.stmts, old, new) for block in structure.scope_blocks(stmt)):
            return True
    return False


def enclosing_class(qualname: str) -> str | None:
    """`'Model'` for a method `Model.__call__` (or `f.<locals>.Model.step`), else None."""
    parts = qualname.split(".")
    return parts[-2] if len(parts) >= 2 and parts[-2] != "<locals>" else None


def function_code(module_code: types.CodeType, name: str) -> types.CodeType:
    """The code object of the function `name` in a compiled `factory_module` (the shallowest)."""
    level = [module_code]
    while level:
        found = [c for c in level if c.co_name == name and c is not module_code]
        if found:
            return found[0]
        level = [c for code in level for c in code.co_consts if isinstance(c, types.CodeType)]
    raise LookupError(f"no function {name!r} in the compiled module")


def compile_function(
    fn_node: gast.FunctionDef,
    freevars: tuple[str, ...],
    user_filename: str,
    qualname: str,
    *,
    suffix: str = ".py",
    footer: Callable[[dict[int, tuple[str, int]]], str] = lambda line_map: "",
    printed: ast.FunctionDef | None = None,
) -> types.CodeType:
    """Compiles a converted function definition into a generated file.

    Args:
      fn_node: the converted definition.
      freevars: the names of the original function's closure variables.
      user_filename: the file the function comes from (named in the header).
      qualname: its qualified name (a method compiles inside a class of that name).
      suffix: how the generated file's name ends.
      footer: given the line map of the file (generated line -> user file, line), the text that
        ends the file.
      printed: `to_ast(fn_node)`, if the caller has it already (converting is most of the
        cost of printing).

    Returns:
      The code object of the function.
    """
    module = factory_module(fn_node, freevars, qualname)
    body = unparse(module) if printed is None else _unparse_around(module, fn_node, printed)
    filename = _generated_path(fn_node.name, suffix)
    header = f"# Generated by astgraph from {user_filename}\n"
    line_map = {
        line + 1: (loc.filename, loc.lineno)  # + 1: the header comment
        for line, loc in origins.line_map(module, body).items()
    }
    source = f"{header}{body}\n{footer(line_map)}"
    with open(filename, "w", encoding="utf-8") as f:
        f.write(source)
    code = compile(source, filename, "exec")
    # Also in linecache, should the file be gone by the time a traceback is printed.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    fn_code = function_code(code, fn_node.name)
    # The file and the linecache entry go when the code does (its nested functions' code
    # objects are its constants: they go with it).
    weakref.finalize(fn_code, _forget, filename)
    return fn_code


def _forget(filename: str) -> None:
    linecache.cache.pop(filename, None)
    with contextlib.suppress(OSError):
        os.remove(filename)


def instantiate(
    code: types.CodeType, fn: types.FunctionType, runtime_module, skip: tuple[str, ...] = ()
) -> types.FunctionType:
    """A function running `code` with `fn`'s globals, closure cells, defaults and metadata."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cells[RUNTIME] = types.CellType(runtime_module)
    closure = tuple(cells[name] for name in code.co_freevars)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    new.__module__ = fn.__module__
    new.__annotations__ = dict(getattr(fn, "__annotations__", {}))
    new.__dict__.update({k: v for k, v in fn.__dict__.items() if k not in skip})
    return new
