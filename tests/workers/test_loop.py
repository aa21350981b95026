"""AgentLoop: every way a loop continues, finishes or fails, driven by ScriptedModel."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog
from pydantic import BaseModel

from runtime import (
    AssistantMessage,
    Budget,
    BudgetExceeded,
    Dispatcher,
    EmptyResponse,
    Limits,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelResponseError,
    OutputValidationError,
    ToolCall,
    ToolMessage,
    ToolRegistry,
    Tracer,
    Usage,
    UserMessage,
    tool,
)
from runtime.testing import FunctionModel, ScriptedModel, call
from tests.support.sample_tools import lookup
from workers import AgentLoop, ContextWindow, Continue, Failed, Final, LoopSettings, LoopState
from workers import loop as loop_module
from workers.services import Services


@tool(terminal=True)
def submit(answer: str) -> str:
    """Hand in the final answer."""
    return answer


class Verdict(BaseModel):
    city: str
    warm: bool


def make_loop(model: ScriptedModel | FunctionModel, **settings: object) -> AgentLoop:
    return AgentLoop(
        model,
        Dispatcher(ToolRegistry([lookup, submit])),
        instructions="You are a test worker.",
        settings=LoopSettings(**settings),  # type: ignore[arg-type]
        worker="w1",
    )


async def test_plain_answer_is_final_after_one_call() -> None:
    model = ScriptedModel(["forty-two"])
    result = await make_loop(model).run("what is it?")
    assert isinstance(result, Final)
    assert result.output == "forty-two"
    assert result.state.turn == 1
    first = model.requests[0]
    assert [m.role for m in first.messages] == ["system", "user"]
    assert {t.name for t in first.tools} == {"lookup", "submit"}


async def test_tool_results_come_back_in_call_order_before_the_next_turn() -> None:
    model = ScriptedModel([[call("lookup", {"key": "a"}), call("lookup", {"key": "b"})], "done"])
    result = await make_loop(model).run("look up a and b")
    assert isinstance(result, Final)
    second = model.requests[1].messages
    assert isinstance(second[2], AssistantMessage)
    observations = [m for m in second if isinstance(m, ToolMessage)]
    assert [o.content for o in observations] == ["value-of-a", "value-of-b"]
    assert result.state.usage.tool_calls == 2
    assert result.state.usage.model_calls == 2


async def test_a_step_thinks_or_acts() -> None:
    loop = make_loop(ScriptedModel([call("lookup", {"key": "a"}), "done"]))
    thought = await loop.step(LoopState(task="t"))  # the model asks for a call
    assert isinstance(thought, Continue)
    assert thought.state.turn == 1
    assert [c.name for c in thought.state.pending] == ["lookup"]
    acted = await loop.step(thought.state)  # the call runs; the model is not asked
    assert isinstance(acted, Continue)
    assert acted.state.turn == 1
    assert acted.state.pending == ()
    assert acted.state.tool_calls == 1
    second = await loop.step(acted.state)
    assert isinstance(second, Final)


async def test_a_waiting_loop_holds_one_small_frame_of_its_step() -> None:
    # What a loop holds while its model or its tools work, 10,000 workers hold at once
    # (benchmark E): a frame of its step, thinking or acting, within the 512 bytes of
    # Python's small-object allocator; a larger one is allocated apart, where the
    # frames of the run's other steps cannot reuse its memory.
    held: list[list[tuple[str, int]]] = []

    async def wait() -> None:  # and, as it waits, note what its loop holds
        asyncio.get_running_loop().call_soon(loop_frames, asyncio.current_task())
        await asyncio.sleep(0)

    def loop_frames(task: asyncio.Task[Any]) -> None:
        coro, frames = task.get_coro(), []
        while hasattr(coro, "cr_code"):
            if coro.cr_code.co_filename == loop_module.__file__:
                frames.append((coro.cr_code.co_name, sys.getsizeof(coro)))
            coro = coro.cr_await
        held.append(frames)

    async def answer(request: ModelRequest) -> str | list[ToolCall]:
        await wait()
        return [call("look", {"key": "a"})] if len(held) == 1 else "done"

    @tool
    async def look(key: str) -> str:
        """Look it up."""
        await wait()
        return key

    loop = AgentLoop(FunctionModel(answer), Dispatcher(ToolRegistry([look])))
    assert isinstance(await asyncio.create_task(loop.run("t")), Final)
    assert [[name for name, _ in frames] for frames in held] == [
        ["run", "_think"],  # its model works
        ["run", "_act"],  # its calls run
        ["run", "_think"],
    ]
    assert max(size for frames in held for _, size in frames) <= 512


async def test_terminal_tool_ends_the_loop_with_its_result() -> None:
    model = ScriptedModel([call("submit", {"answer": "from the tool"})])
    result = await make_loop(model).run("t")
    assert isinstance(result, Final)
    assert result.output == "from the tool"
    assert len(model.requests) == 1


async def test_max_turns_then_one_call_that_may_use_no_tool_for_the_best_answer() -> None:
    script = [call("lookup", {"key": str(i)}) for i in range(3)]
    model = ScriptedModel([*script, "best I can do"])
    result = await make_loop(model, max_turns=3).run("t")
    assert isinstance(result, Final)
    assert result.output == "best I can do"
    wrap_up = model.requests[-1]
    assert wrap_up.tools == model.requests[0].tools  # listed, as in every turn
    assert wrap_up.tool_choice == "none"
    assert isinstance(wrap_up.messages[-1], UserMessage)
    assert "used all 3 turns" in wrap_up.messages[-1].content
    assert len(model.requests) == 4


async def test_tool_calls_in_the_wrap_up_call_are_dropped_not_run() -> None:
    model = ScriptedModel(
        [
            call("lookup", {"key": "a"}),
            AssistantMessage(content="final words", tool_calls=(call("lookup", {"key": "z"}),)),
        ]
    )
    result = await make_loop(model, max_turns=1).run("t")
    assert isinstance(result, Final)
    assert result.output == "final words"
    last = result.state.transcript.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.tool_calls == ()


async def test_empty_response_gets_one_nudge() -> None:
    model = ScriptedModel([AssistantMessage(), "now an answer"])
    result = await make_loop(model).run("t")
    assert isinstance(result, Final)
    assert result.output == "now an answer"
    nudge = model.requests[1].messages[-1]
    assert isinstance(nudge, UserMessage)
    assert "empty" in nudge.content


async def test_two_empty_responses_fail_clearly() -> None:
    model = ScriptedModel([AssistantMessage(content="  "), AssistantMessage()])
    result = await make_loop(model).run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, EmptyResponse)
    assert "empty response" in str(result.error)


async def test_structured_output_is_validated_into_the_model() -> None:
    model = ScriptedModel(['```json\n{"city": "Lisbon", "warm": true}\n```'])
    result = await make_loop(model, output_type=Verdict).run("t")
    assert isinstance(result, Final)
    assert result.output == Verdict(city="Lisbon", warm=True)
    assert model.requests[0].output is not None
    assert model.requests[0].output.name == "Verdict"


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param('Here is the verdict: {"city": "Lisbon", "warm": true}.', id="in-prose"),
        pytest.param(
            'Sure.\n```json\n{"city": "Lisbon", "warm": true}\n```\nAnything else?',
            id="fence-amid-prose",
        ),
        pytest.param(
            '<think>Lisbon is warm {mostly}.</think>\n{"city": "Lisbon", "warm": true}',
            id="after-thinking",
        ),
        pytest.param('```\n{"city": "Lisbon", "warm": true}\n```', id="bare-fence"),
    ],
)
async def test_structured_output_is_taken_from_around_what_models_write(answer: str) -> None:
    """Models put a JSON answer in prose, a fence after prose, or after their thinking;
    an answer that was sent back for that (three times, then failed: a planner's plan
    as much as any) is taken at once."""
    model = ScriptedModel([answer])
    result = await make_loop(model, output_type=Verdict).run("t")
    assert isinstance(result, Final)
    assert result.output == Verdict(city="Lisbon", warm=True)
    assert len(model.requests) == 1


async def test_invalid_structured_output_is_sent_back_with_the_error() -> None:
    model = ScriptedModel(['{"city": "Lisbon"}', '{"city": "Lisbon", "warm": false}'])
    result = await make_loop(model, output_type=Verdict).run("t")
    assert isinstance(result, Final)
    assert result.output == Verdict(city="Lisbon", warm=False)
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage)
    assert "warm: Field required" in retry.content


async def test_structured_output_gives_up_after_its_retries() -> None:
    model = ScriptedModel(["not json"] * 3)
    result = await make_loop(model, output_type=Verdict, output_retries=2).run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, OutputValidationError)
    assert result.error.attempts == 3
    assert len(model.requests) == 3


async def test_model_error_fails_the_loop_without_raising() -> None:
    model = ScriptedModel([ModelHTTPError(400, {"error": "bad request"})])
    result = await make_loop(model).run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, ModelHTTPError)
    assert result.error.status == 400


class Returns:
    """A model written by hand, returning whatever it was given."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)

    def __repr__(self) -> str:
        return "Returns()"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self.answers.pop(0)  # type: ignore[return-value]


