"""The static graph of a converted function, as JAX and XLA build it, with the user's lines on it.

`graph(fn)(*args)` traces `fn` once (`jax.jit(fn).trace`) and shows what JAX made of it: the
jaxpr, each equation annotated with the user's `file:line`; the StableHLO it lowers to; the HLO
after XLA's optimization passes (fusion included); a Graphviz drawing; and a summary with XLA's
cost and memory analyses. Nothing here is a second IR: every view is JAX's or XLA's own.

    g = transpiler.graph(model)(params, x)       # arrays or jax.ShapeDtypeStructs
    print(g.text())                              # c:f32[] = reduce_sum[...] b  # model.py:12
    print(g.summary())
    transpiler.graph(jax.grad(transpiler.convert(loss)))(params, x)   # transformations too
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import inspect
import re
import shutil
import subprocess
import types
from collections.abc import Callable

from transpiler import dot, jaxprs, libraries


class GraphvizError(RuntimeError):
    """The Graphviz program that renders DOT to SVG is missing or failed."""


def graph(fn: Callable, **jit_kwargs) -> Callable[..., Graph]:
    """A function that traces `fn` on its arguments and returns the `Graph` JAX builds.

    Args:
      fn: a converted function, a plain user function or a model object of the user's class
        (converted first, as `convert` does), a `transpiler.jit` function, or a JAX
        transformation of any of them
        (`jax.grad(transpiler.convert(f))`, `jax.vmap(...)`).
      **jit_kwargs: passed to `jax.jit` (`static_argnums`, `static_argnames`, ...).

    Returns:
      `trace(*args, **kwargs) -> Graph`; the arguments may be arrays, Python numbers or
      `jax.ShapeDtypeStruct`s (nothing runs: the function is only traced and compiled).

    Example:
      >>> g = transpiler.graph(f)(jnp.ones(3), 5)
      >>> print(g.summary())
    """
    import jax

    target = converted(fn)
    if not jit_kwargs and callable(getattr(target, "trace", None)):
        jitted = target  # already `jax.jit`-ed: trace it as it is
    else:
        jitted = jax.jit(_hashable(target), **jit_kwargs)
    name = getattr(fn, "__name__", None) or type(fn).__name__

    def trace(*args, **kwargs) -> Graph:
        return Graph(jitted.trace(*args, **kwargs), name=name)

    return trace


def converted(fn: Callable) -> Callable:
    """`fn` converted if it is a plain function or method of user code, or a callable object of
    a user's class (an Equinox or Flax NNX module: its view with a converted `__call__`), else
    `fn` as it is (a converted or jitted function, a JAX transformation of one)."""
    from transpiler import api

    if isinstance(fn, (types.FunctionType, types.MethodType)):
        return fn if libraries.is_library(fn) else api.convert(fn)
    if callable(fn) and not isinstance(fn, type) and not libraries.is_library(type(fn)):
        if not getattr(fn, "__transpiler_converted__", False):
            return api.convert(fn)
    return fn


def _hashable(fn: Callable) -> Callable:
    """`fn`, or a function calling it where `jax.jit` cannot take it (a model object whose
    fields are lists is not hashable), with its signature (for `static_argnames`)."""
    try:
        hash(fn)
        return fn
    except TypeError:
        pass

    def call(*args, **kwargs):
        return fn(*args, **kwargs)

    call.__signature__ = inspect.signature(fn)
    call.__name__ = call.__qualname__ = getattr(fn, "__name__", type(fn).__name__)
    return call


class Graph:
    """The graph JAX traced for one function and one set of argument shapes.

    Attributes:
      name: the function's name.
      jaxpr: the traced `jax.extend.core.ClosedJaxpr`, without the equations whose results
        nothing uses (JAX drops them when it lowers the program; see `jaxprs.live`).
      lowered: `jax.stages.Lowered` (StableHLO), made on first use.
      compiled: `jax.stages.Compiled` (XLA's executable), made on first use.
    """

    def __init__(self, traced, *, name: str):
        self._traced = traced
        self.name = name
        self.jaxpr = jaxprs.live(traced.jaxpr)

    def __repr__(self) -> str:
        count = sum(1 for _ in jaxprs.walk(self.jaxpr.jaxpr))
        return f"<Graph of {self.name}: {count} ops>"

    @functools.cached_property
    def lowered(self):
        return self._traced.lower()

    @functools.cached_property
    def compiled(self):
        return self.lowered.compile()

    def text(self) -> str:
        """The jaxpr, each equation ending with a comment naming the user's `file:line`."""
        return _annotated_text(self.jaxpr)

    def hlo(self) -> str:
        """The StableHLO module the jaxpr lowers to (MLIR text)."""
        return self.lowered.as_text()

    def compiled_text(self) -> str:
        """The HLO module after XLA's optimization passes (fusions, layouts) for this device."""
        return self.compiled.as_text()

    def dot(self) -> str:
        """Graphviz DOT text: an op per node (primitive, shapes, `file:line`), a cluster per
        `cond` branch and per loop test and body."""
        return dot.render(self.jaxpr, name=self.name)

    def svg(self) -> str:
        """The DOT drawing rendered to SVG by Graphviz (its `dot` program must be installed).

        Raises:
          GraphvizError: Graphviz's `dot` program is not installed, or it failed.
        """
        return render_svg(self.dot())

    def summary(self) -> Summary:
        """Ops by primitive, fusions after XLA, XLA's cost and memory analyses, and which user
        lines became which `cond`/`while`/`scan`; `str()` of it is a table."""
        ops = list(jaxprs.walk(self.jaxpr.jaxpr))
        by_primitive = collections.Counter(op.eqn.primitive.name for op in ops)
        staged = collections.Counter(
            (op.location, op.eqn.primitive.name)
            for op in ops
            if op.eqn.primitive.name in jaxprs.CONTROL_FLOW
        )
        in_source_order = sorted(
            staged.items(),
            key=lambda item: (item[0][0] is None, item[0][0] or jaxprs.Location("", 0), item[0][1]),
        )
        compiled = self.compiled
        cost = compiled.cost_analysis()
        if isinstance(cost, (list, tuple)):  # one per device program in older JAX
            cost = cost[0] if cost else None
        cost = cost or {}
        memory = compiled.memory_analysis()
        return Summary(
            name=self.name,
            ops=dict(sorted(by_primitive.items(), key=lambda kv: (-kv[1], kv[0]))),
            fusions=count_fusions(compiled.as_text()),
            flops=cost.get("flops"),
            bytes_accessed=cost.get("bytes accessed"),
            memory={
                key: getattr(memory, f"{key}_size_in_bytes", None)
                for key in ("argument", "output", "temp", "alias", "generated_code")
            }
            | {"peak": getattr(memory, "peak_memory_in_bytes", None)},
            control_flow=[
                (str(where) if where is not None else "?", primitive, n)
                for (where, primitive), n in in_source_order
            ],
        )


@dataclasses.dataclass(frozen=True)
class Summary:
    """What `Graph.summary()` reports; `str()` of it is the table.

    Attributes:
      name: the function's name.
      ops: equations by primitive, at every nesting level (most frequent first).
      fusions: fusion instructions in the optimized HLO.
      flops: XLA's estimate of floating-point operations (a loop body counts once).
      bytes_accessed: XLA's estimate of bytes read and written (a loop body counts once).
      memory: bytes by kind from XLA's memory analysis: argument, output, temp, alias,
        generated_code, peak (None where this XLA does not say).
      control_flow: (user `file:line`, `cond`/`while`/`scan`, how many) in graph order.
    """

    name: str
    ops: dict[str, int]
    fusions: int
    flops: float | None
    bytes_accessed: float | None
    memory: dict[str, int | None]
    control_flow: list[tuple[str, str, int]]

    def line(self) -> str:
        """One line: ops, the staged control flow, fusions, FLOPs and peak memory."""
        staged = collections.Counter()
        for _, primitive, n in self.control_flow:
            staged[primitive] += n
        flow = ", ".join(f"{p} x{n}" for p, n in sorted(staged.items())) or "no control flow"
        return (
            f"graph of {self.name}: {sum(self.ops.values())} ops ({flow}), "
            f"{self.fusions} fusions after XLA, {_number(self.flops)} FLOPs, "
            f"peak memory {_bytes(self.memory['peak'])}"
        )

    def __str__(self) -> str:
        total = sum(self.ops.values())
        mem = self.memory
        lines = [
            f"graph of {self.name}: {total} ops, {len(self.ops)} primitives; "
            f"{self.fusions} fusions after XLA",
            f"XLA cost analysis: {_number(self.flops)} FLOPs, "
            f"{_bytes(self.bytes_accessed)} accessed (a loop body counts once)",
            f"XLA memory: arguments {_bytes(mem['argument'])}, outputs {_bytes(mem['output'])}, "
            f"temporaries {_bytes(mem['temp'])}, peak {_bytes(mem['peak'])}",
            "",
            "ops by primitive:",
        ]
        width = max((len(p) for p in self.ops), default=0)
        lines += [f"  {primitive:<{width}}  {n}" for primitive, n in self.ops.items()]
        lines += ["", "control flow from your code:"]
        if not self.control_flow:
            lines.append("  (none staged)")
        width = max((len(line) for line, _, _ in self.control_flow), default=0)
        for line, primitive, n in self.control_flow:
            lines.append(f"  {line:<{width}}  {primitive:<5}  x{n}")
        return "\n".join(lines)


def count_fusions(hlo_text: str) -> int:
    """The fusion instructions in optimized HLO text (`%fusion.3 = f32[8] fusion(...)`)."""
    return len(re.findall(r"\sfusion\(", hlo_text))


def _number(value) -> str:
    if value is None:
        return "?"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _bytes(value) -> str:
    if value is None:
        return "?"
    value = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


_NAME_STACK_COMMENT = re.compile(r"\s*# \[(.*)\]$", re.MULTILINE)


def _annotated_text(closed_jaxpr) -> str:
    """JAX's own printing of the jaxpr, with the user's line where it prints the name stack.

    The jaxpr is copied with each equation's name stack replaced by its `file:line` (only for
    printing: the copy is never run), printed with `name_stack=True`, and the `# [..]` comments
    rewritten as `# file:line`.
    """
    from jax.extend import core

    relabelled = core.ClosedJaxpr(
        _relabel(closed_jaxpr.jaxpr, None, jaxprs.Locations()), closed_jaxpr.consts
    )
    printed = relabelled.pretty_print(name_stack=True)

    def comment(match):
        # Two spaces, not JAX's alignment: one long equation would push every comment right.
        return f"  # {match.group(1)}" if match.group(1) else ""

    return _NAME_STACK_COMMENT.sub(comment, printed)


def _relabel(jaxpr, parent_location, locations):
    from jax.extend import source_info_util

    eqns = []
    for eqn in jaxpr.eqns:
        location = locations.of(eqn.source_info) or parent_location
        params = {k: _relabel_param(v, location, locations) for k, v in eqn.params.items()}
        stack = source_info_util.new_name_stack(str(location) if location is not None else "")
        info = eqn.source_info.replace(name_stack=stack)
        eqns.append(eqn.replace(params=params, source_info=info))
    return jaxpr.replace(eqns=eqns)


def _relabel_param(value, location, locations):
    from jax.extend import core

    if isinstance(value, core.ClosedJaxpr):
        return core.ClosedJaxpr(_relabel(value.jaxpr, location, locations), value.consts)
    if isinstance(value, core.Jaxpr):
        return _relabel(value, location, locations)
    if isinstance(value, (tuple, list)) and any(
        isinstance(v, (core.Jaxpr, core.ClosedJaxpr)) for v in value
    ):
        relabelled = [_relabel_param(v, location, locations) for v in value]
        return value._make(relabelled) if hasattr(value, "_make") else type(value)(relabelled)
    return value


_NO_GRAPHVIZ = (
    "rendering SVG needs Graphviz's `dot` program, which is not installed (not on PATH). "
    "Install Graphviz (apt-get install graphviz, brew install graphviz or conda install "
    "graphviz), or write Graph.dot() to a file and render it where Graphviz is: "
    "dot -Tsvg graph.dot -o graph.svg."
)


def render_svg(dot_text: str) -> str:
    """SVG of DOT text, drawn by Graphviz: through its Python package (`pip install
    astgraph[graphviz]`) if present, else its `dot` program.

    Raises:
      GraphvizError: neither can render (no `dot` program), or Graphviz failed.
    """
    try:
        import graphviz
    except ImportError:
        graphviz = None
    if graphviz is not None:
        try:
            return graphviz.Source(dot_text).pipe(format="svg", encoding="utf-8")
        except graphviz.ExecutableNotFound:
            raise GraphvizError(_NO_GRAPHVIZ) from None
        except graphviz.CalledProcessError as e:
            raise GraphvizError(f"Graphviz could not render the graph: {e}") from None
    program = shutil.which("dot")
    if program is None:
        raise GraphvizError(_NO_GRAPHVIZ)
    done = subprocess.run(
        [program, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise GraphvizError(f"Graphviz could not render the graph: {done.stderr.strip()}")
    return done.stdout
