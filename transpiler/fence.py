"""The allow-list: a written decision for every node type the converter can meet.

Every construct is either converted so that it is staged when its values are traced (and runs as
Python otherwise), run as plain Python exactly as written, or refused with a `ConversionError`
that says what to write instead. There is no fourth way: `passes/fence.py` refuses any node type
this table does not know, and a test checks that every node type of `gast` is in it.
"""

from __future__ import annotations

import enum

import gast


class Decision(enum.Enum):
    STAGED = "converted: staged when its values are traced, plain Python otherwise"
    PYTHON = "runs as plain Python, exactly as written"
    REFUSED = "rejected when converting, with a ConversionError"


_S, _P, _R = Decision.STAGED, Decision.PYTHON, Decision.REFUSED


def _node(name: str) -> type | None:
    return getattr(gast, name, None)  # some exist only in some Python versions' gast


_TABLE: dict[str, tuple[Decision, str]] = {
    # Statements.
    "If": (_S, "lax.cond when the condition is traced"),
    "While": (_S, "lax.while_loop (or a masked lax.scan with max_iterations) when traced"),
    "For": (_S, "lax.scan over a range or an array, lax.while_loop over a traced range"),
    "Break": (_S, "a flag the loop tests"),
    "Continue": (_S, "a flag that guards the rest of the loop body"),
    "Return": (_S, "flags: the function keeps one exit"),
    "Assert": (_S, "a check when the program runs, if the test is traced"),
    "Raise": (_S, "under a traced condition: raised when the program runs that branch"),
    "FunctionDef": (_P, "a nested def; its body is converted too"),
    "ClassDef": (_P, "a class defined as Python; its methods are converted when called"),
    "Delete": (_P, "`del x` unbinds x, as in Python"),
    "Assign": (_P, "assignment; the names it binds become state of staged blocks"),
    "AugAssign": (_P, "augmented assignment"),
    "AnnAssign": (_P, "annotated assignment (the annotation of a local is not evaluated)"),
    "TypeAlias": (_P, "a `type` alias statement"),
    "With": (_P, "context managers enter and exit while the function runs (or is traced)"),
    "Match": (_S, "values, captures and | patterns: an if chain; other patterns match in Python"),
    "Try": (_P, "try/except/else/finally in Python; exceptions of the compiled program are not"),
    "TryStar": (_P, "try/except* in Python"),
    "Import": (_P, "import"),
    "ImportFrom": (_P, "from ... import"),
    "Global": (_P, "declaration; moved to the top of its function"),
    "Nonlocal": (_P, "declaration; moved to the top of its function"),
    "Expr": (_P, "an expression statement"),
    "Pass": (_P, "pass"),
    "AsyncFunctionDef": (_R, "convert a plain (synchronous) function"),
    "AsyncFor": (_R, "use a plain for loop"),
    "AsyncWith": (_R, "use a plain with statement"),
    "Print": (_R, "Python 2 syntax"),
    "Exec": (_R, "Python 2 syntax"),
    # Expressions.
    "BoolOp": (_S, "and/or: Python's short circuit, jnp.logical_and/or or a select if traced"),
    "UnaryOp": (_S, "not: jnp.logical_not when traced; other unary operators as Python"),
    "IfExp": (_S, "a if p else b: lax.cond when p is traced"),
    "Compare": (_S, "chained comparisons evaluate each operand once; `in` a traced array"),
    "Call": (_S, "user functions are converted when called; library code is called as is"),
    "JoinedStr": (_S, "an f-string of traced values, printed, shows their values at run time"),
    "FormattedValue": (_S, "a field of an f-string"),
    "NamedExpr": (_P, "binds in its function; inside and/or/if-else it becomes statements"),
    "BinOp": (_P, "arithmetic"),
    "Lambda": (_P, "a lambda; its body is converted too"),
    "Dict": (_P, "a dict display"),
    "Set": (_P, "a set display"),
    "List": (_P, "a list display"),
    "Tuple": (_P, "a tuple display"),
    "ListComp": (_P, "a list comprehension runs as Python (unrolled when traced)"),
    "SetComp": (_P, "a set comprehension runs as Python"),
    "DictComp": (_P, "a dict comprehension runs as Python"),
    "GeneratorExp": (_P, "a generator expression runs as Python"),
    "Constant": (_P, "a literal"),
    "Attribute": (_P, "attribute access; attributes assigned in staged blocks become state"),
    "Subscript": (_P, "indexing"),
    "Starred": (_P, "*args"),
    "Name": (_P, "a variable"),
    "Slice": (_P, "a slice"),
    "Await": (_R, "converted functions run synchronously; call them outside async code"),
    "Yield": (_R, "return a list or an array instead of yielding"),
    "YieldFrom": (_R, "return a list or an array instead"),
    "Repr": (_R, "Python 2 syntax"),
    "TemplateStr": (_R, "template strings (t-strings): use an f-string"),
    "Interpolation": (_R, "template strings (t-strings): use an f-string"),
    # Parts of statements and expressions.
    **{
        name: (_P, "part of the statement or expression that holds it")
        for name in (
            "arguments keyword alias withitem comprehension ExceptHandler match_case "
            "MatchValue MatchSingleton MatchSequence MatchMapping MatchClass MatchStar MatchAs "
            "MatchOr TypeVar ParamSpec TypeVarTuple TypeIgnore type_ignore"
        ).split()
    },
    **{
        name: (_P, "an operator")
        for name in (
            "Add Sub Mult MatMult Div Mod Pow LShift RShift BitOr BitXor BitAnd FloorDiv "
            "Invert UAdd USub Eq NotEq Lt LtE Gt GtE Is IsNot"
        ).split()
    },
    "And": (_S, "see BoolOp"),
    "Or": (_S, "see BoolOp"),
    "Not": (_S, "see UnaryOp"),
    "In": (_S, "x in a traced array: jnp.any(array == x)"),
    "NotIn": (_S, "x not in a traced array: not jnp.any(array == x)"),
    **{
        name: (_P, "a variable's role in an expression")
        for name in "Load Store Del AugLoad AugStore Param".split()
    },
    # Containers of whole programs: never inside a function.
    **{
        name: (_P, "a whole module or expression, never inside a function")
        for name in "Module Interactive Expression FunctionType Suite".split()
    },
}

FENCE: dict[type, tuple[Decision, str]] = {
    _node(name): entry for name, entry in _TABLE.items() if _node(name) is not None
}
"""Node type -> (decision, what it means or what to write instead)."""


def decision(node: gast.AST) -> tuple[Decision, str] | None:
    """The decision for `node`'s type, or None for a type the converter does not know."""
    return FENCE.get(type(node))
