"""Real model code: calls, classes, closures, lists, pytrees, builtins, print and assert."""

import collections
import dataclasses
import functools
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import check_grad, check_jit, check_python
from tests.end_to_end.test_errors import line_of

HERE = os.path.relpath(__file__)


# -- calls -------------------------------------------------------------------------------------


def gate(h):
    if jnp.mean(h) > 0:
        return h
    return 0.1 * h


class MLP:
    """Layers in a Python list; a traced `if` lives in a helper function."""

    def __init__(self, sizes, seed=0):
        keys = jax.random.split(jax.random.PRNGKey(seed), len(sizes) - 1)
        self.layers = [
            (jax.random.normal(k, (a, b)) / np.sqrt(a), jnp.zeros(b))
            for k, a, b in zip(keys, sizes[:-1], sizes[1:])
        ]

    def __call__(self, x):
        for w, b in self.layers:
            x = gate(x @ w + b)
        return self.score(x)

    def score(self, x):
        return jnp.sum(x) if jnp.sum(x) > 0 else -jnp.sum(x)


def run_mlp(model, x):
    return model(x)


def test_mlp_class_with_helper_converted_recursively():
    model = MLP([3, 5, 2])
    for x in (jnp.array([1.0, -2.0, 0.5]), jnp.array([-3.0, 1.0, 2.0])):
        check_jit(lambda x: run_mlp(model, x), x)
    jaxpr = str(jax.make_jaxpr(transpiler.convert(lambda x: run_mlp(model, x)))(jnp.ones(3)))
    # One `if` per layer (the helper) and one in `score`, each cheap and safe: selects.
    assert jaxpr.count("select_n") == 3 and "cond[" not in jaxpr


def scale(x, k):
    if x > 0:
        return x * k
    return x


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return scale(x, self.k)


def many_callables(x):
    double = functools.partial(scale, k=2.0)
    triple = Scaler(3.0)

    def nested(v):
        return v + 1 if v > 1 else v

    negate = lambda v: -v if v > 0 else v  # noqa: E731
    return negate(nested(triple(double(x))))


@pytest.mark.parametrize("x", [2.0, -2.0, 0.1])
def test_partials_callable_objects_nested_functions_and_lambdas(x):
    check_jit(many_callables, jnp.float32(x))
    check_python(many_callables, x)


def test_library_code_is_called_as_it_is():
    def f(x):
        return jnp.tanh(np.float32(2.0) * x) + jax.nn.relu(x)

    source = transpiler.to_source(f)
    assert "rt__.call" not in source
    check_jit(f, jnp.float32(0.5))


def test_do_not_convert_and_recursive_false():
    @transpiler.do_not_convert
    def python_only(x):
        return x > 0  # a traced `if` on this would fail: it is never staged here

    def uses(x):
        return scale(x, 2.0), python_only(x)

    assert transpiler.convert(python_only) is python_only
    out = jax.jit(transpiler.convert(uses))(1.0)
    assert float(out[0]) == 2.0 and bool(out[1])
    shallow = transpiler.convert(uses, recursive=False)
    assert "rt__.call" not in transpiler.to_source(uses, recursive=False)
    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.jit(shallow)(1.0)


