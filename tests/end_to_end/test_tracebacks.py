"""Errors raised through converted code read as the user's code ran: the rendered traceback
(`traceback.format_exception`) names the user's file:line, and shows no frame of generated code
(files ending `.astgraph.py`) or of the runtime, under `jax.jit`, `jax.grad` and `jax.vmap`."""

import inspect
import os
import subprocess
import sys
import traceback

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import runtime
import transpiler
from runtime import StagingError

HERE = __file__
RELATIVE = os.path.relpath(__file__)
OWN = (
    os.path.dirname(runtime.__file__) + os.sep,
    os.path.dirname(transpiler.__file__) + os.sep,
)

TRANSFORMS = {
    "jit": lambda f, x: jax.jit(f)(x),
    "grad": lambda f, x: jax.grad(lambda v: jnp.sum(f(v)))(x),
    "vmap": lambda f, x: jax.vmap(f)(jnp.stack([x, x])),
}


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def rendered(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def frame(name: str, line: int) -> str:
    """How a traceback shows a frame of this file."""
    return f'File "{HERE}", line {line}, in {name}'


def assert_users(text: str) -> None:
    assert ".astgraph.py" not in text, text
    assert not any(directory in text for directory in OWN), text
    assert "During handling of the above exception" not in text, text


def run(transform: str, fn, x=None):
    x = jnp.ones(3) if x is None else x
    with pytest.raises(Exception) as info:
        TRANSFORMS[transform](transpiler.convert(fn), x)
    return info.value


# -- an error in a helper, called from converted code directly or through JAX ----------------


def helper(x):
    return x + jnp.ones(4)  # x has 3 items: a shape error


HELPER_LINE = line_of(helper, "jnp.ones(4)")


def calls_helper(x):
    return helper(x) * 2


def vmaps_helper(x):
    return jax.vmap(helper)(x[None])[0]


def scans_with_helper(x):
    return lax.scan(lambda carry, row: (carry, helper(row)), 0.0, x[None])[1][0]


def grads_through_helper(x):
    return jax.grad(lambda v: jnp.sum(helper(v)))(x)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize(
    "fn, call",
    [
        (calls_helper, "helper(x) * 2"),
        (vmaps_helper, "jax.vmap(helper)"),
        (scans_with_helper, "lax.scan("),
        (grads_through_helper, "jax.grad(lambda"),
    ],
    ids=["direct", "jax.vmap", "lax.scan", "jax.grad"],
)
def test_a_shape_error_in_a_helper_shows_the_helpers_line(transform, fn, call):
    error = run(transform, fn)
    assert isinstance(error, TypeError)
    assert str(error) == "add got incompatible shapes for broadcasting: (3,), (4,)."
    text = rendered(error)
    assert_users(text)
    assert frame(fn.__name__, line_of(fn, call)) in text
    assert frame("helper", HELPER_LINE) + "\n    return x + jnp.ones(4)  # x has 3" in text
    # The frame standing in for the helper's generated code holds its variables (for pdb.pm()).
    (stand_in,) = [
        f for f, _ in traceback.walk_tb(error.__traceback__) if f.f_code.co_name == "helper"
    ]
    assert stand_in.f_locals["x"].shape == (3,)


# -- in a staged branch or loop body -------------------------------------------------------------


def branch_calls_helper(x):
    if jnp.sum(x) > 0:
        x = helper(x)
    return x


def loop_calls_helper(x):
    while jnp.sum(x) < 100.0:
        x = helper(x)
    return x


@pytest.mark.parametrize(
    "fn, statement", [(branch_calls_helper, "if "), (loop_calls_helper, "while ")]
)
@pytest.mark.parametrize("transform", ["grad", "vmap"])
def test_a_shape_error_in_a_staged_body_shows_the_users_lines(transform, fn, statement):
    # Under jax.grad the condition has a value: the statement runs as Python, and the error is
    # raised while tracing. Under jax.vmap the branch is staged, and raises when it runs.
    error = run(transform, fn)
    text = rendered(error)
    assert_users(text)
    assert frame(fn.__name__, line_of(fn, statement)) in text
    if transform == "grad":
        assert frame(fn.__name__, line_of(fn, "x = helper(x)")) in text
        assert frame("helper", HELPER_LINE) in text
    else:  # raised by the program: the line that raised it is in the note
        assert f"while running converted code at {RELATIVE}:{HELPER_LINE}: " in text


@pytest.mark.parametrize("fn", [branch_calls_helper, loop_calls_helper])
def test_a_shape_error_in_a_staged_body_under_jit_shows_the_helpers_line(fn):
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.jit(transpiler.convert(fn))(jnp.ones(3)).block_until_ready()
    text = rendered(info.value)
    assert "TypeError: add got incompatible shapes for broadcasting" in text
    assert f'File "{HERE}", line {HELPER_LINE}, in helper\n' in text
    assert ".astgraph.py" not in text


def test_raised_again_at_the_users_lines_every_printer_ends_there():
    from runtime import errors

    error = run("grad", branch_calls_helper)  # raised while traced, through converted code
    with pytest.raises(TypeError) as info:
        errors.raise_at_users_lines(TypeError(*error.args), error.__traceback__)
    # XLA prints the stack of the innermost frame, by its callers: the user's lines, last.
    innermost = list(traceback.walk_tb(info.value.__traceback__))[-1][0]
    stack = [(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) for f in walk_back(innermost)]
    assert stack[:2] == [
        (HERE, HELPER_LINE, "helper"),
        (HERE, line_of(branch_calls_helper, "x = helper(x)"), "branch_calls_helper"),
    ]
    assert not any(s[0].endswith(".astgraph.py") for s in stack)
    text = rendered(info.value)
    assert frame("helper", HELPER_LINE) + "\n    return x + jnp.ones(4)  # x has 3" in text


def walk_back(frame):
    while frame is not None:
        yield frame
        frame = frame.f_back


# -- tracers that leak -------------------------------------------------------------------------

STASH = []


def stashes_in_a_branch(x):
    if jnp.sum(x) > 0:
        STASH.append(x)
        x = x + 1
    return x


@pytest.mark.parametrize("transform", ["jit", "vmap"])
def test_a_tracer_leaked_from_a_staged_branch_names_the_if(transform):
    STASH.clear()
    error = run(transform, stashes_in_a_branch)
    assert isinstance(error, StagingError)
    line = line_of(stashes_in_a_branch, "if jnp.sum")
    assert str(error).startswith(
        f"STASH (a list) grows from 0 to 1 items while the if statement is traced "
        f"({RELATIVE}:{line}, if statement)"
    )
    text = rendered(error)
    assert_users(text)
    assert frame("stashes_in_a_branch", line) in text
    assert STASH == []  # put back as it was


def stashes(x):
    y = x * 2
    STASH.append(y)
    return y


def uses_the_stash(x):
    z = x + STASH[0]
    return z


@pytest.mark.parametrize("transform", ["grad", "vmap"])
def test_an_unexpected_tracer_names_the_users_lines(transform):
    STASH.clear()
    jax.jit(transpiler.convert(stashes))(jnp.ones(3))  # a tracer leaks (plain Python does it too)
    error = run(transform, uses_the_stash)
    assert isinstance(error, jax.errors.UnexpectedTracerError)
    text = rendered(error)
    assert_users(text)
    assert frame("uses_the_stash", line_of(uses_the_stash, "z = x + STASH[0]")) in text
    created = line_of(stashes, "y = x * 2")
    assert f"The leaked intermediate value was created on line {RELATIVE}:{created} (stashes)" in (
        str(error)
    )
    STASH.clear()


@pytest.mark.xfail(
    strict=True,
    reason="jax.jit finds the leaked tracer when it runs the program, after converted code "
    "returned: JAX's message names the generated line it was created at",
)
def test_an_unexpected_tracer_found_by_jit_names_the_users_line():
    STASH.clear()
    jax.jit(transpiler.convert(stashes))(jnp.ones(3))
    error = run("jit", uses_the_stash)
    STASH.clear()
    assert isinstance(error, jax.errors.UnexpectedTracerError)
    assert ".astgraph.py" not in rendered(error)


# -- reverse mode ----------------------------------------------------------------------------


@jax.custom_vjp
def clipped(x):
    return x


def clipped_fwd(x):
    return x, None


def clipped_bwd(_, g):
    return (g + jnp.ones(4),)  # the shape bug is in the backward rule


clipped.defvjp(clipped_fwd, clipped_bwd)
BWD_LINE = line_of(clipped_bwd, "jnp.ones(4)")


def loss(x):
    y = jnp.sin(x)
    if jnp.sum(y) > 0:
        y = clipped(y)
    return jnp.sum(y)


def takes_the_gradient(x):
    return jax.grad(loss)(x)


@pytest.mark.parametrize("transform", ["jit", "vmap"])
def test_an_error_in_a_backward_rule_shows_its_line(transform):
    error = run(transform, takes_the_gradient)
    assert str(error) == "add got incompatible shapes for broadcasting: (3,), (4,)."
    text = rendered(error)
    assert_users(text)
    assert frame("clipped_bwd", BWD_LINE) in text
    assert frame("takes_the_gradient", line_of(takes_the_gradient, "jax.grad(loss)")) in text
    # JAX's "stack trace before transformation": where the operation was staged, as written.
    assert frame("loss", line_of(loss, "y = clipped(y)")) in text


@pytest.mark.xfail(
    strict=True,
    reason="jax.grad runs the backward pass after converted code returned: JAX chains the "
    "stack trace of the forward pass as it captured it, generated frames included",
)
def test_an_error_in_a_backward_rule_under_an_outer_grad_shows_no_generated_frame():
    with pytest.raises(TypeError) as info:
        jax.grad(transpiler.convert(loss))(jnp.ones(3))
    text = rendered(info.value)
    assert frame("clipped_bwd", BWD_LINE) in text
    assert_users(text)


@transpiler.do_not_convert
def library_solver(x):
    return lax.while_loop(lambda v: jnp.sum(v) < 10.0, lambda v: v * 1.5, x)


def differentiates_the_solver(x):
    return jax.grad(lambda v: jnp.sum(library_solver(v)))(x)


@pytest.mark.parametrize("transform", ["jit", "vmap"])
def test_reverse_mode_through_a_library_while_loop_names_the_users_lines(transform):
    error = run(transform, differentiates_the_solver)
    assert isinstance(error, ValueError)
    text = rendered(error)
    assert_users(text)
    solver_line = line_of(library_solver, "lax.while_loop")
    assert frame("library_solver", solver_line) in text
    assert "Write that loop in the converted function" in text


# -- asking for the generated frames ------------------------------------------------------------


def test_generated_frames_are_shown_when_asked_for(tmp_path):
    script = tmp_path / "show.py"
    script.write_text(
        "import traceback\n"
        "import jax, jax.numpy as jnp\n"
        "import transpiler\n"
        "def f(x):\n"
        "    if jnp.sum(x) > 0:\n"
        "        x = x + jnp.ones(4)\n"
        "    return x\n"
        "try:\n"
        "    jax.grad(lambda v: jnp.sum(transpiler.convert(f)(v)))(jnp.ones(3))\n"
        "except TypeError as e:\n"
        "    print(''.join(traceback.format_exception(e)))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def run_it(show: str) -> str:
        env = {**os.environ, "PYTHONPATH": root, "JAX_PLATFORMS": "cpu"}
        env["TRANSPILER_SHOW_GENERATED_FRAMES"] = show
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, check=True
        )
        return done.stdout

    hidden, shown = run_it("0"), run_it("1")
    assert ".astgraph.py" not in hidden and f'File "{script}", line 6, in f' in hidden
    assert ".astgraph.py" in shown and f'File "{script}", line 6, in f' not in shown
