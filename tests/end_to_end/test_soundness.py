"""Every construct is staged exactly, run as Python exactly, or refused: never silently wrong.

One test per class of the soundness issue, each comparing the converted function with plain Python
(values, printed output, the objects it mutates) on Python values, under `jax.jit` and, where it
means something, `jax.vmap`; or asserting the precise error.
"""

import builtins
import functools
import logging
import os
import re
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import (
    assert_tree_close,
    check_jit,
    check_python,
    check_vmap,
    primitives,
)
from tests.end_to_end.test_errors import line_of

HERE = os.path.relpath(__file__)

# -- 1. JAX transformations of functions converted code already called ---------------------------


def cube(x):
    return x**3


def grad_of_a_called_helper(x):
    y = cube(x)
    return y, jax.grad(cube)(x), jax.vmap(cube)(jnp.stack([x, x + 1]))


def test_transformations_of_a_converted_helper_are_not_the_helper():
    converted = transpiler.convert(grad_of_a_called_helper)
    expected = grad_of_a_called_helper(2.0)
    assert_tree_close(converted(2.0), expected)
    assert_tree_close(jax.jit(converted)(2.0), expected)
    assert float(jax.jit(converted)(2.0)[1]) == 12.0


def test_wraps_copies_of_a_converted_function_are_not_it():
    transpiler.convert(cube)  # cube's conversion is cached on cube

    @functools.wraps(cube)
    def doubled(x):
        return 2 * cube(x)

    assert transpiler.convert(doubled)(2.0) == 16.0


# -- 2. Object state changed through methods and helpers in staged blocks -------------------------


class Counter:
    def __init__(self):
        self.value = 0

    def add(self, d):
        self.value = self.value + d


def count_to(n, c):
    c.value = 0
    while c.value < n:
        c.add(1)
    return c.value


def test_a_method_that_changes_its_object_in_a_staged_while():
    c = Counter()
    assert jax.jit(lambda n: transpiler.convert(count_to)(n, Counter()))(5) == 5
    assert transpiler.convert(count_to)(5, c) == 5 and c.value == 5


class Smoother:
    def __init__(self):
        self.prev = jnp.float32(0.0)

    def step(self, x):
        y = 0.5 * (x + self.prev)
        self.prev = x
        return y


def smooth(xs, model):
    total = 0.0
    for x in xs:
        total = total + model.step(x)
    return total, model.prev


def test_state_a_method_keeps_between_iterations_of_a_staged_loop():
    xs = jnp.array([1.0, 2.0, 4.0])
    expected = smooth(xs, Smoother())
    assert_tree_close(jax.jit(lambda xs: transpiler.convert(smooth)(xs, Smoother()))(xs), expected)


STEPS = 0


def bump(k):
    global STEPS
    STEPS = STEPS + k


def bump_while(n):
    global STEPS
    STEPS = 0
    i = 0
    while i < n:
        bump(2)
        i += 1
    return STEPS


def test_a_helper_that_rebinds_a_global_in_a_staged_loop():
    assert jax.jit(transpiler.convert(bump_while))(3) == 6
    assert bump_while(3) == 6 and transpiler.convert(bump_while)(3) == 6


def grow_while_counting(x):
    global STEPS
    STEPS = 0
    while jnp.abs(x) < 20.0:  # a test that calls a function: it changes nothing
        x = x * 1.5 + 0.1
        STEPS += 1
    return x, STEPS


def test_a_global_the_body_counts_in_while_the_test_calls_a_function():
    x = jnp.float32(0.1)
    expected = grow_while_counting(x)
    assert_tree_close(jax.jit(transpiler.convert(grow_while_counting))(x), expected)


def bump_scaled(v):  # library code calls it back: the loop's own code never names STEPS
    global STEPS
    STEPS = STEPS + 1
    return v * 2.0


def doubling_while(x):
    global STEPS
    STEPS = 0
    while jnp.sum(x) < 100.0:
        x = jax.tree_util.tree_map(bump_scaled, x)
    return x, STEPS


def test_a_helper_that_library_code_calls_back_rebinds_a_global_in_a_staged_loop():
    x = jnp.ones(2)
    out, steps = jax.jit(transpiler.convert(doubling_while))(x)
    assert_tree_close(out, jnp.full(2, 64.0))
    assert steps == 6 and doubling_while(x)[1] == 6


class Log:
    def __init__(self):
        self.entries = []

    def record(self, value):
        self.entries.append(value)


def log_in_branches(x, log):
    if x > 0:
        log.record("positive")
    else:
        log.record("negative")
    return x


def test_a_python_list_changed_in_a_staged_branch_is_refused_by_name():
    log = Log()
    assert transpiler.convert(log_in_branches)(1.0, log) == 1.0 and log.entries == ["positive"]
    log = Log()
    with pytest.raises(StagingError, match=r"log.entries \(a list\) grows from 0 to 1 items"):
        jax.jit(lambda x: transpiler.convert(log_in_branches)(x, log))(1.0)
    assert log.entries == []  # the abandoned trace left nothing behind


# -- 3. Python containers mutated in a staged loop -----------------------------------------------


def pop_sum(n):
    items = [1, 2, 3, 4]
    s = 0
    for _ in range(n):
        s += items.pop()
    return s


def write_dict(x):
    stats = {"total": 0.0}
    for i in range(3):
        stats["total"] = stats["total"] + x * i
    return stats["total"]


def test_containers_mutated_in_staged_loops():
    assert transpiler.convert(pop_sum)(2) == pop_sum(2) == 7
    # A list the loop only pops from is staged, of traced length (it was refused): popping
    # past its end raises Python's IndexError when the program runs.
    for n in (0, 2, 4):
        assert int(jax.jit(transpiler.convert(pop_sum))(n)) == pop_sum(n)
    with pytest.raises(Exception, match=r"pop from empty list"):
        jax.jit(transpiler.convert(pop_sum))(5).block_until_ready()
    check_jit(write_dict, 2.0)  # an item that changes value, not shape: carried
    check_python(write_dict, 2.0)


# -- 4. Effects with no value happen when the program runs, in the branch taken ------------------


def say_sign(x):
    if x > 0:
        print("positive")
    else:
        print("negative")
    print(f"{x}")
    return x


def test_prints_in_staged_branches_run_in_the_branch_taken(capsys):
    compiled = jax.jit(transpiler.convert(say_sign))
    for x in (1.0, -1.0, 2.0):
        compiled(x).block_until_ready()
        jax.effects_barrier()
        say_sign(x)
        printed = capsys.readouterr().out.splitlines()
        half = len(printed) // 2
        assert printed[:half] == printed[half:], printed


def test_prints_in_staged_branches_under_vmap(capsys):
    jax.jit(jax.vmap(transpiler.convert(say_sign)))(jnp.array([1.0, -2.0, 3.0]))
    jax.effects_barrier()
    printed = capsys.readouterr().out.splitlines()
    # the true branch's prints first, as the `if` reads (`lax.cond` would run the false first)
    assert [p for p in printed if p.endswith("tive")] == ["positive", "positive", "negative"]


def formats(x):
    for i in range(2):
        x = x + 1.5
        print(f"step {i}: x={x:.2f} ({x!r:>8})")
    return x


def test_f_strings_of_traced_values_print_the_values(capsys):
    jax.jit(transpiler.convert(formats))(jnp.float32(1.0))
    jax.effects_barrier()
    assert capsys.readouterr().out.splitlines()[0].startswith("step 0: x=2.50")
    assert transpiler.convert(formats)(1.0) == formats(1.0)
    python_printed = capsys.readouterr().out
    assert python_printed == "step 0: x=2.50 (     2.5)\nstep 1: x=4.00 (     4.0)\n" * 2


