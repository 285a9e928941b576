"""Builtins in staged code behave as Python's: an error a builtin raises in a branch is raised
only where that branch runs; `max`/`min` of arrays compare them as Python does (or raise as it
does); `in` tests identity first; PRNG keys go into staged lists like any array."""

import collections
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from runtime import StagingError


def root_where_positive(x, d):
    if x > 0:
        r = x / math.sqrt(d)
    else:
        r = x
    return r


def parsed_where_positive(x, s):
    n = 0
    if x > 0:
        n = int(s)
    return x + n


def counted_where_positive(x, s):
    n = 0
    if x > 0:
        n = len(s)
    return x + n


def caught_around_a_loop(x, d):
    n = 0
    try:
        while x < 10:
            x = x * 2
            if x > 100:
                n = n + math.sqrt(d)
    except ValueError:
        n = -1
    return x, n


@pytest.mark.parametrize(
    "fn, args",
    [
        (root_where_positive, (-2.0, -1.0)),
        (parsed_where_positive, (-2.0, "n/a")),
        (counted_where_positive, (-2.0, 3)),
        (caught_around_a_loop, (1.0, -1.0)),
    ],
)
def test_a_builtins_error_in_a_branch_not_taken_is_not_raised(fn, args):
    expected = fn(*args)
    got = jax.jit(transpiler.convert(fn), static_argnums=1)(*args)
    assert jax.tree.map(float, got) == jax.tree.map(float, expected)


def test_a_builtins_error_in_the_branch_taken_is_raised_when_it_runs():
    with pytest.raises(Exception, match="math domain error"):
        jax.jit(transpiler.convert(root_where_positive), static_argnums=1)(2.0, -1.0)


def larger(a, b):
    return max(a, b)


def test_max_of_two_arrays_compares_them_as_python_does():
    assert float(transpiler.jit(larger)(jnp.float32(1.0), jnp.float32(3.0))) == 3.0
    with pytest.raises(ValueError, match="truth value of an array with more than one element"):
        transpiler.jit(larger)(jnp.array([1.0, 5.0]), jnp.array([3.0, 2.0]))


def smallest_of_three(a, b, c):
    return min(a + 1, b + 1, c)


def test_min_of_items_without_a_key_compares_and_selects_once_per_item():
    # The items are their own keys: one comparison and one select per item after the first,
    # as `jnp.where(c < m, c, m)` written by hand (the keys were selected a second time).
    jaxpr = jax.make_jaxpr(transpiler.convert(smallest_of_three))(1.0, 2.0, 3.0)
    names = [eqn.primitive.name for eqn in jaxpr.eqns]
    assert names.count("select_n") == 2 and names.count("lt") == 2 and "reshape" not in names
    nan = float("nan")
    for args in ((1.0, 2.0, 3.0), (2.0, 1.0, nan), (nan, 1.0, 0.5), (3.0, 1.0, 0.0)):
        got = float(jax.jit(transpiler.convert(smallest_of_three))(*args))
        want = smallest_of_three(*args)
        assert got == want or (math.isnan(got) and math.isnan(want))


def larger_by_a_vector_key(a, b):
    return max(a, b, key=lambda v: v.reshape(1))


def test_max_by_a_key_of_one_item_gives_an_item_of_its_own_shape():
    # The key's shape (1,) is the comparison's, not the result's: Python gives `a` or `b`.
    for args in ((jnp.float32(1.0), jnp.float32(2.0)), (jnp.float32(3.0), jnp.float32(2.0))):
        got = transpiler.jit(larger_by_a_vector_key)(*args)
        assert got.shape == () and float(got) == float(larger_by_a_vector_key(*args))


def among_itself(x):
    return x in [x, x + 1], x not in (x,)


def test_in_tests_identity_first():
    nan = jnp.float32(jnp.nan)
    assert among_itself(nan) == (True, False)
    assert transpiler.jit(among_itself)(nan) == (True, False)


