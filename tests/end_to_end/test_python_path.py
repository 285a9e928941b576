"""Called eagerly (no transformation tracing), a converted function runs the original: Python's
semantics by construction, at Python's speed. Traced, it runs the converted code."""

import sys

import jax
import jax.numpy as jnp
import pytest

import transpiler

pytestmark = pytest.mark.python_path


def where_it_runs(x):
    if x > 0:
        x = x + 1
    return x, sys._getframe().f_code.co_filename


def test_python_values_run_the_original_function():
    value, filename = transpiler.convert(where_it_runs)(1)
    assert value == 2 and filename == __file__


def test_concrete_arrays_run_the_original_function():
    value, filename = transpiler.convert(where_it_runs)(jnp.float32(1.0))
    assert value == 2.0 and filename == __file__


def test_traced_values_run_the_converted_code():
    def first(x):
        return where_it_runs(x)[0]

    seen = []

    def record(x):
        value, filename = where_it_runs(x)
        seen.append(filename)
        return value

    assert jax.grad(transpiler.convert(record))(1.0) == 1.0  # traced, value known
    assert jax.jit(transpiler.convert(first))(1.0) == 2.0
    assert seen and seen[0] != __file__  # (converted, `sys._getframe` is called from the runtime)


def bounded_count(n):
    i = 0
    while i < n:
        transpiler.loop_options(max_iterations=3)
        i += 1
    return i


def test_a_bounded_loop_stays_bounded_on_python_values():
    # loop_options(max_iterations=N) bounds the loop in Python too: such a function runs its
    # converted code eagerly as well.
    assert transpiler.convert(bounded_count)(10) == 3
    assert bounded_count(10) == 10  # unconverted, the directive does nothing
