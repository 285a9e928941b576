"""Plain Python in, one XLA graph out: an AST source-to-graph transpiler for JAX."""

from transpiler.api import convert, do_not_convert, jit, loop_options, padded, to_source
from transpiler.errors import ConversionError
from transpiler.exporting import Artifact, ArtifactError, ExportError, export, load
from transpiler.graph import Graph, GraphvizError, graph

__all__ = [
    "Artifact",
    "ArtifactError",
    "ConversionError",
    "ExportError",
    "Graph",
    "GraphvizError",
    "convert",
    "do_not_convert",
    "export",
    "graph",
    "jit",
    "load",
    "loop_options",
    "padded",
    "to_source",
]
