"""Graphviz DOT of a jaxpr: an op per node, labelled with its primitive, shapes and user line.

Staged control flow is an op (its operands in, its results out) with a cluster beside it for
each jaxpr it runs: a `cond` has one per branch, a `while` its test and its body, a `scan` its
body; control flow inside them nests inside those clusters. A nested `jax.jit` or custom
derivative is a dashed cluster whose ops take their operands from outside. The custom
derivative the runtime puts around a staged `while` (reverse mode, `runtime/checkpointed.py`)
is drawn as the loop:

    digraph "f" {
      n2 [label="while\\ni32[], f32[3]\\nmodel.py:5"];
      subgraph cluster_3 { label="while (model.py:5): test"; ... }
      subgraph cluster_4 {
        label="while (model.py:5): body";
        n9 [label="cond\\nf32[3]\\nmodel.py:6"];
        subgraph cluster_10 { label="cond (model.py:6): branch 0"; ... }
        ...
      }
    }
"""

from __future__ import annotations

import itertools

from transpiler import jaxprs

_CLUSTER_COLOURS = {"cond": "#e8f0fe", "while": "#fef3e0", "scan": "#e6f4ea"}


def render(closed_jaxpr, *, name: str) -> str:
    """The DOT text of `closed_jaxpr` (a `jax.extend.core.ClosedJaxpr`), as graph `name`."""
    return _Writer().write(closed_jaxpr.jaxpr, name)


def quote(text: str) -> str:
    """`text` as a DOT string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _shapes(variables) -> str:
    return ", ".join(v.aval.str_short(short_dtypes=True) for v in variables)


class _Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.ids = itertools.count()
        self.locations = jaxprs.Locations()
        # Written last, outside every cluster: an edge statement inside a cluster would pull
        # both its nodes into that cluster.
        self.edges: dict[tuple[str, str], None] = {}

    def write(self, jaxpr, name: str) -> str:
        self.lines += [
            f"digraph {quote(name)} {{",
            '  graph [compound=true, fontname="Helvetica", fontsize=11, labeljust=l];',
            '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", '
            'fontname="Helvetica", fontsize=10];',
            '  edge [color="#5f6368", arrowsize=0.6];',
        ]
        env = {}
        for kind, variables in (("const", jaxpr.constvars), ("in", jaxpr.invars)):
            for i, var in enumerate(variables):
                env[var] = self._node(f"{kind} {i}\n{_shapes([var])}", "  ", shape="ellipse")
        self._block(jaxpr, env, None, "  ")
        for i, var in enumerate(jaxpr.outvars):
            out = self._node(f"out {i}\n{_shapes([var])}", "  ", shape="ellipse")
            self._edges([var], env, out)
        self.lines += [f"  {source} -> {target};" for source, target in self.edges]
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def _node(self, label: str, indent: str, **attributes) -> str:
        node = f"n{next(self.ids)}"
        extra = "".join(f", {k}={quote(v)}" for k, v in attributes.items())
        self.lines.append(f"{indent}{node} [label={quote(label)}{extra}];")
        return node

    def _edges(self, variables, env, target: str) -> None:
        for var in variables:
            source = env.get(var) if _is_var(var) else None
            if source is not None:
                self.edges[(source, target)] = None

    def _open_cluster(self, label: str, indent: str, colour: str, dashed: bool = False) -> str:
        style = "dashed,rounded" if dashed else "filled,rounded"
        self.lines += [
            f"{indent}subgraph cluster_{next(self.ids)} {{",
            f"{indent}  label={quote(label)};",
            f'{indent}  style="{style}"; fillcolor="{colour}"; color="#9aa0a6";',
        ]
        return indent + "  "

    def _block(self, jaxpr, env: dict, parent_location, indent: str) -> None:
        for eqn in jaxpr.eqns:
            location = self.locations.of(eqn.source_info) or parent_location
            name = eqn.primitive.name
            where = f" ({location})" if location is not None else ""
            if jaxprs.is_loop_wrapper(eqn):
                self._call(eqn, env, location, indent)  # drawn as the `while` inside it
            elif jaxprs.is_call(eqn):
                label = f"{name} {eqn.params.get('name', '')}".strip() + where
                inner = self._open_cluster(label, indent, "#ffffff", dashed=True)
                self._call(eqn, env, location, inner)
                self.lines.append(f"{indent}}}")
            elif jaxprs.nested(eqn):
                # The op, then a cluster per nested jaxpr beside it (one level of nesting per
                # construct, not two: deep DOT is slow to lay out, and to parse).
                colour = _CLUSTER_COLOURS.get(name, "#f1f3f4")
                head = self._op(eqn, env, location, indent, fillcolor="#fbbc04")
                for role, sub in jaxprs.nested(eqn):
                    inner = self._open_cluster(f"{name}{where}: {role}", indent, colour)
                    self._block(sub, {var: head for var in sub.invars}, location, inner)
                    self.lines.append(f"{indent}}}")
                env.update({var: head for var in eqn.outvars})
            else:
                node = self._op(eqn, env, location, indent)
                env.update({var: node for var in eqn.outvars})

    def _op(self, eqn, env, location, indent: str, **attributes) -> str:
        label = f"{eqn.primitive.name}\n{_shapes(eqn.outvars)}"
        if location is not None:
            label += f"\n{location}"
        node = self._node(label, indent, **attributes)
        self._edges(eqn.invars, env, node)
        return node

    def _call(self, eqn, env, location, indent: str) -> None:
        """The ops of a call's jaxpr, its operands and results those of the equation."""
        ((_, sub),) = jaxprs.nested(eqn)
        inner = {
            var: env.get(outer) for var, outer in zip(sub.invars, eqn.invars) if _is_var(outer)
        }
        self._block(sub, inner, location, indent)
        for outer, var in zip(eqn.outvars, sub.outvars):
            if _is_var(var) and inner.get(var) is not None:
                env[outer] = inner[var]


def _is_var(value) -> bool:
    from jax.extend import core

    return not isinstance(value, core.Literal)
