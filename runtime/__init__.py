"""What generated code calls while it runs: exactly the names it may use, as `rt__.<name>`."""

from runtime.control_flow import for_stmt, if_exp, if_stmt, range_, while_stmt
from runtime.errors import StagingError
from runtime.logical import and_, not_, or_
from runtime.variables import Undefined, ld

__all__ = [
    "StagingError",
    "Undefined",
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
