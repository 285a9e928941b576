"""Functions whose conversion would change nothing run as they are written (`straight_line`).

Three kinds of checks: the rule on small functions, one per construct (accepted or refused);
the rule against the passes themselves (for every function the rule accepts, the pipeline's
code is the original's but for `rt__.call(f, ...)` around its calls); and the functions it
gives, against the original, under `jit`, `grad` and `vmap`, called from converted code.
"""

import gc
import math

import gast
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from tests.end_to_end import checks
from transpiler import api, loading, parsing, pipeline, straight_line
from transpiler.analysis import ownership

MODES = jnp.array([[0.0, 0.0], [2.0, 1.0]])


# -- accepted ----------------------------------------------------------------------------------


def cubic(x):
    return x * x * x - 2.0 * x - 5.0


def oscillator(y, damping, stiffness=4.0):
    """dy/dt of a damped oscillator."""
    x, v = y[0], y[1]
    return jnp.stack([v, -stiffness * x - damping * v])


def nearest(points, centroids):
    distances = jnp.sum((points[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
    return jnp.argmin(distances, axis=1)


def log_density(x):
    return jax.nn.logsumexp(-0.5 * jnp.sum((x - MODES) ** 2, axis=1))


def layer(w, b, h):
    z = w @ h
    z += b
    h = jnp.tanh(z)
    return jax.numpy.linalg.norm(h) * h, ~jnp.isnan(h)


def relu(x, threshold=0.0):
    mask = x > threshold
    return jnp.where(mask, x, 0.0), x is None, x != 1, x <= 2


def nothing(x):
    pass


def scaled(x, scale=0.5):
    y = x * scale
    y **= 2
    return y[..., :1], (y, [x, -x, +x])


class Cell:
    def __init__(self):
        self.w = jnp.eye(3) * 0.5

    def step(self, h):
        return jnp.tanh(self.w @ h), self.w.shape


ACCEPTED = [cubic, oscillator, nearest, log_density, layer, relu, nothing, scaled, Cell.step]


# -- refused: one construct each -------------------------------------------------------------


def chained(x):
    return 0 < x < 1


def contains(x, xs):
    return x in xs


def negates(x):
    return not x


def builtin_call(x):
    return abs(x)


def user_call(x):
    return cubic(x)


def method_call(x):
    return x.sum()


def lax_call(x):
    return jax.lax.cond(x > 0, lambda v: v, lambda v: -v, x)


def takes_functions(x):
    return jnp.vectorize(jnp.sin)(x)


def debug_print(x):
    jax.debug.print("{}", x)
    return x


def prints(x):
    print(x)
    return x


def shadowed(x, jnp):
    return jnp.tanh(x)


def negative_power(k):
    return 2**-k


def traced_power(x, n):
    return x**n


def stores_attribute(obj, x):
    obj.x = x
    return x


def stores_item(xs, x):
    xs[0] = x
    return xs


def starred(xs):
    a, *rest = xs
    return a


def unpacks(x, args):
    return jnp.maximum(x, *args)


def lambda_(x):
    f = lambda v: v + 1  # noqa: E731
    return f


def comprehension(xs):
    return [x + 1 for x in xs]


def conditional(x):
    return x if x else -x


def walrus(x):
    return (y := x + 1) * y


def declares(x):
    global MODES
    MODES = x
    return x


def deletes(x):
    y = x
    del y
    return x


def formats(x):
    return f"{x}"


def loops(xs):
    for x in xs:
        xs = xs + x
    return xs


def reserved(x):
    rt__x = x
    return rt__x


def reserved_read(x):
    return x + rt__y  # noqa: F821 - refused before it runs


def reserved_parameter(rt__x):
    return rt__x


def reserved_augmented(x):
    rt__z += x  # noqa: F821, F841 - refused before it runs
    return x


def math_call(x):
    return math.sqrt(x)


def nested_def(x):
    def inner(v):
        return v

    return inner(x)


REFUSED = [
    chained,
    contains,
    negates,
    builtin_call,
    user_call,
    method_call,
    lax_call,
    takes_functions,
    debug_print,
    prints,
    shadowed,
    negative_power,
    traced_power,
    stores_attribute,
    stores_item,
    starred,
    unpacks,
    lambda_,
    comprehension,
    conditional,
    walrus,
    declares,
    deletes,
    formats,
    loops,
    reserved,
    reserved_read,
    reserved_parameter,
    reserved_augmented,
    math_call,
    nested_def,
]


def _unchanged(fn) -> bool:
    return straight_line.unchanged(parsing.parse_function(fn).node, fn)


@pytest.mark.parametrize("fn", ACCEPTED, ids=lambda fn: fn.__name__)
def test_accepted(fn):
    assert _unchanged(fn)


@pytest.mark.parametrize("fn", REFUSED, ids=lambda fn: fn.__name__)
def test_refused(fn):
    assert not _unchanged(fn)


def test_a_closure_variable_named_like_a_module_is_refused():
    def make(jnp):
        def f(x):
            return jnp.tanh(x)

        return f

    assert not _unchanged(make(np))


# -- the rule against the passes -------------------------------------------------------------


class _CallsAsWritten(gast.NodeTransformer):
    """`rt__.call(f, *args, **kwargs)` -> `f(*args, **kwargs)`."""

    def visit_Call(self, node):
        self.generic_visit(node)
        func, args = ownership.called(node)
        return gast.Call(func, args, node.keywords)


@pytest.mark.parametrize("fn", ACCEPTED, ids=lambda fn: fn.__name__)
def test_the_passes_change_nothing_but_calls_in_what_the_rule_accepts(fn):
    """Every pass runs (none skipped): should a pass start rewriting something the rule lets
    through, this fails."""
    written = loading.unparse(parsing.parse_function(fn).node)
    node = parsing.parse_function(fn).node
    out = pipeline.run(node, fn.__globals__, fn.__code__.co_freevars, skip_idle_passes=False)
    assert loading.unparse(_CallsAsWritten().visit(out.node)) == written


def test_the_passes_change_nothing_in_what_the_rule_accepts_in_the_corpus():
    """The same, on the functions of the samples, of the end-to-end tests and of fuzz
    programs that the rule accepts."""
    import importlib
    import pkgutil

    import samples
    import tests.end_to_end
    from tests.fuzz import harness
    from tests.transpiler.test_pipeline import _functions

    modules = [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for package in (samples, tests.end_to_end)
        for info in pkgutil.iter_modules(package.__path__)
    ]
    programs = [
        harness.load(harness.GENERATORS[generator](seed), f"straight_{generator}_{seed}")
        for generator in ("programs", "model")
        for seed in range(6)
    ]
    try:
        functions = [fn for module in modules + programs for fn in _functions(module)]
        # The programs the tests convert, not the tests (whose asserts pytest rewrites).
        accepted = [fn for fn in functions if not fn.__name__.startswith("test_") and _read(fn)]
        assert len(accepted) >= 20, len(accepted)
        for fn in accepted:
            test_the_passes_change_nothing_but_calls_in_what_the_rule_accepts(fn)
    finally:
        for module in programs:
            harness.unload(module)


def _read(fn) -> bool:
    """Whether the rule accepts `fn`, whose source can be read (a dataclass's `__init__`,
    made by `exec`, cannot)."""
    try:
        return _unchanged(fn)
    except transpiler.ConversionError:
        return False


# -- what converting gives --------------------------------------------------------------------


def test_converted_runs_the_original_code_and_shows_it():
    converted = transpiler.convert(cubic)
    assert converted is not cubic and converted(2.0) == cubic(2.0)
    assert api._generated.get(cubic, api.Options()).code is None  # no generated code
    source = transpiler.to_source(converted)
    assert source.startswith("def cubic(x):") and "x * x * x - 2.0 * x - 5.0" in source


def bisection(lo, hi):
    while hi - lo > 1e-4:
        mid = 0.5 * (lo + hi)
        if cubic(mid) > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi), oscillator(jnp.stack([lo, hi]), 0.1)


def bisection_sum(lo, hi):
    lo, hi = bisection(lo, hi)[0], hi
    return lo * hi


def test_called_from_converted_code_under_jit_grad_and_vmap():
    checks.check_python(cubic, 2.0)
    checks.check_python(bisection, 2.0, 3.0)
    checks.check_jit(bisection, jnp.float32(2.0), jnp.float32(3.0))
    checks.check_vmap(bisection, jnp.array([2.0, 1.5]), jnp.array([3.0, 3.5]))
    checks.check_grad(bisection_sum, jnp.float32(2.0), jnp.float32(3.0), argnums=1)
    checks.check_grad(lambda h: layer(jnp.eye(3), 0.1, h)[0].sum(), jnp.ones(3))
    checks.check_vmap(log_density, jnp.ones((4, 2)))
    checks.check_jit(Cell().step, jnp.ones(3))


def broken(x):
    return jnp.stack([x, jnp.ones(3)])


def calls_broken(x):
    while x.sum() < 10.0:
        x = x * 2.0
    return broken(x)


def test_an_error_in_it_names_the_users_line():
    with pytest.raises(ValueError, match="same shape") as caught:
        jax.jit(transpiler.convert(calls_broken))(jnp.ones(2))
    lines = [
        entry.lineno + 1  # pytest counts from 0
        for entry in caught.traceback
        if entry.path.name == "test_straight_line.py"
    ]
    assert broken.__code__.co_firstlineno + 1 in lines  # its own line, not generated code
    notes = "".join(getattr(caught.value, "__notes__", []))
    # The innermost line of the user's that ran: in the helper, as when it was converted.
    assert f"test_straight_line.py:{broken.__code__.co_firstlineno + 1}: return jnp.stack" in notes


def test_it_leaves_nothing_behind():
    jnp.tanh(1.0)  # JAX's cache of its first call holds the caller's frame (and code) for good
    namespace = {"jnp": jnp, "__name__": "straight_line_dropped"}
    source = "def f(x):\n    return jnp.tanh(x) * 2.0\n"
    path = "<straight_line_dropped>"
    import linecache

    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    try:
        exec(compile(source, path, "exec"), namespace)
        before = len(api._generated)
        converted = transpiler.convert(namespace["f"])
        assert converted(1.0) == namespace["f"](1.0)
        assert len(api._generated) == before + 1
        del converted, namespace["f"]
        gc.collect()
        assert len(api._generated) == before
    finally:
        del linecache.cache[path]
