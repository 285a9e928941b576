"""transpiler.graph: JAX's graph of a converted function, with the user's lines on it."""

import re

import jax
import jax.numpy as jnp
import pydot
import pytest

import transpiler
from transpiler.graph import _bytes, _number, count_fusions
from transpiler.origins import display_path

HERE = display_path(__file__)
SOURCE = open(__file__).read().splitlines()


def line(marker: str) -> str:
    """`file:line` of the one line of this file that ends with the comment `# <marker>`."""
    found = [i + 1 for i, text in enumerate(SOURCE) if text.endswith(f"# {marker}")]
    assert len(found) == 1, marker
    return f"{HERE}:{found[0]}"


def squaring(x, n):
    i = 0
    while jnp.sum(x) < 100 and i < n:  # WHILE
        if x[0] > 0:  # IF
            x = x * (x @ x)  # SQUARE
        else:
            x = x - 1  # DECREMENT
        i += 1  # COUNT
    return x, i


def halve(x, k):
    if k > 1:
        return halve(x * 0.5, k - 1) + 1.0  # HALVE
    return x


def nested(x, n):
    total = 0.0
    i = 0
    while i < n:  # OUTER
        j = 0
        while j < i:  # INNER
            if x[0] > 0:  # NESTED IF
                total = total + (x @ jnp.sin(x)) * j
            j += 1
        i += 1
    for row in x:  # SCAN
        total = total + row
    return halve(total, 3)


@pytest.fixture(scope="module")
def sample():
    return transpiler.graph(squaring)(jnp.ones(3), 5)


def comments(text: str) -> dict[str, set[str]]:
    """Primitive -> the `# file:line` comments of its equations in a jaxpr's text."""
    found: dict[str, set[str]] = {}
    for text_line in text.splitlines():
        match = re.search(r"= ([a-z_]+)\b.*  # (\S+)$", text_line)
        if match:
            found.setdefault(match.group(1), set()).add(match.group(2))
    return found


def test_text_names_the_user_lines_of_the_loop_the_branch_and_each_op(sample):
    found = comments(sample.text())
    # The while is inside the custom derivative that makes it reverse-differentiable.
    assert found["while"] == {line("WHILE")} and found["custom_jvp_call"] == {line("WHILE")}
    assert found["cond"] == {line("IF")}
    assert found["mul"] == {line("SQUARE")} and found["sub"] == {line("DECREMENT")}
    assert found["add"] == {line("COUNT")}
    assert found["reduce_sum"] == {line("WHILE")}
    assert "astgraph.py" not in sample.text()


def _clusters(graph) -> list:
    return [s for s in graph.get_subgraphs() if s.get_name().startswith("cluster_")]


def _all(graph) -> list:
    """`graph` and every subgraph in it."""
    return [graph] + [g for sub in graph.get_subgraphs() for g in _all(sub)]


def _label(item) -> str:
    return item.get("label").strip('"').replace("\\n", "\n")


def test_dot_parses_with_a_cluster_per_branch_and_per_loop_test_and_body(sample):
    (parsed,) = pydot.graph_from_dot_data(sample.dot())
    test, body = _clusters(parsed)
    assert _label(test) == f"while ({line('WHILE')}): test"
    assert _label(body) == f"while ({line('WHILE')}): body"
    false_branch, true_branch = _clusters(body)
    assert _label(false_branch) == f"cond ({line('IF')}): branch 0"
    assert _label(true_branch) == f"cond ({line('IF')}): branch 1"
    assert [_label(n) for n in false_branch.get_nodes()] == [f"sub\nf32[3]\n{line('DECREMENT')}"]
    assert [_label(n) for n in true_branch.get_nodes()] == [
        f"dot_general\nf32[]\n{line('SQUARE')}",
        f"mul\nf32[3]\n{line('SQUARE')}",
    ]
    body_ops = [_label(n).split("\n")[0] for n in body.get_nodes()]
    # The branch and the count; the loop's test is the loop's condition, as written by hand.
    assert body_ops == ["slice", "squeeze", "gt", "convert_element_type", "cond", "add"]
    test_ops = [_label(n).split("\n")[0] for n in test.get_nodes()]
    assert test_ops[:2] == ["reduce_sum", "lt"] and test_ops[-1] == "and"
    # The derivative wrapper around the loop is shown as the loop, not as a custom_jvp.
    assert "custom_jvp" not in sample.dot()
    # Inputs feed the loop; the loop's results are the outputs.
    everything = _all(parsed)
    labels = {n.get_name(): _label(n) for g in everything for n in g.get_nodes() if n.get("label")}
    edges = {
        (labels.get(e.get_source()), labels.get(e.get_destination()))
        for g in everything
        for e in g.get_edges()
    }
    head = f"while\ni32[], f32[3]\n{line('WHILE')}"
    assert ("in 0\nf32[3]", head) in edges and (head, "out 0\nf32[3]") in edges