def test_function_without_source_runs_unconverted_with_one_warning():
    namespace = {}
    exec("def no_source(x):\n    return x * 2\n", namespace)
    no_source = namespace["no_source"]

    def f(x):
        return no_source(x) + no_source(x)

    converted = transpiler.convert(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert jax.jit(converted)(1.0) == 4.0
        assert jax.jit(converted)(2.0) == 8.0
        assert converted(3.0) == 12.0  # eagerly, f runs as Python: nothing is converted
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and messages[0].startswith("no_source is called unconverted")
    # Attributed to the user's calling line, not to the generated file.
    assert caught[0].filename == __file__
    assert caught[0].lineno == f.__code__.co_firstlineno + 1


# -- classes and closures ------------------------------------------------------------------------


class Accumulator:
    def __init__(self):
        self.count = 0
        self.total = 0.0

    def add_positive(self, xs):
        for x in xs:
            if x > 0:
                self.count += 1
                self.total = self.total + x
        return self


def accumulate(xs):
    acc = Accumulator().add_positive(xs)
    return acc.count, acc.total


def test_self_attributes_are_state_of_staged_branches_and_loops():
    xs = jnp.array([1.0, -2.0, 3.0, 4.0])
    check_jit(accumulate, xs)
    check_grad(lambda xs: accumulate(xs)[1], xs)
    check_python(accumulate, [1.0, -2.0, 3.0])


def closure_reads(xs, threshold):
    offset = 1.0

    def shifted(v):
        return v + offset if v > threshold else v

    total = 0.0
    for x in xs:
        total = total + shifted(x)
    return total


def test_closures_read_outer_variables():
    check_jit(closure_reads, jnp.array([1.0, -2.0, 3.0]), 0.0)


def nonlocal_writes(xs):
    total = 0.0

    def add(v):
        nonlocal total
        if v > 0:
            total = total + v

    for x in xs:
        add(x)
    return total


def test_nonlocal_writes_in_nested_functions_are_staged_exactly():
    check_jit(nonlocal_writes, jnp.array([1.0, -2.0, 3.0]))
    check_grad(nonlocal_writes, jnp.array([1.0, -2.0, 3.0]))
    check_python(nonlocal_writes, [1.0, -2.0, 3.0])


# -- lists ---------------------------------------------------------------------------------------

EOS = 0


def greedy_decode(logits):
    out = []
    i = 0
    tok = jnp.argmax(logits[0])
    while tok != EOS:
        transpiler.loop_options(max_iterations=6)
        out.append(tok)
        i += 1
        tok = jnp.argmax(logits[i])
    return transpiler.padded(out)


def greedy_decode_stacked(logits):
    out = []
    i = 0
    tok = jnp.argmax(logits[0])
    while tok != EOS:
        transpiler.loop_options(max_iterations=6)
        out.append(tok)
        i += 1
        tok = jnp.argmax(logits[i])
    return jnp.stack(out)


def test_greedy_decoder_appends_until_end_token_or_max_iterations():
    converted = jax.jit(transpiler.convert(greedy_decode))
    for tokens in ([3, 2, 5, 0, 1, 1, 1], [1, 2, 3, 4, 5, 1, 2]):
        logits = jax.nn.one_hot(jnp.array(tokens), 6)
        stacked, n = converted(logits)
        expected = [t for t in tokens[: tokens.index(0) if 0 in tokens else 6]]
        assert int(n) == len(expected)
        # transpiler.padded: a list built under a traced condition, as its buffer, zero-padded.
        assert stacked.shape == (6,)
        np.testing.assert_array_equal(stacked[: int(n)], expected)
        np.testing.assert_array_equal(stacked[int(n) :], 0)
        eager_tokens, eager_n = greedy_decode(logits) if 0 in tokens else (None, None)
        if eager_tokens is not None:
            np.testing.assert_array_equal(eager_tokens, expected)
    # Stacked as it is, the list would be its padded buffer: refused, naming the list.
    with pytest.raises(StagingError, match="'out' is appended to at .*test_model_code.py:"):
        jax.jit(transpiler.convert(greedy_decode_stacked))(logits)


def unbounded_append(x):
    out = []
    while x < 100:
        out.append(x)
        x = x * 2
    return out


def test_append_in_a_staged_while_without_a_bound_says_what_to_do():
    line = line_of(unbounded_append, "while x < 100")
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(unbounded_append))(1.0)
    assert str(e.value) == (
        f"'out' is appended to in a staged while loop ({HERE}:{line}, while loop) whose number "
        "of iterations is not known, so the list has no fixed size. Put "
        "`transpiler.loop_options(max_iterations=N)` as the first statement of the loop body to "
        "bound it, or loop over a range with a Python bound (`range(N)`)."
    )


def stacked_features(x):
    feats = [x]
    for i in range(3):
        feats.append(feats[-1] * 2 + i)
    last = feats.pop()
    return jnp.stack(feats), jnp.array(feats), last, len(feats)


