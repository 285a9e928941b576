"""A staged loop's Python numbers (`t = 0.0`) that its body makes arrays (`t = t + h`, a float32)
are arrays of the body's type from the loop's start, with the body and the test traced again
for them (`carry.Promoted`): every iteration but Python's first computes with the array, and
that one's test is evaluated as Python evaluated it. A trace with the Python number's weak type
kept for every iteration would compute otherwise wherever the weak type decides a dtype: in the
test (`t < tend16`), or through code that reads only its type (`jnp.ones_like(t)`), which no
jaxpr shows (helpers 160, 161: see docs/benchmarks.md, session 52)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError, carry
from samples.piecewise import band_count
from tests.end_to_end.checks import assert_tree_close, check_grad, check_jit
from tests.fuzz import harness


def promotions(fn, *args) -> int:
    """How many times staging converted `fn` sends a loop back to be traced again, promoted."""
    raised = []
    init = carry.Promoted.__init__

    def counting(self, *a, **k):
        raised.append(a)
        init(self, *a, **k)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(carry.Promoted, "__init__", counting)
        jax.jit(transpiler.convert(fn)).trace(*args)
    return len(raised)


def integrate(t_end, rate):
    t = 0.0
    h = 0.25
    y = jnp.float32(1.0)
    while t < t_end:
        h = min(h, t_end - t)
        y = y - h * rate * y
        t = t + h
    return y, t, h


def bounded_sum(x, n):
    total = 0.0
    k = 0
    while k < n:
        transpiler.loop_options(max_iterations=8)
        total = total + jnp.sin(x * k)
        k += 1
    return total


def decode(table, token):
    score = 0.0
    steps = 0
    while token != 0 and steps < 5:
        row = table[token]
        token = jnp.argmax(row)
        score = score + row[token]
        steps += 1
    return score, steps, token


TABLE = jnp.array(
    [[1.0, 0.0, 0.0], [0.2, 0.1, 0.7], [0.5, 0.3, 0.1]], dtype=jnp.float32
)  # 1 -> 2 -> 0


@pytest.mark.parametrize(
    "fn, args",
    [
        (integrate, (jnp.float32(1.0), jnp.float32(0.5))),
        (bounded_sum, (jnp.float32(0.3), jnp.int32(6))),
        (decode, (TABLE, jnp.int32(1))),
    ],
)
def test_a_python_number_made_an_array_is_the_arrays_type_from_the_start(fn, args):
    assert promotions(fn, *args) == 1
    check_jit(fn, *args)  # values, and types: strong float32 after the loop, as Python's


def test_gradients_through_a_promoted_loop():
    check_grad(lambda rate: integrate(jnp.float32(1.0), rate)[0], jnp.float32(0.5))
    check_grad(lambda x: bounded_sum(x, jnp.int32(6)), jnp.float32(0.3))


def half_precision_sum(x16, n):
    t = 0.0
    acc = jnp.zeros(2, jnp.float16)
    k = 0
    while k < n:
        acc = acc + t * x16  # float16 while `t` is a Python float, float32 once it is not
        t = t + jnp.float32(0.5)
        k += 1
    return acc


def test_a_python_number_whose_weak_type_decides_a_dtype_in_the_body():
    args = (jnp.ones(2, jnp.float16), jnp.int32(3))
    with pytest.raises(StagingError, match="'acc' is float16"):
        jax.jit(transpiler.convert(half_precision_sum))(*args)


def until_float16(h, tend):
    t = 0.0
    while t < tend:  # float32 once `t` is: a float16 test of the weak `t` stops a step early
        t = t + h
    return t


def until_int8(k, lim):
    n = 0
    while n < lim:  # int32 once `n` is: an int8 test of the weak `n` wraps
        n = n + k
    return n


def until_float16_bounded(h, tend):
    t = 0.0
    while t < tend:
        transpiler.loop_options(max_iterations=10)
        t = t + h
    return t


@pytest.mark.parametrize(
    "fn, args",
    [
        (until_float16, (jnp.float32(0.33333), jnp.float16(1.0))),
        (until_float16, (jnp.float32(0.33333), jnp.bfloat16(1.0))),
        (until_int8, (jnp.int32(100), jnp.int8(120))),
        (until_float16_bounded, (jnp.float32(0.33333), jnp.float16(1.0))),
    ],
)
def test_a_test_whose_weak_type_decides_a_dtype(fn, args):
    # The test, traced once, is every iteration's: traced with the weak type, a float16 test.
    check_jit(fn, *args)


def test_the_gradient_through_a_test_traced_again():
    args = (jnp.float32(0.33333), jnp.float16(1.0))
    for fn in (until_float16, until_float16_bounded):
        assert float(jax.jit(jax.grad(transpiler.convert(fn)))(*args)) == 4.0


def printed_steps(t_end):
    t = 0.0
    while t < t_end:
        t = t + jnp.float32(0.5)
        print("t", t)
    return t


def test_a_promoted_loop_that_prints(capfd):
    assert promotions(printed_steps, jnp.float32(1.0)) == 1
    out = jax.jit(transpiler.convert(printed_steps))(jnp.float32(1.0))
    jax.effects_barrier()
    assert capfd.readouterr().out == "t 0.5\nt 1.0\n"
    assert float(out) == 1.0 and out.dtype == np.float32
    assert_tree_close(out, printed_steps(jnp.float32(1.0)))


def weighted_sum(xs, w):
    total = 0.0
    for x in xs:
        total = total + w * jnp.tanh(x)
    return total


XS = jnp.array([-2.0, 0.5, 1.5, 3.0, 0.9])


def test_a_scan_over_a_traced_array_of_python_numbers():
    check_jit(band_count, XS, jnp.float32(0.0), jnp.float32(2.0))
    check_jit(weighted_sum, XS, jnp.float32(0.5))
    check_grad(weighted_sum, XS, jnp.float32(0.5), argnums=(0, 1))
    batched = jax.vmap(transpiler.convert(weighted_sum), in_axes=(0, None))
    assert_tree_close(
        batched(jnp.stack([XS, -XS]), jnp.float32(0.5)),
        jnp.stack([weighted_sum(XS, 0.5), weighted_sum(-XS, 0.5)]),
    )


def counted_prints(xs):
    count = 0
    for x in xs:
        count = count + 1
        print("x", x, "count", count)
    return count


def test_a_scan_of_python_numbers_that_prints(capfd):
    out = jax.jit(transpiler.convert(counted_prints))(jnp.array([1.0, 2.0]))
    jax.effects_barrier()
    assert capfd.readouterr().out == "x 1.0 count 1\nx 2.0 count 2\n"
    assert int(out) == 2


# Random while loops whose Python numbers the body makes strong (float32 `h`, int32 `k`), tested
# against low-precision arguments (`lim`: float16, bfloat16 or int8; `w`: float16): Python
# tests the first iteration with the numbers, the others with the arrays, and the staged loop
# must too (helper 160 found a test traced once with the weak types). The loop runs at least
# once (`lim` above the start), so what it returns is the body's (after no iteration, a
# product with a float16 differs, as documented).
_BODY = [
    "t = t + h",
    "n = n + k",
    "s = s * 0.5 + t",
    "t = max(t, h) + 0.25",
    "n = n + (1 if t > h else 2)",
    "s = s + float(n) * 0.125",
]
_TESTS = {
    "float": ["t < lim", "t * 2.0 < lim + 1.0", "t + s < lim * 2.0"],
    "int": ["n < lim", "n + 1 < lim", "(t < 8.0) and n < lim"],
}
_RESULTS = ["t", "n", "s", "t * w", "n * w", "(t, n, s)"]


def _weak_program(seed: int) -> tuple[str, tuple]:
    import random

    rng = random.Random(seed)
    kind = rng.choice(["float", "int"])
    body = rng.sample(_BODY, rng.randint(2, 4))
    body += ["t = t + h"] if kind == "float" and "t = t + h" not in body else []
    body += ["n = n + k"] if kind == "int" and "n = n + k" not in body else []
    lines = [
        "import jax.numpy as jnp",
        "",
        "",
        "def f(h, k, lim, w):",
        "    t = 0.0",
        "    n = 0",
        "    s = 0.5",
        "    i = 0",
        f"    while i < 12 and {rng.choice(_TESTS[kind])}:",
        *(f"        {line}" for line in body),
        "        i += 1",
        f"    return {rng.choice(_RESULTS)}, i",
    ]
    lim_dtype = rng.choice([jnp.float16, jnp.bfloat16]) if kind == "float" else jnp.int8
    lim = jnp.asarray(rng.choice([1.0, 2.0, 3.5]) if kind == "float" else rng.choice([5, 40]))
    args = (
        jnp.float32(rng.choice([0.33333, 0.7, 1.1])),
        jnp.int32(rng.choice([3, 7, 11])),
        lim.astype(lim_dtype),
        jnp.float16(rng.choice([0.5, 1.5])),
    )
    return "\n".join(lines), args


@pytest.mark.parametrize("seed", range(24))
def test_random_loops_of_python_numbers_against_low_precision_tests(seed):
    source, args = _weak_program(seed)
    module = harness.load(source, f"weak_{seed}")
    try:
        expected = module.f(*args)
        actual = transpiler.jit(module.f)(*args)
    finally:
        harness.unload(module)
    assert_tree_close(actual, expected, rtol=1e-3, atol=1e-3)
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
        assert jnp.result_type(a) == jnp.result_type(e), source


def ones_like_in_a_scan(xs, s16):
    total = 0.0
    scale = 1.0
    for x in xs:
        scale = jnp.ones_like(total)  # the type of `total` only: float32 after the first item
        total = total + x
    return scale * s16


def ones_like_in_a_while(h, tend, s16):
    t = 0.0
    scale = 1.0
    while t < tend:
        scale = jnp.ones_like(t)
        t = t + h
    return scale * s16


def full_like_after_the_first(xs, s16):
    total = 0.0
    acc = jnp.float32(0)
    for i, x in enumerate(xs):
        acc = acc + jnp.where(i > 0, jnp.full_like(total, 7) * s16, 0)
        total = total + x
    return acc


S16 = jnp.float16(1.1)


@pytest.mark.parametrize(
    "fn, args",
    [
        (ones_like_in_a_scan, (jnp.array([0.5, 1.0, 2.0]), S16)),
        (ones_like_in_a_while, (jnp.float32(0.25), jnp.float32(1.0), S16)),
        (full_like_after_the_first, (jnp.array([0.5, 1.0, 2.0]), S16)),
    ],
)
def test_code_that_reads_only_the_type_of_a_promoted_number(fn, args):
    # No equation reads `total` there: only a trace with the array's type shows it (helper 161).
    check_jit(fn, *args)