def answer(message: Any = None, **fields: Any) -> ModelResponse:
    return ModelResponse(message=message or AssistantMessage(content="ok"), **fields)


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        ("forty-two", "a str ('forty-two'), not a ModelResponse"),
        (answer(UserMessage(content="x")), "message is a UserMessage"),
        (answer(AssistantMessage(content=5)), "message.content is an int (5), not a string"),  # type: ignore[arg-type]
        (answer(AssistantMessage(tool_calls=(ToolCall(id="c", name=None),))),  # type: ignore[arg-type]
         "message.tool_calls[0].name is missing (or null), not a string"),
        (answer(AssistantMessage(tool_calls=("lookup",))),  # type: ignore[arg-type]
         "message.tool_calls[0] is a str ('lookup'), not a ToolCall"),
        (answer(usage=Usage(input_tokens="3")),  # type: ignore[arg-type]
         "usage.input_tokens is a str ('3'), not an integer"),
        (answer(usage={"input_tokens": 3}), "usage is a dict ({'input_tokens': 3}), not a Usage"),
        (answer(model=None), "model is missing (or null), not a string"),
    ],
)  # fmt: skip
async def test_a_malformed_answer_fails_the_loop_naming_the_model_and_the_field(
    returned: object, problem: str
) -> None:
    with structlog.testing.capture_logs() as logs:
        result = await make_loop(Returns(returned)).run("t")  # type: ignore[arg-type]
    assert isinstance(result, Failed)
    assert isinstance(result.error, ModelResponseError)
    assert str(result.error).startswith("model Returns() returned ")
    assert problem in str(result.error)
    (event,) = [e for e in logs if e["event"] == "model_call.finished"]
    assert event["status"] == "error"


