"""An answer whose endpoint reports no usage still counts: a stream from an endpoint
that refuses (or ignores) ``stream_options``, a proxy that drops ``usage``, a stream
broken off after its answer finished, before its usage came. Its tokens are the token
estimate's, so that a run's token budget and cost see the call. Through the real
``openai`` client, over real HTTP, against the local test server."""

from __future__ import annotations

import pytest

from honeycomb import Budgets, Executor, Policy, Role
from runtime import (
    BudgetExceeded,
    ModelRequest,
    OpenAIModel,
    RetryPolicy,
    UserMessage,
)
from runtime.models.layers.cost_cap import prompt_tokens
from runtime.models.pricing import Price, PricedModel
from tests.support.openai_server import (
    OpenAIServer,
    Raw,
    RecordedRequest,
    Reply,
    _chunks,
    _completion,
    tool_calls,
)

ANSWER = "a fairly long answer, " * 20
ONCE = RetryPolicy(attempts=1)


def refusing_stream_options(request: RecordedRequest) -> Raw | Reply:
    if "stream_options" in request.body:
        return Raw(400, "Unknown parameter: 'stream_options'.")
    return Reply(content=ANSWER)


async def test_a_stream_without_usage_counts_in_the_runs_token_budget_and_cost(
    openai_server: OpenAIServer,
) -> None:
    openai_server.default = refusing_stream_options
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=ONCE)
    priced = PricedModel(model, Price(input_per_mtok=1.0, output_per_mtok=2.0))
    executor = Executor([Role(name="w")], priced, policy=Policy(budgets=Budgets(total_tokens=150)))

    with pytest.raises(BudgetExceeded) as caught:
        await executor.run(
            "t", subtasks=[("w", "a"), ("w", "b")], on_event=[lambda e: None], text_deltas=True
        )
    assert caught.value.limit == "total_tokens"
    assert caught.value.used >= len(ANSWER) // 8  # the estimate: about 4 characters a token
    assert model.stream_usage is False
    usage = caught.value.partial.usage
    assert usage.output_tokens >= len(ANSWER) // 8  # the estimate: about 4 characters a token
    assert usage.cost > 0


async def test_a_one_shot_answer_without_usage_counts_the_estimate(
    openai_server: OpenAIServer,
) -> None:
    body = _completion(Reply(content=ANSWER), "m", 1)
    del body["usage"]
    openai_server.enqueue(Raw(200, body=body))
    request = ModelRequest(messages=(UserMessage(content="Say it at length."),))
    answer = await OpenAIModel("m", base_url=openai_server.base_url, retry=ONCE).complete(request)

    assert answer.usage.input_tokens == prompt_tokens(request)
    assert len(ANSWER) // 8 <= answer.usage.output_tokens <= len(ANSWER) // 2


async def test_a_stream_broken_off_after_its_answer_finished_is_the_answer(
    openai_server: OpenAIServer,
) -> None:
    """The connection closes after the finish reason, before the usage chunk and
    ``[DONE]``: the text and the calls all came, and were shown once."""
    answer = tool_calls(("lookup", {"q": "x"}), content=ANSWER)
    before_usage = len(_chunks(answer, "m", 1, usage=True)) - 1
    openai_server.enqueue(
        Reply(content=answer.content, tool_calls=answer.tool_calls, cut_after=before_usage)
    )
    request = ModelRequest(messages=(UserMessage(content="Say it at length."),))
    shown: list[str] = []
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=ONCE)
    response = await model.stream(request, shown.append)

    assert "".join(shown) == response.message.content == ANSWER
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [
        ("lookup", '{"q": "x"}')
    ]
    assert response.finish_reason == "tool_calls"
    assert response.usage.input_tokens == prompt_tokens(request)  # the estimate
    assert len(openai_server.requests) == 1
