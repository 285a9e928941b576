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
import queue
import shutil
import tempfile
import threading
import types
import weakref
from collections.abc import Callable
from typing import NamedTuple

import gast

from transpiler import origins, printing, structure, templates, trees
from transpiler.naming import RUNTIME

_counter = itertools.count()
_directory: str | None = None


def _generated_path(name: str, suffix: str) -> str:
    """A real file for generated code, so every traceback printer and debugger can show it."""
    global _directory
    if _directory is None:
        _directory = tempfile.mkdtemp(prefix="astgraph-")
        atexit.register(_remove_directory, _directory)
    return os.path.join(_directory, f"{name}_{next(_counter)}{suffix}")


class _Files:
    """Writes and removes generated files in order, on a thread of its own.

    Creating a file costs 0.2-0.3 ms on some file systems (this project's CI machine among
    them), 5-10% of converting a small function; the code never reads the file (it is compiled
    from the text, and tracebacks read `linecache`, which holds the text too), so converting
    does not wait for it. After a `fork`, the child starts a thread of its own.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._pid: int | None = None
        self._lock = threading.Lock()

    def write(self, filename: str, text: str) -> None:
        self._submit(filename, text)

    def remove(self, filename: str) -> None:
        self._submit(filename, None)

    def wait(self, timeout: float | None = None) -> None:
        """Returns once every write and removal asked for so far is done (or after `timeout`
        seconds)."""
        done = threading.Event()
        self._submit(None, done)
        done.wait(timeout)

    def _submit(self, filename: str | None, payload) -> None:
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._jobs = queue.SimpleQueue()  # a forked child's queue has no reader
                    threading.Thread(
                        target=self._work, args=(self._jobs,), name="astgraph-files", daemon=True
                    ).start()
                    self._pid = os.getpid()
        self._jobs.put((filename, payload))

    @staticmethod
    def _work(jobs: queue.SimpleQueue) -> None:
        while True:
            filename, payload = jobs.get()
            if filename is None:
                payload.set()
            elif payload is None:
                with contextlib.suppress(OSError):
                    os.remove(filename)
            else:
                with contextlib.suppress(OSError), open(filename, "w", encoding="utf-8") as f:
                    f.write(payload)


_files = _Files()


def _remove_directory(directory: str) -> None:
    _files.wait(timeout=10.0)  # no file may be written into it after it is gone
    shutil.rmtree(directory, ignore_errors=True)


def wait_for_files() -> None:
    """Returns once every generated file written so far is on disk (and every removed one
    gone)."""
    _files.wait()


def unparse(node: gast.AST) -> str:
    """Python source for a gast tree, printed by the standard library's `ast.unparse`."""
    return printing.numbered(to_ast(node)).text


def to_ast(node: gast.AST) -> ast.AST:
    """The standard library's tree for a gast tree (a new one: `node` is left as it is), for
    printing: its nodes have no line numbers."""
    return trees.to_unplaced_ast(node)


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


def _skeleton_around(
    module: gast.Module, fn_node: gast.FunctionDef, printed: ast.AST
) -> ast.Module:
    """`to_ast(module)`, where `module` holds `fn_node`, whose `ast` tree is `printed`: only
    the rest of the module is converted."""
    placeholder = gast.Pass()
    _swap(module.body, fn_node, placeholder)
    try:
        skeleton = to_ast(module)
    finally:
        _swap(module.body, placeholder, fn_node)
    _swap(skeleton.body, None, printed)  # the skeleton's only `pass` is the placeholder
    return skeleton


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
    """`'Model'` for a method `Model.__call__` (or `f.<locals>.Model.step`), else None (also
    for a function a comprehension or a generator expression makes: `<listcomp>.<lambda>`)."""
    parts = qualname.split(".")
    return parts[-2] if len(parts) >= 2 and not parts[-2].startswith("<") else None


def function_code(module_code: types.CodeType, name: str) -> types.CodeType:
    """The code object of the function `name` in a compiled `factory_module` (the shallowest)."""
    level = [module_code]
    while level:
        found = [c for c in level if c.co_name == name and c is not module_code]
        if found:
            return found[0]
        level = [c for code in level for c in code.co_consts if isinstance(c, types.CodeType)]
    raise LookupError(f"no function {name!r} in the compiled module")


class Compiled(NamedTuple):
    code: types.CodeType  # the function's
    source: str  # the function's definition, printed alone


