"""Plain Python in, one XLA graph out: an AST source-to-graph transpiler for JAX."""

from transpiler.api import (
    convert,
    do_not_convert,
    get_verbosity,
    jit,
    loop_options,
    padded,
    run_eagerly,
    running_eagerly,
    set_verbosity,
    to_source,
)
from transpiler.errors import ConversionError, ConversionWarning
from transpiler.exporting import Artifact, ArtifactError, ExportError, export, load
from transpiler.graph import Graph, GraphvizError, graph

__all__ = [
    "Artifact",
    "ArtifactError",
    "ConversionError",
    "ConversionWarning",
    "ExportError",
    "Graph",
    "GraphvizError",
    "convert",
    "do_not_convert",
    "export",
    "get_verbosity",
    "graph",
    "jit",
    "load",
    "loop_options",
    "padded",
    "run_eagerly",
    "running_eagerly",
    "set_verbosity",
    "to_source",
]