def test_summary_counts_ops_fusions_flops_memory_and_staged_lines(sample):
    summary = sample.summary()
    assert summary.flops > 0 and summary.bytes_accessed > 0
    assert summary.fusions == count_fusions(sample.compiled_text())
    assert summary.fusions > 0
    assert summary.memory["argument"] == 3 * 4 + 4 and summary.memory["output"] > 0
    assert summary.ops["while"] == 1 and summary.ops["cond"] == 1 and summary.ops["mul"] == 1
    assert summary.control_flow == [(line("WHILE"), "while", 1), (line("IF"), "cond", 1)]
    table = str(summary)
    assert table.startswith(f"graph of squaring: {sum(summary.ops.values())} ops, ")
    assert f"{summary.fusions} fusions after XLA" in table
    assert f"  {line('WHILE')}  while  x1\n  {line('IF')}  cond   x1" in table


def test_summary_line_is_one_line_of_the_same_numbers(sample):
    summary = sample.summary()
    assert summary.line() == (
        f"graph of squaring: {sum(summary.ops.values())} ops (cond x1, while x1), "
        f"{summary.fusions} fusions after XLA, {_number(summary.flops)} FLOPs, "
        f"peak memory {_bytes(summary.memory['peak'])}"
    )


def test_hlo_and_compiled_text_are_xla_s_own(sample):
    assert "stablehlo.while" in sample.hlo() and "stablehlo.case" in sample.hlo()
    compiled = sample.compiled_text()
    assert compiled.startswith("HloModule ") and " fusion(" in compiled


def test_shape_specs_give_the_graph_of_arrays():
    specs = (jax.ShapeDtypeStruct((3,), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32))
    from_specs = transpiler.graph(transpiler.jit(squaring))(*specs)
    from_arrays = transpiler.graph(squaring)(jnp.ones(3), jnp.int32(5))
    assert from_specs.text() == from_arrays.text()


def test_grad_through_nested_loops_and_recursive_helpers_keeps_the_user_lines():
    g = transpiler.graph(jax.grad(transpiler.convert(nested)))(jnp.ones(3), 4)
    staged = {(str(op.location), op.eqn.primitive.name) for op in _ops(g)}
    assert (line("HALVE"), "mul") in staged  # a helper, converted, unrolled three times
    assert {(line("OUTER"), "while"), (line("INNER"), "while")} <= staged
    assert {(line("NESTED IF"), "cond"), (line("SCAN"), "scan")} <= staged
    assert all(op.location is not None for op in _ops(g))


def test_vmap_keeps_the_user_lines():
    g = transpiler.graph(jax.vmap(transpiler.convert(nested), in_axes=(0, None)))(
        jnp.ones((2, 3)), 4
    )
    staged = {(str(op.location), op.eqn.primitive.name) for op in _ops(g)}
    assert {(line("OUTER"), "while"), (line("INNER"), "while"), (line("SCAN"), "scan")} <= staged
    # Under vmap the branch on a batched value is a select, still from the if's line.
    assert (line("NESTED IF"), "select_n") in staged


def _ops(g):
    from transpiler import jaxprs

    return list(jaxprs.walk(g.jaxpr.jaxpr))


def test_user_code_outside_converted_code_keeps_its_own_line():
    f = transpiler.convert(squaring)
    g = transpiler.graph(jax.grad(lambda x: f(x, 3)[0].sum()))(jnp.ones(3))  # LAMBDA
    # The sum's derivative (its own result is dead code in the gradient's graph).
    assert (line("LAMBDA"), "broadcast_in_dim") in {
        (str(op.location), op.eqn.primitive.name) for op in _ops(g)
    }


