"""The public API: convert, jit, to_source, caching, closures, methods."""

import functools
import importlib.util
import linecache

import jax
import jax.numpy as jnp
import pytest

import transpiler
from transpiler import api

SCALE = 2.0


def uses_global(x):
    if x > 0:
        x = x * SCALE
    return x


def test_public_api_is_exactly_these_names():
    assert sorted(transpiler.__all__) == [
        "Artifact",
        "ArtifactError",
        "ConversionError",
        "ExportError",
        "Graph",
        "GraphvizError",
        "convert",
        "do_not_convert",
        "export",
        "graph",
        "jit",
        "load",
        "loop_options",
        "padded",
        "to_source",
    ]


def test_globals_are_read_at_call_time():
    global SCALE
    converted = transpiler.convert(uses_global)
    assert converted(1.0) == 2.0
    SCALE = 5.0
    try:
        assert converted(1.0) == 5.0
    finally:
        SCALE = 2.0


def test_closures_are_read_at_call_time_and_share_generated_code():
    def make(scale):
        def scaled(x):
            if x > 0:
                x = x * scale
            return x

        return scaled

    f2, f3 = make(2.0), make(3.0)
    c2, c3 = transpiler.convert(f2), transpiler.convert(f3)
    assert jax.jit(c2)(1.0) == 2.0 and jax.jit(c3)(1.0) == 3.0
    assert c2.__wrapped__ is f2
    # One code object, one generated module: both closures reuse it.
    shared = api._generated.get(f2, api.Options())
    assert shared is not None and api._generated.get(f3, api.Options()) is shared


def test_closure_cell_changes_are_seen():
    offset = 1.0

    def f(x):
        while x < 10:
            x = x + offset
        return x

    converted = transpiler.convert(f)
    assert converted(0.0) == 10.0
    offset = 4.0
    assert converted(0.0) == 12.0
    assert jax.jit(converted)(0.0) == 12.0


def test_convert_is_cached_per_function():
    assert transpiler.convert(uses_global) is transpiler.convert(uses_global)
    assert transpiler.convert(transpiler.convert(uses_global)) is transpiler.convert(uses_global)


class Model:
    def __init__(self, threshold):
        self.threshold = threshold

    def __call__(self, x):
        return self.apply(x)

    def apply(self, x):
        if jnp.sum(x) > self.threshold:
            x = x / 2
        return x


def test_bound_methods_keep_self():
    model = Model(1.0)
    converted = transpiler.convert(model.apply)
    assert converted.__self__ is model
    x = jnp.array([1.0, 2.0])
    assert jnp.allclose(jax.jit(converted)(x), model.apply(x))


def test_decorator_forms():
    @transpiler.convert
    def a(x):
        return x if x > 0 else 0.0

    @transpiler.jit
    def b(x):
        return x if x > 0 else 0.0

    @transpiler.jit(static_argnames="power")
    def c(x, power):
        for _ in range(power):
            x = x * 2 if x < 100 else x
        return x

    assert a(-1.0) == 0.0 and float(b(3.0)) == 3.0 and float(c(1.0, power=3)) == 8.0
    assert float(c(1.0, power=10)) == 128.0


def test_nested_functions_are_converted_with_their_parent():
    def outer(x):
        def helper(v):
            if v > 0:
                v = v * 10
            return v

        return helper(x) + helper(-x)

    assert jax.jit(transpiler.convert(outer))(1.0) == 9.0
    assert "if_stmt" in transpiler.to_source(outer).split("return helper")[0]


def test_lambdas_convert():
    relu = transpiler.convert(lambda x: x if x > 0 else 0.0 * x)
    assert float(jax.jit(relu)(-3.0)) == 0.0 and float(jax.jit(relu)(3.0)) == 3.0


def test_to_source_is_readable():
    def f(x, n):
        i = 0
        while i < n:
            x = x * 2
            i += 1
        return x

    assert transpiler.to_source(f) == (
        "def f(x, n):\n"
        "    i = 0\n"
        "\n"
        "    def loop_test(i, x):\n"
        "        return i < n\n"
        "\n"
        "    def loop_body(i, x):\n"
        "        x = x * 2\n"
        "        i += 1\n"
        "        return (i, x)\n"
        "    i, x = rt__.while_stmt(loop_test, loop_body, (i, x), symbol_names=('i', 'x'))\n"
        "    return x"
    )
    assert transpiler.to_source(transpiler.convert(f)) == transpiler.to_source(f)


def test_generated_names_never_clash_with_user_names():
    def f(x, if_true, loop_body):
        if x > 0:
            x = x + if_true
        for i in range(2):  # noqa: B007
            x = x + loop_body
        return x

    source = transpiler.to_source(f)
    assert "def if_true_1(" in source and "def loop_body_1(" in source
    assert jax.jit(transpiler.convert(f))(1.0, 2.0, 3.0) == 9.0


def test_user_decorators_are_not_reapplied():
    calls = []

    def counting(fn):
        calls.append(fn.__name__)
        return fn

    @counting
    def f(x):
        return -x if x < 0 else x

    assert transpiler.convert(f)(-2) == 2
    assert calls == ["f"]


def test_wrapped_functions_are_converted_as_the_wrapper():
    def base(x):
        return x

    @functools.wraps(base)
    def wrapper(x):
        return base(x) + 1 if x > 0 else base(x)

    assert transpiler.convert(wrapper)(1) == 2


