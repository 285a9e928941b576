"""The public API: convert, jit, to_source, caching, closures, methods."""

import ast
import functools
import importlib.util
import linecache

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from transpiler import api, loading, parsing

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
        "ConversionWarning",
        "ExportError",
        "Graph",
        "GraphvizError",
        "convert",
        "do_not_convert",
        "export",
        "get_verbosity",
        "graph",
        "jit",
        "load",
        "loop_options",
        "padded",
        "run_eagerly",
        "running_eagerly",
        "set_verbosity",
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


def names_defined_in_branches_and_loops(k):
    for _ in range(1):
        transpiler.loop_options(max_iterations=3)  # the converted code runs on Python values
    names = []
    if k > 0:

        def inner(q):
            return q

        names += [inner.__qualname__, (lambda: 0).__qualname__]
    for _ in range(2):

        class Local:
            pass

        names.append(Local.__qualname__)
    try:
        (lambda q: q)()
    except TypeError as e:
        names.append(str(e))
    return names


def test_functions_defined_in_converted_blocks_keep_their_qualified_names():
    # They were `...if_true.<locals>.inner`: the generated function they were moved into.
    want = names_defined_in_branches_and_loops(1)
    assert transpiler.convert(names_defined_in_branches_and_loops)(1) == want
    assert want[0] == "names_defined_in_branches_and_loops.<locals>.inner"


def test_lambdas_convert():
    relu = transpiler.convert(lambda x: x if x > 0 else 0.0 * x)
    assert float(jax.jit(relu)(-3.0)) == 0.0 and float(jax.jit(relu)(3.0)) == 3.0


OPS = {
    "double": lambda x: x * 2 if x > 0 else -x,
    "half": lambda x: x / 2,
}


def test_lambdas_in_a_dict_display_convert():
    converted = transpiler.convert(OPS["double"])
    assert "if_exp" in transpiler.to_source(converted)
    assert float(jax.jit(converted)(-3.0)) == 3.0 and float(jax.jit(converted)(2.0)) == 4.0


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
        "    i, x = rt__.while_stmt(loop_test, loop_body, (i, x), symbol_names=('i', 'x'), "
        "reads=('x',), sums=('i',), counted=('i', lambda: n, 0), test_reads=('i',), "
        "compared=('i',))\n"
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


def test_unedited_functions_that_call_imported_modules_are_told_apart_cheaply(
    tmp_path, monkeypatch
):
    # CPython 3.11 compiles `np.sum(x)` differently where `np` is an import of the module: the
    # check compiles the definition after the module's imports, so its code is the code that
    # runs, told without disassembling (and without `_fingerprint`), at the top level, in a
    # closure and in a method.
    path = tmp_path / "imports.py"
    path.write_text(
        "import numpy as np\n"
        "from numpy import linalg\n"
        "def f(x):\n    return np.sum(x) + linalg.norm(x)\n"
        "def h(x):\n    return np.sum(x) - linalg.norm(x)\n"
        "def make(k):\n    def g(x):\n        return np.sum(x) * k\n    return g\n"
        "class Model:\n    def __call__(self, x):\n        return np.abs(x).sum()\n"
    )
    module = _import(path, "imports")
    monkeypatch.setattr(parsing, "_fingerprint", None)  # calling it fails the test
    x = np.array([3.0, -4.0])
    assert transpiler.convert(module.f)(x) == module.f(x)
    assert transpiler.convert(module.make(2.0))(x) == module.make(2.0)(x)
    assert transpiler.convert(module.Model.__call__)(module.Model(), x) == 7.0
    # An edited call is still told apart.
    path.write_text(path.read_text().replace("np.sum(x) -", "np.max(x) -"))
    linecache.checkcache(str(path))
    monkeypatch.undo()
    with pytest.raises(transpiler.ConversionError, match="the file changed after it was imported"):
        transpiler.convert(module.h)


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


def _generated_functions(fn) -> list:
    """The functions of generated code that `fn` reaches through its closure (and theirs)."""
    import types

    found, todo, seen = [], [fn], set()
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if f.__code__.co_filename.endswith(".astgraph.py"):
            found.append(f)
            continue
        for cell in f.__closure__ or ():
            if isinstance(cell.cell_contents, types.FunctionType):
                todo.append(cell.cell_contents)
    return found