def test_svg_is_rendered_by_graphviz_or_refused_clearly(sample, monkeypatch):
    import shutil

    if shutil.which("dot") is not None:
        svg = sample.svg()
        assert "<svg" in svg and f"while ({line('WHILE')}): body" in svg
    monkeypatch.setitem(__import__("sys").modules, "graphviz", None)  # no Python package
    monkeypatch.setenv("PATH", "")  # and no `dot` program
    with pytest.raises(transpiler.GraphvizError) as e:
        sample.svg()
    assert str(e.value) == (
        "rendering SVG needs Graphviz's `dot` program, which is not installed (not on PATH). "
        "Install Graphviz (apt-get install graphviz, brew install graphviz or conda install "
        "graphviz), or write Graph.dot() to a file and render it where Graphviz is: "
        "dot -Tsvg graph.dot -o graph.svg."
    )


def test_to_source_with_source_map_names_each_statement_s_line():
    source = transpiler.to_source(transpiler.jit(squaring), source_map=True)
    assert (
        f"x, = rt__.if_stmt(x[0] > 0, if_true, if_false, (x,), symbol_names=('x',))  # {line('IF')}"
        in source
    )
    assert f"    x = x * (x @ x)  # {line('SQUARE')}" in source
    assert (
        "i, x = rt__.while_stmt(loop_test, loop_body, (i, x), symbol_names=('i', 'x'), "
        f"reads=('x',), sums=('i',), counted=('i', lambda: n, 0), test_reads=('i', 'x'), "
        f"compared=('i',))  # {line('WHILE')}" in source
    )
    plain = transpiler.to_source(squaring)
    assert re.sub(r"  # \S+:\d+$", "", source, flags=re.MULTILINE) == plain


class Scaler:
    def __init__(self, k):
        self.k = k

    def step(self, x):
        if jnp.sum(x) > 0:  # METHOD IF
            x = jnp.tanh(x) * (x @ x) * self.k
        return x


def test_a_bound_method_is_converted_first():
    summary = transpiler.graph(Scaler(3.0).step)(jnp.ones(2)).summary()
    assert summary.control_flow == [(line("METHOD IF"), "cond", 1)]


def stops_at_a_negative_sine(xs, x):
    acc = jnp.zeros(())
    for v in xs:
        if jnp.sin(v) < 0:  # EXIT_FOR
            break
        acc = acc + jnp.cos(v)
    while x < 100.0:
        if jnp.tanh(x) < -0.5:  # EXIT_WHILE
            break
        x = x * 2.0
    return acc, x


def test_a_loop_s_exit_test_maps_to_its_if_not_to_the_loop():
    # The leading `if C: break` becomes the loop's exit-test function: its line is the if's.
    text = transpiler.graph(stops_at_a_negative_sine)(jnp.ones(3), 1.0).text()
    assert re.search(rf"= sin \w+\s+# {re.escape(line('EXIT_FOR'))}\b", text), text
    assert re.search(rf"= tanh \w+\s+# {re.escape(line('EXIT_WHILE'))}\b", text), text
    source = transpiler.to_source(stops_at_a_negative_sine, source_map=True)
    assert f"jnp.sin(v) < 0  # {line('EXIT_FOR')}" in source


class Scaled:
    """A model object of the user's: unhashable (it defines `__eq__`), as an Equinox module
    with a list field is."""

    def __init__(self, scale):
        self.scale = scale

    def __eq__(self, other):
        return isinstance(other, Scaled) and other.scale == self.scale

    def __call__(self, x):
        if jnp.sum(x) > 0:
            return x * self.scale
        return -x


def test_a_model_object_is_converted_and_traced_as_a_function_is():
    g = transpiler.graph(Scaled(2.0))(jnp.ones(3))
    assert "select_n" in g.text() and g.name == "Scaled"
    assert transpiler.graph(transpiler.convert(Scaled(2.0)))(jnp.ones(3)).text() == g.text()
    exported = transpiler.export(Scaled(2.0), jnp.ones(3))
    assert exported(jnp.full(3, -1.0)).tolist() == [1.0, 1.0, 1.0]
