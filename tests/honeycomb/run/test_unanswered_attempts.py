"""What a run counts of what its endpoint billed and never answered: an attempt cut off
by its timeout had its request read, and a retry sends the prompt again, so each such
attempt counts its prompt, by the estimate, at the model's price, in the run's usage,
its budget and its call's ``model_call.finished``: a call answered at its second
attempt, a call no attempt of which was answered, streamed or not. Over real HTTP,
against the local test server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from honeycomb import BudgetExceeded, Budgets, Executor, Policy, Role, RunFailed
from runtime import Event, ModelRequest, ModelResponse, OpenAIModel, RetryPolicy
from runtime.events import ModelCallFinished
from runtime.model import TextSink, WrapperModel, call_model
from runtime.models.layers.cost_cap import prompt_tokens
from runtime.models.pricing import Price, PricedModel
from tests.support.openai_server import OpenAIServer, Raw, Reply, text

pytestmark = pytest.mark.timeout(60)

PRICE = Price(input_per_mtok=1000.0, output_per_mtok=2000.0)  # $0.001 in, $0.002 out
TWICE = RetryPolicy(attempts=2, initial_wait_s=0.01, max_wait_s=0.01, jitter_s=0.0)
TIMEOUT = 1.0  # a healthy answer takes well under it on a loaded machine
LATE = 2.5  # an answer past it


class Seen(WrapperModel):
    """Keeps the requests its model is sent, as the layers left them."""

    def __init__(self, inner: OpenAIModel) -> None:
        super().__init__(inner)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        self.requests.append(request)
        return await call_model(self.inner, request, on_text)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:  # one a test: a late answer is not the next test's
        yield server


def executor(seen: Seen, budgets: Budgets | None = None) -> Executor:
    return Executor(
        [Role(name="w")],
        PricedModel(seen, PRICE),
        policy=Policy(budgets=budgets or Budgets(model_calls=5)),
    )


async def test_a_call_answered_after_an_attempt_timed_out_counts_that_attempts_prompt(
    server: OpenAIServer,
) -> None:
    server.enqueue(text("too late", delay_s=LATE), Reply(content="done", prompt_tokens=11))
    model = OpenAIModel("gpt-test", base_url=server.base_url, timeout=TIMEOUT, retry=TWICE)
    seen = Seen(model)
    events: list[Event] = []
    try:
        result = await executor(seen).run(
            "t", subtasks=[("w", "Write about bees.")], on_event=[events.append]
        )
    finally:
        await model.client.close()
    assert len(server.requests) == 2  # the prompt sent twice
    prompt = prompt_tokens(seen.requests[0])
    usage = result.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 11 + prompt, 7)
    assert usage.cost == pytest.approx(PRICE.of(11 + prompt, 7))
    assert result.subtasks["s1"].worker.usage == usage  # its worker's call: it counts it too
    (finished,) = [e for e in events if isinstance(e, ModelCallFinished)]
    assert (finished.status, finished.attempts) == ("ok", 2)
    assert (finished.input_tokens, finished.output_tokens) == (usage.input_tokens, 7)
    assert finished.cost == pytest.approx(usage.cost)  # the event adds up to the run


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_call_no_attempt_of_which_was_answered_counts_each_prompt(
    server: OpenAIServer, streamed: bool
) -> None:
    server.default = text("too late", delay_s=LATE)
    model = OpenAIModel("gpt-test", base_url=server.base_url, timeout=0.3, retry=TWICE)
    seen = Seen(model)
    events: list[Event] = []
    plan = [("w", "Write about bees.")]

    async def ran() -> None:
        run = executor(seen)
        if not streamed:
            await run.run("t", subtasks=plan, on_event=[events.append])
            return
        async with run.stream("t", subtasks=plan) as stream:  # someone reads: calls stream
            async for event in stream:
                events.append(event)

    try:
        with pytest.raises(RunFailed) as failed:
            await ran()
    finally:
        await model.client.close()
    # Both attempts were sent (the event below counts them); one cut off at 0.3 s may end
    # before a busy server has read it.
    assert len(server.requests) <= 2
    prompt = prompt_tokens(seen.requests[0])
    partial = failed.value.partial
    assert partial is not None
    usage = partial.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 2 * prompt, 0)
    assert usage.cost == pytest.approx(PRICE.of(2 * prompt, 0))
    worker = partial.subtasks["s1"].worker
    assert worker is not None
    assert worker.usage == usage  # the call failed, and its worker counts it as the run does
    (finished,) = [e for e in events if isinstance(e, ModelCallFinished)]
    assert (finished.status, finished.attempts) == ("error", 2)
    assert (finished.input_tokens, finished.cost) == (usage.input_tokens, usage.cost)


async def test_no_attempt_is_sent_once_the_attempts_before_it_spent_the_budget(
    server: OpenAIServer,
) -> None:
    server.default = text("too late", delay_s=LATE)
    often = RetryPolicy(attempts=5, initial_wait_s=0.01, max_wait_s=0.01, jitter_s=0.0)
    model = OpenAIModel("gpt-test", base_url=server.base_url, timeout=0.3, retry=often)
    seen = Seen(model)
    try:
        with pytest.raises(BudgetExceeded) as stopped:
            await executor(seen, Budgets(total_tokens=30)).run(
                "t", subtasks=[("w", "Write about bees.")]
            )
    finally:
        await model.client.close()
    prompt = prompt_tokens(seen.requests[0])
    assert prompt < 30 <= 2 * prompt  # two attempts' prompts spend it
    # Two were sent (their prompts spent the budget), not five: the third never was.
    # One cut off at 0.3 s may end before a busy server has read it.
    assert len(server.requests) <= 2
    assert (stopped.value.limit, stopped.value.used) == ("total_tokens", 2 * prompt)
    partial = stopped.value.partial
    assert partial is not None
    assert partial.usage.input_tokens == 2 * prompt


@pytest.mark.parametrize(("cut_after", "cut"), [(0, "reset"), (1, "reset"), (1, "end")])
async def test_a_stream_cut_after_its_200_before_any_text_counts_that_attempts_prompt(
    server: OpenAIServer, cut_after: int, cut: str
) -> None:
    server.enqueue(
        Reply(content="lost", cut_after=cut_after, cut=cut),
        Reply(content="done", prompt_tokens=11),
    )
    model = OpenAIModel("gpt-test", base_url=server.base_url, timeout=TIMEOUT, retry=TWICE)
    seen = Seen(model)
    events: list[Event] = []
    try:
        async with executor(seen).stream("t", subtasks=[("w", "Write about bees.")]) as stream:
            async for event in stream:  # someone reads: the calls stream
                events.append(event)
    finally:
        await model.client.close()
    assert len(server.requests) == 2  # the endpoint took the first and answered 200
    prompt = prompt_tokens(seen.requests[0])
    usage = stream.result.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 11 + prompt, 7)
    assert usage.cost == pytest.approx(PRICE.of(11 + prompt, 7))
    assert stream.result.subtasks["s1"].worker.usage == usage
    (finished,) = [e for e in events if isinstance(e, ModelCallFinished)]
    assert (finished.status, finished.attempts, finished.input_tokens) == ("ok", 2, 11 + prompt)


@pytest.mark.parametrize(
    "first",
    [
        Raw(200, content=b'{"id": "x", "choices": [{"mess'),
        Raw(200, content=b"<html>Bad gateway</html>", media_type="text/html"),
    ],
    ids=["cut-off", "html"],
)
async def test_a_one_shot_answer_that_cannot_be_read_counts_that_attempts_prompt(
    server: OpenAIServer, first: Raw
) -> None:
    """A 200 whose body is cut off (or a proxy's page), retried: the endpoint took the
    request and billed it, as for a stream that broke off before its answer."""
    server.enqueue(first, Reply(content="done", prompt_tokens=11))
    model = OpenAIModel("gpt-test", base_url=server.base_url, timeout=TIMEOUT, retry=TWICE)
    seen = Seen(model)
    try:
        result = await executor(seen).run("t", subtasks=[("w", "Write about bees.")])
    finally:
        await model.client.close()
    assert len(server.requests) == 2
    prompt = prompt_tokens(seen.requests[0])
    usage = result.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 11 + prompt, 7)
    assert usage.cost == pytest.approx(PRICE.of(11 + prompt, 7))
