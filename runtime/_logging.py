"""structlog, used only when the application has configured it.

An application that configured structlog has imported it, so Honeycomb never imports
it itself: unconfigured, structlog would print, and the import alone costs time.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

__all__ = ["bound", "configured", "log"]

LOGGER = "honeycomb"


def configured() -> bool:
    """Whether the application uses structlog (imported and configured it)."""
    module = sys.modules.get("structlog")
    return module is not None and bool(module.is_configured())


def log(event: str, fields: dict[str, Any], *, level: str = "info") -> None:
    """Log ``event`` through structlog, if the application configured it."""
    if configured():
        logger = sys.modules["structlog"].get_logger(LOGGER)
        getattr(logger, level)(event, **fields)


_UNBOUND = contextlib.nullcontext()


def bound(**values: Any) -> contextlib.AbstractContextManager[Any]:
    """Bind log context for this task (``bound_contextvars``), if structlog is in use."""
    if not configured():
        return _UNBOUND
    cm: contextlib.AbstractContextManager[Any] = sys.modules[
        "structlog"
    ].contextvars.bound_contextvars(**values)
    return cm
