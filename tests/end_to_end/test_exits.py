"""A `for` loop's exit at the top of its body (runtime/exits.py), and a `while` loop's leading
`break` folded into its test: staged, the exit test is in the loop's condition; values, prints
and derivatives as Python gives them (each case below was found by an adversarial review)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from tests.end_to_end.checks import assert_tree_close


def search(xs, target):
    for i in range(xs.shape[0]):
        if xs[i] == target:
            return i
    return -1


def first_above(xs, t):
    for x in xs:
        if x > t:
            return x * 2
    return -1.0


def sum_until(xs, limit):
    total = 0.0
    for i in range(xs.shape[0]):
        if total > limit:
            break
        total = total + xs[i]
    return total, i


def with_continue(xs, t):
    total = 0.0
    for i in range(xs.shape[0]):
        if xs[i] > t:
            break
        if xs[i] < 0:
            continue
        total = total + xs[i]
    return total


def over_pairs(xs, ys, t):
    acc = 0.0
    for x, y in zip(xs, ys):
        if x * y > t:
            return acc
        acc = acc + x * y
    return acc


XS = jnp.array([0.5, -1.0, 2.0, 3.0, 0.25])
YS = jnp.array([1.0, 2.0, 0.5, 3.0, 1.0])


@pytest.mark.parametrize(
    "fn, args",
    [
        (search, (jnp.arange(8), 5)),
        (search, (jnp.arange(8), 100)),
        (first_above, (XS, 1.0)),
        (first_above, (XS, 10.0)),
        (sum_until, (XS, 1.0)),
        (sum_until, (XS, 100.0)),
        (with_continue, (XS, 2.5)),
        (over_pairs, (XS, YS, 2.0)),
        (over_pairs, (XS, YS, 100.0)),
    ],
)
def test_exits_give_what_python_gives(fn, args):
    assert_tree_close(jax.jit(transpiler.convert(fn))(*args), fn(*args))


def test_exits_under_vmap_and_grad():
    batch = jnp.stack([XS, XS[::-1], XS * 2])
    out = jax.jit(jax.vmap(lambda x: transpiler.convert(first_above)(x, 1.0)))(batch)
    assert out.tolist() == [float(first_above(x, 1.0)) for x in batch]
    grad = jax.jit(jax.grad(lambda x: transpiler.convert(sum_until)(x, 1.0)[0]))(XS)
    np.testing.assert_allclose(grad, jax.grad(lambda x: sum_until(x, 1.0)[0])(XS))


def bounded_range(n, x):
    s = 0.0
    for i in range(n):
        transpiler.loop_options(max_iterations=3)
        if i == 100:
            s = -1.0
            break
        s = s + x
    return s


def test_a_loop_stopped_by_its_bound_did_not_exit():
    # The bound stops the loop at 3 iterations: the exit did not fire (it set s = -1).
    assert float(transpiler.convert(bounded_range)(10, 1.0)) == 3.0
    assert float(jax.jit(transpiler.convert(bounded_range))(10, 1.0)) == 3.0
    assert float(jax.jit(jax.grad(transpiler.convert(bounded_range), argnums=1))(10, 1.0)) == 3.0


def over_appended(x):
    out = []
    for v in x:
        if v > 0.0:
            out.append(v)
    s = 0.0
    for w in out:  # a list of traced length
        if w > 3.0:
            break
        s = s + w
    return s


def test_an_exit_over_a_list_of_traced_length():
    x = jnp.array([1.0, 2.0, 4.0, 5.0])
    assert float(jax.jit(transpiler.convert(over_appended))(x)) == over_appended(x) == 3.0


def printing_exit(x):
    s = 0.0
    for v in x:
        if print(v) or v > 2.0:  # an effect in the exit test: it stays in the body
            break
        s = s + v
    return s


def printing_exit_on_a_range(y):
    s = 0.0
    for i in range(4):
        if print("t", i) or y * i > 3.0:
            break
        s = s + y
    return s


def test_an_exit_test_that_prints_prints_once_per_item(capsys):
    x = jnp.array([1.0, 2.0, 3.0, 4.0])
    printing_exit(x)
    expected = capsys.readouterr().out.splitlines()
    assert float(jax.jit(transpiler.convert(printing_exit))(x)) == 3.0
    jax.jit(jax.grad(transpiler.convert(printing_exit)))(x)
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == expected * 2
    printing_exit_on_a_range(1.5)
    expected = capsys.readouterr().out.splitlines()
    jax.jit(transpiler.convert(printing_exit_on_a_range))(1.5)
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == expected


def too_big(v):
    print("seen", v)  # a helper's print, in the exit test
    return v > 2.0


def exit_through_a_printing_helper(x):
    s = 0.0
    for v in x:
        if too_big(v):
            break
        s = s + v
    return s


def exit_with_a_debug_print(x):
    s = 0.0
    for v in x:
        if jax.debug.print("seen {}", v) or v > 2.0:
            break
        s = s + v
    return s


@pytest.mark.parametrize("fn", [exit_through_a_printing_helper, exit_with_a_debug_print])
def test_an_exit_test_with_an_effect_out_of_sight_prints_once_per_item(fn, capsys):
    # The exit test's effects are seen where they are made (a helper's print, jax.debug): the
    # loop keeps the test in its body, and each item is printed once, as Python prints it.
    x = jnp.array([1.0, 2.0, 3.0, 4.0])
    assert float(jax.jit(transpiler.convert(fn))(x)) == 3.0
    jax.jit(jax.grad(transpiler.convert(fn)))(x)  # in a loop's condition: printed again
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines() == ["seen 1.0", "seen 2.0", "seen 3.0"] * 2


def test_an_exit_test_that_prints_under_vmap():
    batch = jnp.array([[1.0, 2.0, 3.0, 4.0], [5.0, 1.0, 1.0, 1.0]])
    out = jax.jit(jax.vmap(transpiler.convert(printing_exit)))(batch)
    assert out.tolist() == [3.0, 0.0]


def printing_leading_break(x):
    while True:
        transpiler.loop_options(max_iterations=10)
        if print("c", x) or x > 10.0:  # not folded into the test: it prints
            break
        x = x * 2.0
    return x


def test_a_leading_break_that_prints_prints_only_for_elements_looping(capsys):
    xs = jnp.array([1.5, 20.0, 3.0])
    for x in xs:
        printing_leading_break(x)
    expected = sorted(capsys.readouterr().out.splitlines())
    jax.jit(jax.vmap(transpiler.convert(printing_leading_break)))(xs)
    jax.effects_barrier()
    assert sorted(capsys.readouterr().out.splitlines()) == expected


def inverted_flag(x):
    flag = True
    while x < 10.0 and ~flag:  # ~True is -2 in Python: true
        x = x * 2.0
        flag = x > 100.0
    return x


def counter_power(x):
    k = 0
    while x < 10.0 and 2 ** (k - 1) > 0:  # 0.5 for a Python int, 0 for an int32
        x = x * 2.0
        k += 1
    return x


@pytest.mark.parametrize("fn", [inverted_flag, counter_power])
def test_a_test_traced_at_once_reads_python_numbers_as_python(fn):
    assert float(jax.jit(transpiler.convert(fn))(1.0)) == fn(1.0) == 16.0


# The loop variable lives in a cell (a lambda in the body reads it): the exit test must read the
# item the iteration binds, not the variable's value before it. Found by an adversarial review:
# the test read the previous item (2.0 where Python gives -1.0), or the runtime's placeholder
# for an unbound variable (a raw TypeError).


def exit_on_a_captured_item(x):
    v = 0.0
    total = 0.0
    for v in x:
        if v > 2:
            break
        total = total + (lambda: v)()  # noqa: B023
    return total, v


def exit_on_a_captured_item_unbound(x):
    total = 0.0
    for v in x:
        if v > 2:
            break
        scale = lambda t: t * v  # noqa: E731, B023
        total = total + scale(1.0)
    return total


@pytest.mark.parametrize("fn", [exit_on_a_captured_item, exit_on_a_captured_item_unbound])
def test_an_exit_test_reads_the_item_of_a_captured_loop_variable(fn):
    x = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    expected = fn(x)
    assert_tree_close(jax.jit(transpiler.convert(fn))(jnp.asarray(x)), expected)
    assert_tree_close(transpiler.convert(fn)(x), expected)


def doubling_with_a_debug_print(x):
    while x < 10.0:
        jax.debug.print("x {}", x)
        x = x * 2.0
    return x


def test_a_debug_print_in_a_staged_while_prints_once_per_iteration_under_grad(capsys):
    # The derivative recomputes the loop's states with its body traced quietly: a converted
    # print was left out there, `jax.debug.print` was not (printed three more times).
    grad = jax.jit(jax.grad(transpiler.convert(doubling_with_a_debug_print)))(3.0)
    jax.effects_barrier()
    assert float(grad) == 4.0
    assert capsys.readouterr().out.splitlines() == ["x 3.0", "x 6.0"]
