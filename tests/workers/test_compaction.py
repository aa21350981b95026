"""Rolling-summary compaction in the agent loop: where the summary goes, which turns
are folded (never a call without its observation), the window as the last resort, a
summary call that fails or is over budget, what it costs, and the prefix that stays
the same between two turns."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import anyio
import pytest

from honeycomb.cli.lines import describe
from runtime import (
    AssistantMessage,
    Budget,
    BudgetExceeded,
    CompactionFinished,
    CompactionStarted,
    ConfigError,
    Dispatcher,
    Event,
    Limits,
    Model,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelTimeout,
    Price,
    PricedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolRegistry,
    Tracer,
    Usage,
    UserMessage,
    dump_messages,
    tool,
)
from runtime.events import ModelCallFinished
from runtime.limits.budget import retried, timed_out
from runtime.models.layers.cost_cap import prompt_tokens
from runtime.testing import FunctionModel, estimate_usage
from workers import AgentLoop, Failed, Final, LoopSettings, LoopState
from workers.compaction import FOLDED_HEADER, PREVIOUS_HEADER, is_summary_request
from workers.context import TOKENS_PER_MESSAGE, Compaction, estimate_tokens, fold_point
from workers.guards import Guard, GuardRunner, ResolvedGuards
from workers.services import Services

PAGE = "x" * 1600  # about 400 tokens a page


@tool
def read_page(page: int) -> str:
    """Read one page of the log."""
    return f"page {page}: fact-{page}\n{PAGE}"


def pager(pages: int) -> Callable[[ModelRequest], AssistantMessage | str]:
    """A worker model that reads ``pages`` pages, one a turn, then answers; it counts
    its own turns (what it is sent is compacted)."""
    turns = {"done": 0}

    def answer(request: ModelRequest) -> AssistantMessage | str:
        assert not is_summary_request(request)
        turns["done"] += 1
        if turns["done"] > pages:
            return "read them all"
        page = turns["done"]
        return AssistantMessage(
            tool_calls=(ToolCall(id=f"c{page}", name="read_page", arguments=f'{{"page": {page}}}'),)
        )

    return answer


def summarizer(calls: list[ModelRequest]) -> FunctionModel:
    def summarize(request: ModelRequest) -> ModelResponse:
        assert is_summary_request(request)
        calls.append(request)
        body = request.messages[1].content
        facts = sorted({w for w in body.split() if w.startswith("fact-")})
        return ModelResponse(
            message=AssistantMessage(content="facts: " + " ".join(facts)),
            usage=Usage(input_tokens=100, output_tokens=10, cached_input_tokens=40, cost=0.5),
            model="summarizer-1",
        )

    return FunctionModel(summarize, name="summarizer")


def loop(
    model: FunctionModel,
    compaction: Compaction,
    *,
    summarizer: Model | None = None,
    events: list[Event] | None = None,
    budget: Budget | None = None,
    max_turns: int = 30,
) -> AgentLoop:
    if summarizer is not None:  # the summaries' model, by its name in the run
        compaction = compaction.model_copy(update={"model": "summarizer"})
    return AgentLoop(
        model,
        Dispatcher(ToolRegistry([read_page])),
        instructions="You read logs.",
        settings=LoopSettings(max_turns=max_turns, compaction=compaction),
        worker="w1",
        services=Services(
            budget=budget or Budget(),
            tracer=Tracer(events.append) if events is not None else Tracer(),
            run_id="r1",
            models={"summarizer": summarizer} if summarizer is not None else {},
        ),
    )


def sent_tokens(request: ModelRequest) -> int:
    """The input tokens the test models report for a request (the "server's" count)."""
    return estimate_usage(request, AssistantMessage(content="")).input_tokens


def worker_requests(model: FunctionModel) -> list[ModelRequest]:
    return [r for r in model.requests if not is_summary_request(r)]


def no_call_without_its_observation(messages: tuple[object, ...]) -> None:
    asked = {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    last = messages[-1]
    pending = {c.id for c in last.tool_calls} if isinstance(last, AssistantMessage) else set()
    assert answered == asked - pending


async def test_the_oldest_turns_are_folded_into_one_summary_after_the_task() -> None:
    model, summaries = FunctionModel(pager(12)), []
    budget = Compaction(budget_tokens=2500, keep_turns=2)
    result = await loop(model, budget, summarizer=summarizer(summaries)).run("read the log")

    assert isinstance(result, Final)
    assert summaries  # the summarizer was used, not the worker's model
    requests = worker_requests(model)
    for request in requests:
        assert sent_tokens(request) <= 2500
        no_call_without_its_observation(request.messages)
    compacted = [r for r in requests if len(r.messages) > 2 and "[Summary" in _text(r, 2)]
    assert compacted
    for request in compacted:
        system, task, summary, first, *_ = request.messages
        assert isinstance(system, SystemMessage)
        assert system.content == "You read logs."
        assert task == UserMessage(content="read the log")
        assert isinstance(summary, UserMessage)
        assert "facts: fact-1" in summary.content
        assert isinstance(first, AssistantMessage)  # the rest starts with a whole turn
    last = requests[-1].messages
    assert "fact-1" in last[2].content  # the first page's fact, in the summary at the end
    # What the model is sent changed, not what is kept: the whole transcript.
    state = result.state
    assert len([m for m in state.messages if isinstance(m, ToolMessage)]) == 12
    assert state.summary.startswith("facts: ")
    assert state.summarized > 0


async def test_a_later_summary_folds_the_previous_one_in() -> None:
    model, summaries = FunctionModel(pager(14)), []
    await loop(
        model, Compaction(budget_tokens=2500, keep_turns=2), summarizer=summarizer(summaries)
    ).run("read the log")
    assert len(summaries) >= 2
    first, second = (r.messages[1].content for r in summaries[:2])
    assert PREVIOUS_HEADER not in first
    assert FOLDED_HEADER in first
    assert PREVIOUS_HEADER in second  # the summary so far, then only the turns since
    assert "facts: fact-1" in second
    assert "### result read_page(page=1) [ok]" in first
    assert "read_page(page=1)" not in second


def test_a_fold_ends_where_a_turn_starts() -> None:
    call = AssistantMessage(tool_calls=(ToolCall(id="a", name="t"), ToolCall(id="b", name="t")))
    obs = [ToolMessage(tool_call_id=i, name="t", content="x") for i in ("a", "b")]
    nudge = UserMessage(content="go on")
    messages = (call, *obs, nudge, AssistantMessage(content="hm"), call, *obs)
    assert fold_point(messages, 0, keep_turns=1) == 5  # before the last answer and its calls
    assert fold_point(messages, 0, keep_turns=2) == 4
    assert fold_point(messages, 0, keep_turns=3) == 0  # three turns: nothing to fold
    assert fold_point(messages, 4, keep_turns=1) == 5


async def test_a_summary_longer_than_asked_for_is_cut_to_its_allowance() -> None:
    events: list[Event] = []

    def verbose(request: ModelRequest) -> str:
        return "facts: fact-1\n" + "y" * 12000 + "\nstill open: page 9"  # over the budget

    model, writer = FunctionModel(pager(8)), FunctionModel(verbose)
    result = await loop(
        model, Compaction(budget_tokens=2500, keep_turns=2), summarizer=writer, events=events
    ).run("read the log")
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished
    assert all(e.status == "ok" and not e.window for e in finished)
    summary = result.state.summary
    asked = writer.requests[-1].max_output_tokens
    assert asked is not None
    assert asked <= 2500 // 2
    assert estimate_tokens((UserMessage(content=summary),)) <= asked + TOKENS_PER_MESSAGE
    assert summary.startswith("facts: fact-1")  # its start and its end are kept
    assert summary.endswith("still open: page 9")
    assert "characters cut to fit the context budget" in summary
    for request in worker_requests(model):
        assert sent_tokens(request) <= 2500
        no_call_without_its_observation(request.messages)


async def test_a_turn_over_the_budget_on_its_own_is_sent_cut_to_fit() -> None:
    @tool
    def read_all() -> str:
        """Read the whole log at once."""
        return "start of the log\n" + "z" * 15000 + "\nend of the log"

    def once(request: ModelRequest) -> AssistantMessage | str:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "read it"
        return AssistantMessage(tool_calls=(ToolCall(id="c1", name="read_all", arguments="{}"),))

    model = FunctionModel(once)
    result = await AgentLoop(
        model,
        Dispatcher(ToolRegistry([read_all])),
        settings=LoopSettings(compaction=Compaction(budget_tokens=2000)),
    ).run("read the log")
    assert isinstance(result, Final)
    last = model.requests[-1]
    assert estimate_tokens(last.messages, last.tools) <= 2000
    (observation,) = (m for m in last.messages if isinstance(m, ToolMessage))
    assert observation.content.startswith("start of the log")
    assert observation.content.endswith("end of the log")
    assert "characters cut to fit the context budget" in observation.content
    assert len(result.state.messages[1].content) > 15000  # the state keeps it whole


@tool
def read_part(part: int) -> str:
    """Read a part of the log."""
    return f"start of part {part}\n" + "z" * 15000 + f"\nend of part {part}"


async def test_the_wrap_up_is_sent_with_the_newest_results_cut_not_left_out() -> None:
    parts = itertools.count(1)

    def reads(request: ModelRequest) -> AssistantMessage | str:
        if is_summary_request(request):
            return "part 1 was read"
        part = next(parts)
        call = ToolCall(id=f"c{part}", name="read_part", arguments=f'{{"part": {part}}}')
        return AssistantMessage(tool_calls=(call,))

    model = FunctionModel(reads)
    await AgentLoop(
        model,
        Dispatcher(ToolRegistry([read_part])),
        settings=LoopSettings(compaction=Compaction(budget_tokens=2000), max_turns=2),
    ).run("read the log")
    wrap_up = model.requests[-1]
    assert estimate_tokens(wrap_up.messages, wrap_up.tools) <= 2000
    shown = [m.content for m in wrap_up.messages if isinstance(m, ToolMessage)]
    assert [c.split("\n")[0] for c in shown] == ["start of part 2"]  # cut, not left out
    assert shown[0].endswith("end of part 2")
    assert (wrap_up.messages[-1].content or "").startswith("You have used all 2 turns")


async def test_a_correction_is_sent_with_the_answer_it_corrects_cut_not_left_out() -> None:
    long_answer = "my answer starts\n" + "y " * 8000 + "\nmy answer ends"
    model = FunctionModel(lambda request: long_answer if len(model.requests) == 1 else "short")
    guards = GuardRunner(
        ResolvedGuards(
            output=(Guard(name="short", fn=lambda c: "too long" if len(c.text) > 100 else None),)
        ),
        tracer=Tracer(),
    )
    result = await AgentLoop(
        model,
        Dispatcher(ToolRegistry([])),
        settings=LoopSettings(compaction=Compaction(budget_tokens=2000)),
        guards=guards,
    ).run("answer")
    assert isinstance(result, Final)
    again = model.requests[-1]
    assert estimate_tokens(again.messages, again.tools) <= 2000
    answer, correction = again.messages[-2:]
    assert isinstance(answer, AssistantMessage)
    assert (answer.content or "").startswith("my answer starts")  # cut, not left out
    assert correction.content.startswith("Your answer was not accepted")


async def test_a_failing_summary_call_falls_back_to_the_window_and_the_worker_goes_on() -> None:
    events: list[Event] = []

    def broken(request: ModelRequest) -> str:
        raise ModelHTTPError(503, "overloaded", model="summarizer")

    model = FunctionModel(pager(10))
    result = await loop(
        model,
        Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=FunctionModel(broken),
        events=events,
    ).run("read the log")

    assert isinstance(result, Final)
    assert result.text == "read them all"
    started = [e for e in events if isinstance(e, CompactionStarted)]
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert started
    assert len(finished) == len(started)
    assert all(e.status == "error" and e.window for e in finished)
    assert "ModelHTTPError" in (finished[0].error or "")
    assert result.state.summary == ""
    assert result.state.summarized == 0
    for request in worker_requests(model):
        assert sent_tokens(request) <= 2500
    assert result.state.usage.model_calls == 11 + len(started)  # failed calls are calls


async def test_a_summary_call_cut_off_with_its_worker_ends_its_pair_cancelled() -> None:
    events: list[Event] = []
    asked = anyio.Event()

    async def stuck(request: ModelRequest) -> str:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    worker = loop(
        FunctionModel(pager(10)),
        Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=FunctionModel(stuck),
        events=events,
    )
    async with anyio.create_task_group() as group:
        group.start_soon(worker.run, "read the log")
        await asked.wait()
        group.cancel_scope.cancel()
    compactions = [e for e in events if isinstance(e, CompactionStarted | CompactionFinished)]
    assert [e.kind for e in compactions] == ["compaction.started", "compaction.finished"]
    ended = compactions[1]
    assert isinstance(ended, CompactionFinished)
    assert (ended.status, ended.messages, ended.error) == ("cancelled", 0, None)
    assert describe(ended).startswith(f"w1 turn {ended.turn}: compaction cancelled in ")


async def test_an_empty_summary_is_a_failed_summary() -> None:
    events: list[Event] = []
    model = FunctionModel(pager(8))
    result = await loop(
        model,
        Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=FunctionModel(lambda request: "   "),
        events=events,
    ).run("read the log")
    assert isinstance(result, Final)
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished
    assert finished[0].status == "error"
    assert "empty" in (finished[0].error or "")


async def test_a_budget_stops_the_summary_call_as_it_would_any_call() -> None:
    summaries: list[ModelRequest] = []
    budget = Budget(Limits(model_calls=6))
    model = FunctionModel(pager(12))
    result = await loop(
        model, Compaction(budget_tokens=2500, keep_turns=2), summarizer=summarizer(summaries),
        budget=budget,
    ).run("read the log")  # fmt: skip
    assert not isinstance(result, Final)
    assert isinstance(result.error, BudgetExceeded)
    assert budget.usage.model_calls == 6


async def test_the_summary_call_is_counted_in_the_usage_and_the_budget() -> None:
    summaries: list[ModelRequest] = []
    budget = Budget()
    events: list[Event] = []
    model = FunctionModel(pager(12))
    result = await loop(
        model, Compaction(budget_tokens=2500, keep_turns=2), summarizer=summarizer(summaries),
        budget=budget, events=events,
    ).run("read the log")  # fmt: skip
    assert isinstance(result, Final)
    usage = result.state.usage
    assert usage.model_calls == 13 + len(summaries) == budget.usage.model_calls
    assert usage.cost == pytest.approx(0.5 * len(summaries))
    assert usage.cached_input_tokens == 40 * len(summaries)
    assert budget.usage.input_tokens == usage.input_tokens
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert [e.model for e in finished] == ["summarizer-1"] * len(summaries)
    assert finished[0].input_tokens == 100
    assert finished[0].cost == 0.5
    assert finished[-1].summarized == result.state.summarized
    assert isinstance(result.state.messages[result.state.summarized], AssistantMessage)


async def test_between_two_turns_the_request_only_grows_unless_it_was_compacted() -> None:
    model, summaries = FunctionModel(pager(12)), []
    events: list[Event] = []
    await loop(
        model, Compaction(budget_tokens=2500, keep_turns=2), summarizer=summarizer(summaries),
        events=events,
    ).run("read the log")  # fmt: skip
    requests = worker_requests(model)
    compacted_before = {e.turn for e in events if isinstance(e, CompactionFinished)}
    for turn, (earlier, later) in enumerate(itertools.pairwise(requests), start=2):
        before, after = dump_messages(earlier.messages), dump_messages(later.messages)
        assert after[:2] == before[:2]  # the system prompt and the task, always
        if turn in compacted_before:
            assert after[: len(before)] != before
        else:
            assert [json.dumps(m) for m in after[: len(before)]] == [json.dumps(m) for m in before]


async def test_a_loop_resumed_with_its_summary_does_not_summarize_again() -> None:
    summaries: list[ModelRequest] = []
    saved: list[LoopState] = []

    class Keep:
        def save(self, state: LoopState) -> None:
            saved.append(state)

        async def flush(self) -> None:
            pass

    first = loop(
        FunctionModel(pager(9)), Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=summarizer(summaries),
    )  # fmt: skip
    first.checkpoint = Keep()
    await first.run("read the log")
    made = len(summaries)
    state = next(s for s in reversed(saved) if s.summary and not s.pending)
    assert state.summarized
    assert state.compactions
    model = FunctionModel(lambda request: "resumed")
    again = loop(
        model, Compaction(budget_tokens=2500, keep_turns=2), summarizer=summarizer(summaries)
    )
    result = await again.run("read the log", state)
    assert isinstance(result, Final)
    assert len(summaries) == made  # nothing folded again
    (request,) = model.requests
    assert request.messages[2].content.endswith(state.summary)
    assert result.state.messages[: len(state.messages)] == state.messages


async def test_the_context_is_measured_from_what_the_server_reported_plus_an_estimate() -> None:
    reported = {"tokens": 10}

    def cheap(request: ModelRequest) -> ModelResponse:
        turn = sum(1 for m in request.messages if isinstance(m, ToolMessage)) + 1
        message = (
            AssistantMessage(
                tool_calls=(
                    ToolCall(id=f"c{turn}", name="read_page", arguments=f'{{"page": {turn}}}'),
                )
            )
            if turn <= 3
            else AssistantMessage(content="done")
        )
        return ModelResponse(message=message, usage=Usage(input_tokens=reported["tokens"]))

    summaries: list[ModelRequest] = []
    # The pages (1,200 tokens in all by the estimate) would exceed the budget; the server
    # says each request was 10 tokens: only what was added since counts on top.
    result = await loop(
        FunctionModel(cheap), Compaction(budget_tokens=1000, keep_turns=1),
        summarizer=summarizer(summaries),
    ).run("read the log")  # fmt: skip
    assert isinstance(result, Final)
    assert summaries == []
    reported["tokens"] = 900
    result = await loop(
        FunctionModel(cheap), Compaction(budget_tokens=1000, keep_turns=1),
        summarizer=summarizer(summaries),
    ).run("read the log")  # fmt: skip
    assert summaries  # 900 reported plus a page estimated: over the budget


class TellingModel(FunctionModel):
    """A function model that tells its calls of their attempts, as an endpoint does."""

    tells_attempts = True


async def test_an_attempt_cut_off_by_its_timeout_counts_in_the_usage_not_in_the_context() -> None:
    # Each call's answer came after three attempts its timeout cut off: their prompts are
    # spent (the worker's usage), but the context is what one request holds.
    def slow(request: ModelRequest) -> ModelResponse:
        for _ in range(3):
            timed_out()  # as an endpoint adapter tells it
        turn = sum(1 for m in request.messages if isinstance(m, ToolMessage)) + 1
        message = (
            AssistantMessage(
                tool_calls=(
                    ToolCall(id=f"c{turn}", name="read_page", arguments=f'{{"page": {turn}}}'),
                )
            )
            if turn <= 2
            else AssistantMessage(content="done")
        )
        return ModelResponse(message=message, usage=Usage(input_tokens=10))

    model, summaries = TellingModel(slow), []
    budget = Budget()
    result = await loop(
        model, Compaction(budget_tokens=1000, keep_turns=1), summarizer=summarizer(summaries),
        budget=budget,
    ).run("read the log")  # fmt: skip
    assert isinstance(result, Final)
    assert summaries == []  # two pages (about 850 tokens) fit: no summary
    prompts = sum(prompt_tokens(request) for request in model.requests)
    assert result.state.usage.input_tokens == 3 * 10 + 3 * prompts
    assert budget.usage.input_tokens == result.state.usage.input_tokens


def _spent_in_events(events: list[Event]) -> tuple[int, int]:
    """The input tokens the model calls' and the compactions' events report, summed."""
    ended = [e for e in events if isinstance(e, ModelCallFinished | CompactionFinished)]
    return sum(e.input_tokens for e in ended), sum(e.output_tokens for e in ended)


async def test_a_summary_call_that_failed_after_timeouts_reports_what_the_budget_counted() -> None:
    # Its attempts' prompts were spent (the budget counts them as they are cut off): the
    # compaction's event and the worker's usage say so, as a model call's would.
    def summarize(request: ModelRequest) -> str:
        timed_out()  # as an endpoint adapter tells it
        timed_out()
        raise ModelTimeout(1.0, model="summarizer")

    budget, events = Budget(), []
    result = await loop(
        FunctionModel(pager(10)), Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=TellingModel(summarize, name="summarizer"), budget=budget, events=events,
    ).run("read the log")  # fmt: skip
    assert isinstance(result, Final)
    failed = [e for e in events if isinstance(e, CompactionFinished)]
    assert failed
    assert all(e.status == "error" and e.input_tokens > 0 for e in failed)
    assert _spent_in_events(events) == (budget.usage.input_tokens, budget.usage.output_tokens)
    assert result.state.usage.input_tokens == budget.usage.input_tokens


async def test_a_summary_call_the_budget_stops_at_a_retry_counts_what_it_spent() -> None:
    # Its first attempt's prompt was spent, and a budget that prompt used up refused the
    # retry: the worker stops over budget, and its usage counts that prompt, as the
    # budget does (it counted nothing of the summary call).
    before_summary: list[int] = []

    def summarize(request: ModelRequest) -> str:
        before_summary.append(budget.usage.total_tokens)
        timed_out()  # as an endpoint adapter tells it
        retried()  # the retry, which a spent budget refuses
        return "a summary"

    budget = Budget()
    await loop(
        FunctionModel(pager(10)), Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=TellingModel(summarize, name="summarizer"), budget=budget,
    ).run("read the log")  # fmt: skip
    budget = Budget(Limits(total_tokens=before_summary[0] + 1))  # one token over, then
    stopped = await loop(
        FunctionModel(pager(10)), Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=TellingModel(summarize, name="summarizer"), budget=budget,
    ).run("read the log")  # fmt: skip
    assert isinstance(stopped, Failed)
    assert isinstance(stopped.error, BudgetExceeded)
    assert budget.usage.total_tokens > before_summary[-1]  # the prompt was charged
    assert stopped.usage.input_tokens == budget.usage.input_tokens
    assert stopped.usage.model_calls == budget.usage.model_calls


async def test_a_summary_call_cut_off_after_a_timeout_reports_that_attempts_prompt() -> None:
    events: list[Event] = []
    asked = anyio.Event()

    async def stuck(request: ModelRequest) -> str:
        timed_out()  # its first attempt was cut off by its timeout: the prompt was spent
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    budget = Budget()
    worker = loop(
        FunctionModel(pager(10)), Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=TellingModel(stuck, name="summarizer"), budget=budget, events=events,
    )  # fmt: skip
    async with anyio.create_task_group() as group:
        group.start_soon(worker.run, "read the log")
        await asked.wait()
        group.cancel_scope.cancel()
    [ended] = [e for e in events if isinstance(e, CompactionFinished)]
    assert (ended.status, ended.messages, ended.error) == ("cancelled", 0, None)
    assert ended.input_tokens > 0
    assert _spent_in_events(events) == (budget.usage.input_tokens, budget.usage.output_tokens)


async def test_a_summary_call_the_cost_cap_refuses_is_no_compaction_and_no_call() -> None:
    # Its prompt alone passes the cap: the budget never counted it, but it was told as
    # a compaction that failed (a model call more in the trace than in the usage).
    price = Price(input_per_mtok=1000.0, output_per_mtok=1000.0)  # a summary is dear
    budget, events = Budget(Limits(cost_per_call=0.01)), []
    result = await loop(
        FunctionModel(pager(12)), Compaction(budget_tokens=2500, keep_turns=2),
        summarizer=PricedModel(summarizer([]), price), budget=budget, events=events,
    ).run("read the log")  # fmt: skip
    assert isinstance(result, Failed)
    assert isinstance(result.error, BudgetExceeded)
    assert not [e for e in events if isinstance(e, CompactionStarted | CompactionFinished)]
    calls = [e for e in events if isinstance(e, ModelCallFinished)]
    assert len(calls) == budget.usage.model_calls
    assert _spent_in_events(events) == (budget.usage.input_tokens, budget.usage.output_tokens)


def _text(request: ModelRequest, index: int) -> str:
    message = request.messages[index]
    return message.content if isinstance(message, UserMessage) else ""


async def test_a_trigger_below_the_budget_folds_early_and_the_window_waits_for_the_budget() -> None:
    model, summaries = FunctionModel(pager(12)), []
    events: list[Event] = []
    compaction = Compaction(budget_tokens=4000, trigger_tokens=1500, keep_turns=2)
    result = await loop(model, compaction, summarizer=summarizer(summaries), events=events).run(
        "read the log"
    )
    assert isinstance(result, Final)
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert started
    assert all(1500 < e.context_tokens <= 4000 for e in started)  # folded before the budget
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert not any(e.window for e in finished)
    assert max(sent_tokens(r) for r in worker_requests(model)) <= 1500 + 500


def test_a_trigger_over_the_budget_is_refused() -> None:
    with pytest.raises(ConfigError, match="trigger_tokens"):
        Compaction(budget_tokens=1000, trigger_tokens=2000)


async def test_a_summary_call_is_keyed_to_its_workers_conversation_and_apart_from_it() -> None:
    model, summaries = FunctionModel(pager(12)), []
    budget = Compaction(budget_tokens=2500, keep_turns=2)
    await loop(model, budget, summarizer=summarizer(summaries)).run("read the log")
    assert summaries
    assert {r.conversation for r in summaries} == {"r1/w1/compaction"}
    assert {r.conversation for r in worker_requests(model)} == {"r1/w1"}