async def test_an_answer_with_a_list_of_tool_calls_or_a_whole_cost_is_taken() -> None:
    calls = [ToolCall(id="c1", name="lookup", arguments='{"key": "a"}')]
    model = Returns(
        answer(AssistantMessage(tool_calls=calls), usage=Usage(cost=1)),  # type: ignore[arg-type]
        answer(),
    )
    result = await make_loop(model).run("t")  # type: ignore[arg-type]
    assert isinstance(result, Final)
    assert result.state.messages[0] == AssistantMessage(tool_calls=tuple(calls))
    assert result.state.cost == 1


async def test_budget_is_checked_before_the_model_is_called() -> None:
    model = ScriptedModel([call("lookup", {"key": "a"}), call("lookup", {"key": "b"}), "x"])
    budget = Budget(Limits(model_calls=2))
    loop = AgentLoop(model, Dispatcher(ToolRegistry([lookup])), services=Services(budget=budget))
    result = await loop.run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, BudgetExceeded)
    assert result.error.limit == "model_calls"
    assert len(model.requests) == 2
    # The second answer's call did not run: no model call was left to read its result.
    assert budget.usage.tool_calls == 1


async def test_a_turn_whose_calls_would_go_past_the_tool_calls_budget_runs_none() -> None:
    """Two calls fit a budget of three; the next turn's two would make four: neither
    runs (no effect happens past the budget), and the loop fails with the limit."""
    ran: list[str] = []

    @tool(side_effects=True)
    def pay(to: str) -> str:
        """Pay someone."""
        ran.append(to)
        return f"paid {to}"

    turns = [[call("pay", {"to": "a"}), call("pay", {"to": "b"})]]
    model = ScriptedModel([*turns, [call("pay", {"to": "c"}), call("pay", {"to": "d"})], "x"])
    budget = Budget(Limits(tool_calls=3))
    loop = AgentLoop(model, Dispatcher(ToolRegistry([pay])), services=Services(budget=budget))
    result = await loop.run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, BudgetExceeded)
    assert (result.error.limit, result.error.allowed, result.error.used) == ("tool_calls", 3, 2)
    assert ran == ["a", "b"]
    assert budget.usage.tool_calls == 2


