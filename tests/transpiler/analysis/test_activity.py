import gast

from tests.transpiler.analysis.dump import dump, parse
from transpiler import analysis, anno
from transpiler.analysis import activity


def test_assignments_augmented_and_tuple_unpacking():
    assert dump(
        """
        def f(x, y):
            if x:
                a, (b, c) = y
                d += 1
                e: int = 3
        """,
        "modified",
        "reads",
    ) == ["if@3: modified={a, b, c, d, e} reads={d, y}"]


def test_subscripts_and_attributes_modify_their_base():
    assert dump(
        """
        def f(x, obj, buf):
            while x:
                obj.attr = 1
                buf[x][0] = 2
                x.y.z += 1
        """,
        "modified",
        "reads",
    ) == ["while@3: modified={buf, obj, x} reads={buf, obj, x}"]


def test_nested_scopes_keep_their_own_names():
    assert dump(
        """
        def f(xs, k):
            if k:
                ys = [x * k for x in xs]
                g = lambda t: t + k
                def h(u):
                    v = u
                    return v + w
        """,
        "modified",
        "reads",
    ) == ["if@3: modified={g, h, ys} reads={k, w, xs}"]


def test_activity_dataclass_str_and_union():
    a = activity.Activity(frozenset({"x"}), frozenset({"y"}), frozenset())
    b = activity.Activity(frozenset(), frozenset(), frozenset({"z"}))
    assert str(a | b) == "reads={x} bound={y} mutated={z}"
    assert (a | b).modified == {"y", "z"}


def test_scope_records_params_declarations_and_closure_reads():
    fn = parse(
        """
        def f(a, *args, b=1, **kw):
            global g
            nonlocal n
            def inner():
                return a + c
            return inner
        """
    )
    analysis.analyze(fn)
    scope = anno.getanno(fn, anno.Static.SCOPE)
    assert scope.params == {"a", "args", "b", "kw"}
    assert scope.declared == {"g", "n"}
    assert scope.closure_reads == {"a", "c"}


def test_module_reads_follow_pythons_scopes():
    # Which reads of builtin-looking names Python resolves in the module (global or builtin):
    # not those a scope binds (def, import, parameter, comprehension variable, class body).
    fn = parse(
        """
        def f(x, len):
            print(1)
            str(2)
            def g():
                print(3)
                def print(): pass
                repr(4)
            [print(5) for print in x]
            [repr(6) for y in repr(7)]
            class K:
                str = 1
                str(8)
                def m(self): str(9)
            lambda repr: repr(10)
            len(11)
            abs(12)
            from pprint import pprint as sorted
            sorted(13)
            jnp(14)
        """
    )
    activity.mark_module_reads(fn, freevars=("jnp",))
    marked = _marked_calls(fn)
    assert marked == {1, 2, 4, 6, 7, 9, 12}
    abs_call = [n for n in gast.walk(fn) if isinstance(n, gast.Name) and n.id == "abs"][0]
    assert activity.reads_builtin(abs_call, {}, ("abs",))
    assert not activity.reads_builtin(abs_call, {"abs": abs}, ("abs",))  # a global of the name
    assert activity.reads_global(abs_call, {"abs": abs})


def test_module_reads_of_declarations_defaults_walrus_and_match():
    fn = parse(
        """
        def f(x, d=len(1)):
            global abs
            abs = max
            abs(2)
            def g(y=print(3), *, z: int = min(4)):
                nonlocal x
                return sum(5)
            [(sum := 0) for _ in x]
            sum(6)
            class K:
                round = 1
                values = [round(7) for _ in x]
            match x:
                case [len]:
                    len(8)
                case {"k": 1, **any}:
                    any(9)
            return lambda all=all(10): all(11)
        """
    )
    activity.mark_module_reads(fn)
    marked = _marked_calls(fn)
    # Defaults are read where the function is defined; a walrus in a comprehension binds in
    # the function; a class's names are not seen from its comprehensions.
    # `abs`, which f makes a global, is neither a builtin nor a global for sure: unmarked (its
    # calls are resolved when they run); `sum` in g: the walrus binds it in f.
    assert marked == {1, 3, 4, 7, 10}


def _marked_calls(fn: gast.FunctionDef) -> set:
    """The arguments (numbers) of the calls whose function name is marked MODULE_READ."""
    return {
        node.args[0].value
        for node in gast.walk(fn)
        if isinstance(node, gast.Call)
        and isinstance(node.func, gast.Name)
        and anno.hasanno(node.func, anno.Static.MODULE_READ)
    }
