"""``configure_logging``: one call for an application that wants Honeycomb's events
in its logs.

Honeycomb logs through structlog, and only once the application has configured it;
importing Honeycomb configures nothing. Every model call and tool call is then one
entry (``model_call.finished``, ``tool_call.finished`` ...) carrying ``run_id``,
``worker`` and ``turn``, and a tool's own structlog calls carry them too (they are
bound with ``structlog.contextvars`` while the tool runs). Secrets are masked in every
entry, the application's own and their tracebacks included (see
:mod:`runtime.secrets`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

from honeycomb.trace.format import printable
from runtime.secrets import masked

__all__ = ["configure_logging"]


def configure_logging(
    *, json: bool = False, level: str = "info", stream: TextIO | None = None
) -> None:
    """Configure structlog for the whole application: timestamped entries with their
    level and the bound run, worker and turn, as JSON lines or for people.

    Args:
        json: One JSON object per line (for log collectors) instead of console text.
        level: The lowest level written (``debug``, ``info``, ``warning``, ``error``).
        stream: Where to write; default standard error.

    Raises:
        ValueError: for an unknown level.
    """
    number = logging.getLevelNamesMapping().get(level.upper())
    if number is None:
        raise ValueError(f"unknown log level {level!r}: use debug, info, warning or error")
    render: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _masked,
            *(() if json else (_printable,)),
            render,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def _masked(logger: Any, method: str, entry: Any) -> Any:
    """A processor: the entry with every secret masked."""
    return masked(entry)


def _printable(logger: Any, method: str, entry: Any) -> Any:
    """A processor of console entries: their text safe for a terminal (control
    characters, a terminal's escapes, as spaces). The console renderer writes a
    value without spaces as it is, and the message and a traceback always: a tool
    name a model made up, or an error quoting its arguments, could move the cursor,
    clear the screen or retitle the window. JSON escapes them itself."""
    return {k: printable(v) if isinstance(v, str) else v for k, v in entry.items()}
