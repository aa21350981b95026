"""A retry policy's deadline holds through the rate limiter its attempts pass: another
call's long ``Retry-After``, the limiter's cool-down for every caller, gives a retry
that cannot wait it out up at once (``RetryAfterPastDeadline``), as the same
``Retry-After`` told to the call itself does. Through the real ``openai`` client, over
real HTTP, against the local test server; and through ``RetryingModel``."""

from __future__ import annotations

import asyncio
import time

import pytest

from runtime import (
    AdaptiveLimiter,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    RateLimitedModel,
    RetryAfterPastDeadline,
    RetryingModel,
    RetryPolicy,
    UserMessage,
)
from runtime.model import Model
from runtime.testing import FunctionModel
from tests.support.openai_server import Behaviour, OpenAIServer, RecordedRequest, error

DEADLINE = RetryPolicy(attempts=4, deadline_s=3.0, initial_wait_s=0.01, jitter_s=0)
LONG = 20.0
"""The other call's Retry-After: far past the deadline, and past the test's patience."""

WHEN = {
    # A's wait (1 s) is chosen before B's 429 comes (0.3 s in), and B's lands during it.
    "while-waiting": {"a": (0.0, 1.0), "b": 0.3},
    # A's 429 comes (0.5 s in) after B's: the cool-down is there when A's wait is chosen.
    "before-the-wait": {"a": (0.5, 0.1), "b": 0.0},
}


def ask(who: str) -> ModelRequest:
    return ModelRequest(messages=(UserMessage(content=who),))


async def both(model: Model) -> tuple[BaseException, BaseException, float]:
    """Calls A and B together; what each raised, and when A gave up."""
    started = time.monotonic()

    async def call(who: str) -> BaseException:
        with pytest.raises(ModelHTTPError) as caught:
            await model.complete(ask(who))
        return caught.value

    async with asyncio.timeout(LONG / 2):  # without the deadline held, A waits LONG
        a, b = await asyncio.gather(call("A"), call("B"))
    return a, b, time.monotonic() - started


def check(a: BaseException, b: BaseException, took_s: float) -> None:
    assert isinstance(b, RetryAfterPastDeadline)  # B's own Retry-After, refused
    assert isinstance(a, RetryAfterPastDeadline)  # the cool-down B's 429 set, refused
    assert a.attempts == 1
    assert a.retry_after == LONG
    # The wait it would have made: what was left of the cool-down B's 429 set.
    assert a.asked_by == "the rate limiter's cool-down for a 429's Retry-After"
    assert LONG - DEADLINE.deadline_s < a.wait_s < LONG
    assert f"{a.asked_by} asked to wait {a.wait_s:.3g}s" in str(a)
    assert 0 < a.deadline_left_s < DEADLINE.deadline_s
    assert took_s < DEADLINE.deadline_s


@pytest.mark.parametrize("when", WHEN)
async def test_a_cooldown_past_the_deadline_gives_a_retry_up_at_once(
    openai_server: OpenAIServer, when: str
) -> None:
    a_delay, a_retry_after = WHEN[when]["a"]

    def answer(request: RecordedRequest) -> Behaviour:
        who = request.body["messages"][-1]["content"]
        if who == "B":
            return error(429, retry_after=LONG, delay_s=WHEN[when]["b"])
        return error(429, retry_after=a_retry_after, delay_s=a_delay)

    openai_server.default = answer
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=DEADLINE)
    try:
        check(*await both(model))
    finally:
        await model.client.close()
    assert sorted(r.body["messages"][-1]["content"] for r in openai_server.requests) == ["A", "B"]
    # B refused to wait, but its 429 is the endpoint's word: every caller is held by it.
    assert model.limiter is not None
    assert model.limiter.cooldown_left_s > LONG / 2


@pytest.mark.parametrize("when", WHEN)
async def test_a_cooldown_past_the_deadline_gives_up_a_retrying_models_retry(when: str) -> None:
    """The same through ``RetryingModel`` around a ``RateLimitedModel``."""
    a_delay, a_retry_after = WHEN[when]["a"]
    sent: list[str] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        who = str(request.messages[-1].content)
        sent.append(who)
        delay, retry_after = (WHEN[when]["b"], LONG) if who == "B" else (a_delay, a_retry_after)
        await asyncio.sleep(delay)  # the endpoint's latency
        raise ModelHTTPError(429, "slow down", retry_after=retry_after)

    limiter = AdaptiveLimiter(4)
    model = RetryingModel(RateLimitedModel(FunctionModel(answer), limiter), DEADLINE)
    check(*await both(model))
    assert sorted(sent) == ["A", "B"]
    assert limiter.cooldown_left_s > LONG / 2
