"""The command line: `astgraph` (or `python -m transpiler`).

    astgraph demo                                     convert and run the sample programs
    astgraph source model.py::step --source-map       the generated source, with user lines
    astgraph graph model.py::step --args 'f32[8,16], i32[]' --format summary
    astgraph export model.py::step --args 'f32[8,16], i32[]' -o step.bin
    astgraph run step.bin                             run it on random inputs (seeded)

Exit codes: 0 done; 1 the function cannot be converted, traced or exported; 2 bad input (a
missing file or function, malformed `--args`, a file that is not an artifact).
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import keyword
import os
import pathlib
import re
import sys
import tokenize
import traceback

DTYPES = {
    "bool": "bool",
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "c64": "complex64",
    "c128": "complex128",
}
_SHORT = {name: short for short, name in DTYPES.items()}
FORMATS = ("text", "hlo", "compiled", "dot", "svg", "summary")


class UsageError(Exception):
    """Bad input on the command line: reported in one line, exit code 2."""


def parse_specs(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """`'f32[8,16], i32[]'` -> `[("float32", (8, 16)), ("int32", ())]`.

    Raises:
      UsageError: an item is not `dtype[dims]` with a known dtype abbreviation.
    """
    if not text.strip():
        return []  # a function of no arguments
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    specs = []
    for n, item in enumerate(items, 1):
        item = item.strip()
        match = re.fullmatch(r"([a-z0-9]+)\[\s*(\d+(?:\s*,\s*\d+)*)?\s*,?\s*\]", item)
        if match is None or match.group(1) not in DTYPES:
            known = ", ".join(DTYPES)
            why = (
                f"unknown dtype {match.group(1)!r} (known: {known})"
                if match is not None
                else "expected a dtype and a shape in brackets, like f32[8,16] or i32[]"
            )
            raise UsageError(f"malformed --args {text!r}: item {n} {item!r}: {why}")
        dims = match.group(2)
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        specs.append((DTYPES[match.group(1)], shape))
    return specs


def format_spec(dtype: str, shape: tuple[int, ...]) -> str:
    """`("float32", (8, 16))` -> `'f32[8,16]'`."""
    return f"{_SHORT.get(dtype, dtype)}[{','.join(str(d) for d in shape)}]"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from transpiler import demo as demo_module

        demo_module.main(show_graph=not args.no_graph)
        return 0
    try:
        return _COMMANDS[args.command](args)
    except UsageError as e:
        print(f"astgraph {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `astgraph graph ... | head`: the reader has all it wants
        sys.stdout = open(os.devnull, "w")  # as Python advises for this case
        return 0
    except OSError as e:  # an output or artifact path that cannot be written or read
        print(f"astgraph {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the function cannot be converted, traced or run
        # In one message, with the notes that name the user's line; no traceback into the
        # library.
        notes = "".join(f"\n  {note}" for note in getattr(e, "__notes__", ()) if "----" not in note)
        print(f"astgraph {args.command}: {type(e).__name__}: {e}{notes}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="astgraph",
        description="Plain Python in, one XLA graph out.",
        epilog="Exit codes: 0 done, 1 the function cannot be converted, traced or exported, "
        "2 bad input.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="convert and run the sample programs")
    demo.add_argument("--no-graph", action="store_true", help="do not print the full jaxpr")

    source = commands.add_parser("source", help="print the generated source of a function")
    source.add_argument("target", help="FILE::FUNC (or FILE, with FUNC as the next argument)")
    source.add_argument("function", nargs="?", help=argparse.SUPPRESS)
    source.add_argument(
        "--source-map", action="store_true", help="end each statement with its user file:line"
    )
    source.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colours: auto (a terminal, NO_COLOR unset), always or never",
    )

    graph = commands.add_parser("graph", help="show the staged graph of a function")
    graph.add_argument("target", help="FILE::FUNC")
    graph.add_argument("--args", required=True, help="argument specs: 'f32[8,16], i32[]'")
    graph.add_argument("--format", choices=FORMATS, default="summary")
    graph.add_argument("-o", "--output", type=pathlib.Path, help="write here, not to stdout")

    export = commands.add_parser("export", help="export a function as a runnable artifact")
    export.add_argument("target", help="FILE::FUNC")
    export.add_argument("--args", required=True, help="argument specs: 'f32[8,16], i32[]'")
    export.add_argument("-o", "--output", type=pathlib.Path, required=True)
    export.add_argument(
        "--platforms", help="comma-separated, e.g. cpu,cuda (default: this machine's)"
    )
    export.add_argument("--prints", choices=("keep", "drop"), default="keep")
    export.add_argument(
        "--checks",
        choices=("keep", "drop"),
        default="keep",
        help="drop asserts, raises and run-time checks (changes what failing inputs give)",
    )
    export.add_argument("--description", default="")

    run = commands.add_parser("run", help="run an exported artifact on random inputs")
    run.add_argument("artifact", type=pathlib.Path)
    run.add_argument("--args", help="argument specs (default: the artifact's own)")
    run.add_argument("--seed", type=int, default=0)
    return parser


def _load_function(target: str, function: str | None = None):
    """The function named by `FILE::FUNC` (or `FILE` and `FUNC`), its module imported."""
    if function is None:
        if "::" not in target:
            raise UsageError(f"{target!r}: expected FILE::FUNC, e.g. model.py::step")
        target, function = target.rsplit("::", 1)
    path = pathlib.Path(target)
    if not path.is_file():
        raise UsageError(f"no such file: {target}")
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{target} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))  # as `python FILE` would: its imports work
    sys.modules.setdefault(name, module)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise UsageError(f"{target}:{e.lineno}: SyntaxError: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - the user's module raised as it was imported
        own = str(path.resolve())
        frames = [
            f for f in traceback.extract_tb(e.__traceback__) if os.path.abspath(f.filename) == own
        ]
        where = f"{target}:{frames[-1].lineno}: " if frames else f"{target}: "
        raise UsageError(f"{where}importing it raised {type(e).__name__}: {e}") from None
    fn = module
    for part in function.split("."):
        fn = getattr(fn, part, None)
    if fn is None or not callable(fn):
        raise UsageError(f"{target} has no function {function!r}")
    return fn


def _structs(specs: list[tuple[str, tuple[int, ...]]]) -> list:
    """`parse_specs` output as `jax.ShapeDtypeStruct`s (JAX imported only now)."""
    import jax
    import jax.numpy as jnp

    if any(dtype in _WIDE for dtype, _ in specs):
        jax.config.update("jax_enable_x64", True)  # f64/i64 arguments ask for 64-bit JAX
    return [jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)) for dtype, shape in specs]


_WIDE = frozenset({"float64", "int64", "uint64", "complex128"})  # need JAX's 64-bit mode


def _source(args) -> int:
    import transpiler

    fn = _load_function(args.target, args.function)
    try:
        text = transpiler.to_source(fn, source_map=args.source_map)
    except transpiler.ConversionError as e:
        print(f"ConversionError: {e}", file=sys.stderr)
        return 1
    if args.color == "always" or (args.color == "auto" and use_colour(sys.stdout, os.environ)):
        text = colourize(text)
    print(text)
    return 0


def _graph(args) -> int:
    import transpiler

    specs = parse_specs(args.args)  # bad input is reported before anything slow is imported
    fn = _load_function(args.target)
    g = transpiler.graph(fn)(*_structs(specs))
    views = {
        "text": g.text,
        "hlo": g.hlo,
        "compiled": g.compiled_text,
        "dot": g.dot,
        "svg": g.svg,
        "summary": lambda: str(g.summary()),
    }
    try:
        shown = views[args.format]()
    except transpiler.GraphvizError as e:
        print(f"GraphvizError: {e}", file=sys.stderr)
        return 1
    _write(shown, args.output)
    return 0


def _export(args) -> int:
    import transpiler
    from transpiler import exporting

    specs = parse_specs(args.args)
    fn = _load_function(args.target)
    platforms = None
    if args.platforms:
        platforms = tuple(p.strip() for p in args.platforms.split(",") if p.strip())
        try:
            exporting.check_platforms(platforms)
        except ValueError as e:  # bad input, said before anything is traced
            raise UsageError(f"--platforms {args.platforms}: {e}") from None
    try:
        artifact = transpiler.export(
            fn,
            *_structs(specs),
            platforms=platforms,
            prints=args.prints,
            checks=args.checks,
            description=args.description,
        )
    except transpiler.ExportError as e:
        print(f"ExportError: {e}", file=sys.stderr)
        print("(here the options are --prints drop and --checks drop)", file=sys.stderr)
        return 1
    artifact.save(args.output)
    print(
        f"wrote {args.output}: {_signature(artifact)} for {', '.join(artifact.platforms)}, "
        f"{len(bytes(artifact))} bytes"
    )
    return 0


def _run(args) -> int:
    import numpy as np

    import transpiler

    if not args.artifact.is_file():
        raise UsageError(f"no such file: {args.artifact}")
    header, _ = _checked_header(args.artifact)
    if any(spec["dtype"] in _WIDE for spec in header["in_specs"]):
        import jax

        jax.config.update("jax_enable_x64", True)  # before any array of its inputs is made
    artifact = transpiler.load(args.artifact)
    import jax

    # Its arguments' leaves (a pytree argument, a dict of parameters, is one leaf per array).
    leaves, tree = jax.tree_util.tree_flatten(artifact.in_specs)
    expected = [(s.dtype.name, tuple(s.shape)) for s in leaves]
    symbolic = any(not isinstance(d, int) for _, shape in expected for d in shape)
    if args.args is None and symbolic:
        raise UsageError(
            f"{args.artifact} takes ({', '.join(format_spec(*s) for s in expected)}), with "
            "symbolic dimensions: give the shapes to run it on with --args"
        )
    if args.args is not None:
        given = [(dtype, shape) for dtype, shape in parse_specs(args.args)]
        if not _fits(given, expected):
            raise UsageError(
                f"{args.artifact} takes ({', '.join(format_spec(*s) for s in expected)}); "
                f"--args gives ({', '.join(format_spec(*s) for s in given)})"
            )
        expected = given
    rng = np.random.default_rng(args.seed)
    inputs = [_random(rng, dtype, shape) for dtype, shape in expected]
    outputs = artifact(*jax.tree_util.tree_unflatten(tree, inputs))

    print(f"{_signature(artifact)}, random inputs (seed {args.seed}):")
    for i, value in enumerate(inputs):
        print(f"  in {i}  = {_show(value)}")
    for i, value in enumerate(jax.tree_util.tree_leaves(outputs)):
        print(f"  out {i} = {_show(value)}")
    return 0


def _fits(given, expected) -> bool:
    """Whether the (dtype, shape) specs `given` match `expected`, whose symbolic dimensions
    (`n`) take any size."""
    return len(given) == len(expected) and all(
        dtype == want_dtype
        and len(shape) == len(want)
        and all(not isinstance(w, int) or d == w for d, w in zip(shape, want))
        for (dtype, shape), (want_dtype, want) in zip(given, expected)
    )


def _checked_header(path: pathlib.Path):
    from transpiler import exporting

    try:
        return exporting.unpack(path.read_bytes(), str(path))
    except exporting.ArtifactError as e:
        raise UsageError(str(e)) from None


def _random(rng, dtype: str, shape):
    import jax.numpy as jnp

    dtype = jnp.dtype(dtype)  # bfloat16 too, which NumPy does not know by name
    kind = dtype.kind
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind in "iu":
        return rng.integers(0, 10, shape).astype(dtype)  # small: often a count or a bound
    if kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _show(value) -> str:
    import numpy as np

    array = np.asarray(value)
    text = np.array2string(array, precision=6, threshold=20, separator=", ")
    return f"{format_spec(array.dtype.name, array.shape)} {text}".replace("\n", " ")


def _signature(artifact) -> str:
    import jax

    ins = ", ".join(
        format_spec(s.dtype.name, tuple(s.shape))
        for s in jax.tree_util.tree_leaves(artifact.in_specs)
    )

    outs = ", ".join(
        format_spec(s.dtype.name, tuple(s.shape))
        for s in jax.tree_util.tree_leaves(artifact.out_specs)
    )
    return f"{artifact.header.get('function', '?')}({ins}) -> ({outs})"


def _write(text: str, output: pathlib.Path | None) -> None:
    if output is None:
        print(text.rstrip("\n"))
    else:
        output.write_text(text)


def use_colour(stream, environ) -> bool:
    """Colours when `stream` is a terminal and `NO_COLOR` is unset (or empty): no-color.org."""
    return bool(getattr(stream, "isatty", lambda: False)()) and not environ.get("NO_COLOR")


_RESET = "\033[0m"
_STYLES = {
    "keyword": "\033[1;34m",
    "runtime": "\033[36m",
    "string": "\033[32m",
    "comment": "\033[2m",
    "definition": "\033[1m",
}


def colourize(source: str) -> str:
    """`source` with ANSI colours: keywords, `rt__` operators, strings, comments (the source
    map), names being defined."""
    out, previous, last = [], (None, None), (1, 0)
    lines = source.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    for token in tokens:
        out.append(_between(lines, last, token.start))
        style = None
        if token.type == tokenize.COMMENT:
            style = "comment"
        elif token.type == tokenize.STRING:
            style = "string"
        elif token.type == tokenize.NAME and keyword.iskeyword(token.string):
            style = "keyword"
        elif token.type == tokenize.NAME and previous[1] in ("def", "class"):
            style = "definition"
        elif token.type == tokenize.NAME and (token.string == "rt__" or previous == ("rt__", ".")):
            style = "runtime"  # rt__.if_stmt
        text = token.string
        out.append(f"{_STYLES[style]}{text}{_RESET}" if style and text else text)
        previous = (previous[1], token.string)
        last = token.end
    return "".join(out)


def _between(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text from `start` to `end` ((row, col), rows from 1): what lies between
    two tokens (spaces, and the newlines tokenize reports as tokens of their own)."""
    (r0, c0), (r1, c1) = start, end
    if (r0, c0) >= (r1, c1):
        return ""
    if r0 == r1:
        return lines[r0 - 1][c0:c1] if r0 <= len(lines) else ""
    text = lines[r0 - 1][c0:] if r0 <= len(lines) else ""
    text += "".join(lines[r0 : r1 - 1])
    return text + (lines[r1 - 1][:c1] if r1 <= len(lines) else "")


_COMMANDS = {"source": _source, "graph": _graph, "export": _export, "run": _run}