def test_append_in_a_scan_stacks_exactly_and_pop_works():
    check_jit(stacked_features, jnp.array([1.0, 2.0]))
    check_grad(lambda x: jnp.sum(stacked_features(x)[0]), jnp.array([1.0, 2.0]))


def test_list_comprehensions_over_python_ranges_stay_python():
    def f(x):
        powers = [x**i for i in range(4)]
        return jnp.stack(powers)

    source = transpiler.to_source(f)
    # A Python list comprehension, over `range` (which only stages as the iterable of a loop);
    # the power with Python's type (`rt__.pow_`: an int power of an int stays Python's).
    assert "powers = [rt__.pow_(x, i) for i in rt__.range_(4)]" in source
    check_jit(f, jnp.float32(2.0))

    def over_traced_range(n):
        return [i for i in range(n)]

    with pytest.raises(TypeError, match="a range with a traced bound has no length yet"):
        jax.jit(transpiler.convert(over_traced_range))(3)


def test_python_lists_keep_python_semantics():
    def f(items):
        out = []
        for x in items:
            if x:
                out.append(x)
        alias = out
        out.append("end")
        return alias, out.pop(), out

    check_python(f, [1, 0, "a"])


# -- pytrees -------------------------------------------------------------------------------------

Batch = collections.namedtuple("Batch", "x y")


@functools.partial(jax.tree_util.register_dataclass, data_fields=["w", "b"], meta_fields=[])
@dataclasses.dataclass
class Linear:
    w: jax.Array
    b: jax.Array


def train(params, xs, ys, lr):
    for i in range(xs.shape[0]):
        batch = Batch(xs[i], ys[i])
        pred = batch.x @ params["w"] + params["b"]
        err = pred - batch.y
        if jnp.mean(err * err) > 1e-3:
            params = {
                "w": params["w"] - lr * batch.x.T @ err,
                "b": params["b"] - lr * jnp.sum(err),
            }
    return params


def test_training_step_carries_a_dict_of_parameters_through_a_staged_loop():
    key = jax.random.PRNGKey(1)
    xs = jax.random.normal(key, (4, 5, 3))
    ys = xs @ jnp.array([1.0, -2.0, 0.5]) + 0.3
    params = {"w": jnp.zeros(3), "b": jnp.float32(0.0)}
    check_jit(train, params, xs, ys, 0.05)
    check_grad(lambda p: train(p, xs, ys, 0.05)["b"], params)
    jaxpr = str(jax.make_jaxpr(transpiler.convert(train))(params, xs, ys, 0.05))
    assert jaxpr.count("scan[") == 1 and "cond[" in jaxpr


def update(layer, steps):
    for _ in range(steps):
        if jnp.sum(layer.w) > 0:
            layer = Linear(layer.w * 0.5, layer.b + 1)
    return layer, (layer.w, [layer.b, layer.b])


def test_dataclass_tuple_and_fixed_length_list_state():
    layer = Linear(jnp.ones(2), jnp.zeros(2))
    check_jit(update, layer, 3, static_argnums=(1,))


# -- builtins ------------------------------------------------------------------------------------


def builtins_on_traced(x, v):
    n = len(v)
    top = max(x, 0.5)
    bottom = min(x, -0.5, 2.0)
    as_int = int(x * 3)
    as_float = float(as_int)
    truth = bool(x)
    total = 0.0
    for i, e in enumerate(v):
        total = total + i * e
    for a, b in zip(v, v[::-1]):
        total = total + a * b
    for e in reversed(v):
        total = total * 0.5 + e
    return n, top, bottom, as_int, as_float, truth, total, abs(x), max(v), min(v)


@pytest.mark.parametrize("x", [1.7, -1.2, 0.0])
def test_builtins_on_traced_values(x):
    v = jnp.array([1.0, -2.0, 3.0])
    check_jit(builtins_on_traced, jnp.float32(x), v)
    check_python(builtins_on_traced, x, [1.0, -2.0, 3.0])


def test_enumerate_zip_reversed_over_arrays_are_scans():
    jaxpr = str(jax.make_jaxpr(transpiler.convert(builtins_on_traced))(1.0, jnp.ones(3)))
    assert jaxpr.count("scan[") == 3


