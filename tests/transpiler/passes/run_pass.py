"""Run passes over a source snippet; get its printed form and a callable to compare behaviour."""

from __future__ import annotations

import textwrap

import gast

from transpiler import _runtime_bridge, loading
from transpiler.context import PassContext


def context(fn_node: gast.FunctionDef, globals_=None, freevars=()) -> PassContext:
    return PassContext.for_function(fn_node, globals_, freevars)


def apply(source: str, *passes, globals_=None):
    """Runs `passes` in order; returns (generated source, the generated function, the original).

    Generated code gets a runtime whose `call` calls functions as they are.
    """
    source = textwrap.dedent(source)
    fn_node = gast.parse(source).body[0]
    ctx = context(fn_node, globals_)
    for pass_ in passes:
        fn_node = pass_.transform(fn_node, ctx)
    generated = loading.unparse(fn_node)
    namespace = {"rt__": _runtime_bridge.namespace(lambda fn: fn), **(globals_ or {})}
    exec(compile(generated, "<generated>", "exec"), namespace)
    original = dict(globals_ or {})
    exec(compile(source, "<original>", "exec"), original)
    return generated, namespace[fn_node.name], original[fn_node.name]


def expect(source: str) -> str:
    """An expected generated source, written indented in a test."""
    return textwrap.dedent(source).strip("\n")
