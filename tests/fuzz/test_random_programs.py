"""Random programs: converted (Python path, jit, vmap) equals plain Python, exactly.

Two generators (`programs`: nested control flow over ints; `model_programs`: objects, globals,
containers, prints, match, try/finally, walrus, ...), checked by `harness.check_program`:
return values, stdout and module state must match; under jit/vmap a StagingError or
ConversionError is a refusal (allowed), anything else different is a failure.
`FUZZ_SEEDS` scales the number of seeds of each (default 15); `python -m tests.fuzz.run` runs
many more and reports/minimises the failures.
"""

import os

import pytest

from tests.fuzz import harness, model_programs

SEEDS = range(int(os.environ.get("FUZZ_SEEDS", 15)))


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
