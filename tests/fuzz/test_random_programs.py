"""Random programs: converted (Python path, jit, vmap) equals plain Python, exactly.

Three integer generators (`programs`: nested control flow over ints; `model_programs`: objects,
globals, containers, prints, match, try/finally, walrus, ...; `effects_programs`: prints
interleaved with asserts that fail on some inputs, context managers, properties and special
methods, module state written in staged blocks), checked by `harness.check_program`: return
values, stdout and module state must match, and where Python raises, the exception (its message
inside JAX's `JaxRuntimeError` under jit) and stdout up to it; under jit/vmap a StagingError or
ConversionError is a refusal (allowed), anything else different is a failure. A fourth,
`numeric_programs` (floats and mixed dtypes), is checked against eager JAX under jit, vmap and
jax.grad, with dtype and tolerance rules (`harness.compare_numeric`).
`FUZZ_SEEDS` scales the number of seeds of each (default 15; a third of that for the slower
numeric and effects programs); `python -m tests.fuzz.run` runs many more and reports/minimises
the failures.
"""

import os

import jax.numpy as jnp
import pytest

from tests.fuzz import effects_programs, harness, model_programs, numeric_programs

SEEDS = range(int(os.environ.get("FUZZ_SEEDS", 15)))
NUMERIC_SEEDS = range(int(os.environ.get("FUZZ_SEEDS", 15)) // 3)
EFFECTS_SEEDS = range(int(os.environ.get("FUZZ_SEEDS", 15)) // 3)


def _check(generator, seed):
    source, checked = harness.check_seed(generator, seed)
    failures = [o for o in checked.outcomes if o.status == "failure"]
    assert not failures, "\n".join(
        [f"[{o.mode}] {o.kind}\n    {o.detail}" for o in failures] + [source]
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program(seed):
    _check("programs", seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_model_program(seed):
    _check("model", seed)


@pytest.mark.parametrize("seed", NUMERIC_SEEDS)
def test_random_numeric_program(seed):
    _check("numeric", seed)


@pytest.mark.parametrize("seed", EFFECTS_SEEDS)
def test_random_effects_program(seed):
    _check("effects", seed)


def test_effects_generator_is_deterministic_and_fails_only_asserts_in_plain_python():
    outcomes = {"returned": 0, "assert": 0}
    for seed in range(40):
        source = effects_programs.program(seed)
        assert source == effects_programs.program(seed)  # deterministic
        module = harness.load(source, f"plain_effects_{seed}")
        try:
            for xy in harness.INPUTS:
                ran = harness.run(module, module.f, xy, state=True, timeout=10)
                if ran.exc is None:
                    outcomes["returned"] += 1
                    assert all(isinstance(v, int) for v in ran.value), (xy, ran.value, source)
                else:
                    assert isinstance(ran.exc, AssertionError), (xy, ran.exc, source)
                    outcomes["assert"] += 1
                assert ran.stdout, (xy, source)  # f prints first: its checks are ordered
        finally:
            harness.unload(module)
    # both outcomes are common: asserts fail on some inputs, not on all
    assert min(outcomes.values()) >= 40, outcomes


def test_harness_compares_exceptions_and_the_output_before_them():
    expected = AssertionError("A1 i=2")
    wrapped = RuntimeError("INTERNAL: CpuCallback error ...\nAssertionError: A1 i=2 (p.py:7)\n")
    assert harness.raised_as(expected, wrapped, strict=False)
    assert not harness.raised_as(expected, wrapped, strict=True)
    assert harness.raised_as(expected, AssertionError("A1 i=2"), strict=True)
    for other in ("A1 i=20 (p.py:7)", "A1 i=1 (p.py:7)", "A2 (p.py:9)"):
        assert not harness.raised_as(
            expected, RuntimeError(f"AssertionError: {other}"), strict=False
        )
    assert harness.raised_as(
        AssertionError(), RuntimeError("AssertionError: assertion failed (p.py:3)"), strict=False
    )
    # what differs under tracing whatever the converter does: output before a failing assert,
    # and the message of the assert
    before = "def f(x, y):\n    print(type(x).__name__)\n    assert x > 10, 'small'\n    return x\n"
    outcomes = {o.mode: o for o in harness.check_program(before, "t").outcomes}
    assert outcomes["python"].status == "pass"
    assert outcomes["jit"].status == "failure"
    assert outcomes["jit"].kind.endswith("(before the exception)"), outcomes["jit"]
    assert outcomes["vmap"].status == "pass"  # over the inputs on which Python returned
    message = (
        "def f(x, y):\n    print('start')\n    assert x > 10, type(x).__name__\n    return x\n"
    )
    outcomes = {o.mode: o for o in harness.check_program(message, "t").outcomes}
    assert outcomes["python"].status == "pass"
    assert outcomes["jit"].kind == (
        "python raised AssertionError, converted JaxRuntimeError (another message)"
    ), outcomes["jit"]


def test_numeric_generator_is_deterministic_and_runs_in_plain_python():
    for seed in range(40):
        source = numeric_programs.program(seed)
        assert source == numeric_programs.program(seed)  # deterministic
        module = harness.load(source, f"plain_numeric_{seed}")
        try:
            for xy in harness.NUMERIC_INPUTS:
                ran = harness.run(module, module.f, xy, state=False, timeout=10)
                assert ran.exc is None, (xy, ran.exc, source)
                assert isinstance(ran.value, tuple), (xy, ran.value, source)
        finally:
            harness.unload(module)


def test_numeric_comparison_rules():
    ok = harness.Run(value=(1.5, 2, jnp.float32(0.5), float("nan")))
    same = harness.Run(
        value=(
            jnp.asarray(1.5),  # a Python float and a weak float32: compatible
            jnp.float32(2),  # a Python int that a staged join made a float32: documented
            jnp.float32(0.5 + 1e-7),  # within the tolerance
            jnp.float32(float("nan")),  # NaN matches NaN
        )
    )
    assert harness.compare_numeric("jit", ok, same, (0.0, 0.0), []).status == "pass"
    strong = harness.Run(value=(jnp.float32(1.0),))
    for wrong in (
        (jnp.asarray(1.0),),  # a weak float32 where eager is strong
        (jnp.float16(1.0),),  # another dtype
        (jnp.float32(1.001),),  # a different value
        (jnp.float32(float("nan")),),  # NaN where eager is a number
    ):
        got = harness.Run(value=wrong)
        assert harness.compare_numeric("jit", strong, got, (0.0, 0.0), []).status == "failure"
    narrowed = harness.Run(value=(jnp.int32(2),))
    weak_float = harness.Run(value=(2.0,))
    assert harness.compare_numeric("jit", weak_float, narrowed, (0.0, 0.0), []).status == (
        "failure"
    )


def test_return_break_continue_leaving_finally_are_refused():
    assert harness.check_pep765() == []


def test_model_generator_covers_every_class_and_runs_in_plain_python():
    counts = dict.fromkeys(model_programs.CLASS_NAMES, 0)
    for seed in range(60):
        source = model_programs.program(seed)
        assert source == model_programs.program(seed)  # deterministic
        for c in model_programs.classes_of(source):
            counts[c] += 1
        module = harness.load(source, f"plain_{seed}")
        try:
            for xy in harness.INPUTS:
                ran = harness.run(module, module.f, xy, state=True, timeout=10)
                assert ran.exc is None, (xy, ran.exc, source)
                assert all(isinstance(v, int) for v in ran.value), (xy, ran.value, source)
        finally:
            harness.unload(module)
    assert all(n >= 15 for n in counts.values()), counts


def test_harness_tells_failures_from_refusals():
    # Behaviour that differs under tracing whatever the converter does.
    wrong = "def f(x, y):\n    return int(str(y) == '7')\n"
    outcomes = {o.mode: o for o in harness.check_program(wrong, "t").outcomes}
    assert outcomes["python"].status == "pass"
    assert outcomes["jit"].status == "failure"
    assert outcomes["jit"].kind.startswith("wrong return"), outcomes["jit"]
    assert outcomes["vmap"].kind.startswith("wrong return"), outcomes["vmap"]
    prints = "def f(x, y):\n    print(type(x).__name__)\n    return x\n"
    outcomes = {o.mode: o for o in harness.check_program(prints, "t").outcomes}
    assert outcomes["jit"].kind == "wrong stdout: different lines", outcomes["jit"]
    assert outcomes["vmap"].status == "pass"  # stdout is not compared under vmap
    assert outcomes["python"].status == "pass"
    refused = (
        "from runtime import StagingError\n\n"
        "def f(x, y):\n    if not isinstance(x, int):\n        raise StagingError('traced x')\n"
        "    return x\n"
    )
    outcomes = {o.mode: o for o in harness.check_program(refused, "t").outcomes}
    assert outcomes["python"].status == "pass"
    assert outcomes["jit"].status == "refusal"
    assert outcomes["jit"].kind == "StagingError: traced x", outcomes["jit"]
