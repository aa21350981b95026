"""``OpenAIEmbeddings`` retries as a chat call does (both through
``runtime.limits.retry.endpoint_call``): another call's long ``Retry-After``, the
shared limiter's cool-down, gives a retry that cannot wait it out up at once
(``RetryAfterPastDeadline``), whether the cool-down is there when the retry's wait is
chosen or comes while it waits. Through the real ``openai`` client, over real HTTP,
against the local test server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from runtime import (
    ModelHTTPError,
    ModelRequest,
    OpenAIEmbeddings,
    OpenAIModel,
    RetryAfterPastDeadline,
    RetryPolicy,
    UserMessage,
)
from tests.support.openai_server import Behaviour, OpenAIServer, RecordedRequest, error

POLICY = RetryPolicy(attempts=4, deadline_s=3.0, initial_wait_s=1.0, jitter_s=0)
LONG = 20.0
"""A's Retry-After: far past the deadline, and past the test's patience."""

WHEN = {
    # B's 500 comes (0.3 s in) after A's 429: the cool-down is there when B's wait is
    # chosen.
    "before-the-wait": {"A": 0.0, "B": 0.3},
    # B's 500 comes first, and A's 429 (0.3 s in) during the wait B chose (1 s).
    "while-waiting": {"A": 0.3, "B": 0.0},
}

Call = Callable[[str], Awaitable[object]]


def sent_by(request: RecordedRequest) -> str:
    """Who sent a request: the text it embeds, or the message it asks."""
    body = request.body
    return str(body["input"][0] if "input" in body else body["messages"][-1]["content"])


async def call_of(kind: str, server: OpenAIServer) -> tuple[Call, Callable[[], Awaitable[None]]]:
    """A call of ``kind`` (embeddings or chat) to ``server``, and how to close it."""
    if kind == "embeddings":
        embeddings = OpenAIEmbeddings("embed-small", base_url=server.base_url, retry=POLICY)
        return (lambda who: embeddings.embed([who])), embeddings.endpoint.client.close
    chat = OpenAIModel("gpt-test", base_url=server.base_url, retry=POLICY)
    ask = lambda who: chat.complete(ModelRequest(messages=(UserMessage(content=who),)))  # noqa: E731
    return ask, chat.client.close


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("kind", ["embeddings", "chat"])
async def test_a_retry_gives_up_at_once_on_a_cooldown_past_its_deadline(
    openai_server: OpenAIServer, kind: str, when: str
) -> None:
    def answer(request: RecordedRequest) -> Behaviour:
        who = sent_by(request)
        if who == "A":
            return error(429, retry_after=LONG, delay_s=WHEN[when]["A"])
        return error(500, delay_s=WHEN[when]["B"])

    openai_server.default = answer
    call, close = await call_of(kind, openai_server)
    started = time.monotonic()

    async def failed(who: str) -> BaseException:
        with pytest.raises(ModelHTTPError) as caught:
            await call(who)
        return caught.value

    try:
        async with asyncio.timeout(LONG / 2):  # without the deadline held, B waits LONG
            a, b = await asyncio.gather(failed("A"), failed("B"))
    finally:
        await close()
    assert time.monotonic() - started < POLICY.deadline_s
    assert sorted(sent_by(r) for r in openai_server.requests) == ["A", "B"]
    assert isinstance(a, RetryAfterPastDeadline)  # its own Retry-After
    assert a.asked_by == "the endpoint's Retry-After"
    assert isinstance(b, RetryAfterPastDeadline)  # the cool-down A's 429 set
    assert b.asked_by == "the rate limiter's cool-down for a 429's Retry-After"
    assert b.retry_after == LONG
    assert LONG - POLICY.deadline_s < b.wait_s < LONG