def test_global_and_nonlocal_writes_in_converted_blocks():
    counter = 0

    def f(xs):
        nonlocal counter
        for x in xs:
            if x > 0:
                counter += 1
        return counter

    assert transpiler.convert(f)([1, -1, 2]) == 2
    assert counter == 2


@pytest.mark.parametrize("jit_kwargs", [{}, {"static_argnums": 1}])
def test_jit_passes_options_to_jax(jit_kwargs):
    def f(x, n):
        for _ in range(n):
            x = x + 1.0
        return x

    assert float(transpiler.jit(f, **jit_kwargs)(0.0, 3)) == 3.0


def factorial(n):
    if n <= 1:
        return 1
    return n * factorial(n - 1)


def test_recursive_functions_call_the_global_name():
    assert transpiler.convert(factorial)(5) == 120


class Base:
    def f(self, x):
        return x + 1


class Child(Base):
    def f(self, x):
        y = super().f(x)
        if y > 2:
            y = y * 2
        return y


def test_zero_argument_super_in_a_converted_method():
    child = Child()
    assert transpiler.convert(child.f)(3.0) == 8.0
    assert float(jax.jit(transpiler.convert(child.f))(3.0)) == 8.0


def test_modules_imported_inside_the_function_are_called_as_they_are():
    def f(x):
        import jax.numpy as np_local

        return np_local.sum(x) if x.shape[0] > 1 else x[0]

    assert float(jax.jit(transpiler.convert(f))(jnp.ones(3))) == 3.0


class ChildInBranch(Base):
    def f(self, x):
        if x > 2:
            x = super().f(x)
        return x


def test_zero_argument_super_inside_a_staged_branch():
    child = ChildInBranch()
    assert float(jax.jit(transpiler.convert(child.f))(3.0)) == 4.0
    assert transpiler.convert(child.f)(1.0) == 1.0


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_file_edited_after_import_is_refused(tmp_path):
    path = tmp_path / "edited.py"
    path.write_text("def f(x):\n    if x > 0:\n        return x\n    return -x\n")
    module = _import(path, "edited")
    path.write_text("def f(x):\n    if x > 0:\n        return 2 * x\n    return -x\n")
    linecache.checkcache(str(path))
    with pytest.raises(transpiler.ConversionError, match="the file changed after it was imported"):
        transpiler.convert(module.f)
    # Lines added above the function: also caught (the source found is not f's).
    path.write_text("\n\n" + "def f(x):\n    if x > 0:\n        return x\n    return -x\n")
    linecache.checkcache(str(path))
    with pytest.raises(transpiler.ConversionError):
        transpiler.convert(module.f)


def test_equal_code_in_two_files_keeps_two_source_maps(tmp_path):
    source = "def f(x):\n    if x > 0:\n        x = x.undefined\n    return x\n"
    functions = []
    for name in ("first", "second"):
        (tmp_path / f"{name}.py").write_text(source)
        functions.append(_import(tmp_path / f"{name}.py", name).f)
    assert functions[0].__code__ == functions[1].__code__  # equal by value, as CPython compares
    for fn, name in zip(functions, ("first", "second")):
        with pytest.raises(AttributeError) as info:
            jax.grad(transpiler.convert(fn))(1.0)  # traced, so the converted code runs
        assert f"{name}.py:3" in "".join(getattr(info.value, "__notes__", []))


def test_private_attributes_in_converted_methods():
    class Scaled:
        def __init__(self):
            self.__scale = 3.0

        def __call__(self, x):
            if x > 0:
                return x * self.__scale
            return x

    model = Scaled()
    assert transpiler.convert(model.__call__)(2.0) == 6.0
    assert jax.jit(transpiler.convert(model.__call__))(2.0) == 6.0


def test_nothing_is_left_behind_when_a_converted_function_is_dropped(tmp_path):
    import gc
    import os
    import sys
    import types
    import weakref

    module = tmp_path / "dropped.py"
    module.write_text(
        "def make(k):\n"
        "    def g(x):\n"
        "        if x > k:\n"
        "            x = x - 1\n"
        "        return x\n"
        "    return g\n"
    )
    mod = _import(module, "dropped")
    sys.modules["dropped"] = mod  # as imported modules are
    g = mod.make(1)
    converted = transpiler.convert(g)
    assert converted(3) == 2
    (generated,) = [
        cell.cell_contents
        for cell in converted.__closure__
        if isinstance(cell.cell_contents, types.FunctionType)
        and cell.cell_contents.__code__.co_filename.endswith(".astgraph.py")
    ]
    filename = generated.__code__.co_filename
    assert os.path.exists(filename) and filename in linecache.cache
    alive = weakref.ref(g), weakref.ref(converted)
    del g, converted, generated
    gc.disable()  # no reference cycle may hold them: freed without the cycle collector
    try:
        assert [ref() for ref in alive] == [None, None]
    finally:
        gc.enable()
    # The generated code is cached for the code object of `g`, a constant of the module's
    # `make`: it goes with the module (whose functions and globals are a cycle, as always).
    assert os.path.exists(filename)
    del mod, sys.modules["dropped"]
    gc.collect()
    assert not os.path.exists(filename) and filename not in linecache.cache
