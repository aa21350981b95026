"""The Tracer: events to handlers and the log; retries reported during a model call."""

from __future__ import annotations

import functools
import gc
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from runtime.errors import ConfigError
from runtime.events import (
    Caller,
    CallReport,
    Event,
    EventHandler,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
    Tracer,
    current_call,
    event_handlers,
    report_retry,
)

MODEL_FINISHED: dict[str, Any] = {
    "worker": "w1", "run_id": "r1", "turn": 2, "duration_s": 0.5, "status": "ok",
    "model": "m", "input_tokens": 10, "output_tokens": 5, "cost": 0.25, "tool_calls": 1,
    "error": None,
}  # fmt: skip
TOOL_FINISHED: dict[str, Any] = {
    "worker": "w1", "run_id": "r1", "turn": 2, "call_id": "c1", "tool": "lookup",
    "status": "error", "duration_s": 0.1, "error": "ValueError: no",
}  # fmt: skip


def one_turn() -> list[Event]:
    return [
        ModelCallStarted(worker="w1", run_id="r1", turn=2),
        ModelCallFinished(**MODEL_FINISHED),
        ToolCallStarted(worker="w1", run_id="r1", turn=2, call_id="c1", tool="lookup"),
        ToolCallFinished(**TOOL_FINISHED),
    ]


def test_handlers_get_every_event_in_order() -> None:
    first: list[Event] = []
    second: list[Event] = []
    tracer = Tracer(first.append, second.append, log=False)
    for event in one_turn():
        tracer.emit(event)
    assert first == second == one_turn()


def test_events_are_values() -> None:
    event = ModelCallFinished(**MODEL_FINISHED)
    assert event == ModelCallFinished(**MODEL_FINISHED)
    assert event.fields()["input_tokens"] == 10
    assert set(event.fields()) == set(ModelCallFinished.__struct_fields__)
    with pytest.raises(AttributeError):
        event.turn = 3  # type: ignore[misc]


def test_a_tracer_without_handlers_or_log_is_disabled() -> None:
    assert not Tracer(log=False).enabled
    assert Tracer(print, log=False).enabled
    assert not Tracer().enabled  # structlog is not configured here


def test_the_log_gets_the_events_without_handlers() -> None:
    with capture_logs() as logs:
        tracer = Tracer()
        assert tracer.enabled
        for event in one_turn():
            tracer.emit(event)
    assert [entry["event"] for entry in logs] == [
        "model_call.started",
        "model_call.finished",
        "tool_call.started",
        "tool_call.finished",
    ]
    assert logs[1]["input_tokens"] == 10


def test_whether_to_log_is_asked_as_the_tracer_is_made() -> None:
    made_before = Tracer(log=True)
    with capture_logs() as logs:
        made_within = Tracer(log=True)
        for event in one_turn():
            made_before.emit(event)
            made_within.emit(event)
        assert not made_before.enabled
    assert len(logs) == len(one_turn())  # only the tracer made with structlog configured


