"""What generated code calls while it runs (as `rt__.<name>`), and the StagingError it raises.

`rt__.call` is made by `runtime.calls.caller` around the converter `transpiler` gives it.
"""

from runtime.builtins import (
    all_,
    any_,
    bool_,
    enumerate_,
    float_,
    int_,
    len_,
    max_,
    min_,
    next_,
    reversed_,
    round_,
    sorted_,
    sum_,
    zip_,
)
from runtime.control_flow import if_exp, if_stmt
from runtime.debugging import assert_, effect, print_
from runtime.errors import StagingError
from runtime.for_loops import for_stmt, range_
from runtime.identity import let_go
from runtime.lists import (
    handed_list,
    list_append,
    list_clear,
    list_delete,
    list_item,
    list_pop,
    list_reverse,
    list_setitem,
    list_update,
    stack_list,
)
from runtime.logical import and_, and_or, in_, is_, is_not, match_guard, not_, not_in, or_
from runtime.loops import while_stmt
from runtime.powers import pow_
from runtime.staging import CANNOT_STAGE, raise_cannot_stage
from runtime.text import format_, fstring, percent, repr_, str_
from runtime.variables import Undefined, UndefinedReturnValue, deleted, ld

__all__ = [
    "CANNOT_STAGE",
    "StagingError",
    "Undefined",
    "UndefinedReturnValue",
    "all_",
    "and_",
    "and_or",
    "any_",
    "assert_",
    "bool_",
    "deleted",
    "effect",
    "enumerate_",
    "float_",
    "int_",
    "is_",
    "is_not",
    "len_",
    "let_go",
    "match_guard",
    "handed_list",
    "list_append",
    "list_item",
    "list_clear",
    "list_delete",
    "list_pop",
    "list_reverse",
    "list_setitem",
    "list_update",
    "max_",
    "min_",
    "next_",
    "pow_",
    "print_",
    "fstring",
    "format_",
    "percent",
    "repr_",
    "str_",
    "reversed_",
    "round_",
    "sorted_",
    "sum_",
    "stack_list",
    "zip_",
    "for_stmt",
    "if_exp",
    "if_stmt",
    "ld",
    "not_",
    "in_",
    "not_in",
    "or_",
    "raise_cannot_stage",
    "range_",
    "while_stmt",
]