def text_made_before_it_is_printed(x):
    msg = f"x={x:.2f}"
    line = "v " + str(x) + " and " + str(x > 1)
    template = "({})".format(x)  # noqa: UP032 - the .format form is what is tested
    builtins.print("b", x)
    functools.partial(print, "p")(x)
    print(msg)
    print(line, template)
    return x, [str(3), str(b"ab", "ascii")]  # no traced value: Python's text


def test_text_made_before_it_is_printed_prints_the_values(capsys):
    # Text stored in a variable and printed later, and print reached as `builtins.print` or
    # through a partial, print the values when the program runs, in program order.
    converted = transpiler.convert(text_made_before_it_is_printed)
    texts = []
    jax.jit(lambda x: texts.append(converted(x)[1]) or x)(jnp.float32(2.0))
    jax.effects_barrier()
    assert texts == [["3", "ab"]] and all(type(t) is str for t in texts[0])
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["b 2.0", "p 2.0", "x=2.00", "v 2.0 and True (2.0)"]


TEXT_LOG = []


def text_kept_elsewhere(loss):
    TEXT_LOG.append(f"loss={loss:.2f}")  # kept, not printed: Python's text
    return loss


def test_text_kept_elsewhere_is_pythons_text_as_under_jit():
    # Only text that is printed (raised, asserted) is made when the program runs; kept in a
    # list, a tracer's format fails as under plain jax.jit, not a silently different text.
    with pytest.raises(TypeError, match="unsupported format string"):
        transpiler.jit(text_kept_elsewhere)(jnp.float32(0.5))
    TEXT_LOG.clear()


# -- 5. Lists appended to under a traced condition ------------------------------------------------


def samples(x, n):
    out = []
    for i in range(10):
        x = x * 1.1
        if i >= n:
            out.append(x)
    return jnp.stack(out)


def sample_mean(x, n):
    out = []
    for i in range(10):
        x = x * 1.1
        if i >= n:
            out.append(x)
    total = 0.0
    for v in out:  # a loop over a list of traced length: a while loop over its length
        total = total + v
    buffer, count = transpiler.padded(out)
    return total / len(out), jnp.sum(buffer) / count


def test_a_list_of_traced_length_never_passes_for_its_buffer():
    assert transpiler.convert(samples)(1.0, 5).shape == (5,)
    line = line_of(samples, "out.append")
    with pytest.raises(StagingError, match=rf"'out' is appended to at {re.escape(HERE)}:{line}"):
        transpiler.jit(samples)(1.0, 5)
    expected = sample_mean(1.0, 5)
    assert_tree_close(transpiler.jit(sample_mean)(1.0, 5), expected)
    for reduce in (reduce_mean, reduce_array, reduce_list, reduce_sorted):
        with pytest.raises(StagingError, match="'out' is appended to"):
            jax.jit(transpiler.convert(reduce))(1.0, 2)


def reduce_mean(x, n):
    out = []
    for i in range(4):
        if i >= n:
            out.append(x)
    return jnp.mean(out)


def reduce_array(x, n):
    out = []
    for i in range(4):
        if i >= n:
            out.append(x)
    return jnp.array(out)


def reduce_list(x, n):
    out = []
    for i in range(4):
        if i >= n:
            out.append(x)
    return list(out)


def reduce_sorted(x, n):
    out = []
    for i in range(4):
        if i >= n:
            out.append(x)
    return sorted(out)


def reductions(x, y):
    acc = []
    for i in range(4):
        if (x + i) % 3 == 0:
            acc.append((y * i) % 97)
    largest = max(acc) if acc else -1
    smallest = min(acc) if len(acc) > 0 else -1
    return sum(acc), largest, smallest, len(acc)


def test_reductions_of_a_list_of_traced_length_are_exact():
    inputs = [(0, 5), (1, 7), (2, 3), (5, 9)]
    for args in inputs:
        check_jit(reductions, *args)
    check_vmap(reductions, *(jnp.array(column) for column in zip(*inputs)))

    def empty_max(x):
        acc = []
        if x > 0:
            acc.append(x)
        return max(acc)

    compiled = jax.jit(transpiler.convert(empty_max))
    assert compiled(2) == 2
    with pytest.raises(jax.errors.JaxRuntimeError, match="empty sequence"):
        compiled(-2).block_until_ready()


# -- 6. Syntax: walrus, try/finally, match, raise under a traced if in a try ----------------------


def walrus_and(x):
    y = -1.0
    z = x > 0 and (y := x * 2) > 1
    return z, y


def walrus_ternary(x):
    y = 0.0
    w = (y := 3.0) if x > 1 else (y := -3.0)
    return w, y


def walrus_maybe_unbound(x):
    z = x > 0 and (y := x * 2) > 1
    return z, y


def test_walrus_in_lazy_operands_binds_where_python_binds():
    for fn, args in ((walrus_and, (3.0, -3.0)), (walrus_ternary, (2.0, 0.0))):
        for x in args:
            check_python(fn, x)
            check_jit(fn, x)
        check_vmap(fn, jnp.array(args))
    assert transpiler.convert(walrus_maybe_unbound)(3.0) == (True, 6.0)
    with pytest.raises(UnboundLocalError):
        transpiler.convert(walrus_maybe_unbound)(-3.0)
    compiled = jax.jit(transpiler.convert(walrus_maybe_unbound))
    assert tuple(compiled(3.0)) == (True, 6.0)
    with pytest.raises(jax.errors.JaxRuntimeError, match="local variable 'y'"):
        compiled(-3.0)[1].block_until_ready()


def walrus_in_the_and_or_idiom(x):
    y = 0.0
    r = x > 0 and (y := x - 1) or (y := 100.0)
    return r, y


def test_walrus_in_the_and_or_idiom_binds_where_python_binds():
    # `a and b or c` is one value (b or c) even where b or c binds a name: x = 1 makes
    # `y := x - 1` zero, false, so `c` runs too and binds y again.
    for x in (3.0, 1.0, -1.0):
        check_python(walrus_in_the_and_or_idiom, x)
        check_jit(walrus_in_the_and_or_idiom, x)
    check_vmap(walrus_in_the_and_or_idiom, jnp.array([3.0, 1.0, -1.0]))


def read_only_where_bound(x):
    if x > 1 and (z := x + 1) < 10:
        out = z
    else:
        out = 0.0
    return out


def test_a_name_bound_on_some_paths_and_read_only_there():
    for x in (3.0, -3.0, 20.0):
        check_jit(read_only_where_bound, x)
    check_vmap(read_only_where_bound, jnp.array([3.0, -3.0, 20.0]))


def walrus_in_a_guard(x, k):
    match k:
        case 1 if (y := x * 2) > 0:
            r = y
        case 2 if (y := x - 5) > 0 or (y := x + 5) > 9:
            r = y * 10
        case _:
            r = -x
    return r


def test_walrus_in_a_match_guard_binds_where_python_binds():
    # Found by an adversarial review: staged, `y` was read in the case body but bound nowhere.
    for x, k in ((3.0, 1), (-3.0, 1), (6.0, 2), (4.5, 2), (1.0, 2), (2.0, 3)):
        check_python(walrus_in_a_guard, x, k)
        check_jit(walrus_in_a_guard, x, k)
    check_vmap(walrus_in_a_guard, jnp.array([3.0, -3.0, 6.0]), jnp.array([1, 1, 2]))


def count_down(n):
    c = 0
    while (n := n - 1) > 0:
        c += 1
    else:
        c += 100
    return c, n


def test_walrus_in_a_while_test():
    for n in (5, 0, 1):
        check_python(count_down, n)
        check_jit(count_down, n)


def finally_loop_break(xs):
    out = 0
    try:
        out = 1
        return out
    finally:
        for x in xs:
            if x == 2:
                break
            out += x


def return_from_finally(x):
    try:
        return x
    finally:
        return -x  # noqa: B012 - refused, as PEP 765 would have it


