"""Graph size of whole programs, converted, next to the same algorithm written with `lax`.

For every program of `programs_vs_lax.py` (its own and the samples'), both versions are lowered
with `jax.jit(f).lower(*args)` and their StableHLO is counted: operations in all (dead code is
gone by then: JAX drops it when it lowers), `while` and `case` (a `lax.cond`) among them, and
the kinds of operation whose counts differ (converted minus hand-written). The lowered program
is what XLA compiles: where the converted one has more operations, what they are says what the
conversion adds (a flag, a select, a clamp of an index).

    python benchmarks/graph_size.py [--only NAME]
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re

import jax
from programs_vs_lax import cases, cubic, fresh_module  # a sibling script: run as a script

import transpiler

_OPERATION = re.compile(r"\b(stablehlo\.[a-z_]+)\b")


def operations(text: str) -> collections.Counter:
    """The StableHLO operations of a lowered module's text, by kind (`while`, `add`, ...)."""
    found = collections.Counter()
    for line in text.splitlines():
        match = _OPERATION.search(line)
        if match:
            found[match.group(1).removeprefix("stablehlo.")] += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only the programs whose name has this")
    args = parser.parse_args()
    transpiler.convert(cubic)  # the first conversion also builds the runtime namespace
    print(f"jax {jax.__version__}; StableHLO operations of jax.jit(f).lower(*args)")
    header = (
        f"{'program':<36} | {'ops conv':>8} | {'ops lax':>7} | {'ratio':>5} | "
        f"{'while':>9} | {'case':>9} | converted minus hand-written, by kind"
    )
    print(header)
    print("-" * len(header))
    here = pathlib.Path(__file__).resolve().parent / "programs_vs_lax.py"
    for name, path, pick, fn_args in cases():
        if args.only not in name:
            continue
        fn, ref = pick(fresh_module(path), fresh_module(here))
        conv = operations(jax.jit(transpiler.convert(fn)).lower(*fn_args).as_text())
        hand = operations(jax.jit(ref).lower(*fn_args).as_text())
        n_conv, n_hand = sum(conv.values()), sum(hand.values())
        diff = ", ".join(
            f"{kind} {conv[kind] - hand[kind]:+d}"
            for kind in sorted(set(conv) | set(hand))
            if conv[kind] != hand[kind] and kind not in ("return", "constant")
        )
        print(
            f"{name:<36} | {n_conv:8d} | {n_hand:7d} | {n_conv / n_hand:5.2f} | "
            f"{conv['while']:>4} {hand['while']:>4} | {conv['case']:>4} {hand['case']:>4} | "
            f"{diff}",
            flush=True,
        )


if __name__ == "__main__":
    main()
