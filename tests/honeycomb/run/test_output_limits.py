"""No runaway generation: every model call of a run carries an output limit (the
planner's sized from the plan it may write, a judge's from a verdict, a summary's from
the compaction budget, every other from its role or the policy), on the model and on
the wire; an answer cut off at its limit is handled as any invalid answer."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from honeycomb import (
    AssistantMessage,
    BudgetExceeded,
    Budgets,
    Compaction,
    Executor,
    Guards,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    Plan,
    Policy,
    RetryPolicy,
    Role,
    RunFailed,
    ToolCall,
    ToolMessage,
    Usage,
)
from honeycomb.cli.view import summary
from honeycomb.events import ModelCallFinished, PlanReady
from honeycomb.models import TextToolModel
from honeycomb.run.plan import plan_output_tokens
from honeycomb.testing import FunctionModel
from runtime import Event, ModelCallStarted, OutputCutOff, PlanError, TextDelta
from tests.honeycomb.run.test_compaction_run import read_page
from tests.support.openai_server import OpenAIServer, Reply
from workers.compaction import is_summary_request
from workers.guards import VERDICT_TOKENS
from workers.worker import CUT_OFF_NOTE


def every_kind(request: ModelRequest) -> str | AssistantMessage:
    """Answers each kind of call a run makes: the plan, a summary, a verdict, a reader's
    turn (a page, until three are read), the aggregator's answer."""
    system = request.messages[0].content or ""
    if request.output is not None and request.output.name == "Plan":
        return json.dumps({"subtasks": [{"id": "s1", "role": "reader", "instruction": "read"}]})
    if is_summary_request(request):
        return "facts so far"
    if "You are a guard" in system:
        return "PASS"
    if "reader worker" in system:
        read = sum(1 for m in request.messages if isinstance(m, ToolMessage))
        if read >= 3 or request.tool_choice == "none":  # the wrap-up
            return f"read {read} pages"
        call = ToolCall(id=f"c{read}", name="read_page", arguments=json.dumps({"page": read}))
        return AssistantMessage(tool_calls=(call,))
    return "final answer"


ROLES = [
    Role(name="planner"),
    Role(
        name="reader",
        tools=("read_page",),
        max_turns=2,  # then the wrap-up call
        compaction=Compaction(budget_tokens=900, keep_turns=1),
        guards=Guards(input=("checker",), output=("checker",), arguments=("checker",)),
    ),
    Role(name="checker"),
    Role(name="aggregator", max_output_tokens=77),
]


def kind_of(request: ModelRequest) -> str:
    system = request.messages[0].content or ""
    if request.output is not None and request.output.name == "Plan":
        return "plan"
    if is_summary_request(request):
        return "summary"
    if "You are a guard" in system:
        return "judge"
    return "reader" if "reader worker" in system else "aggregator"


async def test_every_call_of_a_planned_run_carries_an_output_limit() -> None:
    model = FunctionModel(every_kind)
    executor = Executor(
        ROLES, model, tools=[read_page], guards=Guards(output=("checker",)),
        policy=Policy(max_output_tokens=1234),
    )  # fmt: skip
    result = await executor.run("read the log")
    assert result.status == "ok", result.failures
    limits: dict[str, set[int | None]] = {}
    for request in model.requests:
        limits.setdefault(kind_of(request), set()).add(request.max_output_tokens)
    assert set(limits) == {"plan", "summary", "judge", "reader", "aggregator"}
    assert limits["plan"] == {plan_output_tokens(20)}  # the policy's max_subtasks
    assert limits["judge"] == {VERDICT_TOKENS}
    assert limits["reader"] == {1234}  # the run-wide default, the wrap-up call's too
    assert limits["aggregator"] == {77}  # the role's own wins
    (summary,) = limits["summary"]
    assert summary is not None
    assert summary <= 900 // 2  # sized from the compaction budget


def test_a_plans_limit_is_what_the_longest_plan_its_schema_allows_can_take() -> None:
    few, many = plan_output_tokens(3), plan_output_tokens(20)
    assert 1000 < few < many
    assert plan_output_tokens(2, earlier=5) > plan_output_tokens(2)  # more to depend on
    assert many < 20 * 1000  # an instruction is at most 1,000 characters


