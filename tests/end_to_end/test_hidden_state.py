"""Python state that no variable shows: how many items an iterator gave, where a random number
generator stands. A staged loop or branch must change it exactly as Python would, or refuse."""

import array
import contextlib
import functools
import io
import itertools
import random
import sys
from random import gauss

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.random import normal

import transpiler
from runtime import StagingError, sequences

X = jnp.float32(1.5)


def held_iterator(x):
    it = iter([1.0, 2.0, 3.0, 4.0])
    s = 0.0
    for v in it:
        if x < v:
            break
        s = s + v
    return s, len(list(it))


def generator_with_effects(x):
    fetched = []

    def items():
        for i in range(4):
            fetched.append(i)
            yield i

    s = 0.0
    for i in items():
        if x < i:
            break
        s = s + i
    return s, len(fetched)


def endless(x):
    s = 0.0
    for i in itertools.count():
        if x < i:
            break
        s = s + i
    return s


def enumerate_a_list(x):  # a fresh iterator over a list: taking more items shows nowhere
    s = 0.0
    for i, v in enumerate([1.0, 2.0, 3.0, 4.0]):
        if x < v:
            break
        s = s + v * i
    return s


@pytest.mark.parametrize("fn", [held_iterator, generator_with_effects, endless])
def test_a_traced_break_in_a_loop_over_a_visible_iterator_is_refused(fn):
    with pytest.raises(StagingError, match=r"takes its items from an iterator \(\w+\)"):
        transpiler.jit(fn)(X)


def test_a_traced_break_in_a_loop_over_a_fresh_iterator_of_a_list_is_staged():
    assert transpiler.jit(enumerate_a_list)(X) == enumerate_a_list(X)
    assert transpiler.jit(enumerate_a_list)(jnp.float32(2.5)) == enumerate_a_list(2.5)


def _probe(iterable):
    iterator = iter(iterable)  # as for_stmt counts
    refs = sys.getrefcount(iterator) - (iterator is iterable)
    return sequences.taking_items_shows(iterator, refs)


class HeldIterable:
    def __init__(self, it):
        self.it = it

    def __iter__(self):
        return self.it


def test_which_iterators_show_the_items_taken():
    # Each made where it is probed, so that it is held only where the test means it to be
    # (pytest's rewritten asserts hold what they show: the results are asserted afterwards).
    held = iter([1, 2])
    shows = [
        _probe(held),
        _probe(enumerate(held)),
        _probe(zip((v for v in [1]), [2])),
        _probe(v for v in [1]),
        _probe(itertools.count()),
        _probe(map(abs, [1])),
        _probe(zip([0, 1], held)),
        _probe(HeldIterable(held)),  # its __iter__ gives a held iterator
    ]
    hides = [
        _probe(iter([1, 2])),
        _probe(enumerate([1, 2])),
        _probe(enumerate(zip([1], (2,)))),
        _probe(reversed([1, 2])),
        _probe(iter({1: 2}.items())),
        _probe([1, 2]),  # not an iterator: each loop takes its own
    ]
    assert shows == [True] * 8
    assert hides == [False] * 6


def python_random_in_a_scan(x):
    s = 0.0
    for _ in range(3):
        s = s + x * random.random()
    return s


def numpy_random_in_a_while(x):
    n = 0
    while x < 10:
        x = x + np.random.uniform()
        n += 1
    return n


RNG = np.random.default_rng(0)


def imported_draws_in_a_branch(x):
    if x > 0:
        x = x + gauss(0.0, 1.0) + normal()
    return x


def draws_in_a_helper(v):
    return v * np.random.uniform()


def helper_draws_in_a_branch(x):
    if x > 0:
        x = draws_in_a_helper(x)
    return x


def generator_in_a_branch(x):
    if x > 0:
        x = x + RNG.normal()
    return x


def test_random_draws_in_a_loop_with_python_bounds_run_as_python():
    random.seed(0)
    expected = python_random_in_a_scan(X)
    random.seed(0)
    assert np.isclose(transpiler.jit(python_random_in_a_scan)(X), expected)
    random.seed(0)
    assert np.isclose(jax.jit(transpiler.convert(python_random_in_a_scan))(X), expected)


