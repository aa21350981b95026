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

import inspect
import time
from collections.abc import Callable, Coroutine, Iterable
from contextvars import ContextVar
from typing import Any, ClassVar, Protocol, runtime_checkable

import msgspec

from runtime import logs
from runtime.errors import ConfigError
from runtime.secrets import masked
from runtime.value import Value

__all__ = [
    "ApprovalDecided",
    "ApprovalRequested",
    "CallReport",
    "Caller",
    "CompactionFinished",
    "CompactionStarted",
    "Event",
    "EventHandler",
    "HeldText",
    "ModelCallFinished",
    "ModelCallRetrying",
    "ModelCallStarted",
    "Routed",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolCallsAnswered",
    "Tracer",
    "current_call",
    "event_handlers",
    "event_time",
    "report_retry",
    "tell_as_of",
    "told_at",
]


# benchmark F: made every call when tracing, never walked by the GC
class Event(Value, frozen=True, gc=False, kw_only=True):
    """Base of all events: immutable values. ``kind`` names the event in logs
    (``model_call.finished``)."""

    kind: ClassVar[str] = "event"
    logged: ClassVar[bool] = True
    """Whether the event is also a log entry (when structlog is configured)."""
    worker: str | None = None
    run_id: str | None = None

    def fields(self) -> dict[str, Any]:
        """The event's fields by name (for logs and JSON)."""
        return msgspec.structs.asdict(self)


class ModelCallStarted(Event, frozen=True, kw_only=True):
    """A worker asks its model for the next turn."""

    kind: ClassVar[str] = "model_call.started"
    turn: int


class ModelCallRetrying(Event, frozen=True, kw_only=True):
    """An attempt of a model call failed and the call will be tried again after
    ``wait_s`` seconds (a Retry-After honoured, or backoff)."""

    kind: ClassVar[str] = "model_call.retrying"
    turn: int
    attempt: int  # the attempt that failed, from 1
    status: str  # the HTTP status ("429"), or "timeout", "connection", "response"
    wait_s: float
    error: str


class TextDelta(Event, frozen=True, kw_only=True):
    """A piece of a streamed answer's text, as the model wrote it: joined in order, a
    turn's deltas are its answer's content. Only runs that ask for them stream (see
    :class:`Tracer`); they go to handlers, never to the log (one line per piece). The
    deltas of an answer that guards check are held until the guards pass it
    (:class:`HeldText`)."""

    kind: ClassVar[str] = "model_call.text"
    logged: ClassVar[bool] = False
    turn: int
    text: str


class ModelCallFinished(Event, frozen=True, kw_only=True):
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
    cached_input_tokens: int = 0
    # The answer's (``stop``, ``tool_calls``, ``length`` ...); "" when there is none.
    finish_reason: str = ""


class CompactionStarted(Event, frozen=True, kw_only=True):
    """A worker's context would exceed its budget: its oldest turns are folded into
    the summary by a model call of its own, before the turn's model call."""

    kind: ClassVar[str] = "compaction.started"
    turn: int
    messages: int  # messages folded in by this compaction
    context_tokens: int  # the context's estimated size before it
    budget_tokens: int


class CompactionFinished(Event, frozen=True, kw_only=True):
    """The summary call ended: the summary folds ``summarized`` messages now (``ok``),
    or it failed and the summary is as it was (``error``); ``window`` says whether the
    window also leaves messages out of this turn's call, as the last resort."""

    kind: ClassVar[str] = "compaction.finished"
    turn: int
    duration_s: float
    status: str  # "ok" or "error"
    model: str = ""
    messages: int = 0
    summarized: int = 0
    context_tokens: int = 0  # the context's estimated size after it
    window: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    attempts: int = 1
    retry_wait_s: float = 0.0
    error: str | None = None


class ToolCallStarted(Event, frozen=True, kw_only=True):
    """A tool call of a turn starts."""

    kind: ClassVar[str] = "tool_call.started"
    turn: int
    call_id: str
    tool: str


class ToolCallFinished(Event, frozen=True, kw_only=True):
    """A tool call ended: its status (an observation status) and time."""

    kind: ClassVar[str] = "tool_call.finished"
    turn: int
    call_id: str
    tool: str
    status: str  # an ObservationStatus
    duration_s: float
    error: str | None = None