async def test_every_request_body_on_the_wire_carries_the_limit() -> None:
    def answer(request: Any) -> Reply:
        asked = request.body
        system = asked["messages"][0]["content"]
        if asked.get("response_format", {}).get("json_schema", {}).get("name") == "Plan":
            plan = {"subtasks": [{"id": "s1", "role": "reader", "instruction": "read"}]}
            return Reply(content=json.dumps(plan))
        if "You are a guard" in system:
            return Reply(content="PASS")
        return Reply(content="done")

    roles = [Role(name="planner"), Role(name="reader", guards=Guards(output=("checker",))),
             Role(name="checker"), Role(name="aggregator")]  # fmt: skip
    with OpenAIServer(answer) as server:
        model = OpenAIModel("m", base_url=server.base_url, retry=RetryPolicy(attempts=1))
        result = await Executor(roles, model).run("t")
        await model.client.close()
        bodies = [r.body for r in server.requests]
    assert result.status == "ok"
    assert len(bodies) == 4  # the plan, the reader, its judge, the aggregator
    assert all(isinstance(b.get("max_tokens"), int) for b in bodies), bodies


def cut(text: str) -> ModelResponse:
    return ModelResponse(message=AssistantMessage(content=text), finish_reason="length")


async def test_a_plan_cut_off_at_its_limit_goes_back_saying_so() -> None:
    whole = json.dumps({"subtasks": [{"id": "s1", "role": "reader", "instruction": "read"}]})
    answers = iter([cut(whole[:30]), whole])

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request.output is not None and request.output.name == "Plan":
            return next(answers)
        return "done"

    model = FunctionModel(answer)
    result = await Executor([Role(name="planner"), Role(name="reader")], model).run("t")
    assert result.status == "ok"
    again = [r for r in model.requests if r.output is not None][1].messages
    asked_again = again[-1].content
    assert "cut off at the output limit of" in asked_again
    assert "Answer again, shorter" in asked_again
    assert again[-2].content == whole[:30]  # what it wrote, for it to shorten


class _Local(FunctionModel):
    """A function model that holds 400 tokens a call, its prompt and its answer
    together, as a local model says its context."""

    context_tokens = 400


async def test_a_plan_cut_off_where_its_context_was_full_is_not_sent_back() -> None:
    """Cut where a local model's context was full (SmolLM2 at a context of 512 or
    1024), the unfinished JSON went back with the retry, which took the request past the
    context: the server refused it with a 400, not a second try."""
    whole = json.dumps({"subtasks": [{"id": "s1", "role": "reader", "instruction": "read"}]})
    answers = iter([whole[:30], whole])

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request.output is None:
            return "done"
        text = next(answers)
        if text == whole:
            return text
        filled = Usage(input_tokens=380, output_tokens=20)  # the context's 400 tokens
        message = AssistantMessage(content=text)
        return ModelResponse(message=message, finish_reason="length", usage=filled)

    model = _Local(answer)
    result = await Executor([Role(name="planner"), Role(name="reader")], model).run("t")
    assert result.status == "ok"
    again = [r for r in model.requests if r.output is not None][1].messages
    assert "Answer again, shorter" in (again[-1].content or "")
    assert not any(whole[:30] in (m.content or "") for m in again)


async def test_an_aggregators_answer_cut_off_says_so() -> None:
    """The run's answer, the one a person reads first, said nothing of it."""

    def answer(request: ModelRequest) -> ModelResponse | str:
        merging = "aggregator" in (request.messages[0].content or "")
        return cut("the answer as far as it g") if merging else "a whole answer"

    roles = [Role(name="reader"), Role(name="aggregator")]
    result = await Executor(roles, FunctionModel(answer)).run("t", subtasks=[("reader", "r")])
    assert (result.answer_text, result.answer_cut_off) == ("the answer as far as it g", True)
    assert result.subtasks["s1"].worker is not None
    assert not result.subtasks["s1"].worker.cut_off
    assert "cut off        the answer: answers that end at the output limit" in "\n".join(
        summary(result)
    )
    whole = await Executor(roles, FunctionModel(lambda r: "whole")).run(
        "t", subtasks=[("reader", "r")]
    )
    assert not whole.answer_cut_off


