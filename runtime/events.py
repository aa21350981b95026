"""Typed events for every model call and tool call, and the :class:`Tracer` that
delivers them to handlers and to structlog.

Events go to structlog only when the application has configured structlog (or a test
captures logs), so the library never prints on its own. Handlers receive the typed
event objects; the Executor's progress stream is one such handler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from runtime import _logging

__all__ = [
    "Event",
    "EventHandler",
    "ModelCallFinished",
    "ModelCallStarted",
    "ToolCallFinished",
    "ToolCallStarted",
    "Tracer",
]


@dataclass(kw_only=True, slots=True)
class Event:
    """Base of all events. ``kind`` names the event in logs (``model_call.finished``).

    Events are values: handlers read them and must not change them (they are not
    frozen only because a frozen dataclass costs three times as much to make, and
    a traced run makes several per model turn).
    """

    kind: ClassVar[str] = "event"
    worker: str | None = None
    run_id: str | None = None

    def fields(self) -> dict[str, Any]:
        """The event's fields by name (for logs and JSON)."""
        names = _FIELD_NAMES.get(type(self))
        if names is None:
            names = _FIELD_NAMES[type(self)] = tuple(f.name for f in dataclasses.fields(self))
        return {name: getattr(self, name) for name in names}


_FIELD_NAMES: dict[type[Event], tuple[str, ...]] = {}


@dataclass(kw_only=True, slots=True)
class ModelCallStarted(Event):
    kind: ClassVar[str] = "model_call.started"
    turn: int


@dataclass(kw_only=True, slots=True)
class ModelCallFinished(Event):
    kind: ClassVar[str] = "model_call.finished"
    turn: int
    duration_s: float
    status: str  # "ok" or "error"
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    tool_calls: int = 0
    error: str | None = None


@dataclass(kw_only=True, slots=True)
class ToolCallStarted(Event):
    kind: ClassVar[str] = "tool_call.started"
    turn: int
    call_id: str
    tool: str


@dataclass(kw_only=True, slots=True)
class ToolCallFinished(Event):
    kind: ClassVar[str] = "tool_call.finished"
    turn: int
    call_id: str
    tool: str
    status: str  # an ObservationStatus
    duration_s: float
    error: str | None = None


EventHandler = Callable[[Event], None]


class Tracer:
    """Delivers events to handlers and, when structlog is configured, to a logger.

    Args:
        handlers: Called with every event, in order; they must be quick and not raise
            (an exception from a handler is logged and dropped).
        log: Send events to structlog (logger ``honeycomb``). Logging happens only if
            the application has configured structlog, never through its print default.
    """

    __slots__ = ("_handlers", "_log")

    def __init__(self, *handlers: EventHandler, log: bool = True) -> None:
        self._handlers = handlers
        self._log = log

    @property
    def enabled(self) -> bool:
        """Whether emitting can have any effect (skip building events when False)."""
        return bool(self._handlers) or (self._log and _logging.configured())

    def emit(self, event: Event) -> None:
        for handler in self._handlers:
            try:
                handler(event)
            except Exception as exc:  # a broken handler must not break a worker
                fields = {"error": repr(exc), "event": event.kind}
                _logging.log("event_handler.failed", fields, level="warning")
        if self._log and _logging.configured():
            _logging.log(event.kind, event.fields())


NO_TRACE = Tracer(log=False)
