"""Conversion of deep and long code: linear in its size, and a ConversionError where it is too
deep, never a RecursionError. (No timings: the shapes below took minutes when a pass was
exponential in the nesting depth, and raised RecursionError when it recursed per level.)"""

import importlib.util
import sys

import jax
import jax.numpy as jnp
import pytest

import transpiler
from transpiler import api


def _load(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nested_loops(depth):
    lines = ["def f(x, n):"]
    for k in range(depth):
        lines.append("    " * (k + 1) + f"for i{k} in range(n):")
        lines.append("    " * (k + 2) + f"t{k} = x + i{k}")
    lines.append("    " * (depth + 1) + "x = x + 1")
    lines.append("    return x")
    return "\n".join(lines) + "\n"


def _nested_ifs(depth):
    lines = ["def f(x):"]
    for k in range(depth):
        lines.append("    " * (k + 1) + f"if x > {k}:")
        lines.append("    " * (k + 2) + f"y{k} = x - {k}")
    lines.append("    " * (depth + 1) + "x = x + 1")
    lines.append("    return x")
    return "\n".join(lines) + "\n"


def test_twenty_nested_loops_convert_and_run(tmp_path):
    # 20 is Python's own limit on statically nested blocks.
    f = _load(tmp_path, "loops20", _nested_loops(20)).f
    assert "rt__.for_stmt" in transpiler.to_source(f)
    assert transpiler.convert(f)(0, 1) == f(0, 1) == 1
    assert jax.jit(transpiler.convert(f))(jnp.int32(0), 1) == 1


def test_ninety_nested_ifs_convert_and_run(tmp_path):
    f = _load(tmp_path, "ifs90", _nested_ifs(90)).f
    converted = transpiler.convert(f)
    for x in (0, 45, 100):
        assert converted(x) == f(x)


def test_thirty_nested_staged_ifs(tmp_path):
    # Tracing 90 nested lax.conds needs more Python frames than JAX has by default; 30 do not.
    f = _load(tmp_path, "ifs30", _nested_ifs(30)).f
    staged = jax.jit(transpiler.convert(f))
    for x in (0, 15, 100):
        assert staged(jnp.int32(x)) == f(x)


def test_a_thousand_term_expression_converts(tmp_path):
    f = _load(tmp_path, "sum1000", "def f(x):\n    return " + " + ".join(["x"] * 1000) + "\n").f
    assert transpiler.convert(f)(1.0) == 1000.0
    assert sys.getrecursionlimit() < api._RECURSION_LIMIT  # raised only while converting


def test_too_deep_code_is_a_conversion_error_naming_the_line(tmp_path, monkeypatch):
    source = "def f(x):\n    y = x\n    return " + " + ".join(["y"] * 1500) + "\n"
    f = _load(tmp_path, "deep1500", source).f
    monkeypatch.setattr(api, "_RECURSION_LIMIT", 1200)
    limit = sys.getrecursionlimit()
    with pytest.raises(transpiler.ConversionError) as info:
        transpiler.convert(f)
    message = str(info.value)
    assert "nested too deeply" in message and "deep1500.py:3:" in message
    assert "return y + y" in message
    assert sys.getrecursionlimit() == limit
