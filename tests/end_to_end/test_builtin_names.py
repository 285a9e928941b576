"""A name that reads like a builtin (`print`, `str`, `len`) is the builtin only where Python
resolves it to one: a local `def print`, `import ... as print`, a parameter, a comprehension
variable or a class attribute of the name is called as the user's object, converted or not,
on every path. Each function runs as Python, then converted on Python values and under
`jax.jit`, with the same printed output and the same result."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import transpiler


def local_print_collects(x):
    calls = []

    def print(*args):  # the function's own `print`
        calls.append(args)

    print("hello")
    return x + len(calls)


def local_str_in_a_print(x):
    def str(v):
        return "<hidden>"

    print("value:", str(x))
    return x


def print_imported_under_the_name(x):
    from pprint import pprint as print

    print(list(range(30)), width=40)
    return x


def builtin_print_beside_a_helper_with_its_own(x):
    def helper(v):
        print = lambda *args: None  # noqa: E731 - the helper's own, silent
        print(v)
        return v + 1

    print("x is", x)
    return helper(x)


def comprehension_variable_named_like_builtins(x):
    total = x
    for len in [abs]:  # noqa: B007 - `len` rebound by the loop, then called
        total = total + len(-2.0)
    return total + sum([repr(1.0) == "1.0" for repr in [str]])


def class_attribute_named_print(x):
    class Report:
        lines = []
        print = lines.append
        print("kept")  # the class body's own `print`, not the builtin

    print("lines:", len(Report.lines))
    return x * 2


CASES = [
    local_print_collects,
    local_str_in_a_print,
    print_imported_under_the_name,
    builtin_print_beside_a_helper_with_its_own,
    comprehension_variable_named_like_builtins,
    class_attribute_named_print,
]


@pytest.mark.parametrize("fn", CASES, ids=lambda fn: fn.__name__)
def test_names_like_builtins_keep_their_binding(fn, capsys):
    expected = fn(1.0)
    printed = capsys.readouterr().out

    assert transpiler.convert(fn)(1.0) == expected
    assert capsys.readouterr().out == printed

    traced = jax.jit(transpiler.convert(fn))(jnp.float32(1.0))
    jax.effects_barrier()
    assert float(traced) == float(expected)
    assert capsys.readouterr().out == printed