# -- print and assert ----------------------------------------------------------------------------


def printing_loop(x):
    for i in range(3):
        x = x * 2
        print("step", i, x)
    return x


def test_print_in_a_staged_loop_prints_each_iteration_in_order(capfd):
    out = jax.jit(transpiler.convert(printing_loop))(jnp.float32(1.0))
    jax.effects_barrier()
    assert float(out) == 8.0
    assert capfd.readouterr().out == "step 0 2.0\nstep 1 4.0\nstep 2 8.0\n"


def test_print_of_python_values_is_python(capsys):
    def f(x, n):
        print("n =", n, sep="", end="!\n")
        return x

    transpiler.convert(f)(1.0, 3)
    assert capsys.readouterr().out == "n =3!\n"


def checked_log(x):
    assert jnp.all(x > 0), "x must be positive"
    return jnp.log(x)


def test_assert_fires_on_bad_data_with_message_and_line():
    line = line_of(checked_log, "assert")
    fn = jax.jit(transpiler.convert(checked_log))
    np.testing.assert_allclose(fn(jnp.ones(2)), 0.0)
    with pytest.raises(Exception, match=rf"x must be positive \({HERE}:{line}\)"):
        jax.block_until_ready(fn(jnp.array([1.0, -1.0])))
        jax.effects_barrier()


def asserts_an_elementwise_test(x):
    assert x > 0, "x must be positive"
    return x.sum()


def test_an_assert_of_more_than_one_value_is_refused_as_python_s_truth_test():
    # It was checked as all(x > 0): 6.0 where Python raises "The truth value of an array with
    # more than one element is ambiguous".
    with pytest.raises(ValueError, match="ambiguous"):
        asserts_an_elementwise_test(jnp.array([1.0, 2.0, 3.0]))
    line = line_of(asserts_an_elementwise_test, "assert x")
    with pytest.raises(StagingError, match=rf"assert's test is bool\[3\] \({HERE}:{line}"):
        jax.jit(transpiler.convert(asserts_an_elementwise_test))(jnp.array([1.0, 2.0, 3.0]))


def test_assert_with_python_values_is_python():
    def f(x):
        assert x > 0, f"got {x}"
        return x

    converted = transpiler.convert(f)
    assert converted(2) == 2
    with pytest.raises(AssertionError) as e:
        converted(-1)
    # (pytest rewrites asserts in test modules: it adds its explanation on the next line.)
    assert str(e.value).splitlines()[0] == "got -1"


def nested_append(x):
    out = []
    for i in range(3):
        for j in range(2):
            out.append(x * i + j)
    return jnp.stack(out), len(out)


def nested_conditional_append(x):
    out = []
    for i in range(3):
        for j in range(2):
            if x * i > j:
                out.append(x * i + j)
    return transpiler.padded(out)


def bounded_while_with_inner_append(x):
    out = []
    k = 0
    while x > 0 and k < 3:
        transpiler.loop_options(max_iterations=3)
        k += 1
        for j in range(2):
            out.append(x + j)
        x = x - 1
    return transpiler.padded(out)


def test_appends_in_nested_loops_are_counted_per_inner_iteration():
    check_jit(nested_append, jnp.float32(2.0))
    stacked, n = jax.jit(transpiler.convert(nested_conditional_append))(jnp.float32(2.0))
    expected, expected_n = nested_conditional_append(2.0)
    assert int(n) == expected_n == 4
    np.testing.assert_array_equal(stacked[:4], expected)
    np.testing.assert_array_equal(stacked[4:], 0)  # padding: the buffer has room for all 6
    stacked, n = jax.jit(transpiler.convert(bounded_while_with_inner_append))(jnp.float32(2.0))
    expected, expected_n = bounded_while_with_inner_append(2.0)
    assert int(n) == expected_n == 4
    np.testing.assert_array_equal(stacked[:4], expected)


State = collections.namedtuple("State", "position velocity")