async def test_two_workers_cannot_both_take_the_last_tool_calls_of_the_budget() -> None:
    """Each worker's turn asks for two calls of a budget of three: the turn reserved
    first runs, the other runs none, whatever the order their calls would end in."""
    budget = Budget(Limits(tool_calls=3))
    turn = [call("lookup", {"key": "a"}), call("lookup", {"key": "b"})]

    def loop() -> AgentLoop:
        model = ScriptedModel([turn, "done"])
        return AgentLoop(
            model, Dispatcher(ToolRegistry([lookup])), services=Services(budget=budget)
        )

    async with anyio.create_task_group() as group:
        ended: list[Final | Failed] = []

        async def run(worker: AgentLoop) -> None:
            ended.append(await worker.run("t"))  # type: ignore[arg-type]

        group.start_soon(run, loop())
        group.start_soon(run, loop())
    assert sorted(type(e).__name__ for e in ended) == ["Failed", "Final"]
    assert budget.usage.tool_calls == 2


async def test_garbage_from_the_model_never_raises_out_of_the_loop() -> None:
    garbage = [
        call("lookup", "{not json"),
        call("lookup", '{"key": 5, "extra": 1}'),
        call("no_such_tool", {}),
        call("lookup", "[1, 2]"),
        call("lookup", ""),
    ]
    model = ScriptedModel([garbage, "recovered"])
    result = await make_loop(model).run("t")
    assert isinstance(result, Final)
    observations = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [o.status for o in observations] == ["error"] * 5
    assert "not valid JSON" in observations[0].content
    assert "unknown tool 'no_such_tool'" in observations[2].content
    assert "lookup" in observations[2].content  # lists the available tools


async def test_identical_repeat_of_the_previous_call_is_not_run() -> None:
    model = ScriptedModel([call("lookup", {"key": "a"}), call("lookup", {"key": "a"}), "done"])
    result = await make_loop(model).run("t")
    assert isinstance(result, Final)
    statuses = [m.status for m in result.state.transcript.messages if isinstance(m, ToolMessage)]
    assert statuses == ["ok", "skipped"]
    assert result.state.usage.tool_calls == 1


async def test_context_window_drops_old_turns_but_never_splits_a_call_from_its_result() -> None:
    script = [call("lookup", {"key": "k" * 400 + str(i)}) for i in range(6)]
    model = ScriptedModel([*script, "done"])
    await make_loop(model, window=ContextWindow(max_chars=2500)).run("t")
    last = model.requests[-1].messages
    assert "left out" in last[2].content
    shown = last[3:]
    assert isinstance(shown[0], AssistantMessage)
    for index, message in enumerate(shown):
        if isinstance(message, ToolMessage):
            opener = shown[index - 1]
            assert isinstance(opener, AssistantMessage)
            assert opener.tool_calls[0].id == message.tool_call_id
    assert len(last) < 2 + 12


async def test_every_model_call_is_an_event_with_worker_turn_and_usage() -> None:
    seen: list[object] = []
    model = ScriptedModel([call("lookup", {"key": "a"}), "done"])
    with structlog.testing.capture_logs() as logs:  # configured as the tracer is made
        loop = AgentLoop(
            model,
            Dispatcher(ToolRegistry([lookup])),
            worker="w7",
            services=Services(tracer=Tracer(seen.append)),
        )
        await loop.run("t")
    finished = [e for e in logs if e["event"] == "model_call.finished"]
    assert [e["turn"] for e in finished] == [1, 2]
    assert all(e["worker"] == "w7" and e["status"] == "ok" for e in finished)
    assert all(e["duration_s"] >= 0 and e["input_tokens"] > 0 for e in finished)
    kinds = [type(e).__name__ for e in seen]
    assert kinds == [
        "ModelCallStarted",
        "ModelCallFinished",
        "ToolCallsAnswered",  # the turn's call has its answer
        "ModelCallStarted",
        "ModelCallFinished",
    ]