def test_nothing_is_left_behind_when_a_converted_function_is_dropped(tmp_path):
    import gc
    import os
    import sys
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
    (generated,) = _generated_functions(converted)
    filename = generated.__code__.co_filename
    loading.wait_for_files()  # written on a thread of their own
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
    loading.wait_for_files()
    assert not os.path.exists(filename) and filename not in linecache.cache


# -- the eager switch -------------------------------------------------------------------------


SEEN = []


def records_what_it_sees(x):
    SEEN.append(isinstance(x, jax.core.Tracer))
    if x > 0:
        x = x * 2
    return x


@pytest.fixture
def eager_switch_off():
    yield
    transpiler.run_eagerly(False)


def test_run_eagerly_runs_the_original_of_a_jit_made_before(eager_switch_off):
    SEEN.clear()
    fast = transpiler.jit(records_what_it_sees)
    assert not transpiler.running_eagerly()
    assert fast(jnp.float32(3.0)) == 6.0 and SEEN == [True]  # traced
    transpiler.run_eagerly(True)
    assert transpiler.running_eagerly()
    assert fast(jnp.float32(3.0)) == 6.0 and SEEN == [True, False]  # run as Python
    assert fast(-1.0) == -1.0 and SEEN == [True, False, False]
    transpiler.run_eagerly(False)
    assert fast(jnp.float32(3.0)) == 6.0 and SEEN == [True, False, False]  # compiled already


def test_what_jit_returns_is_a_jitted_function(eager_switch_off):
    @transpiler.jit
    def step(x):
        if x > 0:
            x = x - 1.0
        return x

    x = jnp.float32(2.0)
    assert "stablehlo" in step.lower(x).as_text() or "func" in step.lower(x).as_text()
    assert step.eval_shape(x).shape == () and step.trace(x).jaxpr is not None
    step.clear_cache()
    assert transpiler.to_source(step) == transpiler.to_source(step.__wrapped__)
    assert "rt__.if_stmt" in transpiler.to_source(step)
    assert transpiler.convert(step) is step  # already converted
    assert jax.jit(step)(x) == 1.0 and jax.grad(step)(x) == 1.0
    transpiler.run_eagerly(True)
    assert step(x) == 1.0 and "func" in step.lower(x).as_text()  # lower() still compiles


def test_jit_methods_bind(eager_switch_off):
    class Model:
        scale = 3.0

        @transpiler.jit(static_argnums=0)  # as with jax.jit: self is static
        def __call__(self, x):
            if x > 0:
                return x * self.scale
            return x

    model = Model()
    assert model(jnp.float32(2.0)) == 6.0
    transpiler.run_eagerly(True)
    assert model(jnp.float32(2.0)) == 6.0


def test_run_eagerly_takes_a_bool():
    with pytest.raises(TypeError) as info:
        transpiler.run_eagerly("yes")
    assert str(info.value) == "run_eagerly takes True or False, got 'yes'"


