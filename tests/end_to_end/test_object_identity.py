"""An object of the user's registered pytree class (a dataclass) that a staged statement
changes in place (`s.n += 1`) keeps its identity, as a list or dict does: every name that holds
it sees the change. Where the staged program cannot keep it (the object is changed and then let
go of, or a name holds one of two objects a traced condition chose), the converted function
refuses with a StagingError naming the variable. Before `runtime.identity.attribute_node`, the
programs below returned the values from before the change, with no error."""

import copy
import dataclasses

import jax
import jax.numpy as jnp
import pytest

import transpiler
from runtime import StagingError
from tests.end_to_end.checks import check_grad, check_jit, check_python, check_vmap


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class State:
    n: jax.Array


@jax.tree_util.register_pytree_node_class
class Params:
    """A class registered by hand, with a static tag its children do not hold."""

    def __init__(self, w, tag="p"):
        self.w = w
        self.tag = tag

    def tree_flatten(self):
        return (self.w,), self.tag

    @classmethod
    def tree_unflatten(cls, tag, children):
        return cls(*children, tag=tag)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(slots=True)
class Slotted:
    n: jax.Array
    k: int = dataclasses.field(default=0, metadata=dict(static=True))


def slotted_in_a_while(x):
    s = Slotted(jnp.zeros(()), k=3)
    old = s
    i = 0
    while i < x:
        s.n = s.n + s.k
        s = s
        i += 1
    return old.n, s.n, old is s


def set_and_rebound_in_a_branch(x):
    s = State(jnp.zeros(()))
    old = s
    if x > 0:
        s.n += 1
        s = s
    return old.n, s.n, old is s


def set_in_a_while_that_rebinds_it(x):
    s = State(jnp.zeros(()))
    t = s
    i = 0
    while i < x:
        s.n = s.n + 1
        s = s
        i += 1
    return t.n, s.n


def set_in_a_list_item_under_a_branch(x):
    s = State(jnp.zeros(()))
    ss = [s]
    for i in range(3):
        if x > i:
            ss[0].n += 1
            ss = ss
    return s.n, ss[0].n


def set_in_a_dict_item_under_a_branch(x):
    s = State(jnp.zeros(()))
    d = {"s": s}
    if x > 0:
        d["s"].n = d["s"].n + 1
        d = d
    return s.n, d["s"].n


def both_names_carried(x):
    s = State(jnp.zeros(()))
    t = s
    i = 0
    while i < x:
        s.n += 1
        t = t
        i += 1
    return s.n, t.n


def _bump(s, c):
    if c > 0:
        s.n = s.n + 1
        s = s
    return s


def set_by_a_helper_under_its_branch(x):
    s = State(jnp.zeros(()))
    old = s
    r = _bump(s, x)
    return old.n, r.n, old is r


def hand_registered_class_in_a_range_loop(x):
    p = Params(jnp.ones(3))
    q = p
    for i in range(3):
        if x > i:
            p.w = p.w * 2
            p = p
    return q.w, p.w, q.tag == "p"


def every_iteration_of_a_scan(x):
    s = State(jnp.zeros(()))
    old = s
    for _ in range(3):
        s.n = s.n + x
        s = s
    return old.n, s.n


def items_of_a_list_chosen_by_the_index(x):
    ss = [State(jnp.zeros(())), State(jnp.ones(()))]
    first = ss[0]
    for i in range(4):
        if x > i:
            ss[i % 2].n = ss[i % 2].n + i
            ss = ss
    return first.n, ss[0].n, ss[1].n


KEPT = [
    set_and_rebound_in_a_branch,
    set_in_a_while_that_rebinds_it,
    set_in_a_list_item_under_a_branch,
    set_in_a_dict_item_under_a_branch,
    set_by_a_helper_under_its_branch,
    hand_registered_class_in_a_range_loop,
    every_iteration_of_a_scan,
    items_of_a_list_chosen_by_the_index,
    slotted_in_a_while,
]


@pytest.mark.parametrize("fn", KEPT)
@pytest.mark.parametrize("x", [2.0, -1.0])
def test_the_object_changed_in_place_is_the_one_every_name_holds(fn, x):
    check_jit(fn, x)


