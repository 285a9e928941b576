"""StagingError and the source maps that let runtime errors name the user's file:line.

Each generated file ends with its source map (`source_map_footer`): which user line every
generated line comes from. Runtime operators remember the frame that called them and, on error,
look its line up there. An exception leaving converted code is made to read as the user's code
ran (`clean`): in its traceback each frame of generated code becomes a frame at the user's
file:line it came from, the runtime's frames go, and generated places in JAX's messages are
mapped too; `TRANSPILER_SHOW_GENERATED_FRAMES=1` keeps the generated frames.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import linecache
import os
import re
import sys
import tokenize
import traceback
import types
import warnings
from typing import NoReturn


class StagingError(Exception):
    """Converted code cannot be staged as written: say which variable, where, and why."""


class OuterRangeRefused(StagingError):
    """A loop over a range that a staged loop around it made traced would not compute what it
    computes over the Python range (`for_stmt(outer_range=True)`): the loop around it runs
    unrolled instead."""


class TracerAsKey(StagingError):
    """A traced value was used where Python hashes it (a dict key, a set item, `in` a dict)."""


class TracerAsStatic(StagingError):
    """A traced value was used where JAX needs a Python value: a shape (`jnp.ones(i)`), a slice
    bound of a multi-dimensional index (`m[:, :i]`), a static argument (`jnp.tril(m, k=i)`)."""


def as_cannot_stage(error: BaseException, operators: bool = False) -> BaseException | None:
    """The "cannot stage" error `error` stands for, or None: Python's TypeError for hashing a
    tracer (`table[i]` with a traced `i`), and JAX's TypeError, ValueError or IndexError for a
    tracer where it needs a Python value (a shape), mean the code needs a Python value there, as
    JAX's own errors for a tracer where a value is needed do; raised while tracing, they are
    never the program's to raise (nor a user's `except TypeError` to catch). `operators`: an
    operator's TypeError naming a tracer counts too (`p * i` of a tuple `p`), where the tracer
    may be a loop's item that runs as a Python value unrolled; where the error is the
    program's, the unrolled loop raises it at its line."""
    if isinstance(error, StagingError):
        return None
    text = str(error)
    if isinstance(error, TypeError) and text.startswith("unhashable type") and "Tracer" in text:
        found = TracerAsKey(
            f"a traced value is used as a dict key or set item{_where(error)}: the staged code "
            "needs a Python value there. Index an array instead (jnp.asarray of the "
            "table's values), or keep the value Python (a static argument)."
        )
    elif isinstance(error, (TypeError, ValueError, IndexError, OverflowError)) and (
        _tracer_for_static(error)
        or (operators and (_operator_of_tracer(error) or _traced_index(error)))
    ):
        what = (
            "a Python int that no int32 holds meets a traced value"
            if isinstance(error, OverflowError)
            else "a traced value is used where JAX needs a Python value"
        )
        found = TracerAsStatic(
            f"{what}{_where(error)}: {text.splitlines()[0]} Keep the value Python there: a loop "
            "index of a `for` over a range is a Python int where the loop runs unrolled; a "
            "function argument can be static (`static_argnames`)."
        )
    else:
        return None
    found.__cause__ = error
    return found


def _where(error: BaseException) -> str:
    """` (file:line: code)` of the user's line `error` passed through, or ''."""
    where = user_frames_note(error.__traceback__)
    return f" ({where.removeprefix('while running converted code at ')})" if where else ""


# Python's TypeErrors for an operator its operands do not support (a tracer one of them).
_OPERATOR_ERRORS = (
    "unsupported operand type",
    "can only concatenate",
    "can't multiply sequence",
    "bad operand type",
    "not supported between instances of",
)


def _operator_of_tracer(error: BaseException) -> bool:
    """Whether `error` is Python's TypeError for an operator a tracer is an operand of."""
    text = str(error)
    return (
        isinstance(error, TypeError)
        and "Tracer" in text
        and any(words in text for words in _OPERATOR_ERRORS)
    )


def _traced_index(error: BaseException) -> bool:
    """Whether `error` (a TypeError or IndexError) was raised in a `__getitem__` given a
    traced index: a Python sequence class read at a loop's traced index (`model.layers[i]` of
    NNX's `List`: "Invalid index type"), which the loop unrolled reads at a Python int."""
    if not isinstance(error, (TypeError, IndexError)):
        return False
    from jax.core import Tracer  # (here: this module is imported before JAX is needed)

    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "__getitem__" and code.co_argcount >= 2:
            key = tb.tb_frame.f_locals.get(code.co_varnames[1])
            if isinstance(key, Tracer):
                return True
        tb = tb.tb_next
    return False