def split_keys(key, xs):
    keys = []
    for v in xs:
        key, sub = jax.random.split(key)
        if v > 0:
            keys.append(sub)
    return len(keys)


def all_keys(key, xs):
    keys = []
    for _ in xs:
        key, sub = jax.random.split(key)
        keys.append(sub)
    return jnp.stack([jax.random.key_data(k) for k in keys])


def test_prng_keys_in_a_list_a_staged_loop_builds():
    key, xs = jax.random.key(0), jnp.array([1.0, -1.0, 2.0])
    assert int(transpiler.jit(split_keys)(key, xs)) == split_keys(key, xs) == 2
    assert (transpiler.jit(all_keys)(key, xs) == all_keys(key, xs)).all()


def replaced_object(x):
    s = Plain(1.0)
    if x > 0:
        s = Plain(2.0)
    return x * s.v


class Plain:
    def __init__(self, v):
        self.v = v


def test_two_objects_of_one_class_from_two_branches_are_named_as_such():
    with pytest.raises(StagingError, match="'s' is a Plain in the true branch but a different"):
        transpiler.jit(replaced_object)(1.0)


def largest_where_big(x):
    out = []
    s = x[1]
    if x[1] > 5:
        s = s + max(out)  # an empty list: Python raises only where this runs
    return s


def last_in_a_bounded_loop_never_run(x):
    out = []
    s = x[0]
    while x[0] > 5:
        transpiler.loop_options(max_iterations=2)
        s = s + out[-1]
    return s


@pytest.mark.parametrize("fn", [largest_where_big, last_in_a_bounded_loop_never_run])
def test_an_error_of_code_that_never_runs_is_not_raised(fn):
    x = jnp.array([1.0, 2.0])
    assert float(transpiler.jit(fn)(x)) == float(fn(x))


def pick(a, b):
    return max(a, b), min(a, b)


def among_arrays(x):
    return x in [jnp.array([1.0, 2.0])]


def largest_item(a):
    return max(a)


def any_positive(x):
    out = []
    if x > 0:
        out.append(x)
    return bool(out)


def allocated_where_positive(x, n, alloc):
    if x > 0:
        y = x + alloc(n).sum()
    else:
        y = x
    return y


def test_comparisons_python_refuses_or_shapes_python_keeps():
    with pytest.raises(StagingError, match=r"of shapes \(1,\) and \(\)"):
        transpiler.jit(pick)(jnp.array([3.0]), jnp.float32(2.0))
    with pytest.raises(ValueError, match="truth value of an array"):
        transpiler.jit(among_arrays)(jnp.float32(1.0))
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        transpiler.jit(largest_item)(jnp.float32(1.0))
    assert [bool(transpiler.jit(any_positive)(v)) for v in (1.0, -1.0)] == [True, False]


def test_a_c_function_given_a_tracer_is_refused_by_name_while_tracing():
    staged = jax.jit(lambda x, n: transpiler.convert(allocated_where_positive)(x, n, np.zeros))
    with pytest.raises(StagingError, match=r"where JAX needs a Python value \(\S+:\d+: y = x"):
        staged(-1.0, 3)  # refused while tracing, whichever branch would run


def maybe_logged(x, make_log):
    if make_log:
        log = []
    log.append(x)
    return x * 2


def logged_starred(x):
    log = []
    log.append(*[x])
    return x


def test_an_unread_list_keeps_pythons_errors_and_syntax():
    with pytest.raises(UnboundLocalError):
        jax.jit(lambda x: transpiler.convert(maybe_logged)(x, False))(1.0)
    assert float(transpiler.jit(logged_starred)(1.0)) == 1.0


def extremes_of_generators(xs):
    largest = max(v for v in xs)
    smallest_double = min((v * 2 for v in xs), default=0.0)
    nothing = min((v for v in xs if False), default=-1.0)
    largest_value = max({"a": xs[0], "b": xs[2]}.values()) + max(xs, default=0.0) * 0
    return largest, smallest_double, nothing, max(iter([xs[0], xs[1]])), largest_value