async def test_a_plan_cut_below_the_requests_limit_names_the_limit_that_applied() -> None:
    """A model's own max_tokens (its settings, its server's) cut the plan after 256
    tokens: the error named the request's limit, thousands of tokens, which raising
    would not help."""
    whole = json.dumps({"subtasks": [{"id": "s1", "role": "reader", "instruction": "read"}]})
    short = Usage(output_tokens=256)

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request.output is not None and request.output.name == "Plan":
            message = AssistantMessage(content=whole[:30])
            return ModelResponse(message=message, finish_reason="length", usage=short)
        return "done"

    model = FunctionModel(answer)
    with pytest.raises(PlanError) as failed:
        await Executor([Role(name="planner"), Role(name="reader")], model).run("t")
    said = str(failed.value)
    assert "cut off after 256 tokens" in said
    assert "a limit of the model's own applied (a max_tokens in its settings" in said
    asked_again = [r for r in model.requests if r.output is not None][1].messages[-1].content
    assert "cut off at the output limit of 256 tokens" in asked_again


async def test_a_plan_cut_where_its_context_was_full_names_the_context() -> None:
    """SmolLM2 at --context 512: its plan stopped where its prompt and the answer
    filled the context, at every attempt; the error said a max_tokens of the model's
    own applied, which there was none of, not the context to raise."""
    whole = json.dumps({"subtasks": [{"id": "s1", "role": "reader", "instruction": "read"}]})
    filled = Usage(input_tokens=380, output_tokens=20)  # the context's 400 tokens

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request.output is not None and request.output.name == "Plan":
            message = AssistantMessage(content=whole[:30])
            return ModelResponse(message=message, finish_reason="length", usage=filled)
        return "done"

    with pytest.raises(PlanError) as failed:
        await Executor([Role(name="planner"), Role(name="reader")], _Local(answer)).run("t")
    said = str(failed.value)
    assert "cut off after 20 tokens" in said
    assert "its prompt of 380 tokens and the answer filled its model's context" in said
    assert "the 400 tokens one call holds (give the model a larger context" in said
    assert "max_tokens" not in said


async def test_an_answer_cut_to_nothing_where_its_context_was_full_names_the_context() -> None:
    """A local reasoning model thought until its prompt and its thinking filled the
    context: the error said to raise the max_tokens of its settings, which it had none
    of, not the context."""
    thought = ModelResponse(
        message=AssistantMessage(content=None, reasoning="hmm " * 20),
        finish_reason="length",
        usage=Usage(input_tokens=390, output_tokens=10),  # the context's 400 tokens
    )
    with pytest.raises(RunFailed) as caught:
        await Executor([Role(name="reader")], _Local(lambda request: thought)).run(
            "t", subtasks=[("reader", "think hard")]
        )
    assert caught.value.partial is not None
    (failed,) = caught.value.partial.failures
    assert failed.error is not None
    assert failed.error.type == "OutputCutOff"
    assert "the end of its model's context (400 tokens" in failed.error.message
    assert "give the model a larger context" in failed.error.message


async def test_an_answer_with_nothing_but_its_limit_fails_saying_which_limit() -> None:
    model = FunctionModel(lambda request: cut(""))
    roles = [Role(name="reader", max_output_tokens=50)]
    with pytest.raises(RunFailed) as caught:
        await Executor(roles, model).run("t", subtasks=[("reader", "think hard")])
    assert caught.value.partial is not None
    (failed,) = caught.value.partial.failures
    assert failed.error is not None
    assert failed.error.type == "OutputCutOff"
    assert "output limit of 50 tokens" in failed.error.message
    assert len(model.requests) == 1  # the same limit would cut it again: not asked twice


async def test_an_answer_a_limit_of_the_models_own_cut_to_nothing_names_that_limit() -> None:
    """A reasoning model whose max_tokens (in its settings) went on thinking alone: the
    error named the request's limit (4096 tokens) and said to raise the role's, which
    would change nothing."""
    thought = ModelResponse(
        message=AssistantMessage(content=""), finish_reason="length", usage=Usage(output_tokens=12)
    )
    model = FunctionModel(lambda request: thought)
    with pytest.raises(RunFailed) as caught:
        await Executor([Role(name="reader")], model).run("t", subtasks=[("reader", "think")])
    assert caught.value.partial is not None
    (failed,) = caught.value.partial.failures
    assert failed.error is not None
    assert "output limit of 12 tokens" in failed.error.message
    assert "raise the max_tokens in its settings" in failed.error.message
    assert "max_output_tokens" not in failed.error.message


