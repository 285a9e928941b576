"""Reading a function's definition from its file."""

import jax
import pytest

import transpiler
from transpiler import loading, parsing


def ends_with_code_cpython_drops(x):
    while True:
        if x > 0:
            return x
    # CPython compiles nothing for the lines below (unreachable after `while True:`); a
    # definition read up to its code's last line lost them.
    x = -x
    return x


def ends_with_a_comment(x):
    return x
    # a comment of the function's


TOP_LEVEL = 1  # after the definition: not part of it

# Functions a comprehension makes: their qualified names are `<listcomp>.<lambda>`, which was
# taken for a method's class (the generated code declared `global <listcomp>`: a SyntaxError).
SCALES = [lambda v, k=k: v * k if v > 0 else -v for k in range(3)]
SHIFTS = list(lambda v, k=k: v + k if v > 0 else v - k for k in range(3))


def test_a_definition_keeps_the_lines_cpython_compiles_to_nothing():
    source = loading.unparse(parsing.parse_function(ends_with_code_cpython_drops).node)
    assert source.rstrip().endswith("x = -x\n    return x")


def test_a_definition_ends_where_its_block_ends():
    source = loading.unparse(parsing.parse_function(ends_with_a_comment).node)
    assert source == "def ends_with_a_comment(x):\n    return x"


def test_functions_a_comprehension_makes_convert():
    assert float(transpiler.jit(SCALES[2])(3.0)) == 6.0
    assert float(transpiler.jit(SCALES[2])(-3.0)) == 3.0
    assert float(jax.jit(transpiler.convert(SHIFTS[1]))(-3.0)) == -4.0


async def _awaited(x):
    return x


def test_an_async_function_is_refused_as_one():
    with pytest.raises(transpiler.ConversionError, match="'_awaited' is an async function") as e:
        transpiler.convert(_awaited)
    assert "test_parsing.py:" in str(e.value) and "decorator" not in str(e.value)