@pytest.mark.parametrize(
    "fn",
    [
        numpy_random_in_a_while,
        generator_in_a_branch,
        imported_draws_in_a_branch,
        helper_draws_in_a_branch,
    ],
)
def test_random_draws_in_staged_code_are_refused_and_undone(fn):
    np.random.seed(1)
    before_global, before_rng = np.random.get_state()[1].copy(), RNG.bit_generator.state
    with pytest.raises(StagingError, match=r"is drawn from \(a Python random number generator"):
        transpiler.jit(fn)(jnp.float32(0.5))
    assert np.array_equal(np.random.get_state()[1], before_global)
    assert RNG.bit_generator.state == before_rng


class Epochs:
    def __init__(self):
        self.started = 0

    def __iter__(self):
        self.started += 1
        return iter([1.0, 2.0, 3.0])


EPOCHS = Epochs()


def loop_over_an_iterable_object(x):
    for v in EPOCHS:
        if x < v:
            break
        x = x + v
    return x


def test_a_loop_takes_one_iterator_from_an_iterable():
    EPOCHS.started = 0
    expected = loop_over_an_iterable_object(1.5)
    assert EPOCHS.started == 1
    EPOCHS.started = 0
    assert np.isclose(transpiler.jit(loop_over_an_iterable_object)(jnp.float32(1.5)), expected)
    assert EPOCHS.started == 1


class Noise:
    def __init__(self, draw):
        self.draw = draw


OWN = random.Random(0)
NOISES = [Noise(random.random), Noise(functools.partial(random.random)), Noise(OWN.random)]


def draws_through_an_attribute(x, noise):
    s = x
    for _ in range(3):
        s = s + noise.draw()
    return s


@pytest.mark.parametrize("noise", NOISES, ids=["bound", "partial", "own generator"])
def test_a_generator_reached_through_a_bound_method_draws_each_iteration(noise):
    random.seed(0)
    OWN.seed(0)
    expected = draws_through_an_attribute(1.0, noise)
    random.seed(0)
    OWN.seed(0)
    converted = transpiler.convert(draws_through_an_attribute)
    got = jax.jit(lambda x: converted(x, noise))(jnp.float32(1.0))
    assert np.isclose(got, expected)


SYSTEM = random.SystemRandom()  # no state to read: it must not break staged code around it


def doubles_if_positive(x):
    if x > 0:
        x = x * 2
    return x


def test_a_system_random_generator_in_reach_is_no_error():
    assert transpiler.jit(doubles_if_positive)(jnp.float32(1.0)) == 2.0


def advances_with(take):
    it = iter([3.0, 1.0, 4.0, 1.0, 5.0, 9.0])

    def f(s):
        while s < 10:
            s = s + take(it)
        return s, next(it)

    return f


def take_islice(it):
    return list(itertools.islice(it, 1))[0]


def take_next_method(it):
    return it.__next__()


def take_next_of_a_zip(it):
    return next(zip(it))[0]


TAKERS = {"islice": take_islice, "__next__": take_next_method, "next of a zip": take_next_of_a_zip}


@pytest.mark.parametrize("take", TAKERS.values(), ids=TAKERS.keys())
def test_an_iterator_advanced_in_staged_code_by_any_means_is_refused(take):
    with pytest.raises(StagingError, match=r"\(an iterator: \w+\) is advanced"):
        transpiler.jit(advances_with(take))(jnp.float32(0.0))


# -- callables with state of their own: functools.lru_cache -----------------------------------------

CACHED_CALLS = []


@functools.lru_cache(None)
def cached_scale(k):
    CACHED_CALLS.append(k)  # an effect the cache makes happen once
    return k * k


@functools.lru_cache(None)
def cached_pure(k):
    return k * k


def loop_calling_cached(x, scale):
    s = 0.0
    for v in x:
        if v > 0:
            s = s + v * scale(2)
    return s, len(CACHED_CALLS)


def test_a_cached_call_that_changes_state_in_staged_code_is_refused():
    # Tracing makes the call, which the snapshot undoes, but the cache keeps its entry: a
    # second way of staging the loop (unrolled) would meet a cache hit and lose the append.
    CACHED_CALLS.clear()
    cached_scale.cache_clear()
    xs = jnp.array([1.0, -2.0, 3.0])
    with pytest.raises(StagingError, match=r"by a call of cached_scale .*test_hidden_state.py:"):
        transpiler.jit(loop_calling_cached, static_argnums=1)(xs, cached_scale)
    cached_pure.cache_clear()
    out = transpiler.jit(loop_calling_cached, static_argnums=1)(xs, cached_pure)
    assert out[0] == loop_calling_cached(xs, cached_pure)[0]


