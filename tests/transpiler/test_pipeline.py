"""The pipeline skips the passes that would find nothing, and that changes nothing it makes."""

import inspect
import pathlib
import types

import gast
import pytest

from tests.fuzz import harness
from transpiler import features, loading, parsing, pipeline
from transpiler.passes import return_statements

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def _functions(module) -> list[types.FunctionType]:
    """The module's own functions and methods (defined in its file)."""
    found = []
    for value in vars(module).values():
        candidates = [value]
        if isinstance(value, type):
            candidates = list(vars(value).values())
        for fn in candidates:
            if isinstance(fn, types.FunctionType) and inspect.getmodule(fn) is module:
                found.append(fn)
    return found


def _corpus() -> list[types.FunctionType]:
    import samples.clipped_rnn
    import samples.greedy_decoder
    import samples.newton_sqrt
    import samples.piecewise
    from tests.end_to_end import test_early_exits, test_soundness

    modules = [
        samples.clipped_rnn,
        samples.greedy_decoder,
        samples.newton_sqrt,
        samples.piecewise,
        test_early_exits,
        test_soundness,
    ]
    # The programs the tests convert, not the tests themselves.
    return [fn for m in modules for fn in _functions(m) if not fn.__name__.startswith("test_")]


def _converted(fn, skip: bool) -> str:
    node = parsing.parse_function(fn).node
    out = pipeline.run(node, fn.__globals__, fn.__code__.co_freevars, skip_idle_passes=skip)
    return loading.unparse(out.node)


def test_skipping_idle_passes_changes_no_generated_code():
    functions = _corpus()
    programs = []
    for generator in ("programs", "model"):
        for seed in range(10):
            module = harness.load(harness.GENERATORS[generator](seed), f"pipeline_{seed}")
            programs.append(module)
            functions += _functions(module)
    try:
        assert len(functions) > 100
        for fn in functions:
            try:
                expected = _converted(fn, skip=False)
            except Exception as e:  # noqa: BLE001 - a refusal must be the same refusal
                with pytest.raises(type(e)):
                    _converted(fn, skip=True)
                continue
            assert _converted(fn, skip=True) == expected, fn.__qualname__
    finally:
        for module in programs:
            harness.unload(module)


def test_early_returns_are_found_as_the_return_pass_finds_them():
    def has_early(source):
        return features.EARLY_RETURN in features.present(gast.parse(source).body[0])

    assert not has_early("def f(x):\n    y = x\n    return y")
    assert not has_early("def f(x):\n    def g():\n        return 1\n    return g")
    assert has_early("def f(x):\n    if x:\n        return 1\n    return 2")
    assert has_early("def f(x):\n    for v in x:\n        return v")
    assert has_early("def f(x):\n    def g(v):\n        if v:\n            return 1\n    return g")
    for source in ("def f(x):\n    return 1\n    x = 2", "def f(x):\n    pass"):
        fn = gast.parse(source).body[0]
        early = features.EARLY_RETURN in features.present(fn)
        assert early == return_statements._needs_rewrite(fn.body)