def test_max_and_min_of_a_generator_of_traced_items():
    xs = jnp.array([3.0, 5.0, 1.0])
    expected = extremes_of_generators(xs)
    got = transpiler.jit(extremes_of_generators)(xs)
    assert [float(v) for v in got] == [float(v) for v in expected] == [5.0, 2.0, -1.0, 5.0, 3.0]


def range_of_a_traced_bound(x, n):
    evens, odds = range(0, n, 2), range(1, n, 2)
    found = (3 in range(n), 4 in odds, 5 in odds, 2.0 in range(n), 2.5 in range(n), -1 in evens)
    return len(evens), odds[-1], odds[0], found, 4 in range(n, 0, -2)


@pytest.mark.parametrize("n", [7, 8, 2])
def test_len_index_and_in_of_a_range_of_traced_bound(n):
    expected = range_of_a_traced_bound(1.0, n)
    got = transpiler.jit(range_of_a_traced_bound)(1.0, n)
    assert jax.tree.map(int, got) == jax.tree.map(int, expected)


def range_values_times(h, n, k):
    total = h * len(range(n)) + h * range(n)[-1] + h * range(1, n, 3)[k]
    for i in reversed(range(n)):
        total = total + h * i
    for i in range(n, 0, -2):
        total = total + h * (i + 1)
    for j, i in enumerate(range(k, n), k):
        total = total + h * (i - j)
    return total


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.int8, jnp.int16, jnp.bfloat16])
def test_the_items_and_length_of_a_range_of_traced_bound_are_python_ints(dtype):
    # Weakly typed ints, however the bounds are typed: a uint8 `h` times one is a uint8 (which
    # wraps), as in Python. They were int32s where a bound or the index was typed.
    for n_dtype in (jnp.int32, jnp.uint8, jnp.int8):
        n, k = jnp.asarray(5, n_dtype), jnp.int8(0)
        h = jnp.asarray(100 if dtype != jnp.int8 else 10, dtype)
        expected = range_values_times(h, n, k)
        got = transpiler.jit(range_values_times)(h, n, k)
        assert got.dtype == expected.dtype == dtype
        assert jax.typeof(got).weak_type == jax.typeof(expected).weak_type
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def range_truth_and_equality(n):
    r = range(n)
    chosen = 1 if r else 2
    steps = 0
    while r and steps < 3:
        steps += 1
    either = 1 if range(n) and n > 1 else 0
    same = (r == range(3), r == range(0, n, 1), r != range(3), range(2, n) == range(2, n, 5))
    return chosen, steps, not r, bool(r), either, same, r.index(0) if r else -1, r.count(2)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_truth_equality_index_and_count_of_a_range_of_traced_bound(n):
    # Its truth was always True (an object's), and `==` compared the objects: `1 if range(n)
    # else 2` gave 1 for n = 0, and `range(n) == range(3)` False for n = 3.
    expected = range_truth_and_equality(n)
    got = transpiler.jit(range_truth_and_equality)(n)
    assert jax.tree.map(int, got) == jax.tree.map(int, expected)


def reductions_of_a_range(n, k):
    up, down = range(k, n, 2), range(n, k, -3)
    return (
        sum(range(n)),
        sum(up, 10),
        max(range(n), default=-7),
        min(range(n), default=-7),
        max(down, default=-1),
        min(down, default=-1),
        any(range(n)),
        all(range(n)),
        any(up),
        all(range(1, n)),
        any(range(k, k + 1)),
    )


@pytest.mark.parametrize("n, k", [(0, 0), (1, 1), (2, -3), (5, 0), (9, 1), (9, -3)])
def test_sum_min_max_any_all_of_a_range_of_traced_bound(n, k):
    # They were refused: "a range with a traced bound has no length yet".
    expected = reductions_of_a_range(n, k)
    got = transpiler.jit(reductions_of_a_range)(n, k)
    assert [int(v) for v in got] == [int(v) for v in expected]
    with pytest.raises(Exception, match=r"max\(\) arg is an empty sequence"):
        transpiler.jit(lambda n: max(range(n)))(0).block_until_ready()


