"""Budgets that calls under way can pass. What a model call spends (tokens, cost) is
known once it answers, so workers whose calls run together can take a run past
``total_tokens`` or ``cost``; no call starts after that, and the run ends
``over_budget``, the answers that came in kept. A turn of tool calls the budget
refuses says what it asked for. A call cut off after it streamed text counts its
prompt and that text, by the estimate; one cut off before, no tokens."""

from __future__ import annotations

import asyncio

import pytest

from honeycomb import BudgetExceeded, Budgets, Executor, Policy, Role, tool
from honeycomb.run.events import RunFinished
from honeycomb.testing import FunctionModel, call
from runtime import ModelRequest, ModelResponse, ToolCall
from runtime.events import ModelCallFinished
from runtime.limits import AdaptiveLimiter, RateLimitedModel
from runtime.model import TextSink
from runtime.models.pricing import Price, PricedModel

PRICE = Price(input_per_mtok=1000.0, output_per_mtok=1000.0)  # $0.001 a token
WORKERS = 8
SUBTASKS = [("w", f"task {i}") for i in range(WORKERS)]


async def think(request: ModelRequest) -> str:
    await asyncio.sleep(0.01)  # every worker's call is under way before one answers
    return "word " * 50


def executor(budgets: Budgets) -> Executor:
    return Executor(
        [Role(name="w")],
        PricedModel(FunctionModel(think), PRICE),
        aggregator="concat",
        policy=Policy(budgets=budgets),
    )


@pytest.mark.parametrize(
    ("budgets", "limit"),
    [(Budgets(total_tokens=100), "total_tokens"), (Budgets(cost=0.1), "cost")],
)
async def test_workers_whose_calls_pass_a_limit_together_end_the_run_over_budget(
    budgets: Budgets, limit: str
) -> None:
    with pytest.raises(BudgetExceeded) as caught:
        await executor(budgets).run("t", subtasks=SUBTASKS)
    stopped = caught.value
    assert stopped.limit == limit
    assert stopped.used > stopped.allowed
    partial = stopped.partial
    assert partial is not None
    assert partial.status == "over_budget"
    assert [s.status for s in partial.subtasks.values()] == ["ok"] * WORKERS
    assert all(s.text for s in partial.subtasks.values())  # their answers kept
    assert partial.usage.model_calls == WORKERS  # the calls under way, and no more
    spent = partial.usage.cost if limit == "cost" else partial.usage.total_tokens
    assert spent == pytest.approx(stopped.used)


