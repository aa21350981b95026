"""What the ``mcp`` SDK logs of Honeycomb's connections to MCP servers.

The SDK logs through :mod:`logging` what it passes over: a notification a server sent
that is not as MCP has it (a log message of a level MCP does not know, a progress
without its token), with its traceback, as a warning. Where the application configured
logging, those records go where it says, secrets masked. Where nothing takes them,
Python would print them on standard error (its last resort), and a library never
prints: those made in a connection of Honeycomb's (:func:`ours`: its server's task, the
SDK's tasks it starts, a call) are then dropped. The application's own use of the SDK
logs as it did, and no level or handler of any logger is set.
"""

from __future__ import annotations

import logging

from runtime.logs import Unheard

__all__ = ["ours", "unprinted"]

_SESSION = "client"
"""The logger of the SDK's client session: it names it so, outside ``mcp``."""

_UNHEARD = Unheard("mcp")

ours = _UNHEARD.ours
"""What the SDK logs meanwhile in this task, and in the tasks it starts, is of
Honeycomb's connections."""


def unprinted() -> None:
    """Put the filter on the SDK's loggers loaded so far (a filter on a logger sees its
    own records only, not its children's: each gets one; one it has is not added
    again)."""
    for name, logger in list(logging.root.manager.loggerDict.items()):
        sdk = name == _SESSION or name.partition(".")[0] == "mcp"
        if sdk and isinstance(logger, logging.Logger):
            logger.addFilter(_UNHEARD)
