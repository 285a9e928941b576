"""`convert(obj)` on callable objects, partials, and the method wrappers of a class body."""

import dataclasses
import functools
import gc
import operator
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from tests.end_to_end.checks import assert_identical, assert_tree_close


class Gate:
    """A callable object with a traced `if` in `__call__` and a helper method."""

    def __init__(self, threshold):
        self.threshold = threshold
        self.__scale = 2.0

    def __call__(self, x):
        if jnp.sum(x) > self.threshold:
            return self.scaled(x)
        return -x

    def scaled(self, x):
        return x * self.__scale

    @property
    def doubled_threshold(self):
        return 2 * self.threshold


def test_a_callable_object_converts_to_a_view_of_it():
    gate = Gate(1.0)
    view = transpiler.convert(gate)
    assert isinstance(view, Gate) and view is not gate
    assert type(view).__name__ == "Gate" and type(view).__qualname__ == "Gate"
    assert view.threshold == 1.0 and view.doubled_threshold == 2.0
    for x in (jnp.array([1.0, 2.0]), jnp.array([-1.0, 0.5])):
        assert_tree_close(jax.jit(view)(x), gate(x))
        assert_tree_close(jax.jit(lambda x: view(x))(x), gate(x))
        assert_tree_close(
            jax.grad(lambda x: jnp.sum(view(x)))(x), jax.grad(lambda x: jnp.sum(gate(x)))(x)
        )
    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.jit(gate)(jnp.ones(2))  # the original is left as it was


def test_the_view_shares_the_objects_attributes():
    gate = Gate(1.0)
    view = transpiler.convert(gate)
    gate.threshold = 10.0
    assert view.threshold == 10.0
    view.extra = "set on the view"
    assert gate.extra == "set on the view"
    assert vars(view) is vars(gate)
    x = jnp.array([3.0, 4.0])
    assert_tree_close(jax.jit(lambda x: view(x))(x), -x)  # reads the new threshold


def test_python_values_give_exactly_what_the_object_gives():
    gate = Gate(1.0)
    view = transpiler.convert(gate)
    for x in (np.array([1.0, 2.0]), np.array([-1.0, 0.5])):
        assert_identical(view(x), gate(x))


def test_transpiler_jit_of_an_object():
    gate = Gate(0.0)
    x = jnp.array([1.0, -3.0])
    assert_tree_close(transpiler.jit(gate)(x), gate(x))


def test_views_are_made_once_per_class_and_conversion_is_idempotent():
    a, b = Gate(1.0), Gate(2.0)
    view_a, view_b = transpiler.convert(a), transpiler.convert(b)
    assert type(view_a) is type(view_b)
    assert transpiler.convert(view_a) is view_a
    assert type(transpiler.convert(a, recursive=False)) is not type(view_a)


def test_to_source_of_a_view_shows_its_call():
    source = transpiler.to_source(transpiler.convert(Gate(1.0)))
    assert source.startswith("def __call__(self, x):") and "rt__.if_stmt" in source


class Decorated:
    @transpiler.convert
    def __call__(self, x):
        return x if x > 0 else -x


@transpiler.do_not_convert
def _as_is(self, x):
    return x


class AsIs:
    __call__ = _as_is


class Library:
    __call__ = textwrap.indent  # the standard library's: converted code calls it as it is


def test_an_object_whose_call_is_converted_already_do_not_convert_or_library_is_returned_as_is():
    decorated, as_is, library = Decorated(), AsIs(), Library()
    assert transpiler.convert(decorated) is decorated
    assert transpiler.convert(as_is) is as_is
    assert transpiler.convert(library) is library
    assert float(jax.jit(lambda x: decorated(x))(-2.0)) == 2.0


class Base:
    def __call__(self, x):
        if x > 0:
            return self.step(x)
        return x

    def step(self, x):
        return x + 1


class Child(Base):
    def __call__(self, x):
        y = super().__call__(x)
        while 0 < y < 10:
            y = y * 2
        return y


def test_inherited_and_overriding_calls_with_super():
    base, child = Base(), Child()
    for x in (3.0, -1.0):
        assert float(jax.jit(transpiler.convert(base))(x)) == base(x)
        assert float(jax.jit(transpiler.convert(child))(x)) == child(x)
    assert isinstance(transpiler.convert(child), Child)


