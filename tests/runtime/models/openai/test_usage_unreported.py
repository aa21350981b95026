"""An answer whose endpoint reports no usage still counts: a stream from an endpoint
that refuses (or ignores) ``stream_options``, a proxy that drops ``usage``. Its tokens
are the token estimate's, so that a run's token budget and cost see the call. Through
the real ``openai`` client, over real HTTP, against the local test server."""

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
from tests.support.openai_server import OpenAIServer, Raw, RecordedRequest, Reply, _completion

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
