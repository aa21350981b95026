"""What the loop reports of each model call: the retries a model absorbed (the retry
policy sits inside the model, shared by every worker, and reports to the call's
caller), and the reasoning a reasoning model spent."""

from __future__ import annotations

import pytest

from runtime import (
    AssistantMessage,
    Dispatcher,
    Event,
    ModelCallFinished,
    ModelCallRetrying,
    ModelConnectionError,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelTimeout,
    RetryingModel,
    RetryPolicy,
    ToolRegistry,
    Tracer,
    Usage,
    tool,
)
from runtime.events import current_call
from runtime.testing import FunctionModel, ScriptedModel, call
from workers import AgentLoop, Final, LoopSettings
from workers.services import Services


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-of-{key}"


def fast(attempts: int = 4) -> RetryPolicy:
    return RetryPolicy(attempts=attempts, initial_wait_s=0.01, max_wait_s=0.02, jitter_s=0)


def loop_on(model: object, events: list[Event], **settings: object) -> AgentLoop:
    return AgentLoop(
        model,  # type: ignore[arg-type]
        Dispatcher(ToolRegistry([lookup])),
        worker="w1",
        settings=LoopSettings(**settings),  # type: ignore[arg-type]
        services=Services(tracer=Tracer(events.append, log=False), run_id="r1"),
    )


async def test_each_absorbed_retry_is_an_event_and_the_finished_call_counts_them() -> None:
    flaky = ScriptedModel(
        [ModelHTTPError(429, "slow down", retry_after=0.05), ModelTimeout(1.0), "done"]
    )
    events: list[Event] = []

    result = await loop_on(RetryingModel(flaky, fast()), events).run("t")

    assert isinstance(result, Final)
    retries = [e for e in events if isinstance(e, ModelCallRetrying)]
    assert [(e.worker, e.run_id, e.turn, e.attempt, e.status) for e in retries] == [
        ("w1", "r1", 1, 1, "429"),
        ("w1", "r1", 1, 2, "timeout"),
    ]
    assert retries[0].wait_s == pytest.approx(0.05)
    assert "slow down" in retries[0].error
    [finished] = [e for e in events if isinstance(e, ModelCallFinished)]
    assert finished.status == "ok"
    assert finished.attempts == 3
    assert finished.retry_wait_s == pytest.approx(0.05 + retries[1].wait_s)
    assert current_call.get() is None  # nothing is left set once the call is done


async def test_a_call_that_fails_after_retries_reports_every_attempt() -> None:
    down = FunctionModel(lambda request: (_ for _ in ()).throw(ModelConnectionError("refused")))
    events: list[Event] = []

    await loop_on(RetryingModel(down, fast(attempts=3)), events).run("t")

    assert [e.status for e in events if isinstance(e, ModelCallRetrying)] == ["connection"] * 2
    [finished] = [e for e in events if isinstance(e, ModelCallFinished)]
    assert (finished.status, finished.attempts) == ("error", 3)


async def test_a_call_without_retries_is_one_attempt_and_turns_do_not_add_up() -> None:
    flaky = ScriptedModel([ModelHTTPError(503), call("lookup", {"key": "a"}), "done"])
    events: list[Event] = []

    await loop_on(RetryingModel(flaky, fast()), events).run("t")

    finished = [e for e in events if isinstance(e, ModelCallFinished)]
    assert [(e.turn, e.attempts) for e in finished] == [(1, 2), (2, 1)]
    assert finished[1].retry_wait_s == 0.0


def thinking(tokens: int, message: AssistantMessage) -> ModelResponse:
    usage = Usage(input_tokens=10, output_tokens=tokens + 5, reasoning_tokens=tokens)
    return ModelResponse(message=message, usage=usage)


async def test_reasoning_tokens_are_counted_on_the_loop_the_budget_and_the_events() -> None:
    model = ScriptedModel(
        [
            thinking(30, AssistantMessage(tool_calls=(call("lookup", {"key": "a"}),))),
            thinking(12, AssistantMessage(content="done", reasoning="a is known now")),
        ]
    )
    events: list[Event] = []
    loop = loop_on(model, events)

    result = await loop.run("t")

    assert isinstance(result, Final)
    assert result.state.usage.reasoning_tokens == 42
    assert loop.budget.usage.reasoning_tokens == 42
    finished = [e for e in events if isinstance(e, ModelCallFinished)]
    assert [e.reasoning_tokens for e in finished] == [30, 12]
    last = result.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.reasoning == "a is known now"


async def test_the_wrap_up_answer_keeps_its_reasoning() -> None:
    def answer(request: ModelRequest) -> AssistantMessage:
        if request.tool_choice != "none":
            return AssistantMessage(tool_calls=(call("lookup", {"key": "a"}),))
        # Asked for an answer without tools, it calls a tool anyway: the call is dropped.
        return AssistantMessage(
            content="best guess", tool_calls=(call("lookup", {"key": "b"}),), reasoning="why"
        )

    result = await loop_on(FunctionModel(answer), [], max_turns=1).run("t")

    assert isinstance(result, Final)
    last = result.state.messages[-1]
    assert last == AssistantMessage(content="best guess", reasoning="why")
