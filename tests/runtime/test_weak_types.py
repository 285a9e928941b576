"""A while loop whose body makes a Python number (`t = 0.0`) a strong array of its dtype keeps the
body as traced with the weak type where that computes what the strong type would (no second
trace), and traces it again where it does not (see runtime/weak_types.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError, carry, weak_types
from samples.piecewise import band_count
from tests.end_to_end.checks import assert_tree_close, check_grad, check_jit


def body_reads(fn, *args) -> bool:
    """`strong_alike` of `fn`'s jaxpr with its Python-number arguments weakly typed."""
    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    weak = [i for i, v in enumerate(jaxpr.invars) if v.aval.weak_type]
    assert weak, "no weakly typed input"
    return weak_types.strong_alike(jaxpr, weak)


F32 = jnp.float32(2.0)


@pytest.mark.parametrize(
    "fn, args, alike",
    [
        (lambda t, h: t + h, (0.0, F32), True),  # strong: the same either way
        (lambda t, h: (t * 2.0 + 1.0) + h, (0.0, F32), True),  # weak until it meets h
        (lambda t, h: t * 2.0, (0.0, F32), False),  # a weak output: strong, traced again
        (lambda t, x: t * x, (0.0, jnp.ones(2, jnp.float16)), False),  # promoted to float16
        (lambda i, x: x[i] + 1.0, (1, jnp.arange(3.0)), True),  # an index: read, not promoted
        (lambda i, x: x * i, (1, jnp.arange(3.0)), False),  # an int made a float
        (lambda t, h: jax.jit(lambda a: a + h)(t), (0.0, F32), False),  # a call: not looked into
    ],
)
def test_what_the_weak_type_decides(fn, args, alike):
    assert body_reads(fn, *args) is alike


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
def test_a_python_number_made_strong_keeps_the_body_traced_once(fn, args):
    assert promotions(fn, *args) == 0
    check_jit(fn, *args)  # values, and types: strong float32 after the loop, as Python's


def test_gradients_through_a_loop_kept_as_traced():
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


def test_a_python_number_whose_weak_type_decides_a_dtype_is_traced_again():
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
def test_a_test_whose_weak_type_decides_a_dtype_is_traced_again(fn, args):
    # The test, traced once, is every iteration's: the weak type must decide nothing there.
    assert promotions(fn, *args) == 1
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


def test_a_body_with_effects_is_traced_again(capfd):
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


def test_a_scan_over_a_traced_array_keeps_its_body_traced_once():
    assert promotions(band_count, XS, 0.0, 2.0) == 0
    check_jit(band_count, XS, jnp.float32(0.0), jnp.float32(2.0))
    assert promotions(weighted_sum, XS, jnp.float32(0.5)) == 0
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


def test_a_scan_with_effects_over_python_numbers_prints_as_python(capfd):
    out = jax.jit(transpiler.convert(counted_prints))(jnp.array([1.0, 2.0]))
    jax.effects_barrier()
    assert capfd.readouterr().out == "x 1.0 count 1\nx 2.0 count 2\n"
    assert int(out) == 2