async def test_an_aggregators_call_that_passes_a_limit_ends_the_run_over_budget() -> None:
    async def answer(request: ModelRequest) -> str:
        return "word " * (200 if "aggregator" in str(request.messages[0].content) else 5)

    merged = Executor(
        [Role(name="w"), Role(name="aggregator", description="Merges.")],
        FunctionModel(answer),
        policy=Policy(budgets=Budgets(total_tokens=200)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        await merged.run("t", subtasks=[("w", "one")])
    assert caught.value.limit == "total_tokens"
    assert caught.value.used > 200
    assert caught.value.partial is not None
    assert caught.value.partial.subtasks["s1"].status == "ok"


async def test_no_call_starts_once_the_calls_under_way_passed_a_limit() -> None:
    looked: list[str] = []

    @tool
    async def look(topic: str) -> str:
        """Look a topic up."""
        looked.append(topic)
        return topic

    async def asks(request: ModelRequest) -> str | list[ToolCall]:
        await asyncio.sleep(0.01)
        if any(m.role == "tool" for m in request.messages):
            return "found"
        return [call("look", {"topic": "bees"})]

    executor = Executor(
        [Role(name="w", tools=["look"])],
        FunctionModel(asks),
        tools=[look],
        aggregator="concat",
        # Any one call's prompt passes it: the first answer spends the run past it.
        policy=Policy(budgets=Budgets(total_tokens=10)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=SUBTASKS)
    partial = caught.value.partial
    assert partial is not None
    assert partial.usage.model_calls == WORKERS  # each worker's first turn, no second
    assert looked == []  # no turn of tool calls after the limit was passed either
    assert {s.status for s in partial.subtasks.values()} == {"over_budget"}


def one_at_a_time(room: str) -> tuple[Executor, FunctionModel]:
    """Eight workers whose calls wait their turn for room to be sent: a slot of the
    run's ``model_concurrency``, or a start of their model's rate limiter."""
    sent = FunctionModel(think)
    if room == "model_concurrency":
        return Executor(
            [Role(name="w")],
            PricedModel(sent, PRICE),
            aggregator="concat",
            policy=Policy(model_concurrency=1, budgets=Budgets(cost=0.1)),
        ), sent
    limited = RateLimitedModel(PricedModel(sent, PRICE), AdaptiveLimiter(1, min_concurrency=1))
    return Executor(
        [Role(name="w")], limited, aggregator="concat", policy=Policy(budgets=Budgets(cost=0.1))
    ), sent


@pytest.mark.parametrize("room", ["model_concurrency", "rate limiter"])
async def test_a_call_that_waited_for_room_is_not_sent_once_the_calls_before_it_spent_the_budget(
    room: str,
) -> None:
    executor, sent = one_at_a_time(room)
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=SUBTASKS)
    # Each answer costs $0.068: the second passes $0.1, and the six calls that waited
    # behind them are not sent (all eight were, one after another, past the budget).
    assert len(sent.requests) == 2
    partial = caught.value.partial
    assert partial is not None
    assert [s.status for s in partial.subtasks.values()] == ["ok"] * 2 + ["over_budget"] * 6
    assert caught.value.limit == "cost"
    assert caught.value.used == pytest.approx(partial.usage.cost) == pytest.approx(0.136)


def blocked_tools() -> tuple[Executor, list[int]]:
    """Four workers whose turns each ask for two calls that never end, under a budget
    of seven calls: the fourth turn is refused, and the run stops the other three."""
    started: list[int] = []

    @tool
    async def work(n: int) -> str:
        """Do work."""
        started.append(n)
        await asyncio.Event().wait()
        return "never"

    async def asks(request: ModelRequest) -> str | list[ToolCall]:
        await asyncio.sleep(0)
        return [call("work", {"n": 1}), call("work", {"n": 2})]

    executor = Executor(
        [Role(name="w", tools=["work"])],
        FunctionModel(asks),
        tools=[work],
        aggregator="concat",
        policy=Policy(budgets=Budgets(tool_calls=7)),
    )
    return executor, started


async def test_a_refused_turn_of_tool_calls_says_how_many_it_asked_for_and_are_under_way() -> None:
    executor, started = blocked_tools()
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=SUBTASKS[:4])
    # The three turns under way hold six of the seven calls: the fourth asks for two.
    assert str(caught.value) == (
        "budget exceeded: tool_calls used 6 of 7 allowed by Budgets(tool_calls=7) (6 in turns "
        "under way), and a turn asked for 2 more"
    )
    assert (caught.value.requested, caught.value.running) == (2, 6)
    # The run's end cuts those turns off: their workers never read the answers, and a
    # resumed run would make the calls again, so the partial usage counts none of
    # them, as the trace and a store's lives do (the error said 6 used, unexplained).
    assert len(started) == 6
    assert caught.value.partial is not None
    assert caught.value.partial.usage.tool_calls == 0


class WritesThenHangs:
    """Streams three pieces of text, then never finishes (nor does a call unstreamed)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        for piece in ("one ", "two ", "three "):
            on_text(piece)
        return await self.complete(request)


async def test_a_call_cut_off_after_it_streamed_counts_its_prompt_and_its_text() -> None:
    executor = Executor(
        [Role(name="w")],
        PricedModel(WritesThenHangs(), PRICE),
        policy=Policy(budgets=Budgets(wall_time_s=0.2)),
    )
    seen: list[object] = []

    async def streamed() -> None:  # someone reads the text: the calls stream
        async with executor.stream("t", subtasks=[("w", "Write about bees.")]) as events:
            async for event in events:
                seen.append(event)

    with pytest.raises(BudgetExceeded) as stopped:
        await streamed()
    usage = stopped.value.partial.usage
    assert usage.output_tokens == 3  # a token a piece streamed
    assert usage.input_tokens >= 8  # the prompt: the system message and the subtask
    assert usage.cost == pytest.approx((usage.input_tokens + 3) * 0.001)
    (finished,) = [e for e in seen if isinstance(e, ModelCallFinished)]
    assert finished.status == "cancelled"
    assert (finished.input_tokens, finished.output_tokens, finished.cost) == (
        usage.input_tokens,
        usage.output_tokens,
        usage.cost,
    )  # the events add up to what the run counts
    (ended,) = [e for e in seen if isinstance(e, RunFinished)]
    assert ended.usage == usage


async def test_a_call_cut_off_before_it_streamed_counts_no_tokens() -> None:
    executor = Executor(
        [Role(name="w")],
        PricedModel(WritesThenHangs(), PRICE),
        policy=Policy(budgets=Budgets(wall_time_s=0.2)),
    )
    with pytest.raises(BudgetExceeded) as stopped:
        await executor.run("t", subtasks=[("w", "Write about bees.")])  # nobody listens
    usage = stopped.value.partial.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 0, 0)