async def test_text_cut_off_is_the_answer_as_far_as_it_goes_and_says_so() -> None:
    """It was accepted silently: nothing in the result, the events or the command's
    summary told a cut answer from a whole one."""
    text = "a partial answer that ran on and o"

    def answer(request: ModelRequest) -> ModelResponse | str:
        return cut(text) if "cut" in (request.messages[-1].content or "") else "whole"

    finished: list[ModelCallFinished] = []
    executor = Executor(
        [Role(name="reader")],
        FunctionModel(answer),
        aggregator="concat",
        on_event=[lambda e: finished.append(e) if isinstance(e, ModelCallFinished) else None],
    )
    result = await executor.run("t", subtasks=[("reader", "be cut"), ("reader", "write")])
    assert result.status == "ok"
    cut_one, whole = result.subtasks["s1"], result.subtasks["s2"]
    assert cut_one.text == text
    assert cut_one.worker is not None
    assert cut_one.worker.cut_off
    assert whole.worker is not None
    assert not whole.worker.cut_off
    assert sorted(e.finish_reason for e in finished) == ["length", "stop"]
    assert "cut off        s1: answers that end at the output limit" in "\n".join(summary(result))


def test_output_cut_off_is_an_agent_error() -> None:
    from runtime import AgentError

    assert issubclass(OutputCutOff, AgentError)


class Runaway:
    """A planner that loops inside its answer: it streams a piece every 10 ms and
    never ends (a small model inside a grammar, with no output limit to stop it)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await anyio.sleep(3600)
        raise AssertionError("unreachable")

    async def stream(self, request: ModelRequest, on_text: Any) -> ModelResponse:
        while True:
            on_text('{"subtasks": [')
            await anyio.sleep(0.01)


async def test_a_run_stopped_by_its_wall_time_says_which_calls_were_in_flight() -> None:
    executor = Executor(
        [Role(name="planner"), Role(name="reader")], Runaway(),
        policy=Policy(budgets=Budgets(wall_time_s=0.5)),
    )  # fmt: skip
    events: list[Event] = []
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", on_event=[events.append], text_deltas=True)
    error = caught.value
    (call,) = error.in_flight
    assert (call.who, call.kind, call.turn) == ("planner", "turn", 1)
    assert 0.3 < call.seconds <= 0.5 + 0.5  # from its start to the deadline
    assert call.streamed is not None
    assert call.streamed >= 5  # what it had written when it was cut off
    assert "cut off in flight: planner turn 1 (" in str(error)
    assert f"~{call.streamed} tokens streamed" in str(error)
    partial = error.partial
    assert partial is not None
    assert partial.timings.plan_s > 0.3  # the time went to planning: it says so
    assert partial.timings.plan_s <= partial.timings.wall_s


async def test_the_live_view_shows_the_planners_progress_while_it_plans() -> None:
    from honeycomb.cli.view import _RunState, planning_progress

    state = _RunState()
    assert planning_progress(state) == ""
    state.apply(ModelCallStarted(worker="planner", run_id="r", turn=1))
    assert planning_progress(state) == "planner turn 1"
    for _ in range(3):
        state.apply(TextDelta(worker="planner", run_id="r", turn=1, text="{"))
    assert planning_progress(state) == "planner turn 1 · ~3 tokens so far"
    state.apply(ModelCallStarted(worker="planner", run_id="r", turn=2))
    assert planning_progress(state) == "planner turn 2"
    state.apply(PlanReady(run_id="r", plan=Plan.of([("reader", "read")]), duration_s=1.0))
    assert planning_progress(state) == ""


async def test_an_answer_cut_off_is_handed_on_saying_it_is_incomplete() -> None:
    """A worker's answer cut off at its output limit went on to other models as if it
    were whole: its nested caller's observation, a dependent subtask's input and the
    aggregator's results took the part for the whole. Each now reads that it is
    incomplete; the worker's own text stays as the model wrote it."""

    def answer(request: ModelRequest) -> ModelResponse | str | AssistantMessage:
        system = request.messages[0].content or ""
        if "aggregator" in system:
            return "merged"
        if "lead worker" in system:
            if not any(isinstance(m, ToolMessage) for m in request.messages):
                call = ToolCall(id="c1", name="reader", arguments='{"instruction": "read"}')
                return AssistantMessage(tool_calls=(call,))
            return "lead done"
        if "writer worker" in system:
            return "written"
        return cut("the first half of the")  # the reader's, nested or a subtask's

    roles = [Role(name="lead", tools=("agent:reader",)), Role(name="reader"),
             Role(name="writer"), Role(name="aggregator")]  # fmt: skip
    model = FunctionModel(answer)
    plan = [
        {"id": "s1", "role": "lead", "instruction": "lead"},
        {"id": "s2", "role": "reader", "instruction": "read"},
        {"id": "s3", "role": "writer", "instruction": "write", "depends_on": ["s2"]},
    ]
    result = await Executor(roles, model).run("t", subtasks=plan)
    assert result.status == "ok"
    assert result.subtasks["s2"].text == "the first half of the"  # as the model wrote it
    handed_on = f"the first half of the {CUT_OFF_NOTE}"
    said = [str(m.content) for r in model.requests for m in r.messages]
    assert any(s == handed_on for s in said)  # the lead's observation of its nested reader
    assert any(handed_on in s and "write" in s for s in said)  # the writer's input
    merging = next(r for r in model.requests if "aggregator" in (r.messages[0].content or ""))
    assert f"### s2 (reader)\n{handed_on}" in str(merging.messages[-1].content)


