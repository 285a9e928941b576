"""Directives: calls written in converted code that tell the converter something.

A leaf module (it imports nothing of the project), so the pass that reads the directives, the
public API that exports them and the runtime bridge can all import it.
"""

from __future__ import annotations


def loop_options(*, max_iterations: int | None = None, checkpoints: int | None = None) -> None:
    """Options for the loop whose body this call opens; does nothing when it runs.

    Written as the first statement of a loop body in converted code::

        while tok != end:
            transpiler.loop_options(max_iterations=64)
            ...

    Args:
      max_iterations: a positive Python int: the loop runs at most this many iterations (in
        Python too). A staged `while` becomes a `lax.scan` of that many iterations, masked once
        its test is false: reverse-mode differentiable, and lists appended to in it get a buffer
        of that size.
      checkpoints: a Python int >= 2: how many states of a staged `while` (without
        `max_iterations`) reverse-mode differentiation keeps (default 64). Memory is that many
        states (plus ~log2 n); fewer checkpoints, more recomputation (see docs/gradients.md).
    """
    del max_iterations, checkpoints


LOOP_OPTIONS = frozenset({"max_iterations", "checkpoints"})
"""The keyword arguments `loop_options` accepts."""