def prints_a_range(n):
    print(range(n), f"{range(1, n, 2)!r}", [range(n, 0, -1)])
    return n


def test_a_range_of_traced_bound_prints_as_python_prints_it(capsys):
    prints_a_range(4)
    expected = capsys.readouterr().out
    jax.block_until_ready(transpiler.jit(prints_a_range)(4))
    assert capsys.readouterr().out == expected == "range(0, 4) range(1, 4, 2) [range(4, 0, -1)]\n"


def index_not_in_range(n):
    return range(n).index(2)


def test_index_and_hash_of_a_range_of_traced_bound_raise_as_python_does():
    assert int(transpiler.jit(index_not_in_range)(5)) == 2
    with pytest.raises(Exception, match="2 is not in range"):
        transpiler.jit(index_not_in_range)(2).block_until_ready()
    with pytest.raises(TypeError, match="no hash"):
        transpiler.jit(lambda n: {range(3): 1}.get(range(n), 0))(3)


def item_past_the_end(n):
    return range(n)[5]


def test_an_index_past_the_end_of_a_range_of_traced_bound_raises():
    assert int(transpiler.jit(item_past_the_end)(7)) == 5
    with pytest.raises(Exception, match="range object index out of range"):
        transpiler.jit(item_past_the_end)(3).block_until_ready()


def adds_text_where_negative(xs):
    s = 0.0
    for v in xs:
        if v < 0:
            s = s + "oops"
        s = s + v
    return s


def test_an_operator_error_in_a_branch_not_taken_is_not_raised():
    # Python's TypeError for `+` of a number and a string is the program's: raised only where
    # that branch runs (it was taken for JAX's need of a Python value, and raised while traced).
    assert float(transpiler.jit(adds_text_where_negative)(jnp.array([1.0, 2.0]))) == 3.0
    with pytest.raises(Exception, match="unsupported operand type"):
        transpiler.jit(adds_text_where_negative)(jnp.array([1.0, -2.0])).block_until_ready()


def found_in(c, xs):
    return 1.0 if c in xs else 0.0


@pytest.mark.parametrize(
    "c, xs",
    [
        (jnp.array([1.0, 5.0]), jnp.array([[1.0, 2.0], [3.0, 4.0]])),
        (jnp.float32(1.0), jnp.array([[1.0, 2.0], [3.0, 4.0]])),
        (jnp.array([1.0, 5.0]), jnp.array([1.0, 2.0])),
    ],
)
def test_in_an_array_raises_as_jax_does_for_shapes_it_refuses(c, xs):
    with pytest.raises(ValueError, match="Array.__contains__") as python:
        found_in(c, xs)
    with pytest.raises(ValueError, match="Array.__contains__") as staged:
        transpiler.jit(found_in)(c, xs)
    assert str(staged.value).split(",")[0] == str(python.value).split(",")[0]


def largest_of_two_numbers_and_an_array(x):
    return max(1e5, 2e5, x)  # Python compares the numbers first: 2e5, then against x


def sum_of_a_list_of_traced_length(x, h):
    out = []
    for i in range(3):
        if x > i:
            out.append(h)
    return sum(out)  # Python adds in the items' own type: int8 wraps


def test_min_and_max_of_python_numbers_among_arrays_compare_them_as_python():
    # float16 cannot hold 2e5: refused, not inf (the two numbers were once chosen in the graph,
    # a weakly typed array that passed as a number).
    with pytest.raises(StagingError, match="200000.0 would be made a float16"):
        jax.jit(transpiler.convert(largest_of_two_numbers_and_an_array))(jnp.float16(1))
    got = jax.jit(transpiler.convert(largest_of_two_numbers_and_an_array))(jnp.float32(3e5))
    assert got.dtype == jnp.float32 and float(got) == 3e5