# State that code Python calls without the function naming it changes: a context manager's
# __enter__/__exit__, a contextlib.contextmanager's body, a property's getter. Tracing a staged
# block ran it once for every run and branch, and nothing was watched.
TRAIL = []


class Scope:
    def __enter__(self):
        TRAIL.append("in")

    def __exit__(self, *exc):
        TRAIL.append("out")


@contextlib.contextmanager
def named_scope(name):
    TRAIL.append(name)
    yield
    TRAIL.append("/" + name)


class Counter:
    def __init__(self):
        self.v = 1.0

    @property
    def value(self):
        TRAIL.append("read")
        return self.v


COUNTER = Counter()


def scope_in_a_branch(x):
    if x > 2:
        with Scope():
            x = x - 1
    return x


def scope_in_a_loop(x):
    for i in range(3):
        with Scope():
            if x > i:
                x = x - 1
    return x


def contextmanager_in_a_branch(x):
    if x > 0:
        with named_scope("a"):
            x = x - 1
    return x


def property_in_a_branch(x):
    if x > 0:
        x = x + COUNTER.value
    return x


@pytest.mark.parametrize(
    "fn", [scope_in_a_branch, contextmanager_in_a_branch, property_in_a_branch]
)
def test_state_changed_by_methods_python_calls_in_staged_code_is_refused(fn):
    TRAIL.clear()
    with pytest.raises(StagingError, match=r"TRAIL \(a list\) grows"):
        transpiler.jit(fn)(1.0)
    assert TRAIL == []  # undone


def test_a_loop_whose_context_manager_changes_state_runs_as_python():
    TRAIL.clear()
    expected = scope_in_a_loop(1.0)
    python_trail = list(TRAIL)
    TRAIL.clear()
    assert float(transpiler.jit(scope_in_a_loop)(1.0)) == expected
    assert TRAIL == python_trail == ["in", "out"] * 3


# Files and buffers: a write in staged code is made when the program runs, in the branch taken
# (it was made while tracing, once per traced branch, whatever the data said).


class _Log:
    def __init__(self):
        self.buf = io.StringIO()

    def log(self, message, value):
        self.buf.write(f"{message}: {value}\n")


def logs_improvements(xs, log):
    best = jnp.inf
    for i in range(xs.shape[0]):
        if xs[i] < best:
            log.log("improved", xs[i])
            best = xs[i]
    return best


def writes_to_a_stream(xs, stream):
    count = 0
    for v in xs:
        if v > 2:
            stream.write(f"{v}")
            count = count + stream.write("!")
            stream.writelines(["!", "\n"])
    return count


def writes_lines_to_stdout(x):
    if x > 0:
        sys.stdout.writelines(["pos\n"])
    return x


