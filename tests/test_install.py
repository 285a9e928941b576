"""The package as a user gets it: built into a wheel, installed (not editable), run elsewhere.

The repository's packaging files and packages are copied to a temporary folder (so the build
leaves nothing in the source tree), installed from there with `pip install --no-deps --target`
into another folder, and run with only that folder on `PYTHONPATH` from a third one. Its
dependencies (JAX, ...) are those of the interpreter running the tests. The editable install of
the source tree cannot shadow the installed copy: setuptools' editable finder comes after the
path entries on `sys.meta_path`, `PYTHONPATH` comes before site-packages, the working directory
is not the repository, and each subprocess checks where its modules came from.
"""

import importlib.metadata
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("transpiler", "runtime", "samples")
SAMPLES = sorted(p.stem for p in (ROOT / "samples").glob("[!_]*.py"))


def _builds_wheels_offline() -> bool:
    """Whether this interpreter's setuptools can build a wheel with no download (a build
    without isolation): setuptools 70.1 and later have `bdist_wheel`, earlier ones need `wheel`."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major, minor = (int(part) for part in version.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


def _env(target: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return {**env, "PYTHONPATH": str(target), "JAX_PLATFORMS": "cpu", "PYTHONNOUSERSITE": "1"}


def _python(target, *args, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(target),
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> pathlib.Path:
    """The folder the package is installed into (`pip install --no-deps --target`)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for name in PACKAGES:
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path_factory.mktemp("site") / "target"
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target)]
    if _builds_wheels_offline():
        command += ["--no-build-isolation", "--no-index"]
    # Otherwise pip fetches setuptools into an isolated build environment from the package
    # index, as it did for the editable install of the source tree.
    done = subprocess.run(
        [*command, str(source)], capture_output=True, text=True, cwd=source, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def test_the_wheel_holds_the_packages_and_they_are_what_runs(installed, tmp_path):
    assert sorted(p.name for p in installed.iterdir() if (p / "__init__.py").exists()) == sorted(
        PACKAGES
    )  # not tests/ nor benchmarks/
    assert sorted(p.stem for p in (installed / "samples").glob("[!_]*.py")) == SAMPLES
    probe = "import runtime, samples, transpiler\nfor m in (runtime, samples, transpiler): print(m.__file__)\n"
    done = _python(installed, "-c", probe, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert pathlib.Path(line).is_relative_to(installed), line


# `python -m transpiler demo --no-graph`, after printing where `transpiler` and `samples` come from
# (`runpy.run_module` is what `python -m` runs).
DEMO = """
import importlib.util, runpy, sys
import transpiler
print(transpiler.__file__)
print(importlib.util.find_spec("samples").origin, flush=True)
sys.argv = ["transpiler", "demo", "--no-graph"]
runpy.run_module("transpiler", run_name="__main__", alter_sys=True)
"""


def test_demo_runs_from_the_installed_package(installed, tmp_path):
    done = _python(installed, "-c", DEMO, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    transpiler_file, samples_file, *_ = done.stdout.splitlines()
    assert pathlib.Path(transpiler_file) == installed / "transpiler" / "__init__.py"
    assert pathlib.Path(samples_file) == installed / "samples" / "__init__.py"
    out = done.stdout
    for section in (
        "== samples/newton_sqrt.py:",
        "== samples/clipped_rnn.py:",
        "== samples/piecewise.py:",
        "== samples/greedy_decoder.py:",
    ):
        assert section in out, out
    assert "generated source:" in out and "rt__.while_stmt(" in out
    for name in ("newton_sqrt", "clipped_rnn", "smooth_l1", "band_count", "decode"):
        assert f"\n  graph of {name}: " in out, out
    assert "converted + jit" in out and "d score / d h0, converted + jit (norm)" in out
    assert "Traceback" not in done.stderr


def test_a_sample_runs_as_a_module_from_the_installed_package(installed, tmp_path):
    done = _python(installed, "-m", "samples.newton_sqrt", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "graph of newton_sqrt: " in done.stdout and "sqrt(10) = 3.162278" in done.stdout