@pytest.mark.parametrize(
    "item", [jnp.int8(100), jnp.uint8(200), jnp.bool_(True), jnp.float32(0.5)], ids=str
)
def test_sum_of_a_list_of_traced_length_adds_in_the_items_type(item):
    expected = sum_of_a_list_of_traced_length(jnp.float32(5.0), item)
    got = jax.jit(transpiler.convert(sum_of_a_list_of_traced_length))(jnp.float32(5.0), item)
    assert got.dtype == expected.dtype
    assert jax.typeof(got).weak_type == jax.typeof(expected).weak_type
    assert got == expected


def largest_of_a_bool_and_an_int(h, w):
    return max(h, 2) * w


def largest_of_a_float_and_a_number(x, w):
    return max(x, 0.5) * w


@pytest.mark.parametrize(
    "fn, args",
    [
        (largest_of_a_bool_and_an_int, (jnp.bool_(True), jnp.uint8(200))),  # 2 * 200 wraps
        (largest_of_a_float_and_a_number, (jnp.float32(3.0), jnp.float16(1.5))),  # float32
    ],
    ids=["bool-int", "float-chosen"],
)
def test_a_choice_against_a_python_number_has_the_type_python_arithmetic_gives(fn, args):
    # (Where Python's choice is the number and the other a float32, the staged choice is the
    # float32 array: the documented join, semantics.md.)
    expected = fn(*args)
    got = jax.jit(transpiler.convert(fn))(*args)
    assert got.dtype == expected.dtype
    assert float(got) == float(expected)


def sum_of_kept_losses(losses, running):
    kept = []
    for loss in losses:
        if loss > 0:
            kept.append(loss)
    return sum(kept, running)


def test_sum_of_a_list_of_traced_length_adds_one_item_after_another():
    # Python: ((1e8 + 4) + 4) rounds to 1e8 at each step in float32; a total of the items
    # first (8) added to 1e8 once would give 100000008.
    args = (jnp.array([4.0, 4.0]), jnp.float32(1e8))
    expected = sum_of_kept_losses(*args)
    got = jax.jit(transpiler.convert(sum_of_kept_losses))(*args)
    assert float(got) == float(expected) == 1e8
    half = (jnp.ones(2, jnp.float16), jnp.float16(2048))  # float16 rounding at each step too
    assert float(jax.jit(transpiler.convert(sum_of_kept_losses))(*half)) == 2048


def truth_of(g):
    if g:
        return 1
    return 0


def kept_if_true(g):
    if g:
        return g
    return g - g + 5


def kept_or_five(g):
    return g or g - g + 5


def scaled_if_true(g):
    return g * 2 if g else -g


@pytest.mark.parametrize("value", [1e-40, -1e-40, 1e-45, -0.0, float("nan"), 0.0])
def test_the_truth_of_a_float_is_pythons_for_subnormals_zeros_and_nan(value):
    # XLA on a CPU flushes a float32 subnormal to zero in `x != 0`; Python's truth does not.
    x = jnp.float32(value)
    assert int(jax.jit(transpiler.convert(truth_of))(x)) == truth_of(x) == bool(value)
    # Read by its bits, also where the kernel XLA fuses the test into reads `x` as a float
    # (a select of `x`): LLVM turns `bits & 0x7fffffff != 0` into a flushing `x != 0.0` there.
    for fn in (kept_if_true, kept_or_five, scaled_if_true):
        for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
            x = jnp.asarray(value, dtype)
            if float(x) == 0 and value != 0:  # not a subnormal of this dtype: it is 0 there
                continue
            expected = np.asarray(fn(x), np.float32)  # eager: each operation its own kernel
            got = np.asarray(jax.jit(transpiler.convert(fn))(x), np.float32)
            np.testing.assert_array_equal(got, expected)
            xs = jnp.stack([x, jnp.asarray(3, dtype)])
            got = np.asarray(jax.jit(jax.vmap(transpiler.convert(fn)))(xs), np.float32)
            np.testing.assert_array_equal(got[0], expected)


