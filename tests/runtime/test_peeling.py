"""runtime.peeling: the state a loop restarts from, and when its first iteration allows it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from runtime import effects, peeling, staging
from runtime.variables import MaybeUnbound, Undefined, UndefinedReturnValue


def types_of(tree):
    return [
        (jnp.shape(x), jnp.result_type(x), jax.typeof(x).weak_type)
        for x in jax.tree_util.tree_leaves(tree)
    ]


def test_python_numbers_take_the_types_they_have_after_one_iteration():
    after = (jnp.float32(1.5), 1, jnp.asarray(True), 2.5)
    start = peeling.start_state((0, 0, False, 0), after)
    assert types_of(start) == types_of(staging.as_arrays(after))
    assert [float(x) for x in start] == [0.0, 0.0, 0.0, 0.0]


def test_a_weak_int_becomes_a_weak_float():
    (start,) = peeling.start_state((3,), (0.5,))
    assert start.dtype == jnp.float32 and jax.typeof(start).weak_type and float(start) == 3.0


def test_arrays_keep_their_values():
    x = jnp.arange(3.0)
    (start,) = peeling.start_state((x,), (x * 2,))
    np.testing.assert_array_equal(start, x)


@pytest.mark.parametrize(
    "before, after",
    [
        (0.5, jnp.int32(1)),  # a float does not become an int
        (jnp.int32(1), jnp.float32(1.0)),  # a strongly typed int is not cast
        (jnp.zeros(3), jnp.zeros(4)),  # shapes differ
        (None, jnp.zeros(3)),  # None before, an array after
        ((1, 2), (1.0,)),  # trees differ
        ([jnp.zeros(2)], [jnp.zeros(2)]),  # a list (loops size those themselves)
        (Undefined("y"), "text"),  # bound to something that is not an array
        (Undefined("y"), MaybeUnbound(jnp.zeros(2), jnp.asarray(True), "y")),
        (object(), object()),  # another object
    ],
)
def test_what_does_not_promote(before, after):
    assert peeling.start_state((before,), (after,)) is None


def test_unbound_variables_and_return_values_start_as_zeros():
    after = (jnp.ones((2, 3), jnp.int32), jnp.float32(4.0))
    start = peeling.start_state((Undefined("y"), UndefinedReturnValue()), after)
    assert types_of(start) == types_of(after)
    assert not any(np.any(np.asarray(x)) for x in start)


def test_the_same_object_stays():
    model = object()
    assert peeling.start_state((model, None), (model, None)) == (model, None)


def test_eager_code_is_never_restarted():
    after, decides, start = peeling.first_iteration(
        lambda s: ((s[0] + 1,), s[0] + 1 < 3), (0,), ("i",), ()
    )
    assert (after, decides, start) == ((1,), True, None)


LOG = []


def appends(i):
    LOG.append(i)  # Python state the iteration changes
    return i + 1


def test_an_iteration_that_changes_python_state_is_not_restarted():
    seen = []

    def run(x):
        def iteration(state):
            out = (appends(state[0]) * x,)
            return out, out[0] < 10

        after, decides, start = peeling.first_iteration(iteration, (1,), ("i",), (appends,))
        seen.append(start)
        return after[0]

    jax.jit(run)(2.0)
    assert seen == [None] and LOG == [1]


def test_effects_made_under_a_watch_are_recorded():
    watch = effects.Watch((), ())
    with staging.watching(watch):
        staging.made_effect()
    assert watch.effects and not watch.clean()
    assert staging.watches() == ()
