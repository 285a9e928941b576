"""The command line: `python -m transpiler source ...` and the demo (the README's main job)."""

import pathlib
import subprocess
import sys

from transpiler.__main__ import main

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


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
    assert "graph: cond x1, scan x1 (50 time steps)" in result.stdout
    assert float(values["max |difference| of the gradients"]) < 1e-4
    assert values["band_count eager (NumPy input)"] == values["band_count converted, NumPy input"]
    assert values["eager Python: tokens, score"] == values["converted + jit: tokens, score"]
