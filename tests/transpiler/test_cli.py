"""The command line: `astgraph` / `python -m transpiler` (source, graph, export, run, demo)."""

import io
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from transpiler import cli
from transpiler.__main__ import main

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent

MODEL = """
import jax.numpy as jnp


def step(x, n):
    i = 0
    while jnp.sum(x) < 50.0 and i < n:
        if x[0] > 0:
            x = jnp.sort(x * x)  # a sort: not cheap elementwise work, a cond
        else:
            x = x - 1.0
        i += 1
    return x, i
"""


def astgraph(*args, cwd, check_exit=0):
    """`python -m transpiler ARGS` in a subprocess: (stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-m", "transpiler", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    assert done.returncode == check_exit, (done.stdout, done.stderr)
    return done.stdout, done.stderr


def test_source_prints_generated_code(capsys):
    assert main(["source", str(ROOT / "samples" / "piecewise.py"), "smooth_l1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("def smooth_l1(x, beta=1.0):") and "rt__.if_stmt(ax < beta" in out


def test_source_of_a_method_and_of_a_missing_name(capsys):
    path = str(ROOT / "samples" / "greedy_decoder.py")
    assert main(["source", path, "TinyDecoder.decode"]) == 0
    assert "rt__.while_stmt(" in capsys.readouterr().out
    assert main(["source", path, "nope"]) == 2
    assert "has no function 'nope'" in capsys.readouterr().err


def test_demo_runs_and_matches_eager_results():
    result = subprocess.run(
        [sys.executable, "-m", "transpiler", "demo", "--no-graph"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=True,
    )
    rows = [
        (line[2:42].strip(), line[43:].strip())
        for line in result.stdout.splitlines()
        if line.startswith("  ") and not line.startswith("   ") and len(line) > 43
    ]
    values = dict(rows)
    eager = values["eager Python        newton_sqrt(10.0)"].strip("()").split(", ")
    staged = values["converted + jit     newton_sqrt(10.0)"].strip("()").split(", ")
    assert abs(float(eager[0]) - float(staged[0])) < 1e-5 and eager[1] == staged[1]
    assert values["d sqrt(a)/da at 2, eager (jacfwd)"] == values["exact 1/(2 sqrt 2)"]
    assert values["d sqrt(a)/da at 2, converted + jit"] == values["exact 1/(2 sqrt 2)"]
    for name, flow in [
        ("newton_sqrt", "while x1"),
        ("clipped_rnn", "scan x1"),  # its clipping is a select of masked inputs
        ("smooth_l1", "no control flow"),  # under vmap a cond of cheap branches is a select
        ("band_count", "scan x1"),
        ("decode", "while x1"),  # bounded: a while loop, its max_len test in its condition
    ]:
        summary = rf"\n  graph of {name}: \d+ ops \({flow}\), \d+ fusions after XLA, .* FLOPs, peak memory "
        assert re.search(summary, result.stdout), (name, result.stdout)
    assert "compiling" not in result.stdout  # the progress line is for terminals only
    assert float(values["max |difference| of the gradients"]) < 1e-4
    assert values["band_count eager (NumPy input)"] == values["band_count converted, NumPy input"]
    assert values["eager Python: tokens, score"] == values["converted + jit: tokens, score"]


def test_source_with_a_source_map_in_a_subprocess():
    out, _ = astgraph("source", "samples/piecewise.py::smooth_l1", "--source-map", cwd=ROOT)
    assert out.startswith("def smooth_l1(x, beta=1.0):  # samples/piecewise.py:6\n")
    assert "  # samples/piecewise.py:9\n" in out and "\033[" not in out  # not a terminal


def test_graph_export_and_run_in_subprocesses(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    out, _ = astgraph("graph", "model.py::step", "--args", "f32[3], i32[]", cwd=tmp_path)
    assert out.startswith("graph of step: ")
    assert re.search(r"\n  model.py:7  while  x1\n  model.py:8  cond   x1\n", out), out
    out, _ = astgraph(
        "graph", "model.py::step", "--args", "f32[3], i32[]", "--format", "dot", cwd=tmp_path
    )
    assert out.startswith('digraph "step" {') and "while (model.py:7): body" in out

    out, _ = astgraph(
        "export", "model.py::step", "--args", "f32[3],i32[]", "-o", "step.bin", cwd=tmp_path
    )
    assert out == (
        "wrote step.bin: step(f32[3], i32[]) -> (f32[3], i32[]) for cpu, "
        f"{(tmp_path / 'step.bin').stat().st_size} bytes\n"
    )
    (tmp_path / "model.py").unlink()  # running needs only the artifact
    out, _ = astgraph("run", "step.bin", "--seed", "3", cwd=tmp_path)
    rng = np.random.default_rng(3)
    x, n = cli._random(rng, "float32", (3,)), cli._random(rng, "int32", ())
    expected_x, expected_i = _step(x, int(n))
    lines = out.splitlines()
    assert lines[0] == "step(f32[3], i32[]) -> (f32[3], i32[]), random inputs (seed 3):"
    assert lines[1:] == [
        f"  in 0  = {cli._show(x)}",
        f"  in 1  = {cli._show(n)}",
        f"  out 0 = {cli._show(expected_x)}",
        f"  out 1 = {cli._show(np.int32(expected_i))}",
    ]


def _step(x, n):
    """MODEL's `step`, in NumPy."""
    i = 0
    while np.sum(x) < 50.0 and i < n:
        x = np.sort(x * x) if x[0] > 0 else x - np.float32(1.0)
        i += 1
    return x, i


