"""What generated code calls while it runs (as `rt__.<name>`), and the StagingError it raises."""

from runtime.control_flow import if_exp, if_stmt
from runtime.errors import StagingError
from runtime.logical import and_, not_, or_
from runtime.loops import for_stmt, range_, while_stmt
from runtime.variables import Undefined, UndefinedReturnValue, ld

__all__ = [
    "StagingError",
    "Undefined",
    "UndefinedReturnValue",
    "and_",
    "for_stmt",
    "if_exp",
    "if_stmt",
    "ld",
    "not_",
    "or_",
    "range_",
    "while_stmt",
]