def simulate(state, steps):
    for _ in range(steps):
        if state.position > 1.0:
            state = State(state.position, -abs(state.velocity))
        state = State(state.position + 0.1 * state.velocity, state.velocity)
    return state


def test_namedtuple_state_through_a_staged_loop_and_branch():
    start = State(jnp.float32(0.5), jnp.float32(2.0))
    check_jit(simulate, start, 20, static_argnums=(1,))
    check_grad(lambda v: simulate(State(jnp.float32(0.5), v), 20).position, jnp.float32(2.0))
    jaxpr = str(jax.make_jaxpr(transpiler.convert(simulate), static_argnums=1)(start, 20))
    # The branch (a negated abs, on its input masked by the condition) is a select in the scan.
    assert "scan[" in jaxpr and "select_n" in jaxpr and "cond[" not in jaxpr


def append_python_then_traced(x):
    out = [1]
    out.append(2)
    if x > 0:
        out.append(x)
    return transpiler.padded(out)


def test_append_under_a_traced_if_after_python_appends():
    for x in (5, -5):
        stacked, n = jax.jit(transpiler.convert(append_python_then_traced))(x)
        expected, expected_n = append_python_then_traced(x)
        assert int(n) == expected_n
        np.testing.assert_array_equal(stacked[: int(n)], expected)


def mixed_number_items(xs):
    out = [0]
    for x in xs:
        if x > 0:
            out.append(x)
        else:
            out.append(1)
    return jnp.stack(out)


def test_list_items_promote_like_jnp_stack():
    xs = jnp.array([0.5, -1.0, 2.0])
    check_jit(mixed_number_items, xs)


def read_by_a_lambda(x):
    if x > 0:
        s = x * 2
    else:
        s = x * 3
    return (lambda: s)()


def clipped_steps(g, loss):
    while loss > 0.1:
        norm = jnp.sqrt(sum(jnp.sum(v * v) for v in jax.tree.leaves(g)))
        g = jax.tree.map(lambda v: v * 0.5 / norm, g)  # noqa: B023 - `norm` read by a lambda
        loss = loss * 0.5
    return g, loss


def last_of_closures(x):
    fs = []
    i = 0
    while i < 3:
        s = x * i
        fs.append(lambda: s)  # noqa: B023 - late binding is what is tested
        i += 1
    return fs[0]() + fs[2]()


def test_variables_first_bound_in_staged_code_and_read_by_a_nested_function():
    # The variable is a closure cell, which the branch or body sets: it is the statement's own
    # state (set from its outputs afterwards), not Python state changed by tracing.
    check_jit(read_by_a_lambda, jnp.float32(3.0))
    check_jit(read_by_a_lambda, jnp.float32(-3.0))
    check_jit(clipped_steps, {"a": jnp.ones(2), "b": jnp.full(3, 2.0)}, jnp.float32(1.0))
    check_jit(last_of_closures, 2.0)  # late binding: every closure reads the last `s`


def casts_with_python_types(xs):
    return xs.astype(float), xs.astype(bool), jnp.asarray(xs, dtype=int), jnp.zeros(2, int)


def test_python_types_given_to_jax_as_dtypes_stay_types():
    # `x.astype(float)` under jax.jit: the staged `float` reached `astype` (TypeError: Cannot
    # interpret '<function float_>' as a data type).
    check_jit(casts_with_python_types, jnp.array([1, 0, 2]))


def _squared_error(params, x):
    return jnp.sum((params[0] * x - 1.0) ** 2) + jnp.sum(params[1] ** 2)


def fits_a_list_of_parameters(params, x):
    loss = _squared_error(params, x)
    while loss > 0.1:
        grads = jax.grad(_squared_error)(params, x)
        params = [p - 0.1 * g for p, g in zip(params, grads)]
        loss = _squared_error(params, x)
    return loss, params


def test_a_list_of_parameters_a_staged_loop_rebuilds_reaches_jax_as_a_list():
    # The list the loop's probe stood in for reached jax.grad ("not a valid JAX type").
    check_jit(fits_a_list_of_parameters, [jnp.array([0.5]), jnp.array([0.3])], jnp.array([2.0]))