@pytest.mark.parametrize("fn", [set_and_rebound_in_a_branch, set_in_a_list_item_under_a_branch])
def test_kept_under_vmap_and_grad(fn):
    check_vmap(fn, jnp.array([2.0, -1.0, 0.5]))
    check_grad(lambda x: sum(jnp.sum(v) for v in fn(x)[:2]), 2.0)


def test_python_values_keep_the_object():
    check_python(set_in_a_while_that_rebinds_it, 2)
    converted = transpiler.convert(set_and_rebound_in_a_branch)
    assert converted(1.0)[2] is True


def changed_then_replaced_in_a_branch(x):
    s = State(jnp.zeros(()))
    old = s
    if x > 0:
        s.n = s.n + 1
        s = State(s.n * 3)
    return old.n, s.n


def changed_then_replaced_in_an_iteration(x):
    s = State(jnp.zeros(()))
    old = s
    i = 0
    while i < x:
        s.n += 1
        s = State(s.n)
        i += 1
    return old.n, s.n


def changed_then_let_go_of(x):
    s = State(jnp.zeros(()))
    old = s
    r = jnp.zeros(())
    if x > 0:
        s.n = s.n + 1
        r = s.n
        s = None
    return old.n, r


def changed_on_one_path_replaced_on_the_other(x):
    s = State(jnp.zeros(()))
    old = s
    if x > 0:
        s = State(jnp.ones(()))
    else:
        s.n = s.n - 1
    return old.n, s.n


def chosen_then_changed(x):
    a, b = State(jnp.zeros(())), State(jnp.ones(()))
    best = a
    if x > 0:
        best = b
    best.n = best.n + 5.0
    return a.n, b.n, best.n


def chosen_by_an_expression_then_changed(x):
    a, b = State(jnp.zeros(())), State(jnp.ones(()))
    best = a if x > 0 else b
    best.n = best.n + 5.0
    return a.n, b.n


def swapped_then_changed(x):
    s, t = State(jnp.zeros(())), State(jnp.ones(()))
    if x > 0:
        s, t = t, s
    s.n = s.n + 10
    return s.n, t.n


@pytest.mark.parametrize(
    "fn, message",
    [
        (changed_then_replaced_in_a_branch, r"'s' is changed in place and then bound to another"),
        (changed_then_replaced_in_an_iteration, r"'s' is given another State after changing"),
        (changed_then_let_go_of, r"'s' holds a State .* changes in place through 's' and then"),
        (changed_on_one_path_replaced_on_the_other, r"'s' holds a State that is changed in place"),
        (chosen_then_changed, r"'best' is a different State depending on the condition"),
        (
            chosen_by_an_expression_then_changed,
            r"'best' is a different State depending on the condition of a staged conditional",
        ),
        (swapped_then_changed, r"'s' is a different State depending on the condition"),
    ],
)
def test_a_change_the_staged_program_cannot_keep_is_refused(fn, message):
    with pytest.raises(StagingError, match=message):
        jax.jit(transpiler.convert(fn))(1.0)


def test_the_refusal_names_a_copy_of_the_object():
    with pytest.raises(StagingError, match=r"s = copy\.copy\(s\)"):
        jax.jit(transpiler.convert(changed_then_replaced_in_a_branch))(1.0)


def copied_first(x):
    s = State(jnp.zeros(()))
    old = s
    if x > 0:
        s = copy.copy(s)
        s.n = s.n + 1
    return old.n, s.n


def test_a_copy_changed_in_place_runs():
    check_jit(copied_first, 1.0)
    check_jit(copied_first, -1.0)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Box:
    inner: State
    k: jax.Array


def attribute_given_a_new_object(x):
    b = Box(State(jnp.zeros(())), jnp.zeros(()))
    old_inner = b.inner
    if x > 0:
        b.inner = State(b.inner.n + 1)
        b = b
    return old_inner.n, b.inner.n


