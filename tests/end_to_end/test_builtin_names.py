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
from runtime import StagingError


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


def print_given_as_a_parameter(x, print=print):
    if x > 0:
        print("pos", x)
    else:
        print("neg", x)
    return x


def print_mapped_over_values(x):
    list(map(print, [x, x + 1]))
    return x


@pytest.mark.parametrize(
    "fn", [print_given_as_a_parameter, print_mapped_over_values], ids=lambda fn: fn.__name__
)
def test_print_as_a_value_is_the_staged_print(fn, capsys):
    fn(1.5)
    printed = capsys.readouterr().out
    jax.jit(transpiler.convert(fn))(jnp.float32(1.5))
    jax.effects_barrier()
    assert capsys.readouterr().out == printed  # once, the branch taken, values not tracers


def test_a_module_level_function_named_print_is_called_converted(capsys):
    from tests.end_to_end import shadowing_module as m

    jax.jit(transpiler.convert(m.uses_module_print))(jnp.float32(1.5))
    jax.effects_barrier()
    assert capsys.readouterr().out == "[log] positive 1.5\n"


def test_a_builtin_the_module_defines_after_conversion_is_the_modules():
    from tests.end_to_end import shadowing_module as m

    assert m.uses_len_defined_below(1.0) == 102.0  # Python calls the module's `len`
    # Converted (by the decorator) before the module defined `len`: converted again now.
    assert float(jax.jit(m.converted_before_len)(jnp.float32(1.0))) == 102.0
    assert float(jax.jit(transpiler.convert(m.uses_len_defined_below))(jnp.float32(1.0))) == 102.0


def test_the_builtin_itself_bound_in_the_module_is_still_the_builtin():
    from tests.end_to_end import shadowing_module as m

    assert float(jax.jit(m.converted_before_builtin_import)(jnp.float32(1.0))) == 5.0


def test_a_name_the_function_makes_a_global_is_resolved_when_it_runs():
    from tests.end_to_end import shadowing_module as m

    traced = jax.jit(transpiler.convert(m.assigns_a_global_builtin_name))(jnp.float32(1.0))
    assert float(traced) == m.assigns_a_global_builtin_name(1.0) == 1.0


class _Recorder:
    def __init__(self):
        self.kept = []

    def stack(self, values):
        self.kept.append(values)
        return 0


def local_named_like_a_module(x):
    jnp = _Recorder()  # not jax.numpy: its `stack` keeps the list
    out = []
    jnp.stack(out)
    if x > 0:
        out.append(x)
    return len(jnp.kept[0])


def test_a_local_named_like_a_module_is_not_the_module():
    assert local_named_like_a_module(1.0) == 1
    # The list escapes into the object: appending to it in a staged if cannot be staged.
    with pytest.raises(StagingError, match="out"):
        jax.jit(transpiler.convert(local_named_like_a_module))(jnp.float32(1.0))


class _Base:
    def __init__(self, v):
        self.v = v

    def val(self):
        return self.v


class _Derived(_Base):
    def val(self):
        return self.v * 2

    def from_others(self, others, x):
        if x > 0:
            x = x + 1
        nested = list(map(lambda o: super(_Derived, o).val(), others))  # noqa: UP008
        first = list(map(lambda o: super().val(), others))[0]
        return x + first + nested[0]


def test_zero_argument_super_in_a_lambda_uses_the_lambdas_argument():
    me, other = _Derived(jnp.float32(1.5)), _Derived(jnp.float32(3.0))
    expected = me.from_others([other], jnp.float32(1.0))
    converted = transpiler.convert(me.from_others)
    assert float(jax.jit(lambda x: converted([other], x))(jnp.float32(1.0))) == float(expected)
    assert float(expected) == 8.0  # 2 + the other's value, twice


def assert_with_a_changing_message(x):
    log = []
    assert x > 0, log.append("failed") or "x must be positive"
    return x + len(log)


def assert_with_a_plain_message(x):
    assert x > 0, f"x must be positive, got {x}"
    return x


def test_an_assert_message_that_changes_state_is_refused_when_the_test_is_traced():
    assert assert_with_a_changing_message(1.5) == 1.5
    with pytest.raises(StagingError, match="message of an assert"):
        jax.jit(transpiler.convert(assert_with_a_changing_message))(jnp.float32(1.5))
    converted = jax.jit(transpiler.convert(assert_with_a_plain_message))
    assert float(converted(jnp.float32(1.5))) == 1.5
    with pytest.raises(Exception, match="x must be positive, got -1.5"):
        converted(jnp.float32(-1.5)).block_until_ready()


def assert_with_a_message_that_raises(x):
    settings = {}
    assert x > 0, f"bad x for {settings['name']}"  # Python makes it only if x <= 0
    return x


def assert_with_a_library_formatted_message(x):
    import equinox as eqx

    assert x > 0, eqx.tree_pformat({"a": 1}) + f" {x}"
    return x


def test_an_assert_message_is_only_a_message_while_the_assertion_holds():
    converted = jax.jit(transpiler.convert(assert_with_a_message_that_raises))
    assert float(converted(jnp.float32(2.0))) == 2.0  # Python never made the message
    with pytest.raises(Exception, match="KeyError"):
        converted(jnp.float32(-2.0)).block_until_ready()
    library = jax.jit(transpiler.convert(assert_with_a_library_formatted_message))
    assert float(library(jnp.float32(2.0))) == 2.0  # library code makes text: not refused