class ToolCallsAnswered(Event, frozen=True, kw_only=True):
    """The worker has the answers of its turn's tool calls (its model will see them):
    the turn is done. Its ``calls`` are the turn's tool calls a budget counts, every
    call answered but a repeat skipped; a turn cut off before this event (its run
    stopped, or calls wait for a person) counts none, whatever of it had ended."""

    kind: ClassVar[str] = "tool_calls.answered"
    turn: int
    calls: int


class ApprovalRequested(Event, frozen=True, kw_only=True, gc=True):
    """A tool call waits for a person's decision before any call of its turn runs:
    the run's approver asks (``asked`` is ``approver``), or, with none, the call waits
    in the run store for one (``store``: ``Executor.decide``, ``honeycomb approve``,
    the page) while the run's other workers go on. Its arguments as a person sees
    them, every secret masked."""

    kind: ClassVar[str] = "approval.requested"
    turn: int
    call_id: str
    tool: str
    role: str
    arguments: dict[str, Any]
    why: str
    asked: str  # "approver" or "store"
    deadline: float | None = None  # when no decision becomes a denial (time.time())
    summary: str | None = None


class ApprovalDecided(Event, frozen=True, kw_only=True, gc=True):
    """The decision a waiting call's worker goes on with: its approver's, a person's
    recorded in the run store (in this process or another), or a denial once its time
    to decide ran out (``by`` the time limit)."""

    kind: ClassVar[str] = "approval.decided"
    turn: int
    call_id: str
    tool: str
    approved: bool
    by: str
    reason: str | None = None
    edited: bool = False  # approved with edited arguments
    # The call's arguments as a person saw them, and those it was approved with instead
    # (None: its own): what a cassette keeps of the decision, to replay it.
    arguments: dict[str, Any] | None = None
    edited_arguments: dict[str, Any] | None = None


EventHandler = Callable[[Event], None]


@runtime_checkable
class Routed(Protocol):
    """An event handler that routes events by their kind itself: a :class:`Tracer`
    asks it once a kind for the function that takes the events of that kind, and
    calls that in its place (benchmark F: a call fewer an event)."""

    def __call__(self, event: Event) -> None: ...

    def handler_for(self, kind: str) -> Callable[[Any], None] | None:
        """What takes the events of ``kind`` (None: it takes none of them)."""
        ...


def event_handlers(handlers: Iterable[EventHandler]) -> tuple[EventHandler, ...]:
    """``handlers`` (an ``on_event`` list) as a tuple, each checked to be a plain
    callable: a handler is called synchronously with each event, and what it returns
    is dropped, so the coroutine an ``async def`` handler returns would never run.

    Raises:
        ConfigError: a handler is not callable, or is an ``async def`` function (or an
            object whose ``__call__`` is), naming it and what to do instead.
    """
    if callable(handlers):
        raise ConfigError(
            f"on_event takes a list of handlers, not one: write on_event=[{_name(handlers)}]",
            field="on_event",
        )
    kept = tuple(handlers)
    for index, handler in enumerate(kept):
        field = f"on_event[{index}]"
        if not callable(handler):
            raise ConfigError(
                f"on_event handler {handler!r} is not callable: give a function that "
                "takes an event",
                field=field,
            )
        if _is_async(handler):
            raise ConfigError(
                f"on_event handler {_name(handler)} is an async function: handlers are "
                "called synchronously with each event, and the coroutine it returns "
                "would never run. Make it a plain function; to hand events to async code, "
                "put them on an asyncio.Queue (queue.put_nowait) that a task of yours "
                "reads, or read the run's events with `async with executor.stream(task) "
                "as events`",
                field=field,
            )
    return kept


def _is_async(handler: Callable[..., object]) -> bool:
    """Whether calling ``handler`` (a callable) only makes a coroutine or an async
    generator: an async function, a ``functools.partial`` of one, or an object whose
    ``__call__`` is one."""
    calls = (handler, type(handler).__call__)
    return any(inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f) for f in calls)


