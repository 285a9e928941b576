"""Compact dumps of analysis annotations: `"if@3: modified={x, y} live_out={x}"`."""

from __future__ import annotations

import textwrap

import gast

from transpiler import analysis, anno

_A = anno.Static


def parse(source: str) -> gast.FunctionDef:
    return gast.parse(textwrap.dedent(source)).body[0]


def fmt(names) -> str:
    return "{" + ", ".join(sorted(names)) + "}"


def dump(source: str, *keys: str) -> list[str]:
    """One line per if/while/for of the (first) function in `source`, with the requested facts."""
    fn = parse(source)
    analysis.analyze(fn)
    lines = []
    for node in gast.walk(fn):
        if not isinstance(node, (gast.If, gast.While, gast.For)):
            continue
        parts = []
        for key in keys:
            if key == "modified":
                parts.append("modified=" + fmt(anno.getanno(node, _A.BODY_ACTIVITY).modified))
            elif key == "reads":
                parts.append("reads=" + fmt(anno.getanno(node, _A.BODY_ACTIVITY).reads))
            elif key == "live_out":
                parts.append("live_out=" + fmt(anno.getanno(node, _A.LIVE_OUT)))
            elif key == "loop_live_in":
                parts.append("loop_live_in=" + fmt(anno.getanno(node, _A.LOOP_LIVE_IN)))
            elif key == "defined_in":
                parts.append("defined_in=" + fmt(anno.getanno(node, _A.DEFINED_IN)))
            elif key == "must":
                parts.append("must=" + fmt(anno.getanno(node, _A.DEFINITELY_DEFINED_IN)))
        lines.append(f"{type(node).__name__.lower()}@{node.lineno}: " + " ".join(parts))
    return sorted(lines, key=lambda line: int(line.split("@")[1].split(":")[0]))
