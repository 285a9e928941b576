"""Command line: `python -m transpiler demo` | `python -m transpiler source FILE.py FUNCTION`."""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transpiler", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="convert and run the sample programs")
    demo.add_argument("--no-graph", action="store_true", help="do not print the full jaxpr")
    source = commands.add_parser("source", help="print the generated source of a function")
    source.add_argument("file", type=pathlib.Path)
    source.add_argument("function", help="a function, or Class.method, defined in FILE")
    args = parser.parse_args(argv)

    if args.command == "demo":
        from transpiler import demo as demo_module

        demo_module.main(show_graph=not args.no_graph)
        return 0

    import transpiler

    spec = importlib.util.spec_from_file_location(args.file.stem, args.file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module
    for part in args.function.split("."):
        fn = getattr(fn, part, None)
    if fn is None:
        print(f"{args.file} has no function {args.function!r}", file=sys.stderr)
        return 2
    try:
        print(transpiler.to_source(fn))
    except transpiler.ConversionError as e:
        print(f"ConversionError: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
