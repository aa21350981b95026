"""Running at a provider's quota: the local server enforces requests and tokens per
minute as providers do, and the adaptive limiter reads the ``x-ratelimit-*`` headers to
slow down before the first 429.

Against the server, timing claims are ratios against the quota's own refill times,
with generous bounds; the limiter's own waits are judged in virtual time
(``tests.support.virtual_time``), exactly.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from runtime import AdaptiveLimiter, ModelRequest, OpenAIModel, RetryPolicy, UserMessage
from runtime.limits.quota import QuotaLeft, quota_from_headers
from tests.support.openai_server import OpenAIServer, Quota, Reply
from tests.support.virtual_time import in_virtual_time, now

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))


def test_the_ratelimit_headers_are_read_as_openai_writes_them() -> None:
    headers = {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "29950",
        "x-ratelimit-reset-tokens": "6m0.5s",
    }
    assert quota_from_headers(headers) == QuotaLeft(
        requests=499, requests_reset_s=0.12, requests_limit=500,
        tokens=29950, tokens_reset_s=360.5, tokens_limit=30000,
    )  # fmt: skip
    tokens_only = {"x-ratelimit-remaining-tokens": "7", "x-ratelimit-reset-tokens": "2"}
    assert quota_from_headers(tokens_only) == QuotaLeft(tokens=7, tokens_reset_s=2)
    assert quota_from_headers({"retry-after": "1"}) is None
    # Nonsense is ignored, not guessed at.
    odd = {"x-ratelimit-remaining-requests": "many", "x-ratelimit-reset-requests": "soon"}
    assert quota_from_headers(odd) is None
    negative = {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "-1s"}
    assert quota_from_headers(negative) == QuotaLeft(requests=3)


def _post(server: OpenAIServer) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=5)


@pytest.mark.parametrize("headers", ["retry-after", "bare", "x-ratelimit"])
def test_the_server_answers_429_once_the_quota_is_spent(headers: str) -> None:
    quota = Quota(requests=3, window_s=60, headers=headers)  # type: ignore[arg-type]
    with OpenAIServer(quota=quota) as server:
        started = time.monotonic()
        answers = [_post(server) for _ in range(4)]
        took = time.monotonic() - started  # the quota refilled meanwhile
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert server.throttled == 1
    refused = answers[-1].headers
    if headers == "retry-after":
        # One request's worth: 60 s / 3, less what refilled while the four were sent.
        assert 20 - took - 0.1 <= float(refused["retry-after-ms"]) / 1000 <= 20
        # Retry-After in whole seconds, rounded up.
        assert 0 <= int(refused["retry-after"]) - float(refused["retry-after-ms"]) / 1000 < 1.01
    else:
        assert "retry-after" not in refused
    if headers == "x-ratelimit":
        assert answers[0].headers["x-ratelimit-remaining-requests"] == "2"
        assert answers[0].headers["x-ratelimit-limit-requests"] == "3"
        assert quota_from_headers(refused) is not None
        left = quota_from_headers(refused)
        assert left is not None
        assert left.requests == 0
        assert left.requests_reset_s is not None
        assert 60 - took - 0.1 <= left.requests_reset_s <= 60  # until all three are back
    else:
        assert not [h for h in answers[0].headers if h.startswith("x-ratelimit")]


def test_the_tokens_quota_counts_each_replys_tokens() -> None:
    quota = Quota(tokens=100, window_s=60, headers="x-ratelimit")
    with OpenAIServer(Reply(content="ok", prompt_tokens=30, completion_tokens=10),
                      quota=quota) as server:  # fmt: skip
        codes = [_post(server).status_code for _ in range(3)]
    assert codes == [200, 200, 429]  # 40 + 40, and 20 left


async def _calls(model: OpenAIModel, count: int, *, streamed: bool = False) -> float:
    started = time.perf_counter()
    if streamed:
        await asyncio.gather(*(model.stream(REQUEST, lambda _: None) for _ in range(count)))
    else:
        await asyncio.gather(*(model.complete(REQUEST) for _ in range(count)))
    return time.perf_counter() - started


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("limit", ["requests", "tokens"])
async def test_the_limiter_paces_at_the_quota_before_the_first_429(
    limit: str, streamed: bool
) -> None:
    """30 calls at once against a quota of 10 that refills 10 a second, 8 in flight at
    most (fewer than the quota: before its first answer the limiter knows nothing of
    it): the first ones start at once, the rest at the rate the headers tell, and
    none is answered 429."""
    quota = (
        Quota(requests=10, window_s=1.0, headers="x-ratelimit")
        if limit == "requests"
        else Quota(tokens=200, window_s=1.0, headers="x-ratelimit")
    )  # 20 tokens a call
    with OpenAIServer(Reply(content="ok", prompt_tokens=15, completion_tokens=5),
                      quota=quota) as server:  # fmt: skip
        limiter = AdaptiveLimiter(8)
        model = OpenAIModel("m", base_url=server.base_url, limiter=limiter,
                            retry=RetryPolicy(attempts=8, initial_wait_s=0.05))  # fmt: skip
        wall = await _calls(model, 30, streamed=streamed)
    assert server.throttled == 0
    assert limiter.paced > 0
    # The quota's own bound: 20 more calls at 10 a second (2 s), a bit below it when
    # paced; far from a call at a time.
    assert 1.5 <= wall <= 10.0


def limiter_in_virtual_time() -> AdaptiveLimiter:
    return AdaptiveLimiter(8, clock=now, sleep=asyncio.sleep)


async def starts_of(limiter: AdaptiveLimiter, callers: int) -> list[float]:
    """When each of ``callers`` attempts, made together, started."""
    starts: list[float] = []

    async def one() -> None:
        async with limiter.attempt():
            starts.append(now())

    async with asyncio.TaskGroup() as tg:
        for _ in range(callers):
            tg.create_task(one())
    return starts


@in_virtual_time
async def test_once_the_quota_runs_low_attempts_are_spaced_at_its_refill_rate() -> None:
    """10 requests left of 20, refilling in 1 s (10 a second): 8 may start freely (2
    are the reserve), and the next ones start spaced at 97% of the refill rate."""
    limiter = limiter_in_virtual_time()
    async with limiter.attempt():
        limiter.observe(QuotaLeft(requests=10, requests_reset_s=1.0, requests_limit=20))
    starts = await starts_of(limiter, 12)
    spacing = 1 / (0.97 * 10)
    assert starts == pytest.approx([0.0] * 9 + [spacing, 2 * spacing, 3 * spacing])
    assert limiter.paced == 3


@in_virtual_time
async def test_without_the_limit_header_the_limiter_waits_for_the_reset() -> None:
    limiter = limiter_in_virtual_time()
    async with limiter.attempt():
        limiter.observe(QuotaLeft(requests=0, requests_reset_s=0.3))
    async with limiter.attempt():
        assert now() == pytest.approx(0.3)
    async with limiter.attempt():  # the quota is whole again: no wait
        assert now() == pytest.approx(0.3)
    assert limiter.paced == 1


@in_virtual_time
async def test_a_quota_with_room_holds_nothing_back() -> None:
    limiter = limiter_in_virtual_time()
    async with limiter.attempt():
        limiter.observe(QuotaLeft(requests=500, requests_reset_s=0.1, requests_limit=501))
    for _ in range(20):
        async with limiter.attempt():
            pass
    assert limiter.paced == 0
    assert now() == 0.0
