"""structlog, used only when the application has configured it.

An application that configured structlog has imported it, so Honeycomb never imports
it itself: unconfigured, structlog would print, and the import alone costs time.

A task may send Honeycomb's entries elsewhere instead (:data:`forwarded`): a worker's
in a Ray actor go to its driver, which logs them as its own (:func:`log_bound`).

What a library Honeycomb uses logs through :mod:`logging` goes where the application's
logging says; where nothing would take it (:func:`heard`), Python would print it, so
what it logs of Honeycomb's own use is dropped (psycopg's, the ``mcp`` SDK's:
:class:`Unheard`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from contextvars import Context, ContextVar, Token
from types import MappingProxyType
from typing import Any

from runtime.secrets import masked

__all__ = [
    "Forward",
    "Unheard",
    "bind",
    "configured",
    "forwarded",
    "heard",
    "log",
    "log_bound",
    "unbind",
]

LOGGER = "honeycomb"

Forward = Callable[[str, dict[str, Any], str, Mapping[str, Any]], None]
"""Takes an entry elsewhere: its event, fields and level, and what :func:`bind` bound
where it was made."""

forwarded: ContextVar[Forward | None] = ContextVar("honeycomb_logs_forwarded", default=None)
"""Where the current task's entries go in place of this process's structlog (None:
there, if configured)."""

_held: ContextVar[Mapping[str, Any]] = ContextVar(
    "honeycomb_logs_held", default=MappingProxyType({})
)
"""What :func:`bind` bound in the current task, for the entries it forwards."""

_HELD = " held"
"""The key of :data:`_held`'s token in what :func:`bind` returns (no value's name)."""


def _structlog() -> bool:
    module = sys.modules.get("structlog")
    return module is not None and bool(module.is_configured())


def configured() -> bool:
    """Whether Honeycomb's entries are logged: the application uses structlog (imported
    and configured it), or the current task forwards them."""
    return forwarded.get() is not None or _structlog()


def log(event: str, fields: dict[str, Any], *, level: str = "info") -> None:
    """Log ``event`` through structlog, if the application configured it, secrets
    masked; or forward it, as it is, with what is bound (:data:`forwarded`: masked
    where it is logged, which knows the secrets)."""
    to = forwarded.get()
    if to is not None:
        to(event, fields, level, _held.get())
    elif _structlog():
        logger = sys.modules["structlog"].get_logger(LOGGER)
        getattr(logger, level)(event, **masked(fields))


def log_bound(event: str, fields: dict[str, Any], level: str, bound: Mapping[str, Any]) -> None:
    """:func:`log` with ``bound`` bound, and nothing else: an entry forwarded from where
    it was made, logged as it would have been there (in a context of its own, since
    the caller's may have bound values of another worker's)."""

    def logged() -> None:
        bind(**bound)
        log(event, fields, level=level)

    Context().run(logged)


Bound = Mapping[str, Token[Any]] | None
"""What :func:`bind` bound, for :func:`unbind` to undo (None: nothing was bound)."""


def bind(**values: Any) -> Bound:
    """Bind log context for this task (``bind_contextvars``), if structlog is in use,
    until :func:`unbind` (and, if the task forwards its entries, for them). Called
    around an ``await`` with ``try``/``finally`` rather than a ``with`` block, which
    keeps a context manager alive on every waiting worker's stack even when there is
    nothing to bind."""
    forwarding, structured = forwarded.get() is not None, _structlog()
    if not (forwarding or structured):
        return None
    tokens: dict[str, Token[Any]] = {}
    if forwarding:
        tokens[_HELD] = _held.set({**_held.get(), **values})
    if structured:
        tokens.update(sys.modules["structlog"].contextvars.bind_contextvars(**masked(values)))
    return tokens


def unbind(tokens: Bound) -> None:
    """Restore what :func:`bind` changed (the values bound before it, if any)."""
    if tokens is None:
        return
    rest = dict(tokens)
    held = rest.pop(_HELD, None)
    if held is not None:
        _held.reset(held)
    if rest:
        sys.modules["structlog"].contextvars.reset_contextvars(**rest)


def heard(logger: logging.Logger) -> bool:
    """Whether a handler of ``logger``, or of one it propagates to, takes its records,
    as :mod:`logging` looks for one before it falls back on its last resort (which
    prints them on standard error): what a library's logger writes of Honeycomb's use
    of it is dropped where nothing would hear it."""
    current: logging.Logger | None = logger
    while current is not None:
        if current.handlers:
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


class Unheard(logging.Filter):
    """On a library's loggers, drops what it logs of Honeycomb's use of it (made within
    :meth:`ours`, or in a thread whose name begins with ``threads``) where no handler
    would take it (:func:`heard`); its other records, and every record an application
    that configured logging would hear, pass. No level or handler is set.

    Args:
        name: Whose use it is (what its context variable is named after).
        threads: How the names of Honeycomb's threads that use the library begin
            (None: none do).
    """

    def __init__(self, name: str, threads: str | None = None) -> None:
        super().__init__()
        self._ours: ContextVar[bool] = ContextVar(f"honeycomb_{name}_ours", default=False)
        self._threads = threads

    @contextlib.contextmanager
    def ours(self) -> Iterator[None]:
        """What the library logs meanwhile in this task (and the tasks it starts) or
        thread is of Honeycomb's use of it."""
        token = self._ours.set(True)
        try:
            yield
        finally:
            self._ours.reset(token)

    def filter(self, record: logging.LogRecord) -> bool:
        threads = self._threads
        mine = self._ours.get() or (
            threads is not None and (record.threadName or "").startswith(threads)
        )
        return not mine or heard(logging.getLogger(record.name))