def test_bad_input_exits_with_code_2_in_subprocesses(tmp_path):
    (tmp_path / "plain.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "junk.bin").write_bytes(b"not an artifact")
    cases = [
        (("graph", "missing.py::f", "--args", "f32[3]"), "no such file: missing.py"),
        (("graph", "plain.py::g", "--args", "f32[3]"), "plain.py has no function 'g'"),
        (
            ("graph", "plain.py", "--args", "f32[3]"),
            "'plain.py': expected FILE::FUNC, e.g. model.py::step",
        ),
        (
            ("export", "plain.py::f", "--args", "f32[3", "-o", "f.bin"),
            "malformed --args 'f32[3': item 1 'f32[3': expected a dtype and a shape in "
            "brackets, like f32[8,16] or i32[]",
        ),
        (("source", "plain.py::nope"), "plain.py has no function 'nope'"),
        (("run", "missing.bin"), "no such file: missing.bin"),
        (
            ("run", "junk.bin"),
            "junk.bin is not an astgraph artifact: it does not start with b'ASTGRAPH' "
            "(transpiler.export(...).save(path) writes them)",
        ),
    ]
    for args, message in cases:
        _, err = astgraph(*args, cwd=tmp_path, check_exit=2)
        assert err == f"astgraph {args[0]}: error: {message}\n"


def test_args_specs_are_parsed():
    assert cli.parse_specs("f32[8,16], i32[]") == [("float32", (8, 16)), ("int32", ())]
    assert cli.parse_specs(" bf16[ 2 , 3 ],bool[4],u8[1] ") == [
        ("bfloat16", (2, 3)),
        ("bool", (4,)),
        ("uint8", (1,)),
    ]
    assert cli.parse_specs("") == []
    with pytest.raises(cli.UsageError) as e:
        cli.parse_specs("f32[2], float[3]")
    assert str(e.value) == (
        "malformed --args 'f32[2], float[3]': item 2 'float[3]': unknown dtype 'float' (known: "
        "bool, f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, c64, c128)"
    )
    with pytest.raises(cli.UsageError) as e:
        cli.parse_specs("f32[2,-1]")
    assert str(e.value) == (
        "malformed --args 'f32[2,-1]': item 1 'f32[2,-1]': expected a dtype and a shape in "
        "brackets, like f32[8,16] or i32[]"
    )
    assert cli.format_spec("float32", (8, 16)) == "f32[8,16]"


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def test_colours_only_for_a_terminal_without_no_color():
    assert cli.use_colour(_Stream(True), {})
    assert not cli.use_colour(_Stream(False), {})
    assert not cli.use_colour(_Stream(True), {"NO_COLOR": "1"})
    assert cli.use_colour(_Stream(True), {"NO_COLOR": ""})  # no-color.org: set and not empty


def test_colourized_source_is_the_source_plus_colours(capsys):
    assert main(["source", str(ROOT / "samples" / "piecewise.py"), "smooth_l1"]) == 0
    plain = capsys.readouterr().out.rstrip("\n")
    coloured = cli.colourize(plain)
    assert re.sub(r"\033\[[0-9;]*m", "", coloured) == plain
    assert "\033[36mrt__\033[0m.\033[36mif_stmt\033[0m(" in coloured
    assert coloured.startswith("\033[1;34mdef\033[0m \033[1msmooth_l1\033[0m(")


def test_the_astgraph_script_is_the_cli():
    pyproject = (ROOT / "pyproject.toml").read_text()
    scripts = pyproject.split("[project.scripts]\n", 1)[1].split("\n\n", 1)[0]
    assert scripts == 'astgraph = "transpiler.cli:main"'
    module, _, name = "transpiler.cli:main".partition(":")
    assert getattr(__import__(module, fromlist=[name]), name) is main


def test_a_file_that_fails_to_import_is_bad_input_with_its_line(tmp_path, capsys):
    (tmp_path / "bad_syntax.py").write_text("def f(x)\n    return x\n")
    (tmp_path / "raises.py").write_text("X = 1\nY = X / 0\n\ndef f(x):\n    return x\n")
    assert main(["source", str(tmp_path / "bad_syntax.py") + "::f"]) == 2
    assert "bad_syntax.py:1: SyntaxError" in capsys.readouterr().err
    assert main(["source", str(tmp_path / "raises.py") + "::f"]) == 2
    assert "raises.py:2: importing it raised ZeroDivisionError" in capsys.readouterr().err


FUNCTIONS = """
import jax.numpy as jnp


def gen(x):
    yield x


def choose(x):
    if x > 0:
        x = jnp.ones(3)
    return x


def good(x, y):
    return x + y
"""


def test_what_cannot_be_converted_traced_or_written_is_one_line_not_a_traceback(tmp_path, capsys):
    path = tmp_path / "functions.py"
    path.write_text(FUNCTIONS)
    assert main(["graph", f"{path}::gen", "--args", "f32[3]"]) == 1
    err = capsys.readouterr().err
    assert "functions.py:6:5: generators ('yield') cannot be converted" in err
    assert "Traceback" not in err
    assert main(["graph", f"{path}::choose", "--args", "f32[]"]) == 1
    err = capsys.readouterr().err
    assert "StagingError: 'x' is float32[3] in the true branch" in err and "Traceback" not in err
    for bad in (["--platforms", "nope", "-o", str(tmp_path / "x.bin")], ["-o", "/no/such/dir/x"]):
        assert main(["export", f"{path}::good", "--args", "f32[], f32[]", *bad]) == 2
        assert "astgraph export: error:" in capsys.readouterr().err


def _affine(params, x):
    return params["w"] * x + params["b"]


def test_run_takes_an_artifact_with_pytree_arguments(tmp_path, capsys):
    import jax.numpy as jnp

    import transpiler

    path = tmp_path / "affine.bin"
    transpiler.export(_affine, {"w": jnp.ones(3), "b": jnp.zeros(3)}, jnp.ones(3)).save(path)
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "_affine(f32[3], f32[3], f32[3]) -> (f32[3])" in out and "in 2  = f32[3]" in out