def _tracer_for_static(error: BaseException) -> bool:
    """Whether `error` is JAX's for a tracer where it needs a concrete value (a shape, a static
    slice bound, a hashable static argument), naming the tracer, or for a Python int too large
    for the traced value it meets (an OverflowError); or a C function's given a tracer."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_code.co_filename if tb is not None else ""
    if isinstance(error, OverflowError):  # a Python int no int32 holds, met with a traced value
        return where.startswith(_JAX_DIRECTORIES)
    text = str(error)
    if "Tracer" not in text or any(words in text for words in _OPERATOR_ERRORS):
        return False  # `s + "oops"` of a traced `s`: an operator's, the program's to raise
    # Raised inside JAX; by a C function the runtime called (see `raised_by_callee`), or one
    # generated code called (`np.zeros(i)`): no Python frame of its own.
    return (
        where.startswith(_JAX_DIRECTORIES)
        or getattr(error, "_transpiler_callee", False)
        or where.endswith(GENERATED_SUFFIX)
    )


def python_error(error: Exception) -> Exception:
    """Marks an exception the runtime raises on purpose, as Python would (`ld` of an unbound
    name, `range(2.5)`): raised while tracing a staged branch, it is the branch's to raise."""
    error._transpiler_python = True
    return error


def python_call(fn, /, *args, **kwargs):
    """`fn(*args, **kwargs)` on the program's behalf (a builtin the program calls: `int(s)`):
    what it raises is the program's, to raise where that code runs (see `is_users`), also where
    `fn` has no Python frame of its own to tell."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        raised_by_callee(e)
        raise


def raised_by_callee(error: Exception) -> None:
    """Marks `error` the program's (see `python_error`) where, caught in the runtime frame that
    called a function for the program, its traceback ends in that frame: the callee raised it
    with no Python frame of its own (`math.sqrt(-1)`, `len(3)`). Unless it names a tracer
    (`np.zeros(n)` of a traced `n`): that one says the code needs a Python value there."""
    tb = error.__traceback__
    if tb is not None and tb.tb_next is None:
        if "Tracer" in str(error):
            error._transpiler_callee = True  # see `_tracer_for_static`
        else:
            python_error(error)


def is_users(error: Exception) -> bool:
    """Whether `error`, raised while tracing, is what the user's code raises as Python would (a
    `raise`, an IndexError, a shape error in a JAX call) rather than a fault of this project:
    the innermost frame it passed through that is not JAX's or NumPy's is the user's (or
    generated code), or the runtime raised it on purpose (`python_error`). Never a
    RecursionError: tracing both branches of every staged `if` runs a recursion on a traced
    value to Python's limit, which the program, run, never meets (and deferred to when a branch
    runs, each level would be traced again: exponential in the depth)."""
    if isinstance(error, RecursionError):
        return False
    if getattr(error, "_transpiler_python", False):
        return True
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    for filename in reversed(frames):
        if filename.startswith(_LIBRARY_DIRECTORIES):
            continue
        return not filename.startswith(_OWN_DIRECTORIES)
    return True


def _directory_of(module) -> str:
    return os.path.dirname(os.path.realpath(module.__file__)) + os.sep


def _own_directories() -> tuple[str, ...]:
    """`runtime/` and `transpiler/`, as imported and with links resolved."""
    found = []
    for here in (os.path.dirname(os.path.abspath(__file__)), _directory_of(sys.modules[__name__])):
        here = here.rstrip(os.sep)
        found += [here + os.sep, os.path.join(os.path.dirname(here), "transpiler") + os.sep]
    return tuple(dict.fromkeys(found))


_OWN_DIRECTORIES = _own_directories()
"""Where the runtime's and the transpiler's own code lives: never the user's frames."""
_LIBRARY_DIRECTORIES = tuple(_directory_of(__import__(name)) for name in ("jax", "jaxlib", "numpy"))
_JAX_DIRECTORIES = _LIBRARY_DIRECTORIES[:2]


GENERATED_SUFFIX = ".astgraph.py"
"""How the names of generated files end: `model_step_3.astgraph.py`."""

_MAP_MARK = "# astgraph source map: "


