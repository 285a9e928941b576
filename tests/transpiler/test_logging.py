"""`transpiler.set_verbosity` and `TRANSPILER_VERBOSITY`: conversions and staged statements are
logged to the `astgraph` logger, and on stderr above verbosity 0."""

import importlib.util
import itertools
import logging
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import transpiler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODEL = """\
import jax.numpy as jnp


def model(x, n):
    i = 0
    while i < n:
        if jnp.sum(x) > 0:
            x = x * 0.5
        i += 1
    for row in x:
        x = x + row
    return x
"""

_fresh = itertools.count()


@pytest.fixture
def model(tmp_path, monkeypatch):
    """A function never converted before (conversions are cached), in a file of its own."""
    monkeypatch.chdir(tmp_path)  # messages name files relative to the working directory
    path = tmp_path / f"model_{next(_fresh)}.py"
    path.write_text(MODEL)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module.model
    transpiler.set_verbosity(0)


def lines_of(stderr: str) -> list[str]:
    """The logged lines, with the conversion time written as `T`."""
    return [re.sub(r"in \d+\.\d ms$", "in T ms", line) for line in stderr.splitlines()]


def test_verbosity_1_logs_each_conversion_and_each_staged_statement(model, capsys):
    transpiler.set_verbosity(1)
    assert transpiler.get_verbosity() == 1
    out = jax.jit(transpiler.convert(model))(jnp.ones(3), 3)
    assert jnp.allclose(out, model(jnp.ones(3), 3))
    name = model.__code__.co_filename.rsplit(os.sep, 1)[1]
    assert lines_of(capsys.readouterr().err) == [
        f"astgraph: converted 'model' ({name}:4) in T ms",
        f"astgraph: {name}:7: if → lax.select (cheap branches)",
        f"astgraph: {name}:6: while → lax.while_loop",
        f"astgraph: {name}:10: for → lax.scan",
    ]


def test_verbosity_2_also_logs_the_generated_source(model, capsys):
    transpiler.set_verbosity(2)
    converted = transpiler.convert(model)
    name = model.__code__.co_filename.rsplit(os.sep, 1)[1]
    err = capsys.readouterr().err
    header = f"astgraph: generated source of 'model' ({name}:4):\n"
    assert header + transpiler.to_source(converted) + "\n" in err


def test_verbosity_0_writes_nothing_and_python_values_log_nothing(model, capsys):
    transpiler.set_verbosity(1)
    converted = transpiler.convert(model)
    capsys.readouterr()
    assert converted(jnp.ones(3), 2).shape == (3,)  # Python decides: nothing staged
    assert capsys.readouterr().err == ""
    transpiler.set_verbosity(0)
    jax.jit(converted)(jnp.ones(3), 2)
    assert capsys.readouterr().err == ""


def test_applications_can_route_the_logger_themselves(model, capsys):
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("astgraph")
    handler = Collect()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        jax.jit(transpiler.convert(model))(jnp.ones(3), 3)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    assert capsys.readouterr().err == ""  # verbosity 0: no stderr handler of ours
    assert [r.split(": ", 1)[1] for r in records[1:]] == [
        "if → lax.select (cheap branches)",
        "while → lax.while_loop",
        "for → lax.scan",
    ]


@pytest.mark.parametrize("level", [-1, 3, "1", True, 1.0])
def test_bad_verbosity_is_refused(level):
    with pytest.raises(ValueError) as info:
        transpiler.set_verbosity(level)
    assert str(info.value) == f"the verbosity must be 0, 1 or 2, got {level!r}"


def test_the_environment_variable_sets_the_verbosity(tmp_path):
    (tmp_path / "prog.py").write_text(
        MODEL
        + "\nimport jax, transpiler\n"
        + "print(transpiler.get_verbosity())\n"
        + "jax.jit(transpiler.convert(model))(jnp.ones(3), 3)\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu", "TRANSPILER_VERBOSITY": "1"}
    done = subprocess.run(
        [sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n"
    assert lines_of(done.stderr) == [
        "astgraph: converted 'model' (prog.py:4) in T ms",
        "astgraph: prog.py:7: if → lax.select (cheap branches)",
        "astgraph: prog.py:6: while → lax.while_loop",
        "astgraph: prog.py:10: for → lax.scan",
    ]
    env["TRANSPILER_VERBOSITY"] = "loud"
    done = subprocess.run(
        [sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "ValueError: TRANSPILER_VERBOSITY must be 0, 1 or 2, got 'loud'"
    )