@dataclasses.dataclass
class Affine:
    w: float
    b: float = 0.0

    def __call__(self, x):
        y = self.w * x + self.b
        if y < 0:
            y = jnp.zeros_like(y)
        return y


def test_dataclass_objects_keep_their_fields():
    affine = Affine(2.0, -1.0)
    view = transpiler.convert(affine)
    assert dataclasses.fields(view) == dataclasses.fields(affine)
    replaced = dataclasses.replace(view, b=5.0)
    assert type(replaced) is type(view) and replaced.b == 5.0 and affine.b == -1.0
    for x in (0.0, 3.0):
        # (A dataclass with eq=True is unhashable: `jax.jit(affine)` is refused as well.)
        assert float(jax.jit(lambda x: view(x))(x)) == affine(x)
        assert float(jax.jit(lambda x: replaced(x))(x)) == dataclasses.replace(affine, b=5.0)(x)


def test_a_view_class_dies_with_its_views():
    class Local:
        def __call__(self, x):
            return x if x > 0 else -x

    view = transpiler.convert(Local())
    assert view(-2.0) == 2.0
    count = len(Local.__subclasses__())
    assert count == 1
    del view
    gc.collect()
    assert Local.__subclasses__() == []


def offset(x, k):
    if x > k:
        return x - k
    return x


def test_partials_convert_their_function():
    part = functools.partial(offset, k=1.0)
    converted = transpiler.convert(part)
    assert type(converted) is functools.partial and converted.keywords == {"k": 1.0}
    assert float(jax.jit(converted)(3.0)) == 2.0 and float(jax.jit(converted)(0.5)) == 0.5
    tree_partial = jax.tree_util.Partial(offset, k=jnp.float32(1.0))
    converted = transpiler.convert(tree_partial)
    assert type(converted) is jax.tree_util.Partial
    assert float(jax.jit(lambda p, x: p(x))(converted, 3.0)) == 2.0


class Wrappers:
    """`@transpiler.convert` above and below the method wrappers of a class body."""

    def __init__(self, x):
        self.x = x

    @transpiler.convert
    @staticmethod
    def static_above(x):
        return x if x > 0 else -x

    @staticmethod
    @transpiler.convert
    def static_below(x):
        return x if x > 0 else -x

    @transpiler.convert
    @classmethod
    def class_above(cls, x):
        return cls(x if x > 0 else -x)

    @classmethod
    @transpiler.convert
    def class_below(cls, x):
        return cls(x if x > 0 else -x)

    @transpiler.convert
    @property
    def property_above(self):
        return self.x if self.x > 0 else -self.x

    @property
    @transpiler.convert
    def property_below(self):
        return self.x if self.x > 0 else -self.x


@pytest.mark.parametrize("where", ["above", "below"])
def test_staticmethod_classmethod_and_property_in_either_order(where):
    static = getattr(Wrappers, f"static_{where}")
    make = getattr(Wrappers, f"class_{where}")
    assert float(jax.jit(static)(-2.0)) == 2.0
    assert float(jax.jit(lambda x: make(x).x)(-3.0)) == 3.0
    assert float(jax.jit(lambda x: getattr(Wrappers(x), f"property_{where}"))(-4.0)) == 4.0
    assert getattr(Wrappers(5.0), f"property_{where}") == 5.0
    assert static(-2.0) == 2.0 and make(-3.0).x == 3.0


def test_a_settable_property_converts_its_setter():
    class Clamped:
        def __init__(self):
            self._value = 0.0

        def _get(self):
            return self._value

        def _set(self, value):
            self._value = value if value > 0 else 0.0

        value = transpiler.convert(property(_get, _set, doc="clamped at 0"))

    def set_and_read(v):
        c = Clamped()
        c.value = v
        return c.value

    assert Clamped.value.__doc__ == "clamped at 0"
    assert float(jax.jit(set_and_read)(-2.0)) == 0.0 and float(jax.jit(set_and_read)(2.0)) == 2.0


def test_things_that_are_not_callable_are_refused():
    with pytest.raises(transpiler.ConversionError) as info:
        transpiler.convert(3)
    assert str(info.value) == (
        "cannot convert 3: it is a int, not a Python function nor an object with a __call__ "
        "method\n"
        "Pass the plain Python function. To combine with jax.jit, convert first: "
        "jax.jit(transpiler.convert(f)), or use @transpiler.jit."
    )