def capped_in_a_branch(x):
    b = jnp.float32(0.25)
    if x <= 2:
        z = 0.0 * b
    else:
        z = max(b, 1.5) + min(jnp.sin(b), 2.0, b)
    return z


def test_min_and_max_of_concrete_arrays_in_a_branch_traced_inside_vmap():
    # Inside the branch JAX traces every operation, the comparison of two concrete values
    # too: Python's max raised TracerBoolConversionError on its truth.
    xs = jnp.array([1.0, 3.0])
    expected = np.stack([np.asarray(capped_in_a_branch(x)) for x in xs])
    got = jax.vmap(transpiler.convert(capped_in_a_branch))(xs)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)
    assert float(jax.jit(transpiler.convert(capped_in_a_branch))(3.0)) == float(expected[1])


def test_min_or_max_of_a_range_of_traced_bound_with_a_default_of_another_type_is_refused():
    # `min(range(n), default=5.5)` gave 0.0 where Python gives the int 0; `default=None` raised
    # "arg is an empty sequence" when the program ran, where Python gives None.
    for default in (5.5, None):
        with pytest.raises(StagingError, match="the default of min"):
            transpiler.jit(lambda n, d=default: min(range(n), default=d))(5)
    assert int(transpiler.jit(lambda n: max(range(n), default=-1))(0)) == -1


def percent_text_printed_later(n, x):
    message = "n is %s, x is %.2f" % (n, x)  # noqa: UP031 - the `%` text under test
    print(message)
    return n


def test_percent_text_assigned_to_a_name_only_printed_shows_values(capsys):
    # It printed the tracer ("n is JitTracer(~int32[])"), and `%.2f` of a tracer raised.
    percent_text_printed_later(3, 1.5)
    expected = capsys.readouterr().out
    jax.block_until_ready(transpiler.jit(percent_text_printed_later)(3, 1.5))
    assert capsys.readouterr().out == expected == "n is 3, x is 1.50\n"


class _Tagged(dict):
    def __init__(self, tag, **items):
        super().__init__(**items)
        self.tag = tag


class _Named(list):
    def __init__(self, name, items=()):
        super().__init__(items)
        self.name = name


def prints_containers_of_library_and_user_types(x):
    counts = collections.defaultdict(float)
    counts["a"] = x
    print(_Tagged("t", a=x), _Named("n", [x, x]), counts, collections.OrderedDict(a=x))
    return x


def test_dict_and_list_subclasses_print_their_values(capsys):
    # A dict subclass printed `{}` (made again by its constructor, which takes other
    # arguments), a defaultdict raised "first argument must be callable".
    prints_containers_of_library_and_user_types(jnp.float32(1.0))
    expected = capsys.readouterr().out
    x = jnp.float32(1.0)
    jax.block_until_ready(transpiler.jit(prints_containers_of_library_and_user_types)(x))
    assert capsys.readouterr().out == expected


def carries_a_numpy_int64(x):
    a = np.int64(2) ** 40
    if x > 0:
        a = a + 1
    return a


def test_a_numpy_int64_an_int32_cannot_hold_is_refused_and_a_negative_int_power_raises():
    # It was cut to an int32 (0 where Python gives 1099511627777), as a Python int is not.
    with pytest.raises(StagingError, match="1099511627777 would be made a int32"):
        transpiler.jit(carries_a_numpy_int64)(1.0)
    # `2 ** -n` of an int32 `n`: eager JAX and NumPy raise, XLA's power of ints gives 0.
    with pytest.raises(Exception, match="Integers cannot be raised to negative powers"):
        transpiler.jit(lambda n: 2**-n)(jnp.int32(3)).block_until_ready()


def argmin_and_running_max_of_tuples(x):
    nearest = min((abs(x - c), i) for i, c in enumerate([0.0, 1.0, 2.0]))
    best = (x * 0, -1)
    for i in range(4):
        best = max(best, (x * i % 3, i))
    return nearest, best, max((x, 2.0), (x, 1.0)), max((1, x), (2, x))