async def test_a_hive_tools_answer_cut_off_is_handed_on_saying_it_is_incomplete() -> None:
    """A hive called as a tool whose aggregator's answer was cut off: its caller's
    model read the part as the hive's whole answer."""

    def merging(request: ModelRequest) -> ModelResponse | str:
        return cut("the merged half") if "aggregator" in str(request.messages[0].content) else "ok"

    hive = Executor(
        [Role(name="reader"), Role(name="aggregator")], FunctionModel(merging),
        planner=lambda task: [("reader", task)],
    )  # fmt: skip

    def lead(request: ModelRequest) -> str | AssistantMessage:
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        if seen:
            return str(seen[0].content)
        call = ToolCall(id="c1", name="facts", arguments='{"instruction": "find"}')
        return AssistantMessage(tool_calls=(call,))

    caller = Executor(
        [Role(name="lead", tools=("facts",))], FunctionModel(lead),
        tools=[hive.as_tool("facts")], aggregator="concat",
    )  # fmt: skip
    result = await caller.run("t", subtasks=[("lead", "go")])
    assert result.subtasks["s1"].text == f"the merged half {CUT_OFF_NOTE}"


def save_note(text: str) -> str:
    """Save a note."""
    return f"saved {len(text)} characters"


@pytest.mark.parametrize("protocol", ["native", "text"])
async def test_a_call_whose_arguments_the_output_limit_cut_short_is_told_so(
    protocol: str,
) -> None:
    """A call cut off at the output limit in the middle of its arguments was told only
    that they are not valid JSON, so the model wrote them again as long as before; the
    text protocol also reported such an answer as ``tool_calls``, not ``length``. The
    call's observation now names the limit and how to stay under it (over real HTTP,
    through the endpoint's tool calls and through the text protocol's actions)."""
    cut_arguments = '{"text": "a very long note that goes on and on and'
    if protocol == "native":
        first = Reply(
            tool_calls=(("c1", "save_note", cut_arguments),),
            finish_reason="length",
            completion_tokens=64,
        )
    else:
        action = '```json\n{"tool": "save_note", "arguments": ' + cut_arguments
        first = Reply(content=action, finish_reason="length", completion_tokens=64)
    replies = iter([first, Reply(content="saved it")])
    finished: list[ModelCallFinished] = []
    with OpenAIServer(lambda request: next(replies)) as server:
        model = OpenAIModel("m", base_url=server.base_url, retry=RetryPolicy(attempts=1))
        executor = Executor(
            [Role(name="writer", tools=("save_note",), max_output_tokens=64)],
            TextToolModel(model) if protocol == "text" else model,
            tools=[save_note],
            aggregator="concat",
            on_event=[lambda e: finished.append(e) if isinstance(e, ModelCallFinished) else None],
        )
        result = await executor.run("t", subtasks=[("writer", "write a long note")])
        await model.client.close()
        second = server.requests[1].body["messages"]
    assert result.status == "ok"
    assert [e.finish_reason for e in finished] == ["length", "stop"]
    told = json.dumps(second)
    assert "not valid JSON" in told
    assert "cut off at its output limit (64 tokens) while writing them" in told
    assert "shorter arguments, or do the work in smaller calls" in told


async def test_an_answer_cut_off_each_time_fails_naming_the_limit_to_raise() -> None:
    """A structured answer cut off at its limit at every attempt failed saying it was
    cut off, and not what to change."""
    model = FunctionModel(lambda request: cut('{"subtasks": [{"id": "s1", "ro'))
    with pytest.raises(PlanError) as failed:
        await Executor([Role(name="planner"), Role(name="reader")], model).run("t")
    assert "cut off at the output limit of" in str(failed.value)
    assert "max_output_tokens" in str(failed.value)