def test_try_finally():
    check_python(finally_loop_break, [1, 2, 3])
    with pytest.raises(transpiler.ConversionError, match="'return' inside 'finally' leaves"):
        transpiler.convert(return_from_finally)


def classify(x, k):
    match k:
        case 0:
            if x > 0:
                y = 1.0
            else:
                y = 2.0
        case 1 | 2:
            y = x * 10
        case v if v > 5:
            y = float(v)
        case v:
            y = -float(v)
    return y


def first_match(xs):
    for k in xs:
        match k:
            case 2:
                return k * 10
            case _:
                pass
    return -1


def test_match():
    for k in (0, 1, 2, 7, 4):
        check_python(classify, 3.0, k)
        check_jit(classify, 3.0, k, static_argnums=(1,))
    check_jit(classify, -3.0, 0, static_argnums=(1,))
    check_python(first_match, [1, 2, 3])
    check_python(first_match, [1, 3])


def guarded_mapping(x, d):
    match d:
        case {"a": v} if v > 1:
            return x + v
        case _:
            return x


def test_a_traced_guard_of_a_match_that_runs_as_python_is_refused_naming_it():
    # A mapping pattern keeps the `match` Python's, which tests its guard while tracing: JAX's
    # TracerBoolConversionError came with the note for code that is not converted.
    assert transpiler.convert(guarded_mapping)(1.0, {"a": 2}) == guarded_mapping(1.0, {"a": 2})
    with pytest.raises(StagingError, match=r"a case's guard is bool\[\], traced .*match statement"):
        jax.jit(transpiler.convert(guarded_mapping))(1.0, {"a": 0.5})


def raise_in_try(x):
    try:
        if x > 10:
            raise ValueError("big")
        y = x * 2
    except ValueError:
        y = -2.0
    return y


def raise_when_taken(x):
    if x < 0:
        raise ValueError("negative input")
    return jnp.sqrt(x)


def test_raise_under_a_traced_condition_raises_when_the_program_runs_that_branch():
    assert jax.jit(transpiler.convert(raise_in_try))(2.0) == raise_in_try(2.0) == 4.0
    compiled = jax.jit(transpiler.convert(raise_when_taken))
    assert compiled(4.0) == 2.0
    with pytest.raises(jax.errors.JaxRuntimeError, match="ValueError: negative input"):
        compiled(-1.0).block_until_ready()


# -- 7. Threads: see test_threads.py ---------------------------------------------------------------

# -- 8. range of a traced float, loop_options --------------------------------------------------------


def float_range(x):
    s = 0.0
    for _ in range(x):
        s += 1
    return s


def bounded(n, bound):
    i = 0
    while i < n:
        transpiler.loop_options(max_iterations=bound)
        i += 1
    return i


def test_float_range_and_loop_options_are_checked():
    for run in (transpiler.convert(float_range), jax.jit(transpiler.convert(float_range))):
        with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
            run(2.5)
    assert (
        transpiler.convert(bounded)(5, 3)
        == jax.jit(transpiler.convert(bounded), static_argnums=1)(5, 3)
        == 3
    )
    for bad, error in ((2.5, TypeError), (0, ValueError), (-1, ValueError)):
        with pytest.raises(error, match="max_iterations"):
            transpiler.convert(bounded)(5, bad)


# -- 9. A source file edited after import: see test_api.py -------------------------------------------

# -- 10. Names bound in both branches inside loops, del, walrus tests ---------------------------------


def total(xs):
    t = 0.0
    for x in xs:
        if x > 0:
            step = 2.0
        else:
            step = 1.0
        t = t + step
    return t


def delete_in_one_branch(x, p):
    y = x
    if p:
        del y
        y = 3
    return y


def delete_and_read(x, p):
    y = x
    if p:
        del y
    return y


def test_names_bound_in_both_branches_inside_loops():
    check_python(total, [1.0, -1.0])
    check_jit(total, jnp.array([1.0, -1.0, 2.0]))
    check_python(delete_in_one_branch, 1.0, True)
    check_python(delete_in_one_branch, 1.0, False)
    check_python(delete_and_read, 1.0, False)
    with pytest.raises(UnboundLocalError):
        transpiler.convert(delete_and_read)(1.0, True)


def delete_in_a_later_iteration(x, n):
    y = x
    for i in range(n):
        z = y + 1
        if i > 0:
            del y
    return z


def delete_then_rebind_in_a_while(x, n):
    y = x
    i = 0
    while i < n:
        z = y * 2
        del y
        i += 1
        if z > 100:
            y = z - 100
        else:
            y = z
    return y


def test_a_del_in_a_staged_loop_unbinds_for_the_iterations_after_it():
    # The second iteration deletes y; a third would read it: Python raises only then.
    assert delete_in_a_later_iteration(1.0, 2) == 2.0
    check_jit(delete_in_a_later_iteration, 1.0, 2)
    check_python(delete_in_a_later_iteration, 1.0, 2)
    with pytest.raises(UnboundLocalError):
        delete_in_a_later_iteration(1.0, 3)
    with pytest.raises(UnboundLocalError):
        transpiler.convert(delete_in_a_later_iteration)(1.0, 3)
    with pytest.raises(jax.errors.JaxRuntimeError, match="cannot access local variable 'y'"):
        jax.block_until_ready(jax.jit(transpiler.convert(delete_in_a_later_iteration))(1.0, 3))
    for n in (0, 1, 4, 9):
        check_jit(delete_then_rebind_in_a_while, 3.0, n)


def delete_in_a_branch(x):
    y = x * 2
    if x > 0:
        del y
    if x < 0:
        return y  # read only where the `del` did not run
    return x


def delete_in_one_iteration(x):
    y = x * 2
    for i in range(3):
        if i == 1:
            del y
            y = x
    return y


def delete_in_a_branch_then_read(x):
    y = x * 2
    if x > 0:
        del y
    return y


def test_a_del_in_a_staged_branch_unbinds_after_it():
    # The branch function handed `y` out deleted: it raised there, before anything read it.
    for x in (1.0, -1.0):
        check_jit(delete_in_a_branch, x)
        check_python(delete_in_a_branch, x)
        assert jax.grad(transpiler.convert(delete_in_a_branch))(x) == jax.grad(delete_in_a_branch)(
            x
        )
    check_vmap(delete_in_a_branch, jnp.array([1.0, -1.0, 2.0]))
    check_jit(delete_in_one_iteration, 1.5)
    check_python(delete_in_one_iteration, 1.5)
    check_jit(delete_in_a_branch_then_read, -1.0)
    with pytest.raises(UnboundLocalError):
        transpiler.convert(delete_in_a_branch_then_read)(1.0)
    with pytest.raises(jax.errors.JaxRuntimeError, match="cannot access local variable 'y'"):
        jax.block_until_ready(jax.jit(transpiler.convert(delete_in_a_branch_then_read))(1.0))


def delete_a_parameter(x, opt=None):
    y = x * 3
    if opt is None:
        y = x * 2
    if x > 0:
        del opt
    return y


def delete_a_parameter_read_before(x):
    y = x + 1
    if y > 1:
        del x
    return y


def delete_a_parameter_before_a_loop(x, n):
    t = x
    del n
    for _ in range(3):
        t = t + x
    return t


def delete_a_string_in_a_branch(x):
    s = "hi"
    if x > 0:
        del s
    if x < 0:
        print(s)
    return x


def test_a_del_of_a_parameter_unbinds_it_only_where_it_runs():
    # The parameter is bound where the function starts: no placeholder replaces the argument.
    for x in (-1.0, 1.0):
        check_jit(delete_a_parameter, x)
        check_jit(delete_a_parameter_read_before, x)
    assert jax.jit(jax.grad(transpiler.convert(delete_a_parameter)))(-1.0) == 2.0
    check_jit(delete_a_parameter_before_a_loop, 1.5, 4)
    check_python(delete_a_parameter_before_a_loop, 1.5, 4)


