import textwrap

import gast
import pytest

from transpiler import anno
from transpiler.analysis import activity, counters


def bound_of(source: str):
    fn = gast.parse(textwrap.dedent(source)).body[0]
    activity.analyze(fn)
    loop = next(s for s in fn.body if isinstance(s, gast.While))
    found = counters.counted_bound(loop, anno.getanno(fn, anno.Static.SCOPE))
    return None if found is None else (found[0], gast.unparse(found[1]).strip(), found[2])


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            """
            def f(x, n):
                i = 0
                while x > 1 and i < n:
                    x = x / 2
                    i += 1
            """,
            ("i", "n", 0),
        ),
        (
            """
            def f(x):
                k = 0
                while 30 >= k:
                    x = x * 2
                    k = k + 1
            """,
            ("k", "30", 1),
        ),
        (
            """
            def f(x, n):
                i = 0
                while (x > 1 and x < 9) and (1 + i) > 0 and n > i:
                    i = 1 + i
            """,
            ("i", "n", 0),
        ),
    ],
)
def test_a_counter_the_test_bounds(source, expected):
    assert bound_of(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        # `or`: the other operand may keep it going
        "def f(x, n):\n i = 0\n while x > 1 or i < n:\n  i += 1",
        # not every iteration counts
        "def f(x, n):\n i = 0\n while i < n:\n  if x > 0:\n   i += 1",
        # counted twice, or by two
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  i += 1",
        "def f(x, n):\n i = 0\n while i < n:\n  i += 2",
        # counting down, or the bound moves
        "def f(x, n):\n i = 0\n while i < n:\n  i -= 1",
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  n = n + 1",
        # rebound elsewhere in the body
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  for i in range(3):\n   x = x + i",
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  y = (i := 0)",
        # a nested function could change either
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  g = lambda: i",
        "def f(x, n):\n i = 0\n def g():\n  return n\n while i < n:\n  i += 1",
        # global: any call may change it
        "def f(x):\n global LIMIT\n i = 0\n while i < LIMIT:\n  i += 1",
        "def f(x):\n i = 0\n while i < LIMIT:\n  i += 1",
        # a bound that is no int literal or local name
        "def f(x, n):\n i = 0\n while i < n + 1:\n  i += 1",
        "def f(x, n):\n i = 0\n while i < 2.5:\n  i += 1",
        "def f(x, n):\n i = 0\n while i < n[0]:\n  i += 1",
        # bound by an import or a definition (helper 143)
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  from errno import EPERM as i",
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  import n",
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  def i():\n   pass",
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  class n:\n   pass",
        # bound by a match capture
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  match x:\n   case [*i]:\n    pass",
        "def f(x, n):\n i = 0\n while i < n:\n  i += 1\n  match x:\n   case {**n}:\n    pass",
    ],
)
def test_no_bound(source):
    assert bound_of(source) is None