def source_map_footer(
    lines: dict[int, tuple[str, int]], return_values: dict[str, tuple[str, list[str]]]
) -> str:
    """The last line of a generated file: which user line each generated line comes from, and
    what error messages say about its functions' return-value variables. The runtime reads it
    back through `linecache` when it needs to name the user's line."""
    data = {"lines": {str(k): list(v) for k, v in lines.items()}, "returns": return_values}
    return _MAP_MARK + json.dumps(data, separators=(",", ":")) + "\n"


def is_generated(filename: str) -> bool:
    """Whether `filename` holds code the transpiler generated."""
    return filename.endswith(GENERATED_SUFFIX)


def _source_map(filename: str) -> dict | None:
    if not is_generated(filename):
        return None
    lines = linecache.getlines(filename)
    if not lines or not lines[-1].startswith(_MAP_MARK):
        return None
    return json.loads(lines[-1][len(_MAP_MARK) :])


def user_location(filename: str, lineno: int) -> tuple[str, int] | None:
    """The user's (file, line) behind a line of generated code, or None for other code."""
    found = _source_map(filename)
    if found is None:
        return None
    lines = {int(k): tuple(v) for k, v in found["lines"].items()}
    best = max((line for line in lines if line <= lineno), default=None)
    return lines[best] if best is not None else None


def calling_line() -> str | None:
    """`file:line` of the innermost line of converted code running now (the user's line behind
    it), for a message raised from the runtime; None outside converted code."""
    found = _calling_frame()
    if found is None:
        return None
    _, (filename, lineno) = found
    return f"{_display(filename)}:{lineno}"


def _calling_frame():
    """(the frame of converted code running now, innermost, and its user's (file, line))."""
    frame = sys._getframe(2)
    while frame is not None:
        found = user_location(frame.f_code.co_filename, frame.f_lineno)
        if found is not None:
            return frame, found
        frame = frame.f_back
    return None


def warn_at_user_line(message: str, stacklevel: int) -> None:
    """A UserWarning attributed to the user's line behind the converted code running now (not
    to the generated file), shown once per line as `warnings.warn` would (the registry of the
    code's module); where there is none, to the caller `stacklevel` frames up."""
    found = _calling_frame()
    if found is None:
        warnings.warn(message, stacklevel=stacklevel + 1)
        return
    frame, (filename, lineno) = found
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    module = frame.f_globals.get("__name__", "")
    warnings.warn_explicit(message, UserWarning, filename, lineno, module, registry)


def _display(filename: str) -> str:
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith(os.pardir) else rel


def _without_comment(line: str) -> str:
    """`line` without its trailing `# comment` (a `#` inside a string stays)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):  # a line of a statement that goes on
        tokens = []
    for token in tokens:
        if token.type == tokenize.COMMENT:
            return line[: token.start[1]]
    return line


class Site:
    """Where a runtime operator was called from, and what construct it stands for."""

    __slots__ = ("construct", "_generated")

    def __init__(self, construct: str, depth: int = 2):
        self.construct = construct
        # The frames of generated code it was called from, and their lines now: a frame's
        # line moves on, and a message may be made later (a derivative's rule, run by JAX).
        generated = []
        frame: types.FrameType | None = sys._getframe(depth)
        while frame is not None:
            if is_generated(frame.f_code.co_filename):
                generated.append((frame.f_code.co_filename, frame.f_lineno))
            frame = frame.f_back
        self._generated = generated

    def return_value(self, name: str) -> tuple[str, list[str]] | None:
        """(function, [its returns]) if `name` is the return-value variable of generated code."""
        for filename, _ in self._generated:
            found = _source_map(filename)
            if found is not None:
                returned = found["returns"].get(name)
                return None if returned is None else tuple(returned)
        return None

    def location(self) -> str | None:
        """The user's `file:line` of the construct, if it is in converted code."""
        for filename, lineno in self._generated:
            found = user_location(filename, lineno)
            if found is not None:
                return f"{_display(found[0])}:{found[1]}"
        return None

    def source_line(self) -> str | None:
        """The user's line of the construct, as written (stripped), if it is in converted code
        and its file can be read."""
        for filename, lineno in self._generated:
            found = user_location(filename, lineno)
            if found is not None:
                line = _without_comment(linecache.getline(found[0], found[1])).strip()
                return line or None
        return None

    def __str__(self) -> str:
        location = self.location()
        return f"{location}, {self.construct}" if location else self.construct