async def test_failed_model_call_is_an_error_event() -> None:
    model = ScriptedModel([ModelHTTPError(401, "no key")])
    with structlog.testing.capture_logs() as logs:
        await make_loop(model).run("t")
    (event,) = [e for e in logs if e["event"] == "model_call.finished"]
    assert event["status"] == "error"
    assert "401" in event["error"]


async def test_function_model_sees_the_conversation_key() -> None:
    keys: list[str | None] = []

    def answer(request: ModelRequest) -> str:
        keys.append(request.conversation)
        return "ok"

    loop = AgentLoop(
        FunctionModel(answer),
        Dispatcher(ToolRegistry()),
        worker="w",
        services=Services(run_id="r1"),
    )
    await loop.run("t")
    assert keys == ["r1/w"]


@pytest.mark.parametrize("turns", [0, -1])
def test_max_turns_must_be_positive(turns: int) -> None:
    with pytest.raises(ValueError, match="max_turns"):
        LoopSettings(max_turns=turns)


async def test_a_state_saved_mid_turn_runs_its_pending_calls_first() -> None:
    saved: list[LoopState] = []
    sent: list[str] = []

    class Keep:
        def save(self, state: LoopState) -> None:
            saved.append(state)

        async def flush(self) -> None:
            pass

    @tool(side_effects=True)
    def send(to: str) -> str:
        """Send."""
        sent.append(to)
        return f"sent to {to}"

    def loop(model: ScriptedModel) -> AgentLoop:
        return AgentLoop(model, Dispatcher(ToolRegistry([send])), services=Services(store=Keep()))

    await loop(ScriptedModel([[call("send", {"to": "ana"})], "done"])).run("send it")
    mid = saved[0]  # after the model asked for send(ana), before it ran
    assert [c.name for c in mid.pending] == ["send"]
    assert sent == ["ana"]
    resumed_model = ScriptedModel(["done again"])
    resumed = await loop(resumed_model).run("send it", mid)
    assert isinstance(resumed, Final)
    assert resumed.output == "done again"
    [request] = resumed_model.requests  # the model was asked once: the pending call ran first
    assert [m.content for m in request.messages if isinstance(m, ToolMessage)] == ["sent to ana"]
    assert sent == ["ana", "ana"]  # no journal here: the dispatcher ran it again


async def test_a_wrap_up_reply_of_only_tool_calls_says_the_model_kept_calling_tools() -> None:
    from runtime import MaxTurnsExceeded

    model = ScriptedModel(
        [
            call("lookup", {"key": "a"}),
            [call("lookup", {"key": "b"}), call("submit", {"answer": "x"})],
        ]
    )
    result = await make_loop(model, max_turns=1).run("t")
    assert isinstance(result, Failed)
    error = result.error
    assert isinstance(error, MaxTurnsExceeded)
    assert not isinstance(error, EmptyResponse)
    assert (error.max_turns, error.tool_names) == (1, ("lookup", "submit"))
    assert str(error) == (
        "the model used all 1 turns (max_turns) and, told to give its final answer, asked "
        "for tools again (lookup, submit); raise the role's max_turns or ask it to answer "
        "sooner"
    )
    assert len(model.requests) == 2  # the wrap-up reply came once


async def test_an_empty_wrap_up_reply_is_empty_once_not_twice() -> None:
    model = ScriptedModel([call("lookup", {"key": "a"}), AssistantMessage()])
    result = await make_loop(model, max_turns=1).run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, EmptyResponse)
    assert "twice" not in str(result.error)
    assert "wrap-up" in str(result.error)


@pytest.mark.parametrize("raised", [ValueError("bad input"), KeyError("k"), RuntimeError("x")])
async def test_a_models_own_exception_fails_the_loop_as_a_model_error(
    raised: Exception,
) -> None:
    from runtime import ModelCallError, ModelError

    def broken(request: ModelRequest) -> str:
        raise raised

    with structlog.testing.capture_logs() as logs:
        result = await make_loop(FunctionModel(broken, name="fn")).run("t")
    assert isinstance(result, Failed)
    error = result.error
    assert isinstance(error, ModelCallError)
    assert isinstance(error, ModelError)
    assert error.__cause__ is raised
    assert error.error_type == type(raised).__name__
    assert error.model == "FunctionModel('fn')"  # the name it was given
    assert str(error).startswith(f"model FunctionModel('fn') raised {type(raised).__name__}: ")
    (event,) = [e for e in logs if e["event"] == "model_call.finished"]
    assert event["status"] == "error"
    assert type(raised).__name__ in event["error"]


