"""Run one pass over a source snippet; get its printed form and a callable to compare behaviour."""

from __future__ import annotations

import textwrap

import gast

import runtime
from transpiler import analysis, loading
from transpiler.naming import Namer


def apply(source: str, pass_module, *, analyses: bool = False, namer: bool = False):
    """Returns (generated source, the generated function, the original function)."""
    source = textwrap.dedent(source)
    fn_node = gast.parse(source).body[0]
    if analyses:
        analysis.analyze(fn_node)
    args = (Namer.for_tree(fn_node),) if namer else ()
    fn_node = pass_module.transform(fn_node, *args)
    generated = loading.unparse(fn_node)
    namespace = {"rt__": runtime}
    exec(compile(generated, "<generated>", "exec"), namespace)
    original = {}
    exec(compile(source, "<original>", "exec"), original)
    return generated, namespace[fn_node.name], original[fn_node.name]


def expect(source: str) -> str:
    """An expected generated source, written indented in a test."""
    return textwrap.dedent(source).strip("\n")