class KindsOnly:
    """A handler that routes events by their kind itself: it takes model calls' only."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.seen: list[Event] = []

    def __call__(self, event: Event) -> None:
        raise AssertionError("a tracer calls what handler_for names")

    def handler_for(self, kind: str) -> Callable[[Any], None] | None:
        self.asked.append(kind)
        return self.seen.append if kind.startswith("model_call.") else None


def test_a_routed_handler_is_asked_once_a_kind_and_gets_only_what_it_takes() -> None:
    routed, plain = KindsOnly(), list[Event]()
    tracer = Tracer(routed, plain.append, log=False)
    for _ in range(2):
        for event in one_turn():
            tracer.emit(event)
    assert [e.kind for e in plain] == [e.kind for e in one_turn()] * 2
    assert [e.kind for e in routed.seen] == ["model_call.started", "model_call.finished"] * 2
    assert routed.asked == [e.kind for e in one_turn()]  # once a kind


def test_a_broken_handler_does_not_stop_the_others_and_is_logged_once() -> None:
    """A handler that fails on every event is logged the first time, naming it (it
    was logged on every event, a warning an event of every run, and not named); a
    failure of another kind is logged too, the first time."""

    def broken(event: Event) -> None:
        if event.kind == "tool_call.finished":
            raise KeyError(event.kind)
        raise RuntimeError("broken")

    events: list[Event] = []
    with capture_logs() as logs:
        tracer = Tracer(broken, events.append)
        for _ in range(3):
            for event in one_turn():
                tracer.emit(event)  # raises nothing
    assert events == one_turn() * 3
    failures = [entry for entry in logs if entry["event"] == "event_handler.failed"]
    assert [(f["event_kind"], f["error"]) for f in failures] == [
        (one_turn()[0].kind, "RuntimeError('broken')"),
        ("tool_call.finished", "KeyError('tool_call.finished')"),
    ]
    assert all(f["handler"].endswith("<locals>.broken") for f in failures)
    assert all(f["log_level"] == "warning" for f in failures)


def test_a_call_report_emits_each_retry_and_counts_attempts_and_waits() -> None:
    events: list[Event] = []
    report = CallReport(Tracer(events.append, log=False), worker="w1", run_id="r1", turn=3)
    token = current_call.set(report)
    try:
        assert report_retry("429", "ModelHTTPError: HTTP 429", 0.5)
        assert report_retry("timeout", "ModelTimeout: timed out", 0.25)
    finally:
        current_call.reset(token)

    assert not report_retry("429", "nobody listens", 1.0)
    assert (report.attempts, report.retry_wait_s) == (3, 0.75)
    assert events == [
        ModelCallRetrying(
            worker="w1", run_id="r1", turn=3, attempt=1, status="429", wait_s=0.5,
            error="ModelHTTPError: HTTP 429",
        ),
        ModelCallRetrying(
            worker="w1", run_id="r1", turn=3, attempt=2, status="timeout", wait_s=0.25,
            error="ModelTimeout: timed out",
        ),
    ]  # fmt: skip


def test_a_callers_conversation_is_its_run_and_worker() -> None:
    assert Caller(worker="w1", run_id="r1").conversation == "r1/w1"
    assert Caller(worker="w1").conversation == "w1"
    assert Caller(run_id="r1").conversation is None


async def pushed(event: Event) -> None:
    """An async handler, as a service would write one to push to a websocket."""


async def streamed_out(event: Event) -> AsyncIterator[Event]:
    yield event


class AsyncCallable:
    async def __call__(self, event: Event) -> None:
        pass


@pytest.mark.parametrize(
    "handler",
    [pushed, functools.partial(pushed), AsyncCallable(), streamed_out],
    ids=["async def", "partial", "async __call__", "async generator"],
)
def test_an_async_handler_is_refused_naming_it_and_what_to_do(handler: Any) -> None:
    with pytest.raises(ConfigError, match="called synchronously") as refused:
        Tracer(print, handler)
    assert refused.value.field == "on_event[1]"
    assert "asyncio.Queue" in str(refused.value)
    assert "executor.stream" in str(refused.value)
    with pytest.raises(ConfigError, match="called synchronously"):
        event_handlers([handler])


def show(event: Event) -> None:
    """A handler of the test's own (a local Ray replaces the builtin print with its own)."""


def test_a_handler_given_alone_or_not_callable_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"a list of handlers, not one: write on_event=\[show\]"):
        event_handlers(show)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"'log\.txt' is not callable") as refused:
        event_handlers([show, "log.txt"])  # type: ignore[list-item]
    assert refused.value.field == "on_event[1]"


def test_plain_handlers_are_kept_in_order() -> None:
    events: list[Event] = []
    handlers: list[EventHandler] = [events.append, print, functools.partial(print, end="")]
    assert event_handlers(iter(handlers)) == tuple(handlers)


def test_a_coroutine_a_handler_returns_is_closed_unrun_and_logged() -> None:
    """A lambda around an async function looks plain: what it returns is closed (no
    'never awaited' warning) and the failure logged; the other handlers go on."""
    events: list[Event] = []
    gc.collect()  # what earlier tests left (a socket that warns as it goes) goes first
    with capture_logs() as logs, warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        tracer = Tracer(lambda event: pushed(event), events.append)  # type: ignore[arg-type]
        for event in one_turn():
            tracer.emit(event)
        gc.collect()
    never = [str(w.message) for w in warned if "never awaited" in str(w.message)]
    assert never == []
    assert events == one_turn()
    failures = [entry for entry in logs if entry["event"] == "event_handler.failed"]
    assert [f["event_kind"] for f in failures] == [one_turn()[0].kind]  # once
    assert "never runs: handlers are called synchronously" in failures[0]["error"]