def compile_function(
    fn_node: gast.FunctionDef,
    freevars: tuple[str, ...],
    user_filename: str,
    qualname: str,
    *,
    suffix: str = ".py",
    footer: Callable[[dict[int, tuple[str, int]]], str] = lambda line_map: "",
    flags: int = 0,
    generated: frozenset[str] = frozenset(),
) -> Compiled:
    """Compiles a converted function definition into a generated file.

    Args:
      fn_node: the converted definition.
      freevars: the names of the original function's closure variables.
      user_filename: the file the function comes from (named in the header).
      qualname: its qualified name (a method compiles inside a class of that name).
      suffix: how the generated file's name ends.
      footer: given the line map of the file (generated line -> user file, line), the text that
        ends the file.
      flags: the compiler flags of the user's `from __future__` imports (`parsing.future_flags`):
        the code compiles under those, not this module's.
      generated: the names of the functions conversion made (`if_true`, `loop_body`): the
        functions the user defines inside them keep the qualified names Python gives them
        (`f.<locals>.inner`, not `f.<locals>.if_true.<locals>.inner`).

    Returns:
      The code object of the function and its printed definition.
    """
    module = factory_module(fn_node, freevars, qualname)
    printed = to_ast(fn_node)
    skeleton = _skeleton_around(module, fn_node, printed)
    filename = _generated_path(fn_node.name, suffix)
    header = f"# Generated by astgraph from {user_filename}\n"
    numbered = printing.numbered(skeleton, first_line=header.count("\n") + 1)
    body = numbered.text
    code = None
    if numbered.complete:  # compiled from the tree, which now has the positions of the text
        try:
            code = compile(skeleton, filename, "exec", flags=flags, dont_inherit=True)
        except (TypeError, ValueError):  # a node the count missed
            pass
    if code is None:  # the text parsed, for its positions
        skeleton = ast.parse(header + body)
        code = compile(skeleton, filename, "exec", flags=flags, dont_inherit=True)
    line_map = {
        line: (loc.filename, loc.lineno) for line, loc in origins.line_map(module, skeleton).items()
    }
    source = f"{header}{body}\n{footer(line_map)}"
    _files.write(filename, source)
    # Also in linecache, should the file be gone by the time a traceback is printed.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    fn_code = user_qualnames(function_code(code, fn_node.name), generated)
    # The file and the linecache entry go when the code does (its nested functions' code
    # objects are its constants: they go with it).
    weakref.finalize(fn_code, _forget, filename)
    definition = None
    if numbered.complete and not numbered.multiline_strings:
        definition = _definition_in(body, fn_node.name)
    return Compiled(fn_code, printing.numbered(printed).text if definition is None else definition)


def user_qualnames(code: types.CodeType, generated: frozenset[str]) -> types.CodeType:
    """`code` with the qualified names of the functions, classes and lambdas defined in it, at
    any depth, as the user's code gives them: less the functions among `generated` that
    conversion moved them into (a user's error message and `__qualname__` name
    `f.<locals>.inner`, not `f.<locals>.if_true.<locals>.inner`)."""
    if not generated:
        return code
    qualnames = {q for c in _code_objects(code) for q in _qualnames_made(c)}
    return _renamed(code, {q: _without_generated(q, generated) for q in qualnames})


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _qualname(code: types.CodeType) -> str | None:
    """A code object's qualified name: its own (Python 3.11 on), else None."""
    return getattr(code, "co_qualname", None)


def _qualnames_made(code: types.CodeType) -> set[str]:
    """The qualified names `code` gives what it defines: its own, and before Python 3.11 the
    string constants MAKE_FUNCTION takes, those that name a function it holds the code of."""
    found = {q for q in (_qualname(code),) if q is not None}
    inner = {c.co_name for c in code.co_consts if isinstance(c, types.CodeType)}
    found |= {
        c
        for c in code.co_consts
        if isinstance(c, str) and ".<locals>." in c and c.rsplit(".", 1)[-1] in inner
    }
    return found


def _renamed(code: types.CodeType, names: dict[str, str]) -> types.CodeType:
    """`code` with its qualified name and its string constants that are qualified names (a
    class body's `__qualname__`; before Python 3.11, MAKE_FUNCTION's argument) renamed by
    `names`, at any depth; a user's string that is none of them stays as it is."""
    consts, changed = [], False
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            new = _renamed(const, names)
        elif isinstance(const, str) and names.get(const, const) != const:
            new = names[const]
        else:
            new = const
        changed = changed or new is not const
        consts.append(new)
    replaced = {"co_consts": tuple(consts)} if changed else {}
    qualname = _qualname(code)
    if qualname is not None and names.get(qualname, qualname) != qualname:
        replaced["co_qualname"] = names[qualname]
    return code.replace(**replaced) if replaced else code


def _without_generated(qualname: str, generated: frozenset[str]) -> str:
    """`qualname` less its `<generated>.<locals>` parts."""
    parts, kept, i = qualname.split("."), [], 0
    while i < len(parts):
        if parts[i] in generated and i + 1 < len(parts) and parts[i + 1] == "<locals>":
            i += 2
            continue
        kept.append(parts[i])
        i += 1
    return ".".join(kept)


def _definition_in(body: str, name: str) -> str | None:
    """The definition of `name`, the last statement of the printed factory `body`, as
    `ast.unparse` prints it alone: its lines, less the factory's indentation (where no string
    spans lines: see `printing.Numbered`)."""
    lines = body.split("\n")
    for i, line in enumerate(lines):
        text = line.lstrip(" ")
        if text.startswith((f"def {name}(", f"async def {name}(")):
            indent = len(line) - len(text)
            return "\n".join(line[indent:] for line in lines[i:])
    return None


def _forget(filename: str) -> None:
    linecache.cache.pop(filename, None)
    _files.remove(filename)


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