@pytest.mark.parametrize("xs", [[3.0, 4.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
def test_writes_to_files_and_buffers_happen_in_the_branch_the_program_takes(xs, capsys):
    xs = jnp.array(xs)
    expected, got = _Log(), _Log()
    best = logs_improvements(xs, expected)
    compiled = jax.jit(transpiler.convert(logs_improvements), static_argnums=1)
    assert float(compiled(xs, got)) == float(best)
    jax.effects_barrier()
    assert got.buf.getvalue() == expected.buf.getvalue()
    # A write of text known while tracing gives its length, as the stream's write does; text
    # with traced values in it gives None (documented), so count only the known ones here.
    stream, expected_stream = io.StringIO(), io.StringIO()
    writes_to_a_stream(xs, expected_stream)
    count = jax.jit(transpiler.convert(writes_to_a_stream), static_argnums=1)(xs, stream)
    jax.effects_barrier()
    assert count == writes_to_a_stream(xs, io.StringIO())
    assert stream.getvalue() == expected_stream.getvalue()
    for x in (-1.0, 1.0):
        transpiler.jit(writes_lines_to_stdout)(jnp.float32(x))
        jax.effects_barrier()
        assert capsys.readouterr().out == ("pos\n" if x > 0 else "")


def reads_what_it_printed(x):
    buf = io.StringIO()
    print("x is", x, file=buf)
    return len(buf.getvalue())


def writes_then_reads(x):
    buf = io.StringIO()
    if x > 0:
        buf.write("positive")
    buf.seek(0)
    return x, buf.read()


@pytest.mark.parametrize(
    "fn, read", [(reads_what_it_printed, "StringIO.getvalue"), (writes_then_reads, "StringIO.seek")]
)
def test_reading_a_buffer_the_program_writes_to_when_it_runs_is_refused(fn, read):
    # Traced, the read would see none of the text: the write is made when the program runs.
    assert fn(1.0) is not None  # Python values: as Python
    assert transpiler.convert(fn)(1.0) == fn(1.0)
    with pytest.raises(StagingError, match=rf"`{read}\(\)` reads or changes the StringIO"):
        transpiler.jit(fn)(jnp.float32(1.0))


def writes_in_a_with_block(xs, path):
    best = jnp.inf
    with open(path, "w") as fh:
        for v in xs:
            if v < best:
                fh.write("improved\n")
                best = v
    return best


def test_a_file_closed_before_the_program_runs_is_refused(tmp_path):
    with pytest.raises(StagingError, match=r"writes to a TextIOWrapper at .*closed before then"):
        jax.jit(transpiler.convert(writes_in_a_with_block), static_argnums=1)(
            jnp.array([3.0, 2.0]), str(tmp_path / "log.txt")
        )


def sets_an_item_of_an_array(x):
    a = array.array("i", [0, 0])
    if x > 0:
        a[0] = 7
    return a[0]


def appends_to_an_array(xs):
    a = array.array("d")
    for v in xs:
        if v > 0:
            a.append(1.0)
    return len(a)


def sets_a_byte(x):
    b = bytearray(b"ab")
    if x > 0:
        b[0] = 65
    return b[0]


@pytest.mark.parametrize(
    "fn, what",
    [
        (sets_an_item_of_an_array, r"a \(an array.array\)"),
        (appends_to_an_array, r"a \(an array.array\)"),
        (sets_a_byte, r"b \(a bytearray\)"),
    ],
)
def test_buffers_changed_in_staged_code_are_refused(fn, what):
    # Tracing changed them once, whatever branch the data took (an item set in a branch that
    # does not run; one append for a loop's many).
    with pytest.raises(StagingError, match=what + " is changed in place"):
        transpiler.jit(fn)(jnp.array([1.0, -1.0, 2.0]) if fn is appends_to_an_array else -1.0)


def writes_lines_and_formats(buf, x):
    if x > 0:
        buf.writelines([f"a{x}\n", "b\n"])
        buf.writelines(f"{v}\n" for v in [x, x + 1])
        buf.write("%s/%s\n" % (x, x + 1))  # noqa: UP031 - Python's % is what is tested
        buf.write("h%.2f\n" % x)  # noqa: UP031 - Python's % is what is tested
        buf.write(format(x, ".1f") + "\n")
        buf.write("%(a)s\n" % {"a": x})  # noqa: UP031 - Python's % is what is tested
    buf.flush()
    return x


class _Recorder:
    def __init__(self):
        self.lines = []

    def write(self, text):
        self.lines.append(text)


def records_a_format(recorder, x):
    recorder.write("h%.2f" % x)  # noqa: UP031 - Python's % is what is tested
    return x


@pytest.mark.parametrize("x", [1.5, -1.0])
def test_text_written_to_a_stream_shows_the_values_however_it_is_made(x):
    # Lists and generators of lines, `%` and `format()`: their values (the tracer's text was
    # written, or `%.2f` raised). A `write` of another object (the user's) gets the text as
    # Python makes it: a format of a tracer raises, as it does.
    expected, got = io.StringIO(), io.StringIO()
    writes_lines_and_formats(expected, jnp.float32(x))
    compiled = jax.jit(transpiler.convert(writes_lines_and_formats), static_argnums=0)
    compiled(got, jnp.float32(x))
    jax.effects_barrier()
    assert got.getvalue() == expected.getvalue()
    with pytest.raises(TypeError):
        jax.jit(transpiler.convert(records_a_format), static_argnums=0)(_Recorder(), x)


def writes_a_number(buf, x):
    if x > 0:
        buf.write(3)
    return x


def test_a_write_python_would_refuse_raises_its_type_error_in_the_branch_taken():
    compiled = jax.jit(transpiler.convert(writes_a_number), static_argnums=0)
    compiled(io.StringIO(), jnp.float32(-1.0))  # the branch does not run: nothing raised
    with pytest.raises(Exception, match=r"write\(\) argument must be str, not int"):
        compiled(io.StringIO(), jnp.float32(1.0))
        jax.effects_barrier()


class Loud:
    def __init__(self, tag):
        self.tag = tag

    def __enter__(self):
        print("enter", self.tag)
        return 2

    def __exit__(self, *exc):
        print("exit", self.tag)
        return False


def prints_around_a_context(x):
    print("start")
    with Loud("a") as k:
        print("inside", k)
        if x > 0:
            with Loud("b"):
                x = x * k
    print("end")
    return x


@pytest.mark.parametrize("x", [1.0, -1.0])
def test_prints_of_enter_and_exit_are_in_order_with_the_functions(x, capfd):
    # (effects fuzz e1922) Python calls a context manager's __enter__ and __exit__ itself: run
    # as they were, under jax.jit their prints came while the function was traced, before the
    # staged prints of the code around them.
    expected = prints_around_a_context(x)
    eager = capfd.readouterr().out
    got = jax.jit(transpiler.convert(prints_around_a_context))(x)
    jax.block_until_ready(got)
    assert capfd.readouterr().out == eager
    assert float(got) == expected


class CountsItsArguments:
    @staticmethod
    def __enter__(*args):
        return len(args)

    def __exit__(self, *exc):
        return False


class SuppressesValueErrors:
    def __enter__(self):
        return self

    @staticmethod
    def __exit__(*exc):
        return exc[0] is ValueError


def static_enter(x):
    with CountsItsArguments() as n:
        y = x + n
    return y


def static_exit(x):
    with SuppressesValueErrors():
        raise ValueError("dropped")
    return x + 1


def test_static_enter_and_exit_get_no_instance():
    # (helper 150) Python binds a static __enter__ to nothing: it was given the manager.
    assert float(jax.jit(transpiler.convert(static_enter))(1.0)) == static_enter(1.0) == 1.0
    assert float(jax.jit(transpiler.convert(static_exit))(1.0)) == static_exit(1.0) == 2.0


def enters_without_a_call(x, cm):
    with cm:
        y = x * 2
    return y


def test_a_with_in_a_function_with_no_call_is_converted_too(capfd):
    # (helper 150) The pass that rewrites `with` ran only in functions holding a call.
    transpiler.jit(enters_without_a_call, static_argnums=1)
    expected = enters_without_a_call(1.0, Loud("c"))
    eager = capfd.readouterr().out
    got = jax.jit(transpiler.convert(enters_without_a_call), static_argnums=1)(1.0, Loud("c"))
    jax.block_until_ready(got)
    assert capfd.readouterr().out == eager
    assert float(got) == expected


SEEN = []


class SuppressesAll:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


def appends_in_a_suppressing_with(x):
    with SuppressesAll():
        if x > 0:
            SEEN.append(1)
    return x


def appends_in_suppress(x):
    with contextlib.suppress(Exception):
        if x > 0:
            SEEN.append(1)
    return x


@pytest.mark.parametrize("fn", [appends_in_a_suppressing_with, appends_in_suppress])
def test_a_suppressing_manager_does_not_swallow_a_refusal(fn):
    # (helper 150, older) The StagingError refusing the staged append to a global list was
    # suppressed: the program went on without the append, where Python's made it.
    with pytest.raises(StagingError):
        jax.jit(transpiler.convert(fn))(1.0)


def asserts_in_a_suppressing_with(x):
    y = x * 1.0
    with SuppressesAll():
        y = x * 10
        assert x > 0
        y = x * 100
    return y


def test_a_check_made_at_once_under_vmap_is_not_suppressed_for_every_element():
    # (helper 150, older) Under jax.vmap without jax.jit the staged assert fails at once for
    # the batch: suppressed, every element took the path of the elements that fail it.
    with pytest.raises(StagingError, match="inside a `with` whose manager's `__exit__`"):
        jax.vmap(transpiler.convert(asserts_in_a_suppressing_with))(jnp.array([1.0, -1.0]))
    assert float(transpiler.convert(asserts_in_a_suppressing_with)(-1.0)) == -10.0