def test_a_del_of_a_value_no_staged_program_holds_is_refused_by_name():
    with pytest.raises(StagingError, match=r"'s' is deleted \(`del s`\) in the true branch"):
        jax.jit(transpiler.convert(delete_a_string_in_a_branch))(1.0)


def first_above(xs, tol):
    for x in xs:
        if x > tol:
            found = x
            break
    else:
        found = -1.0
    return found


def until_small(x):
    while True:
        x = x / 2
        if x < 1:
            last = x
            break
    return last


def test_reads_python_proves_bound_are_not_checked_when_the_program_runs():
    # Bound on every path of the function as written (the break, the else): no check, which
    # would be a host callback, in the program.
    for xs in (jnp.array([0.5, 2.0, 3.0]), jnp.array([0.5, 0.1])):
        check_jit(first_above, xs, 1.0)
    check_jit(until_small, 40.0)
    for fn, args in ((first_above, (jnp.array([0.5, 2.0]), 1.0)), (until_small, (40.0,))):
        source = transpiler.to_source(fn)
        jaxpr = str(jax.make_jaxpr(transpiler.convert(fn))(*args))
        assert "checked=False" in source and "callback" not in jaxpr, (source, jaxpr)


class Tally:
    def __init__(self):
        self.n = 0


def state_the_first_iteration_makes_traced(x, tally, seen):
    hit = False
    acc = []
    for i in range(3):
        acc.append(x * i)
        tally.n = tally.n + 1
        seen["count"] = seen["count"] + 1
        if x * i > 2:
            hit = True
    done, steps = False, 0
    while not done:
        steps += 1
        tally.n = tally.n + 10
        done = x * steps > 3
    return hit, len(acc), sum(acc), tally.n, seen["count"], steps


def a_list_the_first_iteration_appends_to(x):
    hit = False
    acc = []
    for _ in range(3):
        acc.append(x)
        if x > 1:
            hit = True
    return hit, len(acc), sum(acc)


def test_loops_staged_from_their_first_iteration_leave_python_state_as_python_would():
    # Each loop's Python state (hit, done) is traced after one iteration, so the loop is staged
    # from the start: probing that first iteration must change nothing (the list, the object,
    # the dict get each iteration's change once).
    for x in (0.5, 2.0):
        check_jit(a_list_the_first_iteration_appends_to, x)
        assert primitives(a_list_the_first_iteration_appends_to, x).count("scan[") == 1
        expected = state_the_first_iteration_makes_traced(x, Tally(), {"count": 0})
        tally, seen = Tally(), {"count": 0}
        converted = transpiler.convert(state_the_first_iteration_makes_traced)
        got = jax.jit(functools.partial(converted, tally=tally, seen=seen))(x)
        assert [float(v) for v in got] == [float(v) for v in expected], (got, expected)


TABLE = {0: 1.0, 1: 2.0, 2: 3.0}


def weights_with_a_fallback(x):
    total = 0.0
    for i in range(3):
        try:
            w = TABLE[i]
        except Exception:
            w = 0.0
        total = total + w * x
    return total


def weights_in_a_staged_while(x, n):
    i = 0
    total = 0.0
    while i < n:
        total = total + x * TABLE[i]
        i += 1
    return total


def test_a_traced_dict_key_is_never_caught_as_the_users_error():
    # Hashing a tracer raises TypeError while tracing: never the user's `except Exception` to
    # catch (the loop runs as Python instead, where the key is an int).
    check_jit(weights_with_a_fallback, 1.0)
    check_vmap(weights_with_a_fallback, jnp.array([1.0, 2.0]))
    assert float(jax.jit(jax.grad(transpiler.convert(weights_with_a_fallback)))(1.0)) == 6.0
    # A staged while cannot run as Python: refused while tracing, with the line.
    with pytest.raises(StagingError) as info:
        jax.jit(transpiler.convert(weights_in_a_staged_while))(1.0, 3)
    line = line_of(weights_in_a_staged_while, "total = total + x * TABLE[i]")
    assert str(info.value) == (
        f"a traced value is used as a dict key or set item ({HERE}:{line}: total = total + "
        "x * TABLE[i]): the staged code needs a Python value there. Index an array instead "
        "(jnp.asarray of the table's values), or keep the value Python (a static argument)."
    )


# -- 11. and/or with a Python right operand -----------------------------------------------------------


def shape_guard(x, y):
    if jnp.sum(x) > 0 and x.shape == y.shape:
        return x + y
    return x


def test_a_static_right_operand_decides_now():
    check_jit(shape_guard, jnp.ones(3), jnp.ones(2))
    check_jit(shape_guard, jnp.ones(3), jnp.ones(3))


# -- 12. return inside try/finally ---------------------------------------------------------------------


def return_in_try(x):
    try:
        if x > 0:
            return x
        return -x
    finally:
        pass


def test_return_inside_try_finally():
    check_jit(return_in_try, 2.0)
    check_jit(return_in_try, -2.0)


# -- 13. Valid code that failed ---------------------------------------------------------------------

G = 0


def global_in_branch(x):
    if x > 0:
        global G
        G = 5
    return x


def count_after_first(items):
    for i in items:
        if i == items[0]:
            x = 0
        else:
            x += 1
    return x


def reversed_range(n):
    s = 0
    for i in reversed(range(n)):
        s = s * 2 + i
    return s


def aliased_range(n):
    r = range
    s = 0
    for i in r(n):
        s += i
    return s


def size_one(x):
    if x > 0:
        return 1.0
    return 2.0


def contains(x, c):
    if c in x:
        return 1
    return 0


def bound_after_return(x):
    if x > 0:
        return x
    for i in range(3):
        x = x + i
    t = x * 2
    return t + i


def test_valid_code_that_failed():
    check_python(global_in_branch, 1.0)
    assert G == 5
    check_python(count_after_first, [1, 2, 3])
    for n in (0, 1, 4):
        check_jit(reversed_range, n)
        check_jit(aliased_range, n)
    check_jit(size_one, jnp.ones(1))
    check_jit(size_one, -jnp.ones(1))
    check_jit(contains, jnp.arange(3), 2)
    check_jit(contains, jnp.arange(3), 5)
    check_vmap(contains, jnp.arange(6).reshape(2, 3), jnp.array([1, 7]))
    check_jit(bound_after_return, -1.0)
    check_jit(bound_after_return, 1.0)


def raise_in_loop_in_try(x):
    try:
        while x > 100:
            raise ValueError("too big")
        y = 1.0
    except ValueError:
        y = 2.0
    return y + x


def test_a_loop_body_that_raises_raises_when_the_loop_runs():
    compiled = jax.jit(transpiler.convert(raise_in_loop_in_try))
    assert compiled(5.0) == raise_in_loop_in_try(5.0) == 6.0
    with pytest.raises(jax.errors.JaxRuntimeError, match="ValueError: too big"):
        compiled(500.0).block_until_ready()


def staging_error_in_try(x):
    try:
        if jnp.sum(x) > 0:
            y = x[:2]
        else:
            y = x
    except Exception:  # noqa: BLE001 - what the test is about
        y = jnp.zeros(3)
    return y


def test_a_user_except_never_catches_a_staging_error():
    x = jnp.arange(3.0)
    check_python(staging_error_in_try, x)
    with pytest.raises(StagingError, match="'y' is float32\\[2\\] in the true branch"):
        jax.jit(transpiler.convert(staging_error_in_try))(x)


# -- Objects changed in place keep their identity (found by an adversarial review) ------------------


def update(stats, x):
    if x > 0:
        stats["n"] = stats["n"] + 1


def through_a_helper(x):
    stats = {"n": 0}
    update(stats, x)
    return stats["n"]


def through_an_alias(x):
    a = [0.0]
    b = a
    if x > 0:
        b[0] = x
    return a[0]


