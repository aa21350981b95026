"""The tracing layer alone, around a fake model."""

from __future__ import annotations

import pytest

from runtime.errors import ModelHTTPError
from runtime.events import Caller, Event, ModelCallFinished, ModelCallStarted, Tracer, report_retry
from runtime.messages import UserMessage
from runtime.model import Model, ModelRequest, ModelResponse
from runtime.models.layers import ModelCalls, Traced
from runtime.testing import FunctionModel, ScriptedModel

ASK = ModelRequest(messages=(UserMessage(content="hi"),), turn=2)


def traced(model: Model, caller: Caller) -> ModelCalls:
    return ModelCalls(model, (Traced(),), caller=caller)


async def test_a_call_is_a_started_and_a_finished_event_with_its_retries() -> None:
    events: list[Event] = []

    async def retried_once(request: ModelRequest) -> str:
        assert report_retry("429", "slow down", 0.5)  # as a retry policy would
        return "done"

    caller = Caller(worker="w1", run_id="r1", tracer=Tracer(events.append, log=False))
    await traced(FunctionModel(retried_once), caller).complete(ASK)
    started, _retrying, finished = events
    assert isinstance(started, ModelCallStarted)
    assert (started.worker, started.run_id, started.turn) == ("w1", "r1", 2)
    assert isinstance(finished, ModelCallFinished)
    assert (finished.status, finished.attempts, finished.retry_wait_s) == ("ok", 2, 0.5)


async def test_a_failed_call_finishes_with_its_error() -> None:
    events: list[Event] = []
    caller = Caller(worker="w1", tracer=Tracer(events.append, log=False))
    failing = ScriptedModel([ModelHTTPError(500, "down")])
    with pytest.raises(ModelHTTPError):
        await traced(failing, caller).complete(ASK)
    finished = events[-1]
    assert isinstance(finished, ModelCallFinished)
    assert finished.status == "error"
    assert finished.error is not None
    assert finished.error.startswith("ModelHTTPError")


async def test_with_nobody_listening_a_call_goes_straight_through() -> None:
    calls = traced(ScriptedModel(["hi"]), Caller(tracer=Tracer(log=False)))
    response = await calls.complete(ASK)
    assert isinstance(response, ModelResponse)
    assert response.message.content == "hi"
