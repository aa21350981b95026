"""A model that repeats the same tool calls turn after turn: the repeats are not run, and
after ``max_repeats`` such turns (a role's, 3 unless it says) one wrap-up call that may use
no tool asks for its best answer, as at ``max_turns``; an answer of calls alone (or none)
is then a ``RunawayLoop``."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from runtime import (
    AssistantMessage,
    Budget,
    BudgetExceeded,
    ConfigError,
    Dispatcher,
    Limits,
    ModelHTTPError,
    ModelRequest,
    OutputValidationError,
    RunawayLoop,
    ToolMessage,
    ToolRegistry,
    Tracer,
    UserMessage,
    tool,
)
from runtime.events import ModelCallFinished
from runtime.testing import FunctionModel, ScriptedModel, call
from tests.support.sample_tools import lookup
from workers import AgentLoop, Failed, Final, LoopSettings, LoopState, Role, Worker
from workers.services import Services


class Counted(BaseModel):
    n: int


class Keep:
    """A checkpoint that keeps every state it is given."""

    def __init__(self) -> None:
        self.saved: list[LoopState] = []

    def save(self, state: LoopState) -> None:
        self.saved.append(state)

    async def flush(self) -> None:
        pass


class Stuck:
    """A model that asks for ``count(1)`` whenever it is offered tools, and answers the
    wrap-up call (``tool_choice: none``) with ``wrap_up`` (a reply, or an exception to raise)."""

    def __init__(self, wrap_up: AssistantMessage | str | Exception) -> None:
        self.wrap_up = wrap_up
        self.requests: list[ModelRequest] = []

    async def __call__(self, request: ModelRequest) -> AssistantMessage | str:
        self.requests.append(request)
        if request.tool_choice != "none":
            return AssistantMessage(tool_calls=(call("count", {"n": 1}),))
        if isinstance(self.wrap_up, Exception):
            raise self.wrap_up
        return self.wrap_up


def counting(
    model: Stuck, *, services: Services | None = None, **settings: object
) -> tuple[AgentLoop, list[int]]:
    """A loop whose one tool, ``count``, records each call it runs."""
    ran: list[int] = []

    @tool
    def count(n: int) -> str:
        """Count."""
        ran.append(n)
        return f"counted {n}"

    loop = AgentLoop(
        FunctionModel(model),
        Dispatcher(ToolRegistry([count])),
        settings=LoopSettings(**{"max_turns": 50, "max_repeats": 3, **settings}),  # type: ignore[arg-type]
        services=services,
    )
    return loop, ran


def assert_runaway_wrap_up(request: ModelRequest, *, turns: int) -> None:
    assert [t.name for t in request.tools] == ["count"]  # listed, as in every turn
    assert request.tool_choice == "none"
    prompt = request.messages[-1]
    assert isinstance(prompt, UserMessage)
    assert f"You called 'count' with the same arguments {turns} turns in a row" in prompt.content
    assert "Do not call any more tools" in prompt.content


async def test_a_runaway_loop_gets_a_wrap_up_call_and_its_answer_is_final() -> None:
    model = Stuck("I counted 1.")
    budget = Budget()
    seen: list[object] = []
    loop, ran = counting(model, services=Services(budget=budget, tracer=Tracer(seen.append)))
    result = await loop.run("count once")
    assert isinstance(result, Final)
    assert result.output == "I counted 1."
    assert ran == [1]  # the repeats were never run
    assert len(model.requests) == 5  # one call, three repeats, the wrap-up
    assert_runaway_wrap_up(model.requests[-1], turns=4)
    skipped = [m for m in result.state.messages if isinstance(m, ToolMessage)]
    assert [m.status for m in skipped] == ["ok", "skipped", "skipped", "skipped"]
    assert "Not executed: this repeats your previous call" in skipped[-1].content
    # The wrap-up is a model call like any: counted and traced.
    assert result.state.usage.model_calls == 5
    assert budget.usage.model_calls == 5
    assert budget.usage.tool_calls == 1
    assert sum(isinstance(e, ModelCallFinished) for e in seen) == 5


@pytest.mark.parametrize(("max_repeats", "calls"), [(None, 5), (1, 3), (6, 8)])
async def test_a_roles_max_repeats_is_how_many_repeated_turns_its_workers_may_make(
    max_repeats: int | None, calls: int
) -> None:
    """``Role.max_repeats`` (a hive's ``max_repeats:``): the repeated turns a worker of
    the role may make before its wrap-up call; 3 when the role does not say."""
    model = Stuck("I counted 1.")
    ran: list[int] = []

    @tool
    def count(n: int) -> str:
        """Count."""
        ran.append(n)
        return f"counted {n}"

    chosen = {} if max_repeats is None else {"max_repeats": max_repeats}
    role = Role(name="counter", max_turns=50, **chosen)  # type: ignore[arg-type]
    result = await Worker(role, FunctionModel(model), tools=[count]).run("count once")
    assert result.ok
    assert result.text == "I counted 1."
    assert ran == [1]
    assert len(model.requests) == calls  # one call, the repeats, the wrap-up
    assert_runaway_wrap_up(model.requests[-1], turns=calls - 1)


def test_a_role_repeats_at_least_once_before_it_is_a_runaway() -> None:
    with pytest.raises(ConfigError, match="max_repeats"):
        Role(name="counter", max_repeats=0)


async def test_a_runaway_that_keeps_calling_in_the_wrap_up_fails_naming_the_tool() -> None:
    model = Stuck(AssistantMessage(tool_calls=(call("count", {"n": 1}),)))
    loop, ran = counting(model)
    result = await loop.run("count once")
    assert isinstance(result, Failed)
    assert isinstance(result.error, RunawayLoop)
    assert (result.error.tool_name, result.error.turns) == ("count", 4)
    assert str(result.error) == (
        "stopped a runaway loop: the model called 'count' with the same arguments 4 turns "
        "in a row, although it was told the result each time"
    )
    assert ran == [1]
    assert len(model.requests) == 5
    assert_runaway_wrap_up(model.requests[-1], turns=4)
    assert result.state.turn == 5  # long before max_turns
    assert result.state.wrapped_up


async def test_an_empty_answer_to_a_runaways_wrap_up_is_a_runaway() -> None:
    model = Stuck(AssistantMessage())
    loop, _ = counting(model, max_repeats=1)
    result = await loop.run("count once")
    assert isinstance(result, Failed)
    assert isinstance(result.error, RunawayLoop)  # not EmptyResponse: it kept repeating
    assert (result.error.tool_name, result.error.turns) == ("count", 2)
    assert len(model.requests) == 3
    assert_runaway_wrap_up(model.requests[-1], turns=2)


async def test_a_runaways_wrap_up_answer_gets_no_second_try_at_the_output_schema() -> None:
    model = Stuck('{"n": "one"}')
    loop, _ = counting(model, output_type=Counted, output_retries=2)
    result = await loop.run("count once")
    assert isinstance(result, Failed)
    assert isinstance(result.error, OutputValidationError)  # as any wrap-up answer
    assert len(model.requests) == 5
    good, _ = counting(Stuck('{"n": 1}'), output_type=Counted)
    answered = await good.run("count once")
    assert isinstance(answered, Final)
    assert answered.output == Counted(n=1)


async def test_the_budget_can_refuse_a_runaways_wrap_up_call() -> None:
    model = Stuck("never asked")
    loop, _ = counting(model, services=Services(budget=Budget(Limits(model_calls=4))))
    result = await loop.run("count once")
    assert isinstance(result, Failed)
    assert isinstance(result.error, BudgetExceeded)
    assert len(model.requests) == 4


async def test_a_state_saved_at_a_runaways_wrap_up_point_wraps_up_when_resumed() -> None:
    kept = Keep()
    first, _ = counting(Stuck(ModelHTTPError(503, "gone")), services=Services(store=kept))
    cut = await first.run("count once")
    assert isinstance(cut, Failed)  # the wrap-up call failed: the state before it is kept
    point = kept.saved[-1]
    assert point.pending == ()
    assert (point.turn, point.repeats, point.wrapped_up) == (4, 3, False)

    model = Stuck("I counted 1.")
    resumed, ran = counting(model)
    result = await resumed.run("count once", point)
    assert isinstance(result, Final)
    assert result.output == "I counted 1."
    assert ran == []  # nothing runs again: the next step is the wrap-up
    [request] = model.requests
    assert_runaway_wrap_up(request, turns=4)
    assert result.state.usage.model_calls == 5


async def test_a_repeat_that_the_model_breaks_out_of_is_not_a_runaway() -> None:
    same = [call("lookup", {"key": "a"})]
    model = ScriptedModel([same, same, same, [call("lookup", {"key": "b"})], same, same, "ok"])
    loop = AgentLoop(
        model, Dispatcher(ToolRegistry([lookup])), settings=LoopSettings(max_repeats=3)
    )
    result = await loop.run("look things up")
    assert isinstance(result, Final)  # two repeats, a new call, two repeats: never three
    assert len(model.requests) == 7
    assert all(r.tools for r in model.requests)  # no wrap-up call


@pytest.mark.parametrize("repeats", [0, -1])
def test_max_repeats_must_be_positive(repeats: int) -> None:
    with pytest.raises(ValueError, match="max_repeats"):
        LoopSettings(max_repeats=repeats)