def numpy_in_place(x):
    arr = np.zeros(3)
    if x > 0:
        arr[0] = 1.0
    return x + arr[0]


def test_containers_changed_in_place_in_staged_branches():
    for fn in (through_a_helper, through_an_alias):
        for x in (1.0, -1.0):
            check_python(fn, x)
            check_jit(fn, x)
        check_vmap(fn, jnp.array([1.0, -1.0]))
    with pytest.raises(StagingError, match=r"arr \(a NumPy array\) is changed in place"):
        jax.jit(transpiler.convert(numpy_in_place))(1.0)


# -- A staged loop hands its body tracers only where a tracer is exact -------------------------------

WEIGHTS = {"w1": 10.0}
FROZEN = {"layer0"}


def keyed_by_index(x):
    for i in range(2):
        x = x * WEIGHTS.get(f"w{i}", 1.0)
    return x


def negative_power(x):
    for i in range(3):
        x = x + 2**-i
    return x


def index_in_text(x):
    for i in range(3):
        if f"layer{i}" not in FROZEN:
            x = x + 1
    return x


def index_in_stored_text(x):
    for i in range(3):
        name = f"layer{i}"  # text stored, then used as Python text, not printed
        if name not in FROZEN:
            x = x + 1
    return x


def triangle(x):
    s = 0.0
    for i in range(4):
        for j in range(i):  # a static bound in Python: a scan, reverse-differentiable
            s = s + x * j
    return s


def arithmetic_only(x, xs):
    for i in range(3):
        x = x * 2 + i + xs[i]
    return x


def test_python_uses_of_a_loop_index_keep_it_python():
    for fn in (keyed_by_index, negative_power, index_in_text, index_in_stored_text, triangle):
        check_jit(fn, 1.0)
    assert float(jax.jit(jax.grad(transpiler.convert(triangle)))(1.0)) == jax.grad(triangle)(1.0)
    xs = jnp.arange(3.0)
    check_jit(arithmetic_only, 1.0, xs)
    assert "scan[" in str(jax.make_jaxpr(transpiler.convert(arithmetic_only))(1.0, xs))


# -- min/max as Python computes them; prints of objects changed later -------------------------------


def extremes(a, b):
    return max(a, b), min(a, b), max(a, b, key=lambda t: -t)


def test_min_max_ties_nan_and_key():
    for args in ((1.0, float("nan")), (float("nan"), 1.0), (1.0, 1.0), (2.0, -1.0)):
        expected = extremes(*args)
        got = jax.jit(transpiler.convert(extremes))(*args)
        np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), np.float32(expected))
    relu = transpiler.convert(lambda x: max(x, 0.0))
    assert jax.jit(jax.grad(relu))(0.0) == 1.0  # Python's max returns the first of a tie


def history(x):
    seen = []
    for i in range(2):
        seen.append(i)
        print(seen)
        x = x + i
    return x


def test_a_deferred_print_shows_python_objects_as_they_were(capsys):
    jax.jit(transpiler.convert(history))(1.0)
    jax.effects_barrier()
    assert capsys.readouterr().out == "[0]\n[0, 1]\n"


class Monitor:
    def __init__(self):
        self.checks = 0

    def check(self, x):
        self.checks = self.checks + 1
        print("checked")
        return x < 10


def short_circuit(x):
    monitor = Monitor()
    ok = x > 0 and monitor.check(x)
    return ok, monitor.checks


def test_and_or_evaluate_a_right_operand_with_effects_only_where_python_does(capsys):
    for x in (-1.0, 1.0):
        expected = short_circuit(x)
        python_out = capsys.readouterr().out
        got = jax.jit(transpiler.convert(short_circuit))(x)
        jax.effects_barrier()
        assert tuple(got) == expected and capsys.readouterr().out == python_out


def identity(v):
    return v


def early_return_in_a_python_loop(x, y):
    a, b = x, y
    for i in range(3):  # i goes into user code: the loop stays Python, its iterations masked
        if b == x:
            a = i
            return a, b
        b = identity(a)
    return a, b


def test_a_python_loop_left_by_a_traced_return_masks_its_later_iterations():
    for args in ((0, 0), (0, 5), (1, 2)):
        check_jit(early_return_in_a_python_loop, *args)


def shows(x):
    print([x], "{}".format(x), "%.2f" % x, "x: " + str(x), repr(x), {"k": x})  # noqa: UP031, UP032
    if x < 0:
        raise ValueError(f"negative input {x}")
    return x


def test_text_made_from_traced_values_shows_the_values(capsys):
    x = np.float32(1.5)
    shows(jnp.asarray(x))  # what the function gets under jax.jit: a JAX array, shown as one
    python_printed = capsys.readouterr().out
    jax.jit(transpiler.convert(shows))(x)
    jax.effects_barrier()
    assert capsys.readouterr().out == python_printed
    with pytest.raises(jax.errors.JaxRuntimeError, match="ValueError: negative input -2.0"):
        jax.jit(transpiler.convert(shows))(np.float32(-2.0)).block_until_ready()


def shows_with_format(x, width):
    label = format(x, ".2f")
    print(format(x, ".3f"), format(x), format(width), label, format(x, f">{width}.1f"))
    return x


def test_format_of_traced_values_is_what_an_f_string_makes(capsys):
    # format(x, spec) is f"{x:spec}" (helper 59: it raised for a tracer under jit).
    x = np.float32(1.25)
    shows_with_format(x, 8)
    python_printed = capsys.readouterr().out
    jax.jit(transpiler.convert(shows_with_format), static_argnums=1)(x, 8)
    jax.effects_barrier()
    assert capsys.readouterr().out == python_printed


def with_a_local_context_manager(x):
    import contextlib

    log = []

    @contextlib.contextmanager
    def scope(name):
        log.append(name)
        yield name

    with scope("step"):
        if x > 0:
            x = x * 2
    return x, len(log)


def test_a_generator_defined_inside_stays_python():
    check_python(with_a_local_context_manager, 2.0)
    check_jit(with_a_local_context_manager, 2.0)


def in_a_list_of_traced_values(x, y):
    items = [x % 5, 7, y % 11]
    hits = 0
    for i in range(6):
        hits = hits + (1 if i in items else 0)
    return hits


def test_in_a_python_list_holding_traced_values():
    for args in ((0, 0), (3, 4), (9, 13)):
        check_jit(in_a_list_of_traced_values, *args)


def index_after_the_loop(x):
    acc = x
    for i in range(4):  # noqa: B007 - read after the loop, the construct under test
        acc = acc + x
    return acc * 2**-i


def index_through_max(x):
    acc = x
    for i in range(4):
        j = max(i, 1)
        acc = acc + x * 2**-j
    return acc


def index_in_a_closure(x):
    acc = x
    for i in range(4):

        def scale(v):
            return v * 2**-i  # noqa: B023 - called at once, the construct under test

        acc = scale(acc)
    return acc


def index_picks_from_a_tuple(x):
    for i in range(3):
        x = x + (1.0, 5.0)[i > 0]
    return x


def test_more_python_uses_of_a_loop_index():
    for fn in (
        index_after_the_loop,
        index_through_max,
        index_in_a_closure,
        index_picks_from_a_tuple,
    ):
        check_jit(fn, 1.0)


def deferred_message(x):
    if x < 0:
        raise ValueError(f"negative input {x}")
    return jnp.sqrt(x)


def test_a_deferred_message_is_made_again_on_every_failing_run():
    compiled = jax.jit(transpiler.convert(deferred_message))
    for x in (-1.0, -4.0):
        with pytest.raises(jax.errors.JaxRuntimeError, match=f"negative input {x}"):
            compiled(x).block_until_ready()


def message_of_a_value_the_branch_computes(x):
    for i in range(x.shape[0]):
        if x[i] < 0:
            print("bad row", i)
            raise ValueError(f"negative at {i}: {x[i] * 2:.2f}")
        x = x * 2
    return x