def test_the_environment_variable_switches_eager_on(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "prog.py").write_text(
        "import jax, jax.numpy as jnp, transpiler\n"
        "@transpiler.jit\n"
        "def f(x):\n"
        "    print(isinstance(x, jax.core.Tracer))\n"
        "    return x + 1\n"
        "print(transpiler.running_eagerly(), f(jnp.float32(1.0)))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root, "JAX_PLATFORMS": "cpu"}
    for value, expected in [("1", "False\nTrue 2.0\n"), ("0", "True\nFalse 2.0\n")]:
        env["TRANSPILER_RUN_EAGERLY"] = value
        done = subprocess.run(
            [sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected


# -- on_error: run the original when conversion fails ------------------------------------------


def uses_a_reserved_name(x):
    rt__y = x * 2
    return rt__y


def test_on_error_warn_runs_the_original_with_one_warning():
    import os
    import warnings

    here = os.path.relpath(__file__)
    first = uses_a_reserved_name.__code__.co_firstlineno
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        converted = transpiler.convert(uses_a_reserved_name, on_error="warn")
    assert converted is uses_a_reserved_name
    assert [w.category for w in caught] == [transpiler.ConversionWarning]
    assert issubclass(transpiler.ConversionWarning, UserWarning)
    assert str(caught[0].message) == (
        f"'uses_a_reserved_name' ({here}:{first}) runs unconverted, as it is: "
        f"{here}:{first + 1}:5: the name 'rt__y' uses the prefix 'rt__', reserved for generated "
        "code\n    rt__y = x * 2\nRename the variable."
    )
    assert caught[0].filename == __file__  # the warning points at the call
    assert converted(2.0) == 4.0


def test_jit_passes_on_error_through():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = transpiler.jit(uses_a_reserved_name, on_error="warn")
        decorated = transpiler.jit(on_error="warn")(uses_a_reserved_name)
    assert [w.category for w in caught] == [transpiler.ConversionWarning] * 2
    assert caught[0].filename == __file__
    assert fast(jnp.float32(2.0)) == 4.0 and decorated(jnp.float32(1.0)) == 2.0
    with pytest.raises(transpiler.ConversionError, match="reserved for generated code"):
        transpiler.jit(uses_a_reserved_name)


def test_on_error_warn_still_converts_what_it_can():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        converted = transpiler.convert(uses_global, on_error="warn")
    assert converted is transpiler.convert(uses_global)
    assert jax.jit(converted)(1.0) == 2.0


@pytest.mark.parametrize("value", ["ignore", None, "Warn"])
def test_on_error_takes_raise_or_warn(value):
    for make in (transpiler.convert, transpiler.jit):
        with pytest.raises(ValueError) as info:
            make(uses_global, on_error=value)
        assert str(info.value) == f"on_error must be 'raise' or 'warn', got {value!r}"
        with pytest.raises(ValueError):
            make(on_error=value)


def test_definitions_whose_last_lines_compile_to_nothing_convert(tmp_path):
    # The definition's text ends on the last line its code comes from; where that cuts a
    # block short (`else: pass`), the tokenizer's block is taken.
    path = tmp_path / "endings.py"
    path.write_text(
        "def a(x):\n    if x > 0:\n        x = x - 1\n    else:\n        pass\n    # done\n\n\n"
        "def b(x):\n    return max(\n        x,\n        0,\n    )\n\n\n"
        "def c(x):\n    while x > 0:\n        x = x - 1\n    else:\n        pass\n"
    )
    module = _import(path, "endings")
    for fn, arg in ((module.a, 3), (module.b, -2), (module.c, 2)):
        assert transpiler.convert(fn)(arg) == fn(arg)
        assert jax.jit(transpiler.convert(fn))(arg) == fn(arg)


ANNOTATIONS_SEEN = []


def defines_an_annotated_helper(x):
    """A docstring
    over two lines."""

    def helper(v: int) -> float:
        return v

    if x > 0:
        x = x + 1
    ANNOTATIONS_SEEN.append(helper.__annotations__)
    return x


def test_generated_code_compiles_under_the_users_futures_not_ours():
    # This test module has no `from __future__ import annotations`; transpiler/loading.py has:
    # its annotations were strings in generated code (helper 60).
    ANNOTATIONS_SEEN.clear()
    defines_an_annotated_helper(1)
    jax.jit(transpiler.convert(defines_an_annotated_helper))(1.0)
    assert ANNOTATIONS_SEEN == [{"v": int, "return": float}] * 2


def test_the_source_map_comments_stay_out_of_strings():
    annotated = transpiler.to_source(defines_an_annotated_helper, source_map=True)
    first, second = annotated.splitlines()[1:3]
    assert first.strip() == '"""A docstring' and second.strip() == 'over two lines."""'
    (helper,) = [line for line in annotated.splitlines() if "def helper" in line]
    assert (
        helper.strip().startswith("def helper(v: int) -> float:  # ") and "test_api.py:" in helper
    )


def _doubled_if_positive(x):
    if x > 0:
        return x * 2
    return x


def _calls_a_helper(x):
    return _doubled_if_positive(x) + 1


def _returns_zero_above_five(g):
    @functools.wraps(g)
    def wrapper(x):
        if x > 5:
            return 0.0
        return g(x)

    return wrapper


@_returns_zero_above_five
def _decremented_above_one(x):
    if x > 1:
        x = x - 1
    return x


class _Doubler:
    def __call__(self, x):
        if x > 0:
            return x * 2
        return x


def test_the_source_map_shows_the_code_that_runs():
    # `source_map=True` converts again what `convert` was given, as it was given: with its
    # `recursive`, a decorator's wrapper (what runs), a model object's `__call__`.
    def same(a: str, b: str) -> bool:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))

    for converted in (
        transpiler.convert(_calls_a_helper, recursive=False),
        transpiler.convert(_decremented_above_one),
        transpiler.convert(_Doubler()),
    ):
        plain = transpiler.to_source(converted)
        assert same(plain, transpiler.to_source(converted, source_map=True)), plain
    mapped = transpiler.to_source(transpiler.convert(_decremented_above_one), source_map=True)
    assert mapped.startswith("def wrapper(x):")
