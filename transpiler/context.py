"""What every pass receives besides the tree: `transform(fn_node, ctx)`."""

from __future__ import annotations

import dataclasses

import gast

from transpiler.analysis import activity, callees
from transpiler.naming import Namer


@dataclasses.dataclass
class PassContext:
    """The function being converted, as the passes see it.

    Attributes:
      namer: hands out fresh names for generated symbols (one per conversion).
      globals: the function's globals, to resolve names at conversion time (library calls,
        `transpiler.loop_options`, a shadowed `print`).
      freevars: the names of its closure variables.
      closure: the values of those bound, to resolve calls at conversion time (see
        `analysis.callees`).
      recursive: whether calls are rewritten so that called user functions convert too.
      return_values: filled by the return pass: return-value variable -> what error messages say
        about it.
      bounds_loops: set by the directives pass: a loop has `loop_options(max_iterations=N)`.
      hands_functions: set by the call-trees pass: the function hands a function to library
        code (`jax.vmap(helper)`, `lax.scan(step, ...)`), which JAX traces unconverted if the
        original runs.
      module_reads: the names the function reads from its module (globals and builtins: see
        `activity.mark_module_reads`).
      analyzed: the tree whose analyses are current, where a pass that analysed it left it
        unchanged (the next pass need not analyse it again); None once a pass changes it.
    """

    namer: Namer
    globals: dict = dataclasses.field(default_factory=dict)
    freevars: tuple[str, ...] = ()
    closure: dict = dataclasses.field(default_factory=dict)
    recursive: bool = True
    return_values: dict = dataclasses.field(default_factory=dict)
    bounds_loops: bool = False
    hands_functions: bool = False
    analyzed: gast.AST | None = None
    module_reads: frozenset[str] = frozenset()

    @classmethod
    def for_function(
        cls, fn_node: gast.FunctionDef, globals_=None, freevars=(), recursive=True, closure=None
    ) -> PassContext:
        globals_ = globals_ if globals_ is not None else {}
        # What `print`, `len`, `jnp` name in it, for every pass: marked on the tree as written.
        module_reads = activity.mark_module_reads(fn_node, freevars)
        return cls(
            Namer.for_tree(fn_node),
            globals_,
            tuple(freevars),
            dict(closure or {}),
            recursive,
            module_reads=module_reads,
        )

    def builtins_read(self) -> frozenset[str]:
        """The builtins the function reads (`len`, `print`): names its module did not define
        when it was converted. Converted code is right only while it still does not."""
        return frozenset(
            name for name in self.module_reads if activity.is_builtin_name(name, self.globals)
        )

    def callees(self, fn_node: gast.FunctionDef) -> callees.Callees:
        """What the calls of `fn_node` (as it is now) do with their arguments' containers."""
        return callees.Callees(fn_node, self.globals, self.closure)