def test_a_raise_whose_message_the_branch_computes_runs_after_what_precedes_it(capsys):
    # The message's values are made in the branch (`x[i] * 2`): they leaked from the trace
    # the branch first raised in, and the print before the raise was never staged.
    compiled = jax.jit(transpiler.convert(message_of_a_value_the_branch_computes))
    np.testing.assert_allclose(compiled(jnp.array([1.0, 4.0])), [4.0, 16.0])
    with pytest.raises(jax.errors.JaxRuntimeError, match="negative at 1: -16.00"):
        compiled(jnp.array([1.0, -4.0])).block_until_ready()
    assert capsys.readouterr().out == "bad row 1\n"


def sum_of_big_items(x, items):
    acc = x
    for k in items:
        acc = acc + k // 1_000_000_000
    return acc


def test_numpy_64_bit_items_are_not_scanned_as_32_bit():
    items = np.array([3_000_000_000, 1], dtype=np.int64)
    assert int(jax.jit(lambda x: transpiler.convert(sum_of_big_items)(x, items))(1)) == 4


def remember(memo={"n": 0}):  # noqa: B006 - the construct under test
    memo["n"] += 1
    return memo["n"]


def default_argument(x):
    n = 0
    if x > 0:
        n = remember()
    return x + n


def advance(x):
    it = iter([10.0, 20.0, 30.0])
    if x > 0:
        y = x * next(it)
    else:
        y = x
    return y + next(it)


def reorder(x):
    d = {"a": 1.0, "b": 2.0}
    if x > 0:
        d["a"] = d.pop("a") * x
    return list(d.values())


def two_lists(x):
    z = [x] if x > 0 else []
    return len(z)


def test_more_python_state_in_staged_branches():
    assert float(jax.jit(transpiler.convert(default_argument))(-1.0)) == -1.0
    with pytest.raises(StagingError, match=r"next\(\) advances a Python iterator.*\.py:\d+, next"):
        jax.jit(transpiler.convert(advance))(-1.0)
    with pytest.raises(StagingError, match=r"d \(a dict\) has its keys put in another order"):
        jax.jit(transpiler.convert(reorder))(-1.0)
    with pytest.raises(StagingError, match=r"the value is \[float32\[\]\] in the true branch"):
        jax.jit(transpiler.convert(two_lists))(-1.0)


def greet(x):
    print("hello")
    for i in range(2):
        x = x + 1
        print("after", i)
    return x


def test_prints_under_vmap_happen_for_every_element(capsys):
    jax.jit(jax.vmap(transpiler.convert(greet)))(jnp.arange(3.0))
    jax.effects_barrier()
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["hello"] * 3 + ["after 0"] * 3 + ["after 1"] * 3


def checked(x):
    assert x > -1, f"small: {x}"
    return x


def test_an_assert_message_shows_the_values():
    with pytest.raises(jax.errors.JaxRuntimeError, match="AssertionError: small: -2.0"):
        jax.jit(transpiler.convert(checked))(-2.0).block_until_ready()


# -- Python numbers from both branches stay weakly typed (found by an adversarial review) ------------


def number_either_way(x, h):
    y = 1 if x > 0 else 2.5
    if x > 1:
        z = True
    else:
        z = 3
    return h * y, h * z


@pytest.mark.parametrize("x", [2.0, 0.5, -1.0])
def test_numbers_from_both_branches_promote_as_python_numbers(x):
    h = jnp.ones(2, jnp.bfloat16)
    expected = number_either_way(x, h)
    for actual in (
        transpiler.convert(number_either_way)(jnp.float32(x), h),
        jax.jit(transpiler.convert(number_either_way))(x, h),
    ):
        assert [a.dtype for a in actual] == [jnp.bfloat16, jnp.bfloat16]
        assert_tree_close(actual, expected)


# -- State with leaves that are not arrays: held as the very same object ---------------------------


def scaled_until(x, limit):
    state = {"scale": x, "fn": jnp.tanh, "name": "tanh"}
    while jnp.sum(state["scale"]) < limit:
        state = {**state, "scale": state["scale"] * 2.0}
    if state["scale"][0] > 4:
        state = dict(state, scale=state["fn"](state["scale"]))
    return state["scale"], state["fn"], state["name"]


def swapped_function(x):
    state = (x, jnp.tanh)
    if x > 0:
        state = (x, jnp.sin)
    return state[0]


def test_functions_and_strings_in_loop_and_branch_state_stay_the_same_objects():
    for x in (jnp.array([1.0, 2.0]), jnp.array([3.0, 0.5])):
        expected = scaled_until(x, 20.0)
        actual = transpiler.convert(scaled_until)(x, 20.0)
        assert actual[1] is jnp.tanh and actual[2] == "tanh"
        assert_tree_close(actual[0], expected[0])
    compiled = jax.jit(lambda x: transpiler.convert(scaled_until)(x, 20.0)[0])
    assert_tree_close(compiled(jnp.array([1.0, 2.0])), scaled_until(jnp.array([1.0, 2.0]), 20.0)[0])
    batched = jax.vmap(lambda x: transpiler.convert(scaled_until)(x, 20.0)[0])
    xs = jnp.array([[1.0, 2.0], [3.0, 0.5]])
    assert_tree_close(batched(xs), jnp.stack([scaled_until(x, 20.0)[0] for x in xs]))
    with pytest.raises(StagingError, match=r"the very same Python object"):
        jax.jit(transpiler.convert(swapped_function))(1.0)


# -- Choices between values of two dtypes; short-circuits that call user code ------------------------


def min_of_two_dtypes(n, x):
    return min(n, x)


def or_of_two_dtypes(n, x):
    return n or x


def max_with_a_python_number(n, x):
    return max(n, 0), min(x, 2.5), x or 1.0  # a Python number takes the array's dtype


def test_a_traced_choice_between_two_dtypes_is_refused():
    n, x = jnp.int32(16777217), jnp.float32(3e7)
    # Python gives back the int32 (a float32 cannot hold 16777217): one dtype cannot be both.
    with pytest.raises(StagingError, match=r"the items compared are int32\[\] and float32\[\]"):
        transpiler.jit(min_of_two_dtypes)(n, x)
    with pytest.raises(StagingError, match=r"int32\[\] in the true branch but float32\[\].*'or'"):
        transpiler.jit(or_of_two_dtypes)(n, x)
    check_jit(max_with_a_python_number, jnp.int32(-3), jnp.float32(4.0))


def int_or_weak_float_branches(x, n):
    y = jnp.array(0.5)  # a weakly typed float32
    if x > 0:
        y = n
    return y


def float_or_python_complex(x, a):
    c = 1j if x > 0 else a
    return jnp.sqrt(c)


def max_of_int_and_python_float(n):
    return max(n, 0.5)


def int_or_python_float(x, n):
    return (x > 0) and n or 0.5


def test_a_python_float_does_not_make_an_int32_a_float32_that_changes_its_value():
    # Promoting int32 16777217 with a weakly typed float gives float32 16777216: refused, where a
    # Python number that only takes the other's dtype (an int with an int32, a float with a
    # float16) stays allowed.
    n = jnp.int32(16777217)
    with pytest.raises(StagingError, match=r"'y' is int32\[\] in the true branch.*differently"):
        transpiler.jit(int_or_weak_float_branches)(1.0, n)
    with pytest.raises(StagingError, match=r"int32\[\] and float32\[\].*differently"):
        transpiler.jit(max_of_int_and_python_float)(n)
    with pytest.raises(StagingError, match=r"int32\[\] in the true branch but float32\[\]"):
        transpiler.jit(int_or_python_float)(1.0, n)
    check_jit(int_or_weak_float_branches, 1.0, jnp.float16(2.0))  # 0.5 takes float16
    # An int8 made a float32 keeps its values but not its arithmetic (`c * 100` wraps as an
    # int8): refused too; and a float32 made a complex64 by a Python complex.
    with pytest.raises(StagingError, match=r"'y' is int8\[\] in the true branch"):
        transpiler.jit(int_or_weak_float_branches)(-1.0, jnp.int8(3))
    with pytest.raises(StagingError, match=r"computes differently"):
        transpiler.jit(float_or_python_complex)(-1.0, jnp.float32(-4.0))


