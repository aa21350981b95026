"""structlog, used only when the application has configured it.

An application that configured structlog has imported it, so Honeycomb never imports
it itself: unconfigured, structlog would print, and the import alone costs time.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from contextvars import Token
from typing import Any

from runtime.secrets import masked

__all__ = ["bind", "configured", "log", "unbind"]

LOGGER = "honeycomb"


def configured() -> bool:
    """Whether the application uses structlog (imported and configured it)."""
    module = sys.modules.get("structlog")
    return module is not None and bool(module.is_configured())


def log(event: str, fields: dict[str, Any], *, level: str = "info") -> None:
    """Log ``event`` through structlog, if the application configured it, secrets
    masked."""
    if configured():
        logger = sys.modules["structlog"].get_logger(LOGGER)
        getattr(logger, level)(event, **masked(fields))


Bound = Mapping[str, Token[Any]] | None
"""What :func:`bind` bound, for :func:`unbind` to undo (None: nothing was bound)."""


def bind(**values: Any) -> Bound:
    """Bind log context for this task (``bind_contextvars``), if structlog is in use,
    until :func:`unbind`. Called around an ``await`` with ``try``/``finally`` rather
    than a ``with`` block, which keeps a context manager alive on every waiting
    worker's stack even when there is nothing to bind."""
    if not configured():
        return None
    tokens: Mapping[str, Token[Any]] = sys.modules["structlog"].contextvars.bind_contextvars(
        **masked(values)
    )
    return tokens


def unbind(tokens: Bound) -> None:
    """Restore what :func:`bind` changed (the values bound before it, if any)."""
    if tokens is not None:
        sys.modules["structlog"].contextvars.reset_contextvars(**tokens)
