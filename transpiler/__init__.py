"""Plain Python in, one XLA graph out: an AST source-to-graph transpiler for JAX."""

from transpiler.api import convert, do_not_convert, jit, loop_options, padded, to_source
from transpiler.errors import ConversionError

__all__ = [
    "ConversionError",
    "convert",
    "do_not_convert",
    "jit",
    "loop_options",
    "padded",
    "to_source",
]
