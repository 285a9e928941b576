"""Random programs: converted (Python path, jit, vmap) equals plain Python, exactly."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from tests.fuzz.programs import program

SEEDS = range(int(__import__("os").environ.get("FUZZ_SEEDS", 40)))
INPUTS = [(0, 0), (3, 7), (50, 2), (-4, 11), (96, 96)]


def load(tmp_path, seed):
    path = tmp_path / f"program_{seed}.py"
    path.write_text(program(seed))
    spec = importlib.util.spec_from_file_location(f"program_{seed}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program(tmp_path, seed):
    f = load(tmp_path, seed)
    converted = transpiler.convert(f)
    expected = [f(x, y) for x, y in INPUTS]
    assert [converted(x, y) for x, y in INPUTS] == expected, program(seed)
    staged = jax.jit(converted)
    got = [int(staged(x, y)) for x, y in INPUTS]
    assert got == expected, program(seed)
    xs, ys = (jnp.array(v) for v in zip(*INPUTS))
    np.testing.assert_array_equal(jax.jit(jax.vmap(converted))(xs, ys), expected)
