"""Guards where they meet other features: a lead planning (once or in rounds) whose
own guards cannot judge, nested workers, structured output, budgets and failing
models; each checked from the outside, on what the run promises."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from honeycomb import (
    Approvals,
    AssistantMessage,
    BudgetExceeded,
    Budgets,
    Event,
    Executor,
    GuardCheck,
    GuardrailTripped,
    Guards,
    ModelRequest,
    ModelResponse,
    Policy,
    Role,
    RoleMemory,
    RunFailed,
    SQLiteMemory,
    tool,
)
from honeycomb.events import GuardChecked, ModelCallFinished
from honeycomb.planning import RolePlanner
from honeycomb.run.events import RunFinished
from honeycomb.testing import FunctionModel, call
from honeycomb.trace.spans import SpanRecorder
from runtime import ModelTimeout, Usage
from runtime.limits.budget import retried, timed_out
from runtime.models.pricing import Price, PricedModel
from workers.worker import CUT_OFF_NOTE


class Lead:
    """A lead on one function model whose judge (``judge``, checking the lead's plans)
    times out from round ``breaks_in`` on; the lead adds one subtask a round."""

    def __init__(self, breaks_in: int) -> None:
        self.breaks_in = breaks_in
        self.lead_calls = 0
        self.judge_calls = 0

    def answer(self, request: ModelRequest) -> str:
        system = request.messages[0].content or ""
        if "You are a guard" in system:
            self.judge_calls += 1
            if self.lead_calls >= self.breaks_in:
                raise ModelTimeout(5.0, model="judge-model")
            return "PASS"
        if request.output is not None and request.output.name == "Plan":
            self.lead_calls += 1
            sid = f"s{self.lead_calls}"
            return json.dumps({"subtasks": [{"id": sid, "role": "w", "instruction": "look"}]})
        return "found"

    def executor(self, rounds: int) -> Executor:
        return Executor(
            [
                Role(name="lead", guards=Guards(output=("judge",))),
                Role(name="w"),
                Role(name="judge"),
            ],
            FunctionModel(self.answer),
            planner=RolePlanner("lead", rounds=rounds),
            aggregator="concat",
        )


async def test_a_plan_whose_guard_cannot_judge_is_not_asked_for_again() -> None:
    # The judge's model timed out: no other plan would pass it, so the lead is not
    # asked again (plan_attempts times, each judged again) for an "invalid plan".
    lead = Lead(breaks_in=1)
    with pytest.raises(GuardrailTripped) as caught:
        await lead.executor(rounds=1).run("task")
    assert caught.value.broken
    assert caught.value.guard == "judge"
    assert "ModelTimeout" in caught.value.reason
    assert (lead.lead_calls, lead.judge_calls) == (1, 1)


async def test_a_round_whose_guard_cannot_judge_ends_the_rounds_as_the_lead_failing() -> None:
    lead = Lead(breaks_in=2)
    result = await lead.executor(rounds=3).run("task")
    assert result.status == "ok"
    assert result.rounds_ended == "lead_failed"
    assert [r.added for r in result.rounds] == [("s1",), ()]
    error = result.rounds[1].error or ""
    assert error.startswith("GuardrailTripped: output guard 'judge' tripped")
    assert "ModelTimeout" in error
    assert (lead.lead_calls, lead.judge_calls) == (2, 2)  # round 2 asked once


def _no_password(check: GuardCheck) -> str | None:
    return "it mentions a password" if "password" in check.text else None


async def test_a_final_answer_the_runs_guard_refused_is_not_kept_in_memory(
    tmp_path: Path,
) -> None:
    def answer(request: ModelRequest) -> str:
        system = request.messages[0].content or ""
        return "the password is hunter2" if "aggregator" in system.split("\n")[0] else "found"

    memory = SQLiteMemory(tmp_path / "memory.db")
    keeps = RoleMemory(namespace="answers", recall=0, store_result=True)
    roles = [Role(name="w"), Role(name="aggregator", memory=keeps)]
    executor = Executor(
        roles, FunctionModel(answer), memory=memory, guards=Guards(output=(_no_password,))
    )
    with pytest.raises(GuardrailTripped):
        await executor.run("task", subtasks=[("w", "look")])
    assert await memory.search("hunter2", namespace="answers") == ()

    passed = Executor(roles, FunctionModel(lambda request: "all well"), memory=memory)
    await passed.run("task", subtasks=[("w", "look")])  # an accepted answer is kept
    assert [h.record.text for h in await memory.search("well", namespace="answers")] == ["all well"]


async def test_an_answer_cut_off_that_the_run_keeps_after_its_guards_says_so(
    tmp_path: Path,
) -> None:
    # An answer the run keeps once its output guards passed the answer made of it
    # (concat) was kept as the model wrote it, cut off at its output limit, where a
    # worker keeps it as it is handed on, saying it was cut off.
    cut = ModelResponse(
        message=AssistantMessage(content="Lisbon has seven hills and"), finish_reason="length"
    )
    memory = SQLiteMemory(tmp_path / "memory.db")
    keeps = RoleMemory(namespace="trip", recall=0, store_result=True)
    executor = Executor(
        [Role(name="guide", memory=keeps)], FunctionModel(lambda request: cut), memory=memory,
        aggregator="concat", guards=Guards(output=(_no_password,)),
    )  # fmt: skip
    result = await executor.run("task", subtasks=[("guide", "Describe Lisbon.")])
    assert result.status == "ok"
    [kept] = [r for r in await memory.list("trip") if r.kind == "result"]
    assert kept.text == f"Lisbon has seven hills and {CUT_OFF_NOTE}"


async def test_a_wall_time_names_the_worker_each_judge_call_in_flight_was_checking() -> None:
    async def answer(request: ModelRequest) -> str:
        if "You are a guard" in (request.messages[0].content or ""):
            await anyio.sleep(30)  # the judge is slow: the wall time cuts it off
        return "found"

    executor = Executor(
        [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")],
        FunctionModel(answer),
        aggregator="concat",
        policy=Policy(budgets=Budgets(wall_time_s=0.3)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("task", subtasks=[("w", "a"), ("w", "b")])
    cut = sorted(str(c).split(" (")[0] for c in caught.value.in_flight)
    assert cut == ["judge reviewer of s1", "judge reviewer of s2"]


@pytest.mark.parametrize(
    ("verdict", "said"),
    [
        (AssistantMessage(content=""), "its answer was empty"),
        (
            ModelResponse(message=AssistantMessage(content=""), finish_reason="length"),
            "its answer was cut off at its output limit of 256 tokens (give the role "
            "'reviewer' a higher "
            "max_output_tokens)",
        ),
        (  # a reason cut off mid-way (SmolLM2's, at a limit of 8 tokens) is none
            ModelResponse(
                message=AssistantMessage(content="I'm glad you're pleased with your"),
                finish_reason="length",
            ),
            "its answer was cut off at its output limit of 256 tokens (give the role "
            "'reviewer' a higher max_output_tokens): \"I'm glad you're pleased with your\"",
        ),
    ],
)
async def test_a_judge_that_gives_no_verdict_trips_at_once_saying_why(
    verdict: AssistantMessage | ModelResponse, said: str
) -> None:
    # "No verdict" is nothing the worker could fix: its answer is not sent back.
    answers = 0

    def answer(request: ModelRequest) -> AssistantMessage | ModelResponse | str:
        nonlocal answers
        if "You are a guard" in (request.messages[0].content or ""):
            return verdict
        answers += 1
        return "found"

    executor = Executor(
        [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")],
        FunctionModel(answer),
        aggregator="concat",
    )
    with pytest.raises(RunFailed) as caught:
        await executor.run("task", subtasks=[("w", "a")])
    failed = caught.value.partial.subtasks["s1"].worker
    assert isinstance(failed.exception, GuardrailTripped)
    assert failed.exception.broken
    assert failed.exception.reason == (
        f"the guard raised ModelResponseError: the judge 'reviewer' gave no verdict: {said}"
    )
    assert answers == 1


@pytest.mark.parametrize("whose", ["a role's", "the run's"])
async def test_a_judge_whose_model_fails_names_its_role_beside_the_models_error(
    whose: str,
) -> None:
    # The model's error said which model, and to raise "the role's model_timeout", but
    # not which role: the worker's, or its judge's.
    def answer(request: ModelRequest) -> str:
        if "You are a guard" in (request.messages[0].content or ""):
            raise ModelTimeout(0.3, model="judge-model")
        return "found"

    guards = Guards(output=("reviewer",))
    executor = Executor(
        [Role(name="w", guards=guards if whose == "a role's" else None), Role(name="reviewer")],
        FunctionModel(answer),
        aggregator="concat",
        guards=guards if whose == "the run's" else None,
    )
    with pytest.raises((RunFailed, GuardrailTripped)) as caught:
        await executor.run("task", subtasks=[("w", "a")])
    tripped = caught.value
    if isinstance(tripped, RunFailed):
        tripped = caught.value.partial.subtasks["s1"].worker.exception
    assert isinstance(tripped, GuardrailTripped)
    assert tripped.broken
    assert tripped.reason.startswith("the guard raised ModelTimeout: ")
    assert "model 'judge-model'" in tripped.reason
    assert tripped.reason.endswith("; the judge role 'reviewer' gave no verdict")


async def test_a_judge_cut_off_at_the_limit_the_cost_cap_left_says_so() -> None:
    limits: list[int | None] = []

    def answer(request: ModelRequest) -> ModelResponse | str:
        if "You are a guard" not in (request.messages[0].content or ""):
            return "found"
        limits.append(request.max_output_tokens)  # as the cap left it
        return ModelResponse(message=AssistantMessage(content=""), finish_reason="length")

    price = Price(input_per_mtok=1000.0, output_per_mtok=1000.0)  # $0.001 a token
    executor = Executor(
        [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")],
        PricedModel(FunctionModel(answer), price),
        aggregator="concat",
        policy=Policy(budgets=Budgets(cost_per_call=0.3)),  # leaves under 256 to answer
    )
    with pytest.raises(RunFailed) as caught:
        await executor.run("task", subtasks=[("w", "a")])
    [limit] = limits
    assert limit is not None
    assert limit < 256
    failed = caught.value.partial.subtasks["s1"].worker
    assert isinstance(failed.exception, GuardrailTripped)
    assert failed.exception.reason == (
        "the guard raised ModelResponseError: the judge 'reviewer' gave no verdict: its "
        f"answer was cut off at its output limit of {limit} tokens, the limit "
        "budgets.cost_per_call left the call at its model's price (raise the cap)"
    )


class TellingModel(FunctionModel):
    """A function model that tells its calls of their attempts, as an endpoint does."""

    tells_attempts = True


def _judge_empty(request: ModelRequest) -> ModelResponse:
    usage = Usage(input_tokens=100, output_tokens=7)  # spent, though no verdict came of it
    return ModelResponse(message=AssistantMessage(content=""), usage=usage)


def _judge_timing_out(request: ModelRequest) -> ModelResponse:
    timed_out()  # two attempts its timeout cut off, as an endpoint adapter tells them
    timed_out()
    raise ModelTimeout(1.0)


@pytest.mark.parametrize("kind", ["input", "output"])
@pytest.mark.parametrize("judge", [_judge_empty, _judge_timing_out])
async def test_a_judge_that_gives_no_verdict_reports_what_its_call_spent_as_the_run_counts_it(
    kind: str, judge: Callable[[ModelRequest], ModelResponse]
) -> None:
    def answer(request: ModelRequest) -> ModelResponse:
        if "You are a guard" in (request.messages[0].content or ""):
            return judge(request)
        usage = Usage(input_tokens=10, output_tokens=1)
        return ModelResponse(message=AssistantMessage(content="found"), usage=usage)

    events: list[Event] = []
    executor = Executor(
        [Role(name="w", guards=Guards(**{kind: ("reviewer",)})), Role(name="reviewer")],
        TellingModel(answer),
        aggregator="concat",
        on_event=[events.append],
    )
    with pytest.raises(RunFailed) as caught:
        await executor.run("task", subtasks=[("w", "a")])
    usage = caught.value.partial.usage
    [checked] = [e for e in events if isinstance(e, GuardChecked)]
    assert checked.status == "error"
    answers = [e for e in events if isinstance(e, ModelCallFinished)]
    assert checked.input_tokens > 0
    assert checked.input_tokens + sum(e.input_tokens for e in answers) == usage.input_tokens
    assert checked.output_tokens + sum(e.output_tokens for e in answers) == usage.output_tokens


def _checked_against(events: list[Event], run: RunFinished) -> GuardChecked:
    """The one guard check of a run, its tokens and calls with its answers' adding up to
    what the run spent."""
    [checked] = [e for e in events if isinstance(e, GuardChecked)]
    answers = [e for e in events if isinstance(e, ModelCallFinished)]
    usage = run.usage
    assert usage is not None
    assert checked.input_tokens + sum(e.input_tokens for e in answers) == usage.input_tokens
    assert checked.output_tokens + sum(e.output_tokens for e in answers) == usage.output_tokens
    assert checked.model_calls + len(answers) == usage.model_calls
    return checked


async def test_a_judge_cut_off_by_the_wall_time_reports_a_cancelled_check_and_its_spend() -> None:
    # The check had no event at all: no span, and neither its call nor the prompt of
    # its attempt that timed out, which the run's usage counts, was reported.
    async def answer(request: ModelRequest) -> ModelResponse:
        if "You are a guard" in (request.messages[0].content or ""):
            timed_out()  # an attempt its timeout cut off, then the wall time cuts it
            await anyio.sleep(30)
        usage = Usage(input_tokens=10, output_tokens=1)
        return ModelResponse(message=AssistantMessage(content="found"), usage=usage)

    events: list[Event] = []
    recorder = SpanRecorder()
    executor = Executor(
        [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")],
        TellingModel(answer),
        aggregator="concat",
        policy=Policy(budgets=Budgets(wall_time_s=0.3)),
        on_event=[events.append, recorder],
    )
    with pytest.raises(BudgetExceeded):
        await executor.run("task", subtasks=[("w", "a")])
    [run] = [e for e in events if isinstance(e, RunFinished)]
    checked = _checked_against(events, run)
    assert (checked.status, checked.model_calls, checked.reason) == ("cancelled", 1, None)
    assert checked.input_tokens > 0
    [guard] = [s for s in recorder.spans if s.kind == "guard"]
    [judged] = [s for s in recorder.spans if s.parent_id == guard.span_id]
    assert (guard.status, judged.kind, judged.status) == ("cancelled", "model_call", "cancelled")


async def test_a_judges_retry_the_budget_refused_reports_the_call_it_made() -> None:
    # Its first attempt timed out (its prompt counted), and the budget then refused
    # the retry: the check said no model call and no tokens.
    def answer(request: ModelRequest) -> ModelResponse | str:
        if "You are a guard" in (request.messages[0].content or ""):
            timed_out()
            retried()  # as a retry policy says it sends another attempt
            return "PASS"
        usage = Usage(input_tokens=10, output_tokens=1)
        return ModelResponse(message=AssistantMessage(content="found"), usage=usage)

    events: list[Event] = []
    executor = Executor(
        [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")],
        TellingModel(answer),
        aggregator="concat",
        policy=Policy(budgets=Budgets(total_tokens=40)),
        on_event=[events.append],
    )
    with pytest.raises(BudgetExceeded):
        await executor.run("task", subtasks=[("w", "a")])
    [run] = [e for e in events if isinstance(e, RunFinished)]
    checked = _checked_against(events, run)
    assert (checked.status, checked.model_calls, checked.reason) == ("error", 1, "budget exceeded")
    assert checked.input_tokens > 0


def _names_the_vault(check: GuardCheck) -> str | None:
    return "it names the vault" if "vault" in check.text else None


@pytest.mark.parametrize("aggregator", ["concat", "role"])
async def test_an_answer_of_the_workers_answers_refused_leaves_them_out_of_the_partial(
    aggregator: str, tmp_path: Path
) -> None:
    """With concat, the run's refused answer is its workers' answers: its partial
    result, the run.finished event and the stored result held them whole (``honeycomb
    run --json`` printed them). An aggregator role writes the answer anew: its workers'
    answers were not refused, and are kept."""

    def answer(request: ModelRequest) -> str:
        system = request.messages[0].content or ""
        return "The vault opens at nine." if "You merge" not in system else "Merged: the vault."

    roles = [Role(name="clerk"), Role(name="merger", instructions="You merge.")]
    executor = Executor(
        roles,
        FunctionModel(answer),
        aggregator="concat" if aggregator == "concat" else "merger",
        guards=Guards(output=(_names_the_vault,)),
        store=tmp_path / "runs.db",
    )
    events: list[object] = []
    with pytest.raises(GuardrailTripped) as tripped:
        await executor.run("t", subtasks=[("clerk", "a"), ("clerk", "b")], on_event=[events.append])
    partial = tripped.value.partial
    assert partial is not None
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    assert finished.result is not None
    for result in (partial, finished.result):
        kept = result.model_dump_json()
        assert ("opens at nine" in kept) == (aggregator == "role")
        assert [s.status for s in result.subtasks.values()] == ["ok", "ok"]
        assert all(s.worker and s.worker.usage.model_calls == 1 for s in result.subtasks.values())


async def test_answers_a_budget_stopped_before_the_runs_guards_checked_them_are_withheld() -> None:
    """A run whose answer is made of its workers' answers, stopped by its budget before
    its output guards could check them: its partial result held the answers they never
    passed, as its stream and its page do not."""
    executor = Executor(
        [Role(name="clerk")],
        FunctionModel(lambda request: "The vault opens at nine."),
        aggregator="concat",
        guards=Guards(output=(_names_the_vault,)),
        policy=Policy(max_workers=1, budgets=Budgets(model_calls=2)),
    )
    plan = [("clerk", "a"), ("clerk", "b"), ("clerk", "c")]
    with pytest.raises(BudgetExceeded) as stopped:
        await executor.run("t", subtasks=plan)
    partial = stopped.value.partial
    assert partial is not None
    assert [s.status for s in partial.subtasks.values()] == ["ok", "ok", "over_budget"]
    assert "opens at nine" not in partial.model_dump_json()
    assert all(s.worker is None or s.worker.text == "" for s in partial.subtasks.values())


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


def _pays_or_tells(request: ModelRequest) -> AssistantMessage | str:
    """The payer asks to pay (and says so once paid); the clerk tells of the vault."""
    if "payer" not in (request.messages[0].content or ""):
        return "The vault opens at nine."
    if not any(m.role == "tool" for m in request.messages):
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))
    return "Paid bob."


async def test_answers_of_a_run_that_waits_before_its_guards_checked_them_are_withheld(
    db: Path,
) -> None:
    """A run whose answer is made of its workers' answers ends waiting for a decision:
    the result it returns and its ``run.finished`` held the clerk's answer, which its
    output guards had not checked. They hold it back; the run resumed has it still."""
    checked: list[str] = []

    def passes(check: GuardCheck) -> None:
        checked.append(check.text)

    payer = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    executor = Executor(
        [payer, Role(name="clerk")],
        FunctionModel(_pays_or_tells),
        tools=[pay],
        store=db,
        aggregator="concat",
        guards=Guards(output=(passes,)),
    )
    events: list[Event] = []
    plan = [("payer", "pay bob"), ("clerk", "when does the vault open?")]
    waiting = await executor.run("t", subtasks=plan, run_id="r1", on_event=[events.append])
    assert waiting.status == "waiting"
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    for shown in (waiting, finished.result):
        assert shown is not None
        assert "opens at nine" not in shown.model_dump_json()
        assert shown.subtasks["s2"].status == "ok"
    assert checked == []
    (asked,) = waiting.pending
    await executor.decide("r1", asked.call_id, approve=True)
    done = await executor.resume("r1")
    assert done.status == "ok"
    assert "The vault opens at nine." in done.answer_text
    assert len(checked) == 1