def dict_item_given_a_new_object(x):
    d = {"s": State(jnp.zeros(())), "t": {"w": jnp.ones(())}}
    s0, t0 = d["s"], d["t"]
    if x > 0:
        d["s"] = State(x)
        d["t"] = {"w": x}
        d = d
    return s0.n, t0["w"], d["s"].n, d["t"]["w"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Ring:
    buf: list
    n: jax.Array


def _push(r, x):
    r.buf = r.buf[1:] + [x]
    r.n = r.n + 1
    return r


def ring_buffer_pushed_in_a_loop(xs):
    r = Ring([jnp.zeros(()), jnp.zeros(()), jnp.zeros(())], jnp.zeros(()))
    before = r.buf
    for x in xs:
        if x > 0:
            r = _push(r, x)
    return before, r.buf, r.n


def adam_steps_under_a_condition(x):
    import optax

    opt = optax.adam(0.1)
    p = {"w": jnp.ones(3) * x}
    st = opt.init(p)
    for _ in range(3):
        g = jax.tree_util.tree_map(lambda w: 2 * w, p)
        if jnp.sum(p["w"]) > 0:
            upd, st = opt.update(g, st, p)
            p = optax.apply_updates(p, upd)
    return p["w"]


@pytest.mark.parametrize("x", [1.0, -1.0])
@pytest.mark.parametrize(
    "fn",
    [attribute_given_a_new_object, dict_item_given_a_new_object, adam_steps_under_a_condition],
)
def test_an_object_replaced_at_its_place_is_not_overwritten(fn, x):
    check_jit(fn, x)


def test_a_ring_buffer_replaced_in_a_loop_leaves_the_old_list_alone():
    xs = jnp.array([2.0, -1.0, 3.0, 0.5])
    check_jit(ring_buffer_pushed_in_a_loop, xs)
    check_vmap(ring_buffer_pushed_in_a_loop, jnp.stack([xs, -xs]))


def bound_in_a_loop_then_changed(x):
    a, b = State(jnp.zeros(())), State(jnp.ones(()))
    cur = a
    for i in range(3):
        if x > i:
            cur = b
    cur.n = cur.n + 10
    return a.n, b.n


def rebound_in_a_loop_that_may_not_run_then_changed(x):
    s = State(jnp.zeros(()))
    keep = s
    i = 0
    while i < x:
        s = State(s.n + 1)
        i += 1
    s.n = s.n + 100
    return keep.n, s.n


def held_by_a_list_and_changed_by_name(x):
    rec = State(x)
    recs = [rec, State(jnp.ones(()))]
    if x > 0:
        rec.n = rec.n * 2
        recs[0].n = recs[0].n + 10
        recs = recs
    return rec.n, recs[0].n


def reset_on_one_path_changed_on_the_other(xs):
    s = State(jnp.zeros(()))
    first = s
    for x in xs:
        if x < 0:
            s = State(jnp.zeros(()))
        else:
            s.n = s.n + x
    return s.n, first.n


def episode_reset(xs):
    # No other name holds `s`: bound only to new objects (conversion resolves `State` to a
    # class), it owns them, as `s = {...}` owns its dicts.
    s = State(jnp.zeros(()))
    total = jnp.zeros(())
    for x in xs:
        if x < 0:
            total = total + s.n
            s = State(jnp.zeros(()))
        else:
            s.n = s.n + x
    return s.n, total


def episode_reset_in_a_while(x):
    s = State(jnp.zeros(()))
    t = 0
    while t < x:
        if s.n >= 2:
            s = State(jnp.zeros(()))
        s.n = s.n + t
        t += 1
    return s.n


def test_an_object_only_one_name_holds_may_be_replaced_on_one_path():
    xs = jnp.array([2.0, -1.0, 3.0, 0.5, -2.0, 1.0])
    check_jit(episode_reset, xs)
    check_vmap(episode_reset, jnp.stack([xs, -xs]))
    check_grad(lambda xs: sum(episode_reset(xs)), xs)
    check_jit(episode_reset_in_a_while, 5.0)
    check_jit(episode_reset_in_a_while, -1.0)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Holder:
    items: list


def holder_of_a_shared_list_replaced_or_changed(x):
    # `h` is bound only to new objects, but the first holds `p`'s list: it owns no list.
    p = [jnp.zeros(())]
    h = Holder(p)
    if x > 0:
        h = Holder([jnp.ones(())])
    else:
        h.items[0] = h.items[0] + 5
    return p[0], h.items[0]


@pytest.mark.parametrize(
    "fn, message",
    [
        (holder_of_a_shared_list_replaced_or_changed, r"'h' holds a Holder that is changed"),
        (bound_in_a_loop_then_changed, r"'cur' is a different State depending on the condition"),
        (rebound_in_a_loop_that_may_not_run_then_changed, r"'s' holds a new State after the"),
        (held_by_a_list_and_changed_by_name, r"'recs' holds the State that rec.n is in"),
        # (A list's item changed through one name while another carries it: refused alike.)
        (both_names_carried, r"'t' holds the State that s.n is in"),
        # (`first` holds the object changed on one path: the fix names its attributes.)
        (reset_on_one_path_changed_on_the_other, r"Set its attributes on the other path too"),
    ],
)
def test_changes_a_name_cannot_follow_through_loops_are_refused(fn, message):
    arg = jnp.array([1.0, -2.0]) if fn is reset_on_one_path_changed_on_the_other else 1.0
    with pytest.raises(StagingError, match=message):
        jax.jit(transpiler.convert(fn))(arg)


def test_a_library_class_subclassed_is_not_given_back_its_identity():
    import equinox as eqx

    from runtime import identity

    class Policy(eqx.Module):
        w: jax.Array

    assert not identity.attribute_node(Policy(jnp.ones(2)))
    assert identity.attribute_node(State(jnp.ones(2)))
    assert identity.attribute_node(Params(jnp.ones(2)))
    assert not identity.attribute_node({"w": 1})


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Converted:
    n: jax.Array

    def __post_init__(self):
        self.n = jnp.asarray(self.n, jnp.float32)


def made_arrays_by_post_init(x):
    s = Converted(0)
    old = s
    for i in range(3):
        if x > i:
            s.n = s.n + x
            s = s
    return old.n, s.n


def test_a_class_whose_post_init_makes_arrays_is_rebuilt_of_arrays_only():
    # A staged `if` asked JAX for the shapes of its branches' outputs as objects: the class
    # was built of `ShapeDtypeStruct`s, which `__post_init__` could not make arrays (TypeError).
    check_jit(made_arrays_by_post_init, 2.0)
    check_jit(made_arrays_by_post_init, -1.0)


def compared_by_identity_inside_a_branch(x):
    s = State(x)
    s0 = s
    items = [s, State(2 * x)]
    if x > 0:
        s.n = s.n + 1
        s = s
        same = 1 if s is s0 else 0
    else:
        same = (2 if s is s0 else 3) + (4 if items[1] is s else 5)
    return same, s.n, s0.n


def list_compared_by_identity_inside_a_branch(x):
    rec = [x]
    rec0 = rec
    if x > 0:
        rec[0] = rec[0] + 1
        rec = rec
        same = 1 if rec is rec0 else 0
    else:
        same = 4
    return same, rec[0]


def list_chosen_then_compared_after_an_early_return(x, y):
    rec = [x]
    rec0 = rec
    recs = [rec, [y]]
    if y < 0:
        return 5
    if x > 9:
        rec = recs[1]
    return 1 if rec is rec0 else 0


def carried_by_a_loop_and_compared(x):
    s = State(jnp.zeros(()))
    s0 = s
    hits = 0
    i = 0
    while i < x:
        if s is s0:
            hits += 1
        s = State(s.n + 1)
        i += 1
    return hits


@pytest.mark.parametrize("x", [1.0, -1.0])
def test_is_inside_a_branch_sees_the_object_not_the_branchs_copy(x):
    # The branch was given a copy of `s` (of `rec`): `s is s0` was False where Python's is True.
    check_jit(compared_by_identity_inside_a_branch, x)
    check_jit(list_compared_by_identity_inside_a_branch, x)


def test_is_after_a_choice_inside_a_branch_is_refused():
    # Inside the branch the return pass made of the rest, `rec0`'s copy was what the `if`
    # chose between: `rec is rec0` was 0 where Python's is 1 (x <= 9).
    with pytest.raises(StagingError, match=r"`is` compares 'rec'"):
        jax.jit(transpiler.convert(list_chosen_then_compared_after_an_early_return))(3, 4)


def test_is_of_an_object_a_loop_carries_is_refused():
    with pytest.raises(StagingError, match=r"`is` compares a State that a staged loop carries"):
        jax.jit(transpiler.convert(carried_by_a_loop_and_compared))(3.0)


@jax.tree_util.register_pytree_node_class
class Acc:
    def __init__(self, total):
        self.total = total

    def add(self, v):
        self.total = self.total + v

    @property
    def me(self):
        return self

    def tree_flatten(self):
        return (self.total,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def chained_names_for_one_object(xs):
    s = t = State(jnp.zeros(()))
    for x in xs:
        if x < 0:
            s = State(jnp.zeros(()))
        else:
            s.n = s.n + x
    return s.n, t.n


def chained_names_for_one_list(xs):
    s = t = [0.0]
    for x in xs:
        if x < 0:
            s = [0.0]
        else:
            s[0] = s[0] + x
    return s[0], t[0]


def a_method_kept_before_the_loop(xs):
    s = Acc(0.0)
    add = s.add
    for x in xs:
        if x < 0:
            s = Acc(0.0)
        else:
            s.total = s.total + x
    add(100.0)
    return s.total


def a_property_that_gives_back_the_object(xs):
    s = Acc(0.0)
    t = s.me
    for x in xs:
        if x < 0:
            s = Acc(0.0)
        else:
            s.total = s.total + x
    return s.total, t.total


def an_alias_made_by_or(x):
    s = [0.0]
    view = s or [1.0]
    if x > 0:
        s = [5.0]
    else:
        s[0] = s[0] + x
    return view[0], s[0]


def an_alias_made_by_max_of_two(x):
    a = [0.0]
    b = [1.0, 2.0]
    longest = max(a, b, key=len)
    if x > 0:
        b = [5.0, 5.0]
    else:
        b[0] = b[0] + x
    return longest[0], b[0]


@pytest.mark.parametrize(
    "fn",
    [
        chained_names_for_one_object,
        chained_names_for_one_list,
        a_method_kept_before_the_loop,
        a_property_that_gives_back_the_object,
        an_alias_made_by_or,
        an_alias_made_by_max_of_two,
    ],
)
def test_a_second_name_for_the_object_is_seen_by_ownership(fn):
    # Each gave the old values with no error: `s = t = ...`, `s or [...]`, `max(a, b)`
    # made a second name conversion did not see; a method, a property of a class's object
    # may hand on `self` (a name bound to new objects owns them only where it reads fields).
    arg = jnp.array([1.0, 2.0, 3.0]) if "xs" in fn.__code__.co_varnames else -2.0
    with pytest.raises(StagingError):
        jax.jit(transpiler.convert(fn))(arg)


def returned_early_from_a_loop(xs):
    ep = State(jnp.zeros(()))
    for x in xs:
        if x > 10:
            return ep
        ep.n = ep.n + x
    return ep


def test_an_object_returned_early_from_a_loop_holds_its_values_then():
    # It held the values from before the loop (0 where Python's has 1): the exit read the
    # object after its traced attributes were put back.
    check_jit(returned_early_from_a_loop, jnp.array([1.0, 20.0, 3.0]))
    check_jit(returned_early_from_a_loop, jnp.array([1.0, 2.0, 3.0]))
    check_vmap(returned_early_from_a_loop, jnp.array([[1.0, 20.0, 3.0], [1.0, 2.0, 3.0]]))


def replaced_under_a_condition_in_a_range_loop(x):
    s = State(jnp.zeros(()))
    old = s
    for i in range(3):
        if x > i:
            s = dataclasses.replace(s, n=s.n + 1)
    return old.n, s.n, old is s


def list_replaced_under_a_condition_in_a_range_loop(x):
    s = [jnp.zeros(())]
    old = s
    for i in range(3):
        if x > i:
            s = [s[0] + 1]
    return old[0], s[0], old is s


@pytest.mark.parametrize(
    "fn",
    [replaced_under_a_condition_in_a_range_loop, list_replaced_under_a_condition_in_a_range_loop],
)
def test_is_after_a_loop_that_may_replace_the_object_is_refused(fn):
    # It gave False where Python's is True (no iteration replaced it).
    with pytest.raises(StagingError, match=r"`is` compares 's'"):
        jax.jit(transpiler.convert(fn))(-1.0)
