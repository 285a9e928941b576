"""The dependency rules of the package tree, checked on the sources."""

import ast
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_runtime_never_imports_transpiler():
    for path in (ROOT / "runtime").rglob("*.py"):
        assert not any(m.split(".")[0] == "transpiler" for m in imports(path)), path


def test_no_private_jax_imports():
    for package in ("runtime", "transpiler", "samples", "benchmarks"):
        for path in (ROOT / package).rglob("*.py"):
            assert not any(m.startswith("jax._src") for m in imports(path)), path
            assert "jax._src" not in path.read_text(), path


def test_transforming_code_does_not_import_jax(tmp_path):
    script = (
        "import sys, transpiler\n"
        "from transpiler import api\n"
        "def f(x):\n"
        "    return x if x > 0 else -x\n"
        "assert 'rt__.if_exp' in api.to_source(f)\n"
        "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)\n"
    )
    script_path = tmp_path / "probe.py"
    script_path.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(script_path)], check=True, cwd=tmp_path, env=env)


_MUTABLE_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
_MUTABLE_CONSTRUCTORS = {
    "list",
    "dict",
    "set",
    "defaultdict",
    "WeakSet",
    "WeakKeyDictionary",
    "WeakValueDictionary",
    "OrderedDict",
    "deque",
    "Counter",
}


def test_runtime_has_no_module_level_mutable_state():
    """Trace state lives in context variables or is passed explicitly: threads never share it."""
    for path in (ROOT / "runtime").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id.startswith("__") for t in targets):
                continue  # __all__
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                value = node.value
                name = getattr(getattr(value, "func", None), "attr", None) or getattr(
                    getattr(value, "func", None), "id", None
                )
                assert not isinstance(value, _MUTABLE_DISPLAYS), (path, node.lineno)
                assert name not in _MUTABLE_CONSTRUCTORS, (path, node.lineno)
            assert not isinstance(node, ast.Global), (path, node.lineno)
            if isinstance(node, ast.FunctionDef):
                assert not any(isinstance(n, ast.Global) for n in ast.walk(node)), (path, node.name)


def test_api_pipeline_and_runtime_bridge_import_no_circle():
    """The pipeline and the bridge are below the API; directives are a leaf."""
    transpiler = ROOT / "transpiler"
    assert not any(m.startswith("transpiler.api") for m in imports(transpiler / "pipeline.py"))
    assert not any("api" in m for m in imports(transpiler / "_runtime_bridge.py"))
    assert not any(m.startswith("transpiler") for m in imports(transpiler / "directives.py"))
    for path in (transpiler / "passes").glob("*.py"):
        assert "transpiler.api" not in imports(path), path
