"""Called eagerly (no transformation tracing), a converted function runs the original: Python's
semantics by construction, at Python's speed. Traced, it runs the converted code."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
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


def huber(r):
    if jnp.abs(r) < 1.0:
        return 0.5 * r**2
    return jnp.abs(r) - 0.5


def mean_huber(r):
    return jnp.mean(jax.vmap(huber)(r))


def positive_sum(r):
    def step(c, v):
        if v > 0:
            c = c + v
        return c, c

    return jax.lax.scan(step, 0.0, r)[0]


def test_a_function_handing_its_functions_to_jax_runs_converted_on_python_values():
    # On concrete arrays the original would give `huber` to jax.vmap unconverted, and its `if`
    # on a traced value would fail: such a function runs its converted code, as under jit.
    r = jnp.array([0.5, 2.0])
    for fn, want in ((mean_huber, 0.8125), (positive_sum, 2.5)):
        assert float(transpiler.convert(fn)(r)) == want == float(transpiler.jit(fn)(r))
        assert float(transpiler.convert(fn)(np.asarray(r))) == want


def signature_zoo(a, b=2, /, c=3, *rest, d, e=[], **options):  # noqa: B006 - the shared default is tested
    e.append(a)
    shared = e is signature_zoo.__kwdefaults__["e"]
    if a > b:
        return a, b, c, rest, d, shared, options
    return -a, b, c, rest, d, shared, options


def test_the_python_path_binds_arguments_exactly_as_the_original():
    converted = transpiler.convert(signature_zoo)
    calls = [
        ((5,), {"d": 1}),
        ((5, 1, 7, 8, 9), {"d": 1, "z": 0}),
        ((0,), {"d": 4, "e": []}),
        ((5, 6), {"c": 1, "d": 2, "x": 3}),
    ]
    for args, kwargs in calls:
        assert converted(*args, **kwargs) == signature_zoo(*args, **kwargs)
    # The mutable default is the original's own list: both appended to it.
    assert signature_zoo.__kwdefaults__["e"] is converted.__kwdefaults__["e"]
    assert signature_zoo.__kwdefaults__["e"] == [5, 5, 5, 5, 5, 5]


def test_the_python_path_rejects_bad_calls_with_the_original_message():
    converted = transpiler.convert(signature_zoo)
    bad_calls = [
        ((), {"d": 1}),
        ((1,), {}),
        ((1,), {"d": 1, "c": 2, "b": 3}),  # b is positional-only: it goes to **options
        ((1, 2, 3), {"c": 4, "d": 1}),
    ]
    for args, kwargs in bad_calls:
        try:
            expected = signature_zoo(*args, **kwargs)
        except TypeError as e:
            expected = str(e)
        try:
            got = converted(*args, **kwargs)
        except TypeError as e:
            got = str(e)
        assert got == expected


def test_the_python_path_keeps_the_wrapped_attributes():
    import functools
    import inspect

    def documented(x: int, *, scale: float = 2.0) -> float:
        """Scales x."""
        return x * scale

    documented.custom = "kept"
    converted = transpiler.convert(documented)
    for attribute in functools.WRAPPER_ASSIGNMENTS:
        assert getattr(converted, attribute) == getattr(documented, attribute), attribute
    assert converted.__wrapped__ is documented and converted.custom == "kept"
    assert inspect.signature(converted) == inspect.signature(documented)
    assert converted(3) == 6.0 and converted(3, scale=1.0) == 3.0


def parameters_named_like_builtins(type, BaseException=1, *args, **kwargs):  # noqa: A002, N803
    return type, BaseException, args, kwargs


def test_parameters_may_be_named_like_the_builtins_the_wrapper_uses():
    converted = transpiler.convert(parameters_named_like_builtins)
    assert converted("t", 2, 3, k=4) == ("t", 2, (3,), {"k": 4})
    assert jax.jit(lambda x: converted(x, x, x, k=x)[1])(2.0) == 2.0


class Counter:
    def __init__(self):
        self.count = 0

    def add(self, n=1):
        if n > 0:
            self.count += n
        return self.count


def test_methods_bind_on_the_python_path():
    Converted = type("Converted", (Counter,), {"add": transpiler.convert(Counter.add)})
    c = Converted()
    assert c.add() == 1 and c.add(3) == 4 and Converted.add(c, n=2) == 6
    bound = transpiler.convert(Counter().add)
    assert bound(5) == 5 and bound.__self__.count == 5


def test_lambdas_and_keyword_arguments_under_jit():
    converted = transpiler.convert(lambda x, *, k=1: x * k if x > 0 else -x)
    assert converted(2.0, k=3) == 6.0
    assert jax.jit(converted)(jnp.float32(2.0), k=3) == 6.0
    assert jax.jit(converted)(jnp.float32(-2.0)) == 2.0


def raises_in_python(x):
    if x > 0:
        raise ValueError(f"positive: {x}")
    return x


def test_the_python_path_shows_no_frame_of_its_own():
    import traceback

    with pytest.raises(ValueError) as info:
        transpiler.convert(raises_in_python)(1)
    text = "".join(traceback.format_exception(info.value))
    assert "<converted function>" not in text and "_runtime_bridge" not in text
    assert f'File "{__file__}", line' in text and 'raise ValueError(f"positive: {x}")' in text


def test_converted_code_forced_in_one_thread_leaves_the_others_on_the_python_path():
    import threading

    from transpiler import _runtime_bridge

    converted = transpiler.convert(where_it_runs)
    seen = []
    with _runtime_bridge.converted_code_on_python_values():
        assert converted(1)[1] != __file__  # the converted code ran
        thread = threading.Thread(target=lambda: seen.append(converted(1)[1]))
        thread.start()
        thread.join()
    assert seen == [__file__]
    assert converted(1)[1] == __file__


def test_defaults_rebound_after_conversion_are_the_converted_functions_too():
    # The converted function kept the defaults it was made with (2.0 where Python gives 101.0).
    def shifted(x, k=1.0):
        return x + k

    def shifted_by_keyword(x, *, k=1.0):
        return x + k

    assert transpiler.convert(shifted)(1.0) == 2.0
    shifted.__defaults__ = (100.0,)
    assert transpiler.convert(shifted)(1.0) == 101.0
    assert float(jax.jit(transpiler.convert(shifted))(1.0)) == 101.0
    assert transpiler.convert(shifted_by_keyword)(1.0) == 2.0
    shifted_by_keyword.__kwdefaults__ = {"k": 50.0}
    assert transpiler.convert(shifted_by_keyword)(1.0) == 51.0