def uint8_or_python_int(x, c):
    if c > 0:
        y = x
    else:
        y = 300
    return y


def int16_max(x):
    return max(x, 70000)


def float16_or_large(x, c):
    return x if c > 0 else 1e6


def uint8_or(x, c):
    return (c > 0 and x) or 1000


def huge_or_float32(x, a):
    c = 1e39 if x > 0 else a
    return c / 1e30


def two_to_31_or_int32(x, n):
    c = 2**31 if x > 0 else n
    return c


def max_with_a_subnormal(x):
    return max(x, 1e-40)


def tiny_or_float16(t, c):
    return t if c > 0 else 1e-8


def int_of_complex(z, c):
    if c > 0:
        return int(z) + 1
    return 0


def test_int_of_a_traced_complex_raises_pythons_type_error_where_it_runs():
    z = jnp.complex64(2.5 + 1j)
    with pytest.raises(Exception, match="not 'complex'"):  # raised where the branch runs
        jax.block_until_ready(transpiler.jit(int_of_complex)(z, 1.0))
    assert int(transpiler.jit(int_of_complex)(z, -1.0)) == 0  # the branch is not taken


def uint8_after_no_iterations(x, n):
    y = 300
    i = 0
    while i < n:
        y = x
        i += 1
    return y


@pytest.mark.parametrize(
    "fn, args",
    [
        (uint8_or_python_int, (jnp.uint8(5), -1)),
        (int16_max, (jnp.int16(5),)),
        (float16_or_large, (jnp.float16(2), -1)),
        (uint8_or, (jnp.uint8(5), -1)),
        (uint8_after_no_iterations, (jnp.uint8(5), 0)),
        (huge_or_float32, (jnp.float32(1.0), jnp.float32(2.0))),  # 1e39 is inf as a float32
        (two_to_31_or_int32, (jnp.float32(-1.0), jnp.int32(5))),  # 2**31 is no int32
        (tiny_or_float16, (jnp.float16(0.5), -1.0)),  # 1e-8 is 0 as a float16
        (max_with_a_subnormal, (jnp.float32(-2.0),)),  # flushed to 0 by XLA's CPU backend
        (max_with_a_subnormal, (jnp.bfloat16(-2.0),)),
    ],
)
def test_a_python_number_the_arrays_dtype_does_not_hold_is_refused(fn, args):
    # 300 as a uint8 is 44, 70000 as an int16 4464, 1e6 as a float16 inf: Python keeps them.
    with pytest.raises(StagingError, match=r"the Python number .* would be made a"):
        transpiler.jit(fn)(*args)


LAYERS = {"layer0": 1.0, "layer1": 2.0}


def raised_text_caught(x):
    for i in range(2):
        try:
            raise KeyError(f"layer{i}")
        except KeyError as e:
            x = x + LAYERS.get(e.args[0], 100.0)
    return x


def test_text_of_an_exception_the_function_catches_keeps_the_loop_index_python():
    check_jit(raised_text_caught, jnp.float32(0.0))


def upper_bound(x):
    print("upper called")
    return jnp.sqrt(x) + 1


def chained_with_a_call(x):
    return 0 < x < upper_bound(x)


def test_a_chained_comparison_calls_user_code_only_where_python_would(capfd):
    converted = jax.jit(transpiler.convert(chained_with_a_call))
    assert not converted(jnp.float32(-2.0))
    jax.effects_barrier()
    assert capfd.readouterr().out == ""  # traced once, printed by the branch that did not run
    assert converted(jnp.float32(1.0))
    jax.effects_barrier()
    assert capfd.readouterr().out == "upper called\n"


def float_times(x):
    return float(x) * x, int(x) * x


def test_float_and_int_of_a_traced_value_differentiate_alike_compiled_or_not():
    grads = jax.grad(lambda x: sum(transpiler.convert(float_times)(x)))
    # float(x) is a cast (derivative one), int(x) a step (derivative zero)
    expected = 2 * 3.7 + 3.0
    assert np.isclose(grads(3.7), expected)
    assert np.isclose(jax.jit(grads)(3.7), expected)


def closure_over_loop_state(x):
    scale = 1.0
    g = lambda v: v * scale  # noqa: E731 - a closure over a variable the loop changes
    while x < 10:  # the test reads only x: it writes no cell
        x = x * 2
        scale = scale + 1
    return g(x)


def closure_read_by_the_test(x):
    scale = 1.0
    below = lambda v: v * scale < 100  # noqa: E731
    while below(x):  # ... and here it calls the closure: the cell holds the state it tests
        x = x * 2
        scale = scale + 1
    return x, scale


def test_a_loop_test_that_only_reads_does_not_change_a_closure_cell():
    check_jit(closure_over_loop_state, jnp.float32(1.5))
    check_jit(closure_read_by_the_test, jnp.float32(1.5))


def ratio_ok(v):
    assert v != 0, "ratio_ok needs v != 0"
    return 1.0 / v > 0.5


def noisy_positive(v):
    print("checked", v)
    return v > 0


def all_ratios_ok(x):
    return all(ratio_ok(v) for v in x)


def any_positive(x):
    return any(noisy_positive(v) for v in x)


def test_all_and_any_over_a_generator_take_items_only_as_far_as_python(capfd):
    x = jnp.array([1.0, -1.0, 0.0])
    assert not all_ratios_ok(x)
    for run in (transpiler.jit(all_ratios_ok), jax.jit(transpiler.convert(all_ratios_ok))):
        assert not run(x)  # the 0 after the false item is never checked
    got = jax.vmap(transpiler.convert(all_ratios_ok))(
        jnp.array([[1.0, -1.0, 0.0], [1.5, 1.0, 1.2]])
    )
    assert got.tolist() == [False, True]
    capfd.readouterr()
    y = jnp.array([-1.0, 2.0, 3.0])
    assert any_positive(y)
    python_out = capfd.readouterr().out
    assert transpiler.jit(any_positive)(y)
    jax.effects_barrier()
    assert capfd.readouterr().out == python_out  # checked -1.0, then 2.0: not 3.0


def counter_a_closure_captures(n):
    i = 0
    read = lambda: i  # noqa: E731 - never called: `i` lives in a cell all the same
    while i < n:
        i += 1
    return i, read() - i


def test_a_loop_test_that_reads_a_captured_counter_changes_no_state():
    # The test reads the loop's own value of `i`, not its cell (was: refused as changing it).
    assert jax.jit(transpiler.convert(counter_a_closure_captures))(jnp.int32(3)) == (3, 0)
    assert transpiler.convert(counter_a_closure_captures)(3) == counter_a_closure_captures(3)


def break_on_a_one_item_counter(limit):
    i = jnp.zeros([1], jnp.int32)
    while i < 10:
        i += 1
        if i > limit:
            break
    return i


def mixed_operand_tests(x, mask):
    hits = 0
    for v in x:
        if v and v > 0.5:  # float32 and bool: only the truth is tested
            hits += 1
        if v > 2.0 or None:
            hits += 10
        while (v < 3.0 and mask) or not (v or mask):
            v = v + 1.0
    return hits


def test_and_or_tested_for_truth_take_any_operands_python_tests():
    # The staged `and` of a test combines truths (was: refused, since `a and b` as a value
    # would be one of two arrays of different shapes or dtypes).
    for limit in (5, 20):
        assert_tree_close(
            transpiler.jit(break_on_a_one_item_counter)(limit), break_on_a_one_item_counter(limit)
        )
    x = jnp.array([0.0, 1.0, 2.5])
    for mask in (True, False):
        assert transpiler.jit(mixed_operand_tests)(x, mask) == mixed_operand_tests(x, mask)