def _name(handler: object) -> str:
    return getattr(handler, "__qualname__", None) or repr(handler)


class Tracer:
    """Delivers events to handlers and, when structlog is configured, to a logger.

    Build an event only when :attr:`enabled`: nothing else takes it.

    Args:
        handlers: Called with every event, in order; they must be quick, synchronous
            and not raise (an exception from a handler is dropped, and logged the
            first time, as is a coroutine one returns, closed unrun).
        log: Send events to structlog (logger ``honeycomb``). Logging happens only if
            the application has configured structlog as the tracer is made (a run's
            is, as the run starts), never through its print default.
        text: The handlers want the text of answers as it is written: models that
            can stream do, and each piece is a :class:`TextDelta`.
        holds_text: It holds text deltas until guards pass them (:class:`HeldText`,
            or a stand-in for one elsewhere): nobody sees an answer's text as it is
            written, so its model call need not stream.

    Raises:
        ConfigError: a handler is an ``async def`` function (:func:`event_handlers`).
    """

    def __init__(
        self,
        *handlers: EventHandler,
        log: bool = True,
        text: bool = False,
        holds_text: bool = False,
    ) -> None:
        self._handlers = event_handlers(handlers)
        # What takes each kind of event (_route), when a handler routes them itself.
        self._routes: dict[str, tuple[EventHandler, ...]] | None = None
        if any(isinstance(handler, Routed) for handler in self._handlers):
            self._routes = {}
        self._log = log and logs.configured()  # asked once (benchmark F: not every event)
        self._broken: set[tuple[int, type]] = set()  # handlers' failures logged, by kind
        self.text = text and bool(handlers)
        """Whether the handlers get the text of answers (as :class:`TextDelta`)."""
        self.holds_text = holds_text
        """Whether it holds text deltas until guards pass them: an answer's model call
        need not stream."""

    @property
    def handlers(self) -> tuple[EventHandler, ...]:
        """The handlers, in order (a run's sub-run finds the span recorders among
        them: its spans are theirs too)."""
        return self._handlers

    @property
    def enabled(self) -> bool:
        """Whether emitting can have any effect (skip building events when False)."""
        return bool(self._handlers) or self._log

    def emit(self, event: Event) -> None:
        """Give ``event`` to every handler, then to the log, secrets masked."""
        event = masked(event)
        handlers, routes = self._handlers, self._routes
        if routes is not None:
            routed = routes.get(event.kind)
            if routed is None:  # a kind not routed yet
                routed = routes[event.kind] = self._route(event.kind)
            handlers = routed
        for handler in handlers:
            try:
                returned = handler(event)
            except Exception as exc:
                self._failed(handler, type(exc), repr(exc), event.kind)
            else:
                if returned is not None and isinstance(returned, Coroutine):
                    returned.close()  # it never runs: no 'never awaited' warning either
                    self._failed(handler, Coroutine, _unrun(returned), event.kind)
        if self._log and event.logged:
            logs.log(event.kind, event.fields())

    def _failed(self, handler: Callable[..., object], how: type, error: str, kind: str) -> None:
        """A handler raised (or returned a coroutine): log it and go on (a broken
        handler must not break a worker), once a tracer (a run) for each handler and
        kind of failure: one that fails on every event would write a warning an event."""
        if (id(handler), how) in self._broken:
            return
        self._broken.add((id(handler), how))
        # Not ``event``: structlog takes a log line's own name as the ``event`` argument.
        fields = {"error": error, "event_kind": kind, "handler": _name(handler)}
        logs.log("event_handler.failed", fields, level="warning")

    def _route(self, kind: str) -> tuple[EventHandler, ...]:
        """What takes the events of ``kind``: each handler, or, for one that routes
        events by their kind itself (:class:`Routed`), the function it names for them
        (none, if it takes none)."""
        routed: list[EventHandler] = []
        for handler in self._handlers:
            if isinstance(handler, Routed):
                handles = handler.handler_for(kind)
                if handles is not None:
                    routed.append(handles)
            else:
                routed.append(handler)
        return tuple(routed)