def user_frames_note(tb: types.TracebackType | None) -> str | None:
    """For an exception from converted code: the user's line it was raised at, as a note."""
    found = None
    called_converted = False  # the frame before ran a converted function (`_call_staging`)
    while tb is not None:
        code = tb.tb_frame.f_code
        filename = code.co_filename
        if _STAND_IN in code.co_names:  # generated code's frame, as `user_traceback` made it
            found = (filename, tb.tb_lineno)
        elif called_converted and not is_generated(filename) and not is_own(filename):
            # A converted function that runs the user's code as written (there was nothing to
            # convert in it: `transpiler.straight_line`): the user's own frame.
            found = (filename, tb.tb_lineno)
        else:
            found = user_location(filename, tb.tb_lineno) or found
        called_converted = code.co_name == "_call_staging" and is_own(filename)
        tb = tb.tb_next
    if found is None:
        return None
    filename, lineno = found
    text = linecache.getline(filename, lineno).strip()
    return f"while running converted code at {_display(filename)}:{lineno}: {text}"


_REVERSE_WHILE = "Reverse-mode differentiation does not work for lax.while_loop"


def fix_note(error: BaseException) -> str | None:
    """What to do about a JAX error that converted code can avoid, as a note; None otherwise."""
    if _REVERSE_WHILE in str(error):
        return (
            "the lax.while_loop without a reverse-mode derivative is in code called as it is "
            "(a library function, or one marked do_not_convert): converted code's own loops, "
            "Python `while`s and the `lax.while_loop`/`fori_loop` it calls, are "
            "reverse-differentiable. Write that loop in the converted function, or call it "
            "through converted code, or use jax.jvp/jax.jacfwd (forward mode) for it."
        )
    import jax  # noqa: PLC0415 - this module is imported before JAX is needed

    if isinstance(error, jax.errors.TracerIntegerConversionError):
        return (
            "a traced int is used as a Python index or count (`items[i]` of a Python list or "
            "tuple, `[0] * n`): Python containers cannot be indexed by a value the program "
            "computes. Make the list an array (jnp.asarray(items), jnp.stack(items)) and index "
            "that, or keep the index Python (a `for` over a range, a static argument)."
        )
    if isinstance(error, jax.errors.TracerBoolConversionError):
        return (
            "Python's truth test of a traced value, in code that is not converted (a library "
            "function such as heapq's, the `if` of a generator expression, or a comparison a "
            "builtin makes): write the choice with jnp.where, or convert the function that "
            "makes it (transpiler.convert)."
        )
    if isinstance(error, jax.errors.ConcretizationTypeError):
        return (
            "a traced value is used where Python needs a number (`float(x)` or `math.sqrt(x)`, "
            "in code that is not converted or a C function): use the jax.numpy function "
            "(jnp.sqrt(x), x.astype(float)), or make the value static (static_argnames)."
        )
    if isinstance(error, RecursionError):
        return (
            "if a traced value ends this recursion (`if n == 0: return x` with a traced `n`), "
            "it never ends while it is traced: both branches of a staged `if` are traced, the "
            "recursive call's too. Make the value that ends it Python (a static argument), or "
            "write the recursion as a loop."
        )
    return None


SHOW_GENERATED_FRAMES = "TRANSPILER_SHOW_GENERATED_FRAMES"
"""The environment variable that keeps generated code's frames in tracebacks (`=1`)."""


def showing_generated_frames() -> bool:
    """Whether tracebacks keep the frames of generated code (`TRANSPILER_SHOW_GENERATED_FRAMES`
    set to anything but `0` when the error is raised)."""
    return os.environ.get(SHOW_GENERATED_FRAMES, "0") not in ("", "0")


def own_directories() -> tuple[str, ...]:
    """The directories of `runtime/` and `transpiler/` (each ending with a separator)."""
    return _OWN_DIRECTORIES


def is_own(filename: str) -> bool:
    """Whether `filename` is the runtime's or the transpiler's own code."""
    return filename.startswith(_OWN_DIRECTORIES)


_STAND_IN = "rt__here"  # the one name the code of a stand-in frame reads


class _Here(Exception):  # noqa: N818 - raised only to be caught, for its traceback
    """Raised by a stand-in frame at the user's line (see `_frame_at`)."""


