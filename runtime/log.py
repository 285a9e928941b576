"""What staging did, logged to the `astgraph` logger: `model.py:12: while → lax.while_loop`.

`transpiler.set_verbosity(1)` (or `TRANSPILER_VERBOSITY=1`) shows these messages on stderr;
applications can route the `astgraph` logger like any other instead.
"""

from __future__ import annotations

import logging
import types

from runtime.errors import Site

logger = logging.getLogger("astgraph")

# How messages name the statement a runtime operator stands for.
_STATEMENTS = types.MappingProxyType(
    {
        "if statement": "if",
        "conditional expression": "a if p else b",
        "while loop": "while",
        "for loop": "for",
    }
)


def staged(site: Site, lowering: str) -> None:
    """Logs (at INFO) that the statement at `site` is staged as `lowering` (`"lax.cond"`).

    For example, `model.py:14: if → lax.cond`. Costs one level check when nobody listens.
    """
    if not logger.isEnabledFor(logging.INFO):
        return
    statement = _STATEMENTS.get(site.construct, site.construct)
    location = site.location()
    where = f"{location}: " if location else ""
    logger.info("%s%s → %s", where, statement, lowering)