@pytest.mark.parametrize("x", [0.5, 1.7, 2.2])
def test_min_and_max_of_tuples_of_traced_values_compare_item_by_item(x):
    # They raised JAX's TracerArrayConversionError (the tuple read as one array).
    expected = argmin_and_running_max_of_tuples(jnp.float32(x))
    got = transpiler.jit(argmin_and_running_max_of_tuples)(x)
    assert [float(v) for v in jax.tree.leaves(got)] == [float(v) for v in jax.tree.leaves(expected)]


def tuples_with_one_object_twice(x):
    nan, label = x[0], None
    return max((nan, 1), (nan, 2)), max((x[1], label), (x[2], label)), min((nan, 2), (nan, 1))


def test_tuple_items_that_are_one_object_are_equal_as_in_python():
    # Python's tuple comparison takes the same object as equal (a NaN, None): the next items
    # decide. Staged, the NaNs compared unequal ((nan, 1) where Python gives (nan, 2)), and
    # None reached a comparison of arrays.
    x = jnp.array([jnp.nan, 1.0, 2.0])
    expected = tuples_with_one_object_twice(x)
    got = transpiler.jit(tuples_with_one_object_twice)(x)
    assert str(jax.tree.map(float, got)) == str(jax.tree.map(float, expected))


def test_a_range_of_a_traced_array_bound_is_refused_as_python_refuses_it():
    # `len(range(n))` of an int32[2] `n` gave [1, 3].
    with pytest.raises(TypeError, match="only integer scalar arrays"):
        transpiler.jit(lambda n: len(range(n)))(jnp.array([1, 3]))


def simplex_order(x):
    vertices = sorted([x, x + 1.0, x - 2.0], key=lambda p: jnp.sum(p**2))
    return vertices[0], vertices[-1]


def top_two(scores):
    candidates = [(scores[i], i) for i in range(4)]
    best = sorted(candidates, key=lambda c: c[0], reverse=True)[:2]
    return best[0][1], best[1][1], best[0][0]


def three_sorted(a, b, c):
    return sorted([a, b, c])


def by_floor(a, b, c):
    return sorted([a, b, c], key=jnp.floor)


def by_tuple(a, b):
    return sorted([(a, 1), (b, 0), (a, 0)])


@pytest.mark.parametrize(
    "fn, args",
    [
        (simplex_order, (jnp.array([0.5, 0.5]),)),
        (simplex_order, (jnp.array([-1.5, 0.5]),)),
        (top_two, (jnp.array([0.3, 0.9, 0.1, 0.9]),)),  # ties keep their order, reversed too
        (top_two, (jnp.array([0.3, 0.2, 0.7, 0.1]),)),
        (three_sorted, (3.0, 1.0, 2.0)),
        (three_sorted, (1.0, 1.0, -1.0)),
        (by_floor, (1.5, 1.25, 0.5)),  # equal keys: the first first
        (by_tuple, (jnp.float32(2.0), jnp.float32(1.0))),
        (by_tuple, (jnp.float32(1.0), jnp.float32(1.0))),
    ],
)
def test_sorted_with_traced_keys_is_pythons_stable_order(fn, args):
    want = fn(*args)
    got = jax.jit(transpiler.convert(fn))(*args)
    assert jax.tree.map(lambda v: np.asarray(v).tolist(), got) == jax.tree.map(
        lambda v: np.asarray(v).tolist(), want
    )


def test_sorted_with_traced_keys_under_grad_and_vmap():
    def weighted(a):
        return sum(
            v * w for v, w in zip(transpiler.convert(three_sorted)(a, 1.0, 2.0), [1, 10, 100])
        )

    assert [float(jax.grad(weighted)(a)) for a in (3.0, 1.5, 0.5)] == [100.0, 10.0, 1.0]
    batched = jax.vmap(transpiler.convert(three_sorted))(
        jnp.array([3.0, 0.0]), jnp.array([1.0, 1.0]), jnp.array([2.0, 2.0])
    )
    assert [v.tolist() for v in batched] == [[1.0, 0.0], [2.0, 1.0], [3.0, 2.0]]