def _frame_at(filename: str, lineno: int, name: str, frame: types.FrameType) -> types.TracebackType:
    """A traceback entry of a stand-in frame executing `filename:lineno`, in function `name`,
    with the globals and locals of `frame` (for debuggers): what the frame of generated code
    `frame` runs, as the user wrote it.

    Its position spans the whole line, so traceback printers underline nothing in it.
    """
    text = linecache.getline(filename, lineno).rstrip()
    start = len(text) - len(text.lstrip())
    end = len(text.encode("utf-8")) if text else 0
    here = {"lineno": lineno, "end_lineno": lineno, "col_offset": start, "end_col_offset": end}
    raised = ast.Raise(exc=ast.Name(id=_STAND_IN, ctx=ast.Load(), **here), cause=None, **here)
    code = compile(ast.Module(body=[raised], type_ignores=[]), filename, "exec")
    renamed = {"co_name": name}
    if sys.version_info >= (3, 11):
        renamed["co_qualname"] = name
    code = code.replace(**renamed)
    namespace = frame.f_globals
    if "__builtins__" not in namespace:  # exec would add it to the user's dict
        namespace = {**namespace, "__builtins__": builtins}
    try:
        exec(code, namespace, {**frame.f_locals, _STAND_IN: _Here()})
    except _Here as e:
        return e.__traceback__.tb_next
    raise AssertionError("unreachable: the stand-in frame raises")


_CALLING = """
def rt__stand_in(rt__here):
    rt__next(rt__here)
"""
_RAISING = """
def rt__stand_in(rt__here):
    raise rt__here
"""


def _stand_in_function(filename: str, lineno: int, name: str, then) -> types.FunctionType:
    """A function `name` whose one statement is at `filename:lineno`, spanning the line: it
    calls `then(error)`, or, if `then` is None, raises `error`."""
    text = linecache.getline(filename, lineno).rstrip()
    start = len(text) - len(text.lstrip())
    end = len(text.encode("utf-8")) if text else 0
    tree = ast.parse(_RAISING if then is None else _CALLING)
    (definition,) = tree.body
    definition.lineno = definition.end_lineno = lineno
    for node in ast.walk(definition.body[0]):
        if hasattr(node, "lineno"):
            node.lineno = node.end_lineno = lineno
            node.col_offset, node.end_col_offset = start, end
    namespace = {"__builtins__": builtins, "rt__next": then}
    exec(compile(tree, filename, "exec"), namespace)
    function = namespace["rt__stand_in"]
    renamed = {"co_name": name}
    if sys.version_info >= (3, 11):
        renamed["co_qualname"] = name
    function.__code__ = function.__code__.replace(**renamed)
    return function


def raise_at_users_lines(error: BaseException, tb: types.TracebackType | None) -> NoReturn:
    """Raises `error` from frames at the user's lines that `tb` went through (its traceback when
    it was first raised, while traced), each called by the one before, the innermost last.

    For an error a staged branch raised while traced, raised again when the program runs that
    branch: printers that follow each frame's caller rather than the traceback (XLA's report
    of a failed host callback prints the stack of the innermost frame) end at the user's lines
    too, and the traceback shows them after the host callback's frames.
    """
    places = []
    for frame, lineno in traceback.walk_tb(user_traceback(tb, show_generated=False)):
        filename = frame.f_code.co_filename
        if not filename.startswith(_LIBRARY_DIRECTORIES) and not is_own(filename):
            places.append((filename, lineno, frame.f_code.co_name))
    then = None
    for filename, lineno, name in reversed(places):
        then = _stand_in_function(filename, lineno, name, then)
    if then is None:
        raise error.with_traceback(None)
    then(error.with_traceback(None))
    raise AssertionError("unreachable: the innermost stand-in raises")


def _function_spans(filename: str) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of every function and lambda in `filename`."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return []
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            spans.append((node.lineno, node.end_lineno, node.name))
        elif isinstance(node, ast.Lambda):
            spans.append((node.lineno, node.end_lineno, "<lambda>"))
    return spans


class _Functions:
    """The user's function at a file:line (innermost), for the frames standing in for generated
    code: named after the user's function, not after the generated `if_true` or `loop_body`."""

    def __init__(self):
        self._spans: dict[str, list[tuple[int, int, str]]] = {}

    def at(self, filename: str, lineno: int, name: str) -> str:
        """The name of the user's function at `filename:lineno` that generated code named
        `name` runs: `name` itself if a function of that name spans the line (the generated
        function keeps the user's name), else the innermost one (`name` is a generated
        `if_true`), else `name`."""
        if filename not in self._spans:
            self._spans[filename] = _function_spans(filename)
        inside = [s for s in self._spans[filename] if s[0] <= lineno <= s[1]]
        if not inside or name in {s[2] for s in inside}:
            return name
        return max(inside, key=lambda s: (s[0], -s[1]))[2]