def handled_in_a_loop(x):
    for _ in range(3):
        try:
            raise KeyError("k")
        except KeyError as err:  # `err` is unbound again once the handler ends
            x = x + len(err.args)
    while x < 10.0:
        try:
            x = x / 0 if x < 0 else x * 2.0
        except ZeroDivisionError as err:
            x = -x + len(err.args)
    return x


def ident(items):
    return items


def write_through_a_returned_list(x):
    items = [x]
    ident(items)[0] = x * 5.0
    return items[0], ident(items) is items


def test_a_caught_exceptions_name_is_not_loop_state():
    for path in (transpiler.convert(handled_in_a_loop), transpiler.jit(handled_in_a_loop)):
        assert_tree_close(path(0.5), handled_in_a_loop(0.5))


def test_a_container_a_converted_function_returns_is_the_same_object():
    # Was: a copy, so writes through it were lost (and their gradients with them).
    assert transpiler.convert(write_through_a_returned_list)(1.0) == (5.0, True)
    value, same = jax.jit(transpiler.convert(write_through_a_returned_list))(1.0)
    assert value == 5.0 and same
    grad = jax.grad(lambda x: transpiler.convert(write_through_a_returned_list)(x)[0])(1.0)
    assert grad == 5.0


def warns_when_exploding(loss):
    if loss > 1e3:
        warnings.warn("loss exploding", stacklevel=2)
        sys.stdout.write("exploding\n")
        LOG.warning("loss %s", loss)
        loss = jnp.float32(1e3)
    return loss


LOG = logging.getLogger("tests.soundness.host_effects")


def test_logging_warnings_and_writes_happen_when_their_branch_runs(capsys, caplog):
    # Called while tracing, they happened once whichever branch ran, with a tracer's text.
    compiled = jax.jit(transpiler.convert(warns_when_exploding))
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        assert float(compiled(jnp.float32(5.0))) == 5.0
        jax.effects_barrier()
        assert not caught and not caplog.records and capsys.readouterr().out == ""
        assert float(compiled(jnp.float32(5000.0))) == 1000.0
        jax.effects_barrier()
    assert [str(w.message) for w in caught] == ["loss exploding"]
    assert [r.getMessage() for r in caplog.records] == ["loss 5000.0"]
    assert capsys.readouterr().out == "exploding\n"


def and_with_a_failing_right_operand(x, y):
    if x < 0 and (y & 2.5):  # Python evaluates the right operand only where x < 0
        return x
    return -x


def or_with_a_failing_right_operand(x, y):
    return (x < 0) or (y & 2.5)


def test_a_right_operand_that_raises_raises_only_where_python_evaluates_it():
    for fn, fine, raising in (
        (and_with_a_failing_right_operand, 1.0, -1.0),
        (or_with_a_failing_right_operand, -1.0, 1.0),
    ):
        converted = jax.jit(transpiler.convert(fn), static_argnums=1)
        assert float(converted(jnp.float32(fine), 1.5)) == float(fn(jnp.float32(fine), 1.5))
        with pytest.raises(Exception, match="unsupported operand type"):
            jax.block_until_ready(converted(jnp.float32(raising), 1.5))


def checks_in_a_loop(x, stop):
    for i in range(stop):
        print("top", i)
        assert x > i, f"i={i}"
    return x


def check_before_a_print(x):
    assert x > 0, "first"
    print("between")
    return x


@pytest.mark.parametrize(
    "fn, args",
    [(checks_in_a_loop, (2.5, 6)), (check_before_a_print, (-1.0,))],
)
def test_the_first_failing_check_ends_the_run_as_in_python(fn, args, capsys):
    # Checks were unordered host callbacks: a later failing one (i=5) was reported, and prints
    # after the first failure were made or lost.
    with pytest.raises(AssertionError) as python:
        fn(*args)
    expected = capsys.readouterr().out
    message = str(python.value).splitlines()[0]  # (pytest adds the test's operands below)
    with pytest.raises(Exception, match=re.escape(f"AssertionError: {message} (")):
        jax.block_until_ready(
            jax.jit(transpiler.convert(fn), static_argnums=range(1, len(args)))(*args)
        )
    jax.effects_barrier()
    assert capsys.readouterr().out == expected


class Holder:
    pass


HOLDER = Holder()


def keys_created_in_both_branches(x):
    stats = {"step": x}
    if x > 1:
        stats["lr"] = x * 0.5
        stats["scale"] = x
    else:
        stats["lr"] = x
        stats["scale"] = -x
    HOLDER.last = stats["lr"]  # an attribute both paths create
    return stats, list(stats)


def key_created_on_one_path(x):
    stats = {}
    if x > 1:
        stats["lr"] = x * 0.5
    return stats


def keys_created_in_two_orders(x):
    stats = {}
    if x > 1:
        stats["a"] = x
        stats["b"] = x
    else:
        stats["b"] = x
        stats["a"] = x
    return stats


@pytest.mark.parametrize("x", [2.0, 0.5])
def test_a_key_every_branch_of_a_staged_if_creates_is_staged(x):
    # It was refused ("stats['lr'] is created while the if statement is traced").
    expected, expected_keys = keys_created_in_both_branches(jnp.float32(x))
    seen = []  # the keys in order, as the traced code made them (jit sorts a dict it returns)

    def run(x):
        stats, keys = transpiler.convert(keys_created_in_both_branches)(x)
        seen.append(keys)
        return stats

    got = jax.jit(run)(x)
    assert seen == [expected_keys] == [["step", "lr", "scale"]]
    assert {k: float(v) for k, v in got.items()} == {k: float(v) for k, v in expected.items()}


@pytest.mark.parametrize(
    "fn, message",
    [
        (key_created_on_one_path, r"stats\['lr'\] is created on some paths"),
        (keys_created_in_two_orders, "created in different orders on different paths"),
    ],
)
def test_keys_created_on_some_paths_or_in_two_orders_are_refused(fn, message):
    with pytest.raises(StagingError, match=message):
        jax.jit(transpiler.convert(fn))(2.0)


class Settings:
    def __init__(self):
        self.lr = 0.1

    def __repr__(self):
        return f"Settings(lr={self.lr})"


def prints_then_changes(x):
    log = {"phase": "warmup", "x": x}
    print("log:", log)
    log["phase"] = "main"
    log["late"] = "added"
    settings = Settings()
    print(f"{[settings, x]}")
    settings.lr = 0.5
    return x


def prints_a_dict_in_a_branch(x):
    d = {"z": x}
    if x > 0:
        d["b"] = 1.0
        print("in true", d)
    else:
        d["b"] = 2.0
    return d["b"]


@pytest.mark.parametrize("fn", [prints_then_changes, prints_a_dict_in_a_branch])
def test_a_staged_print_shows_its_arguments_as_they_were_when_it_ran(fn, capsys):
    # The containers were read when the program ran: later changes showed ('main', a key
    # added after the print), and a dict a branch changed after printing crashed the program.
    fn(jnp.float32(2.0))
    expected = capsys.readouterr().out
    jax.block_until_ready(jax.jit(transpiler.convert(fn))(jnp.float32(2.0)))
    jax.effects_barrier()
    assert capsys.readouterr().out == expected


class Slotted:
    __slots__ = ("best",)


SLOTTED = Slotted()


def slot_created_in_both_branches(x):
    if x > 0:
        SLOTTED.best = x
    else:
        SLOTTED.best = -x
    return SLOTTED.best * 2


def test_a_slot_every_branch_creates():
    # vars() of the object raised a TypeError.
    assert float(jax.jit(transpiler.convert(slot_created_in_both_branches))(-2.0)) == 4.0