class HeldText(Tracer):
    """A tracer in front of ``parent`` that passes every event on at once but the text
    deltas, which it holds, in order, until :meth:`release` sends them on or
    :meth:`drop` forgets them: the text of an answer that guards may still refuse.

    Holds compose: what one releases into another is held there until that one's
    guards pass too.
    """

    def __init__(self, parent: Tracer) -> None:
        super().__init__(log=False, holds_text=True)
        self.parent = parent
        self.text = parent.text
        self._held: list[TextDelta] = []

    @property
    def enabled(self) -> bool:
        return self.parent.enabled

    @property
    def handlers(self) -> tuple[EventHandler, ...]:
        """Its parent's: what takes the events it passes on (a sub-run finds the
        recorders of the run's spans among them)."""
        return self.parent.handlers

    def emit(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._held.append(event)
        else:
            self.parent.emit(event)

    def release(self) -> None:
        """Send the held deltas on, in the order they came."""
        held, self._held = self._held, []
        for event in held:
            self.parent.emit(event)

    def drop(self) -> None:
        """Forget the held deltas: nobody sees them."""
        self._held.clear()


class CallReport:
    """One model call's attempts, as the retry policy reports them: each retry is
    emitted as a :class:`ModelCallRetrying` through ``tracer``, and counted for the
    call's :class:`ModelCallFinished`.

    Attributes:
        attempts: Attempts made so far (1 until a retry).
        retry_wait_s: Seconds waited between attempts.
    """

    # benchmark F: one per model call traced, no instance dict
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
            worker=self.worker,
            run_id=self.run_id,
            turn=self.turn,
            attempt=self.attempts,
            status=status,
            wait_s=wait_s,
            error=error,
        )
        self.attempts += 1
        self.retry_wait_s += wait_s
        self.tracer.emit(event)


current_call: ContextVar[CallReport | None] = ContextVar("honeycomb_model_call", default=None)
"""The report of the model call the current task is making, if its caller set one
(an :class:`~workers.AgentLoop` does, for each call it traces)."""


told_at: ContextVar[float | None] = ContextVar("honeycomb_told_at", default=None)
"""When the event being emitted happened (seconds since the epoch), if it is told later
than that: a worker's in a Ray actor, whose events reach the run in batches (held back
while a tool there holds the actor's event loop, or its threads the GIL). None: now."""


def tell_as_of(at: float | None, tell: Callable[..., None], *args: Any) -> None:
    """``tell(*args)``, which tells what happened at ``at`` (:data:`told_at`; None: now)."""
    token = told_at.set(at)
    try:
        tell(*args)
    finally:
        told_at.reset(token)


def event_time() -> float:
    """When the event being emitted happened: now, or when a worker elsewhere made it
    (:data:`told_at`). What a span recorder times its spans by."""
    at = told_at.get()
    return time.time() if at is None else at


def report_retry(status: str, error: str, wait_s: float) -> bool:
    """Tell the model call in progress that it is retried; False when no caller set a
    report (then nobody listens)."""
    report = current_call.get()
    if report is None:
        return False
    report.retrying(status, error, wait_s)
    return True


def _unrun(coroutine: Coroutine[Any, Any, Any]) -> str:
    """Why the work of a coroutine a handler returned never happens (a lambda around
    an ``async def``, which :func:`event_handlers` cannot see): nobody awaits it."""
    return (
        f"the handler returned {coroutine!r}, which never runs: handlers are called "
        "synchronously (hand events to async code through an asyncio.Queue)"
    )


NO_TRACE = Tracer(log=False)


class Caller(Value, frozen=True, kw_only=True):
    """Who makes a model or tool call, as its events and its tools' context say: a
    worker of a run, and the tracer its events go to.

    Attributes:
        worker: The worker's name (None: a loop or dispatcher on its own).
        run_id: The run (None: none).
        tracer: Where its events go.
    """

    worker: str | None = None
    run_id: str | None = None
    tracer: Tracer = NO_TRACE

    @property
    def conversation(self) -> str | None:
        """The key of the worker's conversation with its model (``run/worker``, or the
        worker alone outside a run; None: no worker): a model that keeps a session or
        a prompt cache by conversation keys it so."""
        if self.run_id and self.worker:
            return f"{self.run_id}/{self.worker}"
        return self.worker
