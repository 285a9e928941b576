"""State kept on a class, reached through an instance (`type(self).calls`, a class-level list read
as `self.history`), is Python state staged code can change like any other: carried where it stays
an array, refused by name where it cannot be staged. Never changed once while tracing."""

import jax
import jax.numpy as jnp
import pytest

import transpiler
from runtime import StagingError


class Counted:
    calls = 0

    def __call__(self, x):
        if x > 0:
            type(self).calls += 1
        return x * 2


def counted_call(x):
    return Counted()(x), Counted.calls


@pytest.mark.parametrize("x", [-1.0, 1.0])
def test_a_class_counter_changed_through_type_of_self_in_a_staged_if(x):
    Counted.calls = 0
    expected = counted_call(jnp.float32(x))
    Counted.calls = 0
    y, calls = transpiler.jit(counted_call)(jnp.float32(x))
    assert float(y) == float(expected[0]) and int(calls) == expected[1]


class Steps:
    n = 0


def count_steps(xs):
    s = Steps()
    for _ in xs:
        type(s).n += 1
    return Steps.n


def count_steps_through_dunder_class(xs):
    s = Steps()
    for x in xs:
        if x > 1:
            cls = s.__class__
            cls.n = cls.n + 1
    return Steps.n


@pytest.mark.parametrize("fn", [count_steps, count_steps_through_dunder_class])
def test_a_class_counter_changed_in_a_staged_loop(fn):
    xs = jnp.arange(5.0)
    Steps.n = 0
    expected = fn(xs)
    Steps.n = 0
    assert int(transpiler.jit(fn)(xs)) == expected
    Steps.n = 0
    assert transpiler.convert(fn)(xs) == expected  # eager: Python's own loop


class Logged:
    history = []

    def __call__(self, x):
        if x > 0:
            self.history.append(x)
        return x


def logged_call(x):
    return Logged()(x), len(Logged.history)


def test_a_class_level_list_appended_through_self_in_a_staged_if_is_refused():
    Logged.history = []
    with pytest.raises(StagingError, match=r"Logged\.history \(a list\) grows"):
        transpiler.jit(logged_call)(jnp.float32(1.0))
    assert Logged.history == []  # put back, no tracer left in it


class Base:
    n = 0


class Derived(Base):
    pass


def bump_in_a_branch(x):
    d = Derived()
    if x > 1:
        d.__class__.n = d.__class__.n + 1  # creates Derived.n, as Python does
    return x


def test_an_attribute_a_staged_branch_creates_on_a_class_is_refused():
    Base.n = 0
    with pytest.raises(StagingError, match=r"Derived\.n is created"):
        transpiler.jit(bump_in_a_branch)(jnp.float32(2.0))
    assert "n" not in vars(Derived)


def test_an_instance_of_a_user_class_deriving_from_a_librarys_is_staged():
    # Only the user classes of its MRO are walked (not JAX's `Partial`, not `object`).
    class Model(jax.tree_util.Partial):
        pass

    def call(x):
        m = Model(jnp.sin)
        if x > 0:
            x = m(x)
        return x

    assert float(transpiler.jit(call)(jnp.float32(1.0))) == pytest.approx(float(jnp.sin(1.0)))