def sorted_many(xs):
    return sorted([xs[i] for i in range(65)])


def sorted_shapes(a, b):
    return sorted([a, b], key=jnp.sum)


def test_sorted_with_traced_keys_refuses_what_it_cannot_make_exact():
    with pytest.raises(jax.errors.JaxRuntimeError, match="sorted.. of keys holding a NaN"):
        jax.jit(transpiler.convert(three_sorted))(3.0, float("nan"), 2.0).block_until_ready()
    with pytest.raises(StagingError, match=r"sorted\(\) of 65 items .*jnp.argsort"):
        jax.jit(transpiler.convert(sorted_many))(jnp.arange(65.0))
    with pytest.raises(StagingError, match=r"of shapes \(2,\) and \(3,\)"):
        jax.jit(transpiler.convert(sorted_shapes))(jnp.ones(2), jnp.ones(3))


def sorted_from_a_generator(x):
    return sorted(v for v in [x[0], x[1], x[2]])


def sorted_dict_values(x):
    return sorted({"a": x[0], "b": x[1]}.values())


def sorted_lists(x):
    return sorted([[x[0], x[1]], [x[1], x[0]]])


def sorted_in_place(scores):
    candidates = [(scores[i], i) for i in range(4)]
    candidates.sort(key=lambda c: c[0], reverse=True)
    return candidates[0][1], candidates[1][1]


@pytest.mark.parametrize(
    "fn", [sorted_from_a_generator, sorted_dict_values, sorted_lists, sorted_in_place]
)
def test_sorted_of_iterators_lists_and_list_sort_with_traced_items(fn):
    # A generator's and a view's items were not seen as traced (JAX's TracerBoolConversionError),
    # lists were not compared item by item, and `list.sort` was Python's.
    x = jnp.array([3.0, 1.0, 2.0, 1.0])
    want, got = fn(x), jax.jit(transpiler.convert(fn))(x)
    assert jax.tree.map(lambda v: np.asarray(v).tolist(), got) == jax.tree.map(
        lambda v: np.asarray(v).tolist(), want
    )


def logs_items(x):
    history = []
    for _ in range(3):
        x = x * 0.5
        history.append(x.item())
        print(f"{x.item():.4f}")
    return history


def test_item_of_a_traced_array_is_its_python_number_staged(capfd):
    want = logs_items(jnp.float32(1.0))
    expected = capfd.readouterr().out
    got = jax.jit(transpiler.convert(logs_items))(jnp.float32(1.0))
    jax.effects_barrier()
    assert [float(v) for v in got] == want and capfd.readouterr().out == expected


def squared_item(x):
    return x.item() ** 2


def item_of(x):
    return x.item()


def test_item_of_a_traced_array_is_a_constant_and_checks_its_size():
    # Eager JAX's `.item()` gives a constant: its derivative is 0 (it was 1, as float()'s).
    assert float(jax.grad(transpiler.convert(squared_item))(3.0)) == 0.0
    assert float(jax.grad(squared_item)(3.0)) == 0.0
    got = jax.jit(transpiler.convert(item_of))(jnp.complex64(2.0 + 1.0j))
    assert complex(got) == 2.0 + 1.0j
    with pytest.raises(ValueError, match="can only convert an array of size 1"):
        jax.jit(transpiler.convert(item_of))(jnp.ones(2))


def smallest_by_a_ragged_key(x):
    return min([0, 1, 2], key=lambda i: [x[i]] * (i + 1))


def test_min_by_keys_of_different_lengths_is_refused_by_name():
    with pytest.raises(StagingError, match=r"the keys compared are .*one structure"):
        jax.jit(transpiler.convert(smallest_by_a_ragged_key))(jnp.array([1.0, 0.5, 2.0]))