async def test_cancellation_inside_a_model_still_propagates() -> None:
    started = anyio.Event()

    async def waits(request: ModelRequest) -> str:
        started.set()
        await anyio.sleep(10)
        return "never"

    loop = make_loop(FunctionModel(waits))
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.run, "t")
            await started.wait()
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught


async def test_each_kind_of_spending_is_counted_as_itself() -> None:
    """Tokens in, tokens out, reasoning tokens, cost and calls, each with its own figure:
    a count that lands in another's field cannot pass."""
    spent = Usage(input_tokens=7, output_tokens=3, reasoning_tokens=2, cost=0.5)
    answers = [AssistantMessage(tool_calls=(call("lookup", {"key": "a"}),)),
               AssistantMessage(content="done")]  # fmt: skip

    def answer(request: ModelRequest) -> ModelResponse:
        turn = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return ModelResponse(message=answers[turn], usage=spent)

    result = await make_loop(FunctionModel(answer)).run("t")
    assert isinstance(result, Final)
    assert result.state.usage == Usage(
        input_tokens=14, output_tokens=6, reasoning_tokens=4, cost=1.0, model_calls=2,
        tool_calls=1,
    )  # fmt: skip


def call_ids(messages: Any) -> list[str]:
    """Every tool call id, and every observation's, in order."""
    ids: list[str] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            ids += [c.id for c in m.tool_calls]
        elif isinstance(m, ToolMessage):
            ids.append(m.tool_call_id)
    return ids


async def test_a_tool_call_id_the_conversation_already_has_gets_a_new_one() -> None:
    # Some servers (Gemini and Ollama bridges) number the calls of every turn from 0.
    script = [
        [call("lookup", {"key": "a"}, id="call_0"), call("lookup", {"key": "b"}, id="call_1")],
        [call("lookup", {"key": "c"}, id="call_0"), call("lookup", {"key": "d"}, id="call_0")],
        "done",
    ]
    model = ScriptedModel(script)
    result = await make_loop(model).run("look up")
    assert isinstance(result, Final)
    calls = [c.id for m in result.state.messages if isinstance(m, AssistantMessage)
             for c in m.tool_calls]  # fmt: skip
    assert len(set(calls)) == 4  # one id, one call, in the whole conversation
    assert calls[:2] == ["call_0", "call_1"]  # new ids are kept as they are
    ids = call_ids(result.state.messages)
    assert ids == calls[:2] + calls[:2] + calls[2:] + calls[2:]  # each observation, its call
    assert call_ids(model.requests[-1].messages) == ids  # what the model is sent
    # The same answers get the same new ids: a resumed run answered again agrees.
    again = await make_loop(ScriptedModel(script)).run("look up")
    assert isinstance(again, Final)
    assert call_ids(again.state.messages) == ids


async def test_an_answer_is_kept_before_any_call_it_asks_for_runs() -> None:
    # Parallel-safe calls too: a process that dies while they run has the answer (and
    # what it cost) in the store, so its resumed loop runs them rather than ask again.
    seen: list[str] = []

    class Keep:
        def save(self, state: LoopState) -> None:
            seen.append(f"save {[c.name for c in state.pending]}")

        async def flush(self) -> None:
            seen.append("flush")

    @tool
    def look(key: str) -> str:
        """Look."""
        seen.append(f"look {key}")
        return key

    model = ScriptedModel([[call("look", {"key": "a"}), call("look", {"key": "b"})], "done"])
    loop = AgentLoop(model, Dispatcher(ToolRegistry([look])), services=Services(store=Keep()))
    assert isinstance(await loop.run("look"), Final)
    assert seen[:2] == ["save ['look', 'look']", "flush"]
    assert sorted(seen[2:4]) == ["look a", "look b"]
    assert seen[4:] == ["save []"]  # the observations, then the final answer: no calls
