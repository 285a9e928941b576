"""Errors name the variable, the construct and the user's file:line; whole messages are matched."""

import math
import os
import sys

import jax
import jax.numpy as jnp
import pytest

import transpiler
from runtime import StagingError

HERE = os.path.relpath(__file__)


def line_of(fn, text):
    """The line number in this file of the first line of `fn` containing `text`."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return start + offset
    raise AssertionError(text)


def defined_in_one_branch(x):
    if x > 0:
        y = x * 2
    return y


def test_variable_defined_in_one_branch():
    # Staged, it is read where Python reads it: where it is unbound, the program raises.
    compiled = jax.jit(transpiler.convert(defined_in_one_branch))
    assert compiled(1.0) == 2.0
    line = line_of(defined_in_one_branch, "return y")
    with pytest.raises(jax.errors.JaxRuntimeError) as e:
        compiled(-1.0).block_until_ready()
    assert "UnboundLocalError: cannot access local variable 'y'" in str(e.value)
    assert f"in converted code at {HERE}:{line}" in str(e.value)


def checked_positive(x):
    assert x > 0, "x must be positive"
    return x


def raises_when_negative(x):
    if x < 0:
        raise ValueError("negative")
    return x


@pytest.mark.parametrize(
    "fn, message",
    [
        (defined_in_one_branch, "local variable 'y'"),
        (checked_positive, "x must be positive"),
        (raises_when_negative, "negative"),
    ],
)
def test_a_check_failing_as_the_program_runs_is_reported_once(fn, message, caplog):
    # JAX logs a failing callback's exception ("jax.debug.callback failed", with a traceback
    # into the runtime) before raising it again: the user's error is the raised one only.
    compiled = jax.jit(transpiler.convert(fn))
    with caplog.at_level("DEBUG"), pytest.raises(jax.errors.JaxRuntimeError, match=message):
        compiled(-1.0).block_until_ready()
    assert [r.getMessage() for r in caplog.records if "callback failed" in r.getMessage()] == []


def name_in_one_branch(x):
    if x > 0:
        label = "positive"
    return label


def test_a_python_object_defined_in_one_branch():
    line = line_of(name_in_one_branch, "if x > 0")
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(name_in_one_branch))(1.0)
    assert str(e.value) == (
        f"'label' is set in the true branch but not in the false branch ({HERE}:{line}, if "
        "statement), and it is used after the if, but its value there is the str 'positive', which a staged "
        "program cannot hold: give 'label' a value before the if, or in both branches."
    )


def test_variable_defined_in_one_branch_python_path_raises_like_python():
    converted = transpiler.convert(defined_in_one_branch)
    assert converted(1.0) == 2.0
    with pytest.raises(UnboundLocalError, match="'y'"):
        converted(-1.0)


def shape_mismatch(x):
    if x[0] > 0:
        x = x[:2]
    return x


def test_branches_disagree_on_shape():
    line = line_of(shape_mismatch, "if x[0]")
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(shape_mismatch))(jnp.ones(3))
    assert str(e.value) == (
        f"'x' is float32[2] in the true branch but float32[3] in the false branch ({HERE}:{line},"
        " if statement). With a traced condition both branches must give 'x' the same shape and "
        "dtype."
    )


def dtype_mismatch(x, i):
    if x > 0:
        i = i + 1
    else:
        i = jnp.float32(0.5)
    return i


def test_branches_disagree_on_dtype():
    line = line_of(dtype_mismatch, "if x > 0")
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(dtype_mismatch))(1.0, jnp.int32(1))
    assert str(e.value) == (
        f"'i' is int32[] in the true branch but float32[] in the false branch ({HERE}:{line}, if "
        "statement). With a traced condition both branches must give 'i' the same dtype; cast "
        "one of them, e.g. with .astype(jnp.int32)."
    )


def structure_mismatch(x):
    if x > 0:
        s = (x, x)
    else:
        s = x
    return s


def test_branches_disagree_on_structure():
    line = line_of(structure_mismatch, "if x > 0")
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(structure_mismatch))(1.0)
    assert str(e.value) == (
        f"'s' is (float32[], float32[]) in the true branch but float32[] in the false branch "
        f"({HERE}:{line}, if statement). With a traced condition both branches must give 's' the "
        "same structure: arrays (or tuples, lists, dicts of arrays, registered pytrees), or the "
        "very same Python object."
    )


def loop_shape_change(x, n):
    i = 0
    while i < n:
        x = jnp.concatenate([x, x])
        i += 1
    return x


def test_while_variable_changes_shape():
    line = line_of(loop_shape_change, "while i < n")
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(loop_shape_change))(jnp.ones(2), 3)
    assert str(e.value) == (
        f"'x' is float32[2] before the while loop but float32[4] after one iteration ({HERE}:"
        f"{line}, while loop). Loop variables must keep their shape and dtype; pad x to a fixed "
        "size or carry its length separately."
    )


def loop_dtype_change(x, n):
    i = 0
    while i < n:
        x = x * 0.5
        i += 1
    return x


def test_while_variable_changes_dtype():
    line = line_of(loop_dtype_change, "while i < n")
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(loop_dtype_change))(jnp.int32(7), 3)
    assert str(e.value) == (
        f"'x' is int32[] before the while loop but float32[] after one iteration ({HERE}:{line},"
        " while loop). Loop variables must keep their dtype; give x its final dtype before the "
        "loop, or cast inside it with .astype(jnp.int32)."
    )


def defined_only_in_loop(x):
    while x < 10:
        last = x
        x = x * 2
    return last


def test_while_variable_defined_only_inside_the_loop():
    compiled = jax.jit(transpiler.convert(defined_only_in_loop))
    assert compiled(1.0) == defined_only_in_loop(1.0) == 8.0
    with pytest.raises(jax.errors.JaxRuntimeError, match="local variable 'last'"):
        compiled(20.0).block_until_ready()  # the loop never runs: Python raises too


def vector_condition(x):
    if x > 0:
        x = -x
    return x


def test_non_scalar_condition():
    line = line_of(vector_condition, "if x > 0")
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(vector_condition))(jnp.ones(3))
    assert str(e.value) == (
        f"the condition is bool[3] ({HERE}:{line}, if statement: `if x > 0:`); a condition "
        "must be a single value, as in Python. "
        "Reduce it first, e.g. with jnp.any(...) or jnp.all(...)."
    )


def vector_condition_commented(x):
    while x[0] > 0:  # a "#" in the comment; x[0] is a row of a matrix
        x = x - 1
    return x


def test_non_scalar_condition_shows_the_line_without_its_comment():
    with pytest.raises(StagingError, match=r"while loop: `while x\[0\] > 0:`\); a condition"):
        jax.jit(transpiler.convert(vector_condition_commented))(jnp.ones((2, 2)))


def test_errors_hide_runtime_frames():
    with pytest.raises(StagingError) as e:
        jax.jit(transpiler.convert(shape_mismatch))(jnp.ones(3))
    files = [str(entry.path) for entry in e.traceback]
    assert not any(os.sep + "runtime" + os.sep in f for f in files), files


def user_bug(x):
    if x > 0:
        y = x[3]  # x is a scalar: IndexError
    else:
        y = x
    return y


@pytest.mark.python_path
def test_exceptions_in_converted_code_note_the_user_line():
    line = line_of(user_bug, "y = x[3]")
    with pytest.raises(IndexError) as e:  # traced (with its value known): converted code runs
        jax.grad(transpiler.convert(user_bug))(jnp.float32(1.0))
    if sys.version_info >= (3, 11):
        assert e.value.__notes__[0] == (
            f"while running converted code at {HERE}:{line}: y = x[3]  # x is a scalar: IndexError"
        )
    # Evaluated eagerly, the function runs as Python: the error is raised at the user's line.
    with pytest.raises(IndexError) as e:
        transpiler.convert(user_bug)(jnp.float32(1.0))
    users = [entry for entry in e.traceback if str(entry.path).endswith(HERE)]
    assert users[-1].lineno + 1 == line
    assert not any(".astgraph.py" in str(entry.path) for entry in e.traceback)


def generator(xs):
    for x in xs:  # noqa: UP028 - the construct under test
        yield x


def test_generators_are_rejected_with_file_and_line():
    line = line_of(generator, "yield x")
    with pytest.raises(transpiler.ConversionError) as e:
        transpiler.convert(generator)
    assert str(e.value) == (
        f"{HERE}:{line}:9: generators ('yield') cannot be converted\n"
        "    yield x\n"
        "Return a list or an array instead of yielding."
    )


def unbound_default(x):
    y = x
    if x > 0:
        del y
    return locals().get("y", -100.0)


def evaluated(x, text):
    if x > 0:
        x = x + 1
    return eval(text)  # noqa: S307 - the construct under test


def evaluated_in(x, text):
    if x > 0:
        x = x + 1
    return eval(text, {"x": x})  # noqa: S307 - the construct under test


def test_reading_the_frame_is_refused_with_file_and_line():
    # Converted code keeps variables in the functions it generates: locals() there is not
    # Python's (here: `y` after the staged `del`).
    line = line_of(unbound_default, "locals()")
    with pytest.raises(transpiler.ConversionError) as e:
        transpiler.convert(unbound_default)
    message = str(e.value)
    assert message.startswith(f"{HERE}:{line}:12: locals() reads the variables of the frame")
    assert "build what you need" in message.lower()
    with pytest.raises(transpiler.ConversionError, match=r"eval\(\) reads the variables"):
        transpiler.convert(evaluated)
    assert float(jax.jit(transpiler.convert(evaluated_in), static_argnums=1)(2.0, "x * 2")) == 6.0


def test_reserved_prefix_is_rejected():
    def f(x):
        rt__x = x
        return rt__x

    with pytest.raises(transpiler.ConversionError, match="reserved for generated code"):
        transpiler.convert(f)


def test_function_without_source():
    namespace = {}
    exec("def typed_in_a_repl(x):\n    return x\n", namespace)
    with pytest.raises(transpiler.ConversionError) as e:
        transpiler.convert(namespace["typed_in_a_repl"])
    assert str(e.value).startswith("cannot read the source of 'typed_in_a_repl' (<string>:1)")
    assert "Put the function in a module" in str(e.value)


def test_non_function_is_rejected():
    with pytest.raises(transpiler.ConversionError, match="it is a PjitFunction|not a Python"):
        transpiler.convert(jax.jit(abs))


def test_reverse_mode_through_a_library_while_loop_names_the_line_and_the_fix():
    @transpiler.do_not_convert
    def library_solver(x):
        return jax.lax.while_loop(lambda v: v < 10.0, lambda v: v * 1.5, x)

    def train_step(x):
        return jax.grad(library_solver)(x)

    with pytest.raises(ValueError) as info:
        jax.jit(transpiler.convert(train_step))(jnp.float32(1.0))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "test_errors.py" in notes and "jax.grad(library_solver)(x)" in notes
    assert "Write that loop in the converted function" in notes


WEIGHTS = [1.0, 2.0, 3.0, 4.0]


def weighted_until_large(xs, n):
    ws = WEIGHTS  # a module's list, not one the function makes: `ws[i]` is Python's
    s, i = 0.0, 0
    while s < 100 and i < n:
        s = s + ws[i] * xs[i]
        i += 1
    return s


def c_function_of_a_traced_value(x):
    return math.sqrt(x)


@pytest.mark.parametrize(
    "fn, args, line, fix",
    [
        (weighted_until_large, (jnp.ones(4), 3), "s = s + ws[i] * xs[i]", "jnp.asarray(items)"),
        (c_function_of_a_traced_value, (2.0,), "return math.sqrt(x)", "jnp.sqrt(x)"),
    ],
)
def test_a_traced_value_where_python_needs_one_names_the_line_and_the_fix(fn, args, line, fix):
    with pytest.raises(jax.errors.JAXTypeError) as info:
        transpiler.jit(fn)(*args)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert f"test_errors.py:{line_of(fn, line)}: {line}" in notes and fix in notes


def _recursing_in_both_branches(x, depth):
    if depth == 0:
        return x
    if x > 0:
        return _recursing_in_both_branches(x - 1, depth - 1) * 2
    return _recursing_in_both_branches(x + 1, depth - 1)


def test_recursion_on_a_traced_value_fails_fast_naming_the_fix():
    # A recursive call in each branch: deferring the RecursionError to when a branch runs
    # traced each level again (2^40 traces: a hang). Static, the depth ends it.
    assert _recursing_in_both_branches(1.5, 3) == 2.0
    staged = jax.jit(transpiler.convert(_recursing_in_both_branches))
    with pytest.raises(RecursionError) as info:
        staged(1.5, 3)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "test_errors.py" in notes and "static argument" in notes
    static = jax.jit(transpiler.convert(_recursing_in_both_branches), static_argnums=1)
    assert static(1.5, 3) == 2.0


def best_labelled_pair(x):
    pairs = [(x[1], "b"), (x[0], "a")]
    best = max(pairs, key=lambda p: p[0])
    return len(best[1]) * x[0]


class _Point:
    def __init__(self, a):
        self.a = a


def clamped_point(p, x):
    if x > p.a:
        return _Point(x)
    return p


def test_choices_between_python_objects_are_refused_with_what_to_do():
    # max() with traced keys over items holding strings raised NumPy's ValueError from the
    # runtime; two objects of one class said "a _Point on one path and a _Point on another".
    with pytest.raises(StagingError, match=r"the items compared are \(float32\[\], the str 'b'\)"):
        transpiler.jit(best_labelled_pair)(jnp.array([1.0, -2.0]))
    with pytest.raises(
        StagingError,
        match=r"returns a _Point on one path and a different _Point on another .* register the "
        "class as a pytree",
    ):
        jax.jit(transpiler.convert(clamped_point), static_argnums=0)(_Point(1.0), 2.0)


class CountingLayer:
    def __init__(self, scale):
        self.scale, self.calls = scale, 0

    def __call__(self, x):
        self.calls += 1
        return x * self.scale


def through_counting_layers(layers, x):
    for layer in layers:
        x = layer(x)
        if x > 10:
            break
    return x


def through_layers_counted(layers, x):
    n_calls = 0
    for layer in layers:
        x = layer.scale * x
        n_calls += 1
        if x > 10:
            break
    return x, n_calls


def test_a_count_of_calls_after_a_traced_break_names_the_attribute_and_the_way_out():
    layers = [CountingLayer(2.0), CountingLayer(3.0), CountingLayer(4.0)]
    with pytest.raises(StagingError) as raised:
        transpiler.jit(lambda x: through_counting_layers(layers, x))(jnp.float32(3.0))
    message = str(raised.value)
    assert "layer.calls changes from Python int 0 to Python int 1" in message
    assert "count in a variable of the function instead, `n_calls += 1`" in message
    assert "equinox" not in message
    x, n = transpiler.jit(lambda x: through_layers_counted(layers, x))(jnp.float32(3.0))
    assert (float(x), int(n)) == (18.0, 2)