def test_a_class_is_refused_with_what_to_convert_instead():
    with pytest.raises(transpiler.ConversionError) as info:
        transpiler.convert(Gate)
    assert str(info.value) == (
        "cannot convert the class Gate: convert one of its instances, whose __call__ is "
        "converted, or its methods\n"
        "transpiler.convert(Gate(...)), or mark methods with @transpiler.convert in the class body."
    )


def test_a_wrapper_of_an_unconverted_function_is_refused():
    jitted = jax.jit(offset)
    with pytest.raises(transpiler.ConversionError) as info:
        transpiler.convert(jitted)
    assert str(info.value) == (
        f"cannot convert {jitted!r}: it is a {type(jitted).__name__} wrapping the function "
        "offset, which converting the wrapper would leave unconverted\n"
        "Convert the function first, then wrap it: wrap transpiler.convert(offset) instead "
        "(jax.jit(transpiler.convert(offset)), eqx.filter_jit(transpiler.convert(offset)), ...); "
        "in a stack of decorators, put @transpiler.convert below the one that wraps."
    )

    class Wrapper:
        def __init__(self, fn):
            functools.update_wrapper(self, fn)

        def __call__(self, *args):
            return self.__wrapped__(*args)

    with pytest.raises(
        transpiler.ConversionError, match="it is a Wrapper wrapping the function offset"
    ):
        transpiler.convert(Wrapper(offset))
    wrapper = Wrapper(transpiler.convert(offset))
    assert transpiler.convert(wrapper) is wrapper  # what it wraps is converted already
    assert float(jax.jit(wrapper)(3.0, 1.0)) == 2.0


def test_an_object_whose_call_is_not_python_is_refused():
    getter = operator.itemgetter(0)
    with pytest.raises(transpiler.ConversionError) as info:
        transpiler.convert(getter)
    assert str(info.value) == (
        "cannot convert operator.itemgetter(0): it is a itemgetter, whose __call__ is a "
        "wrapper_descriptor, not a Python function\n"
        "Pass the plain Python function. To combine with jax.jit, convert first: "
        "jax.jit(transpiler.convert(f)), or use @transpiler.jit."
    )

    class StaticCall:
        __call__ = staticmethod(offset)

    with pytest.raises(transpiler.ConversionError, match="whose __call__ is a staticmethod"):
        transpiler.convert(StaticCall())


class Slotted:
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k if x > 0 else x


def test_an_object_whose_attributes_a_view_cannot_share_is_refused():
    slotted = Slotted(2.0)
    with pytest.raises(transpiler.ConversionError) as info:
        transpiler.convert(slotted)
    assert str(info.value) == (
        f"cannot convert {slotted!r}: Slotted objects keep attributes in __slots__ (k), which a "
        "converted view of the object cannot share\n"
        "Convert the method instead (transpiler.convert(obj.__call__)), or mark `__call__` with "
        "@transpiler.convert in the class body."
    )
    assert float(jax.jit(transpiler.convert(slotted.__call__))(3.0)) == 6.0

    class OnDict(dict):
        def __call__(self, x):
            return x if x > 0 else -x

    with pytest.raises(transpiler.ConversionError, match="are built on a type implemented in C"):
        transpiler.convert(OnDict())


def test_a_class_that_cannot_be_subclassed_is_refused():
    class NeedsArgument:
        def __init_subclass__(cls, *, tag):
            super().__init_subclass__()

        def __call__(self, x):
            return x

    class Tagged(NeedsArgument, tag="t"):
        pass

    with pytest.raises(transpiler.ConversionError) as info:
        transpiler.convert(Tagged())
    assert str(info.value).startswith(
        "cannot convert a test_a_class_that_cannot_be_subclassed_is_refused.<locals>.Tagged "
        "object: no subclass of test_a_class_that_cannot_be_subclassed_is_refused.<locals>.Tagged "
        "can be made for its converted view ("
    )


def test_long_reprs_are_shortened_in_messages():
    class Big(Slotted):
        __slots__ = ()

        def __repr__(self):
            return "Big(\n" + "  x,\n" * 100 + ")"

    with pytest.raises(
        transpiler.ConversionError,
        match=r"^cannot convert <test_long_reprs_are_shortened_in_messages.<locals>.Big object>: ",
    ):
        transpiler.convert(Big(1.0))
