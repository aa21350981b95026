"""Typed events for every model call and tool call, and the :class:`Tracer` that
delivers them to handlers and to structlog.

Events go to structlog only when the application has configured structlog (or a test
captures logs), so the library never prints on its own. Handlers receive the typed
event objects; the Executor's progress stream is one such handler.

Retries happen inside a model (:class:`~runtime.OpenAIModel`,
:class:`~runtime.RetryingModel`), which many workers share and which knows none of
them: the caller of a model call says who it is by setting a :class:`CallReport` in
:data:`current_call` for the call, and the retry policy tells it of each retry
(:func:`report_retry`), which it emits as a :class:`ModelCallRetrying`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ClassVar, Protocol

from runtime import _logging
from runtime._values import record

__all__ = [
    "CallRecorder",
    "CallReport",
    "Event",
    "EventHandler",
    "ModelCallFinished",
    "ModelCallRetrying",
    "ModelCallStarted",
    "ToolCallFinished",
    "ToolCallStarted",
    "Tracer",
    "current_call",
    "report_retry",
]


@record(kw_only=True)
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
        names: tuple[str, ...] = self._names  # type: ignore[attr-defined]  # set by record
        return {name: getattr(self, name) for name in names}


@record(kw_only=True)
class ModelCallStarted(Event):
    """A worker asks its model for the next turn."""

    kind: ClassVar[str] = "model_call.started"
    turn: int


@record(kw_only=True)
class ModelCallRetrying(Event):
    """An attempt of a model call failed and the call will be tried again after
    ``wait_s`` seconds (a Retry-After honoured, or backoff)."""

    kind: ClassVar[str] = "model_call.retrying"
    turn: int
    attempt: int  # the attempt that failed, from 1
    status: str  # the HTTP status ("429"), or "timeout", "connection", "response"
    wait_s: float
    error: str


@record(kw_only=True)
class ModelCallFinished(Event):
    """The model answered (or failed): its time, tokens, cost and tool calls asked for,
    and the attempts it took."""

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
    attempts: int = 1
    retry_wait_s: float = 0.0
    reasoning_tokens: int = 0


@record(kw_only=True)
class ToolCallStarted(Event):
    """A tool call of a turn starts."""

    kind: ClassVar[str] = "tool_call.started"
    turn: int
    call_id: str
    tool: str


@record(kw_only=True)
class ToolCallFinished(Event):
    """A tool call ended: its status (an observation status) and time."""

    kind: ClassVar[str] = "tool_call.finished"
    turn: int
    call_id: str
    tool: str
    status: str  # an ObservationStatus
    duration_s: float
    error: str | None = None


EventHandler = Callable[[Event], None]


class CallRecorder(Protocol):
    """An event handler that also takes model and tool calls as plain arguments, as a
    :class:`Tracer` gives them to its ``recorder``: a traced turn has several calls,
    and making their event objects costs more than recording them (honeycomb's
    ``SpanRecorder`` is one). It must give the same result either way.
    """

    def __call__(self, event: Event) -> None: ...

    def model_call_started(self, worker: str | None, turn: int) -> None: ...

    def model_call_finished(
        self,
        worker: str | None,
        turn: int,
        model: str,
        status: str,
        error: str | None,
        input_tokens: int,
        output_tokens: int,
        cost: float,
        attempts: int,
        reasoning_tokens: int,
    ) -> None: ...

    def tool_call_started(self, worker: str | None, turn: int, call_id: str, tool: str) -> None: ...

    def tool_call_finished(
        self, worker: str | None, turn: int, call_id: str, status: str, error: str | None
    ) -> None: ...


class Tracer:
    """Delivers events to handlers and, when structlog is configured, to a logger.

    Model and tool calls are emitted with :meth:`model_call_started`,
    :meth:`model_call_finished`, :meth:`tool_call_started` and
    :meth:`tool_call_finished`, which make the event object only when a handler or
    the log takes it: several are emitted per model turn, and a recorder needs their
    fields, not the objects.

    Args:
        handlers: Called with every event, in order; they must be quick and not raise
            (an exception from a handler is logged and dropped).
        log: Send events to structlog (logger ``honeycomb``). Logging happens only if
            the application has configured structlog, never through its print default.
        recorder: Takes every event after the handlers, as one more handler would,
            and the model and tool calls as plain arguments.
    """

    __slots__ = ("_handlers", "_log", "_recorder")

    def __init__(
        self, *handlers: EventHandler, log: bool = True, recorder: CallRecorder | None = None
    ) -> None:
        self._handlers = handlers
        self._log = log
        self._recorder = recorder

    @property
    def enabled(self) -> bool:
        """Whether emitting can have any effect (skip building events when False)."""
        return (
            self._recorder is not None
            or bool(self._handlers)
            or (self._log and _logging.configured())
        )

    def emit(self, event: Event) -> None:
        self._deliver(event)
        if self._recorder is not None:
            try:
                self._recorder(event)
            except Exception as exc:
                _failed(exc, event.kind)

    def _deliver(self, event: Event) -> None:
        """To the handlers and the log (not the recorder)."""
        for handler in self._handlers:
            try:
                handler(event)
            except Exception as exc:
                _failed(exc, event.kind)
        if self._log and _logging.configured():
            _logging.log(event.kind, event.fields())

    def model_call_started(self, *, worker: str | None, run_id: str | None, turn: int) -> None:
        """Emit a :class:`ModelCallStarted`."""
        if self._handlers or (self._log and _logging.configured()):
            self._deliver(ModelCallStarted(worker=worker, run_id=run_id, turn=turn))
        if self._recorder is not None:
            try:
                self._recorder.model_call_started(worker, turn)
            except Exception as exc:
                _failed(exc, ModelCallStarted.kind)

    def model_call_finished(
        self,
        *,
        worker: str | None,
        run_id: str | None,
        turn: int,
        duration_s: float,
        status: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cost: float,
        tool_calls: int,
        error: str | None,
        attempts: int = 1,
        retry_wait_s: float = 0.0,
        reasoning_tokens: int = 0,
    ) -> None:
        """Emit a :class:`ModelCallFinished`."""
        if self._handlers or (self._log and _logging.configured()):
            self._deliver(
                ModelCallFinished(
                    worker=worker, run_id=run_id, turn=turn, duration_s=duration_s,
                    status=status, model=model, input_tokens=input_tokens,
                    output_tokens=output_tokens, cost=cost, tool_calls=tool_calls, error=error,
                    attempts=attempts, retry_wait_s=retry_wait_s,
                    reasoning_tokens=reasoning_tokens,
                )
            )  # fmt: skip
        if self._recorder is not None:
            try:
                self._recorder.model_call_finished(
                    worker, turn, model, status, error, input_tokens, output_tokens, cost,
                    attempts, reasoning_tokens,
                )  # fmt: skip
            except Exception as exc:
                _failed(exc, ModelCallFinished.kind)

    def tool_call_started(
        self, *, worker: str | None, run_id: str | None, turn: int, call_id: str, tool: str
    ) -> None:
        """Emit a :class:`ToolCallStarted`."""
        if self._handlers or (self._log and _logging.configured()):
            self._deliver(
                ToolCallStarted(worker=worker, run_id=run_id, turn=turn, call_id=call_id, tool=tool)
            )
        if self._recorder is not None:
            try:
                self._recorder.tool_call_started(worker, turn, call_id, tool)
            except Exception as exc:
                _failed(exc, ToolCallStarted.kind)

    def tool_call_finished(
        self,
        *,
        worker: str | None,
        run_id: str | None,
        turn: int,
        call_id: str,
        tool: str,
        status: str,
        duration_s: float,
        error: str | None,
    ) -> None:
        """Emit a :class:`ToolCallFinished`."""
        if self._handlers or (self._log and _logging.configured()):
            self._deliver(
                ToolCallFinished(
                    worker=worker, run_id=run_id, turn=turn, call_id=call_id, tool=tool,
                    status=status, duration_s=duration_s, error=error,
                )
            )  # fmt: skip
        if self._recorder is not None:
            try:
                self._recorder.tool_call_finished(worker, turn, call_id, status, error)
            except Exception as exc:
                _failed(exc, ToolCallFinished.kind)


class CallReport:
    """One model call's attempts, as the retry policy reports them: each retry is
    emitted as a :class:`ModelCallRetrying` through ``tracer``, and counted for the
    call's :class:`ModelCallFinished`.

    Attributes:
        attempts: Attempts made so far (1 until a retry).
        retry_wait_s: Seconds waited between attempts.
    """

    __slots__ = ("attempts", "retry_wait_s", "run_id", "tracer", "turn", "worker")

    def __init__(
        self, tracer: Tracer, *, worker: str | None, run_id: str | None, turn: int
    ) -> None:
        self.tracer, self.worker, self.run_id, self.turn = tracer, worker, run_id, turn
        self.attempts = 1
        self.retry_wait_s = 0.0

    def retrying(self, status: str, error: str, wait_s: float) -> None:
        """The attempt made last failed with ``error``; the next starts in ``wait_s``."""
        event = ModelCallRetrying(
            worker=self.worker, run_id=self.run_id, turn=self.turn, attempt=self.attempts,
            status=status, wait_s=wait_s, error=error,
        )  # fmt: skip
        self.attempts += 1
        self.retry_wait_s += wait_s
        self.tracer.emit(event)


current_call: ContextVar[CallReport | None] = ContextVar("honeycomb_model_call", default=None)
"""The report of the model call the current task is making, if its caller set one
(an :class:`~workers.AgentLoop` does, for each call it traces)."""


def report_retry(status: str, error: str, wait_s: float) -> bool:
    """Tell the model call in progress that it is retried; False when no caller set a
    report (then nobody listens)."""
    report = current_call.get()
    if report is None:
        return False
    report.retrying(status, error, wait_s)
    return True


def _failed(exc: Exception, kind: str) -> None:
    """A handler or the recorder raised: log it and go on (a broken handler must not
    break a worker)."""
    # Not ``event``: structlog takes a log line's own name as the ``event`` argument.
    fields = {"error": repr(exc), "event_kind": kind}
    _logging.log("event_handler.failed", fields, level="warning")


NO_TRACE = Tracer(log=False)