def user_traceback(
    tb: types.TracebackType | None, *, show_generated: bool | None = None
) -> types.TracebackType | None:
    """`tb` as the user's code ran: the frames of `runtime/` and `transpiler/` dropped, and each
    frame of generated code replaced by one at the user's file:line it comes from (kept as it
    is with `show_generated`, which defaults to `showing_generated_frames()`).

    The frames standing in for generated code hold its globals and locals, so a post-mortem
    debugger shows the user's variables there.
    """
    if show_generated is None:
        show_generated = showing_generated_frames()
    functions = _Functions()
    kept: list[tuple[types.FrameType, int, int]] = []
    while tb is not None:
        frame = tb.tb_frame
        filename = frame.f_code.co_filename
        if is_generated(filename) and not show_generated:
            found = user_location(filename, tb.tb_lineno)
            if found is not None:
                name = functions.at(*found, frame.f_code.co_name)
                last = kept[-1][0].f_code if kept else None
                if last is None or (last.co_filename, kept[-1][2], last.co_name) != (*found, name):
                    entry = _frame_at(*found, name, frame)
                    kept.append((entry.tb_frame, entry.tb_lasti, entry.tb_lineno))
        elif not is_own(filename):
            kept.append((frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    result = None
    for frame, lasti, lineno in reversed(kept):
        result = types.TracebackType(result, frame, lasti, lineno)
    return result


# A place in generated code as JAX's messages write it: `/tmp/astgraph-x/f_3.astgraph.py:12:4`,
# maybe followed by the function's name in parentheses.
_GENERATED_PLACE = re.compile(
    r"(?P<file>[^\s'\"():]+" + re.escape(GENERATED_SUFFIX) + r"):(?P<line>\d+)(?::\d+)?"
    r"(?P<name> \([^()\s]*\))?"
)


def user_text(text: str) -> str:
    """`text` (a message) with each place in generated code written as the user's file:line,
    and the function named there (`(if_true)`) as the user's function."""
    if GENERATED_SUFFIX not in text:
        return text
    functions = _Functions()

    def mapped(match: re.Match) -> str:
        found = user_location(match["file"], int(match["line"]))
        if found is None:
            return match[0]
        place = f"{_display(found[0])}:{found[1]}"
        if match["name"] is None:
            return place
        return f"{place} ({functions.at(*found, match['name'][2:-1])})"

    return _GENERATED_PLACE.sub(mapped, text)


def _is_internal(error: BaseException) -> bool:
    """Whether `error` is one the runtime raises for itself and catches (a retrace request):
    never the user's to see, even as the exception another was raised while handling."""
    module = type(error).__module__.split(".")[0]
    return module in ("runtime", "transpiler") and not isinstance(error, StagingError)


def _same(a: BaseException, b: BaseException) -> bool:
    """Whether `a` and `b` are one error raised twice: same type, the same arguments (compared
    by identity, or as text: arguments may be arrays)."""
    if type(a) is not type(b) or len(a.args) != len(b.args):
        return False
    return all(x is y or (type(x) is str and x == y) for x, y in zip(a.args, b.args))


def clean(error: BaseException, *, show_generated: bool | None = None) -> None:
    """Makes `error`, raised through converted code, read as the user's code.

    For it and the exceptions chained to it (JAX's "stack trace before transformation" among
    them): the traceback becomes `user_traceback(...)`, places in generated code in a message
    become the user's (`user_text`), and an internal exception it was raised while handling is
    not shown ("During handling of the above exception..."), nor `error` itself as it was
    first raised while traced.
    """
    if show_generated is None:
        show_generated = showing_generated_frames()
    seen: set[int] = set()
    todo = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.__traceback__ = user_traceback(e.__traceback__, show_generated=show_generated)
        if not show_generated and e.args and isinstance(e.args[0], str):
            text = user_text(e.args[0])
            if text != e.args[0]:
                e.args = (text, *e.args[1:])
        context = e.__context__
        if context is not None and e.__cause__ is None and _is_internal(context):
            e.__suppress_context__ = True
        elif context is not None and context is not error and _same(context, error):
            # The exception a staged branch raised while traced, which the program raises
            # again when it runs that branch (as `error`): said once is enough.
            e.__suppress_context__ = True
        todo += [e.__cause__, None if e.__suppress_context__ else context]
