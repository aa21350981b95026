"""The Tracer: events to handlers and the log, and model and tool calls to a recorder."""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock, call

from structlog.testing import capture_logs

from runtime.events import (
    CallReport,
    Event,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
    Tracer,
    current_call,
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


def emit_one_turn(tracer: Tracer) -> None:
    tracer.model_call_started(worker="w1", run_id="r1", turn=2)
    tracer.model_call_finished(**MODEL_FINISHED)
    tracer.tool_call_started(worker="w1", run_id="r1", turn=2, call_id="c1", tool="lookup")
    tracer.tool_call_finished(**TOOL_FINISHED)


def test_handlers_get_the_events_and_the_recorder_their_fields() -> None:
    events: list[Event] = []
    recorder = Mock()
    tracer = Tracer(events.append, log=False, recorder=recorder)
    emit_one_turn(tracer)
    other = ModelCallStarted(worker="w2", run_id="r1", turn=1)
    tracer.emit(other)

    assert events == [
        ModelCallStarted(worker="w1", run_id="r1", turn=2),
        ModelCallFinished(**MODEL_FINISHED),
        ToolCallStarted(worker="w1", run_id="r1", turn=2, call_id="c1", tool="lookup"),
        ToolCallFinished(**TOOL_FINISHED),
        other,
    ]
    assert recorder.mock_calls == [
        call.model_call_started("w1", 2),
        call.model_call_finished("w1", 2, "m", "ok", None, 10, 5, 0.25, 1, 0),
        call.tool_call_started("w1", 2, "c1", "lookup"),
        call.tool_call_finished("w1", 2, "c1", "error", "ValueError: no"),
        call(other),  # an event emitted as one reaches the recorder as one
    ]


def test_a_recorder_alone_enables_the_tracer() -> None:
    recorder = Mock()
    tracer = Tracer(log=False, recorder=recorder)
    assert tracer.enabled
    emit_one_turn(tracer)
    assert len(recorder.mock_calls) == 4


def test_a_broken_recorder_does_not_stop_the_events() -> None:
    events: list[Event] = []
    recorder = Mock(side_effect=RuntimeError("broken"))
    for method in (
        "model_call_started", "model_call_finished", "tool_call_started", "tool_call_finished"
    ):  # fmt: skip
        getattr(recorder, method).side_effect = RuntimeError("broken")
    tracer = Tracer(events.append, log=False, recorder=recorder)
    emit_one_turn(tracer)
    tracer.emit(ModelCallStarted(worker="w2", run_id="r1", turn=1))
    assert len(events) == 5
    assert len(recorder.mock_calls) == 5


def test_the_log_gets_the_call_events_without_handlers() -> None:
    with capture_logs() as logs:
        emit_one_turn(Tracer(recorder=Mock()))
    assert [entry["event"] for entry in logs] == [
        "model_call.started",
        "model_call.finished",
        "tool_call.started",
        "tool_call.finished",
    ]
    assert logs[1]["input_tokens"] == 10


def test_a_broken_handler_is_logged_while_structlog_is_in_use() -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("broken")

    recorder = Mock()
    recorder.tool_call_started.side_effect = ValueError("also broken")
    with capture_logs() as logs:
        emit_one_turn(Tracer(broken, recorder=recorder))  # raises nothing
    failures = [entry for entry in logs if entry["event"] == "event_handler.failed"]
    assert [f["event_kind"] for f in failures] == [
        "model_call.started",
        "model_call.finished",
        "tool_call.started",
        "tool_call.started",
        "tool_call.finished",
    ]
    assert failures[0]["error"] == "RuntimeError('broken')"
    assert failures[3]["error"] == "ValueError('also broken')"
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
