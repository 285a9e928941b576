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

__all__ = [
    "ConversionError",
    "ConversionWarning",
    "convert",
    "do_not_convert",
    "get_verbosity",
    "jit",
    "loop_options",
    "padded",
    "run_eagerly",
    "running_eagerly",
    "set_verbosity",
    "to_source",
]
