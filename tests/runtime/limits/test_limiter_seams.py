"""Where the adaptive limiter meets the retry policy and its callers' comings and goings:
every wait it makes a retry do is held to the retry's deadline (a cool-down, a start
paced by the quota or by 429s), a caller that leaves gives its paced start back, a pace
learnt from 429s holds a quota slower than one call at a time without a storm of 429s,
and a retry that gives up says the wait it refused and where it came from.

Paces are judged in virtual time (``tests.support.virtual_time``), to the instant; what
goes over HTTP, against the local test server, on real time, by bounds far from the
waits at stake.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from runtime import (
    AdaptiveLimiter,
    ModelError,
    ModelHTTPError,
    ModelRequest,
    ModelTimeout,
    OpenAIModel,
    RateLimitedModel,
    RetryAfterPastDeadline,
    RetryingModel,
    RetryPolicy,
    UserMessage,
)
from runtime.limits.quota import QuotaLeft
from runtime.limits.ratelimit import RetryDeadline, retry_deadline
from runtime.testing import FunctionModel
from tests.support.openai_server import OpenAIServer, error, text
from tests.support.virtual_time import all_waiting, in_virtual_time, now

L = 0.1  # latency of one model call, in seconds
REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))
BY_QUOTA = "the rate limiter's pace at the quota the endpoint reported"
BY_429S = "the rate limiter's pace learnt from 429s"


def limiter_in_virtual_time(max_concurrency: int = 16, **options: Any) -> AdaptiveLimiter:
    """A limiter that reads the loop's (virtual) time."""
    return AdaptiveLimiter(max_concurrency, clock=now, sleep=asyncio.sleep, **options)


@contextlib.contextmanager
def retry_after(failure: BaseException, *, deadline_left_s: float) -> Iterator[None]:
    """The block is a call's second attempt, after ``failure``, its retry deadline
    ``deadline_left_s`` away (what the retry policy tells the limiter)."""
    at = time.monotonic() + deadline_left_s  # the retry policy's clock
    token = retry_deadline.set(RetryDeadline(at=at, attempts=1, last=failure))
    try:
        yield
    finally:
        retry_deadline.reset(token)


async def succeed(limiter: AdaptiveLimiter) -> None:
    async with limiter.attempt():
        pass


async def throttle(limiter: AdaptiveLimiter, retry_after_s: float | None = 0.0) -> None:
    with contextlib.suppress(ModelHTTPError):
        async with limiter.attempt():
            raise ModelHTTPError(429, "slow down", retry_after=retry_after_s)


async def teach_five_a_latency(limiter: AdaptiveLimiter) -> None:
    """Ten answers in 2 L, two at a time, then a 429 with no wait: the limiter learns
    the endpoint takes 5 a L, and paces at 90% of it."""

    async def five() -> None:
        for _ in range(5):
            async with limiter.attempt():
                await asyncio.sleep(2 * L / 5)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(five())
        tg.create_task(five())
    await throttle(limiter)


PACED = 1 / (0.9 * 5 / L)
"""Between two starts at the pace :func:`teach_five_a_latency` teaches."""


def spent_quota(limiter: AdaptiveLimiter, *, limit: float | None) -> float:
    """Tell ``limiter`` the requests quota is spent, whole again in 1 s (its limit
    ``limit``, or unsaid); the seconds between two starts at its refill rate."""
    limiter.observe(QuotaLeft(requests=0, requests_reset_s=1.0, requests_limit=limit))
    return 0.0 if limit is None else 1 / (0.97 * limit)


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


# --- every wait held to the retry's deadline -------------------------------------------


@in_virtual_time
async def test_a_retry_the_quota_would_hold_past_its_deadline_gives_up_at_once() -> None:
    # A 500 whose headers say the quota is spent until its reset, 6 s away (no limit
    # said: the limiter waits for the reset), and 2 s of the retry's deadline left.
    limiter = limiter_in_virtual_time()
    failure = ModelHTTPError(500, "busy")
    async with limiter.attempt():
        limiter.observe(QuotaLeft(requests=0, requests_reset_s=6.0))
    with retry_after(failure, deadline_left_s=2.0), pytest.raises(RetryAfterPastDeadline) as caught:
        await succeed(limiter)
    assert now() == 0.0, "it waited"
    refused = caught.value
    assert (refused.status, refused.__cause__) == (500, failure)
    assert (refused.wait_s, refused.asked_by) == (6.0, BY_QUOTA)
    assert f"{BY_QUOTA} asked to wait 6s, 2.0s of the retry deadline left; HTTP 500" in str(refused)
    assert limiter.in_flight == 0
    # Not a retry, or one with the time to: it waits for the reset.
    with retry_after(failure, deadline_left_s=7.0):
        await succeed(limiter)
    assert now() == 6.0


@pytest.mark.parametrize("paced_by", ["quota", "429s"])
@in_virtual_time
async def test_a_retry_whose_paced_start_is_past_its_deadline_gives_up_and_gives_it_back(
    paced_by: str,
) -> None:
    # Twenty callers booked before it: the retry's start is twenty starts away, past
    # its deadline. It gives up at once, and the start it booked goes to the next.
    limiter = limiter_in_virtual_time(64)  # slots for all: a 429 halves the limit
    if paced_by == "quota":
        async with limiter.attempt():
            spacing = spent_quota(limiter, limit=10)
        asked_by = BY_QUOTA
    else:
        await teach_five_a_latency(limiter)
        spacing, asked_by = PACED, BY_429S
    starts: list[float] = []

    async def one() -> None:
        async with limiter.attempt():
            starts.append(now())

    async with asyncio.TaskGroup() as tg:
        for _ in range(20):
            tg.create_task(one())
        await all_waiting()
        first = starts[0]  # the first of them starts at once, the others wait
        failure = ModelHTTPError(503, "busy")
        too_soon = retry_after(failure, deadline_left_s=10 * spacing)
        with too_soon, pytest.raises(RetryAfterPastDeadline) as caught:
            await succeed(limiter)
        assert now() == first, "it waited"
        assert caught.value.asked_by == asked_by
        # (Each answer grows a pace learnt from 429s a little: within 1%.)
        assert caught.value.wait_s == pytest.approx(20 * spacing, rel=0.01)
        assert caught.value.__cause__ is failure
    late = await starts_of(limiter, 1)
    assert late == pytest.approx([first + 20 * spacing], rel=0.01), "its start was kept"


@in_virtual_time
async def test_a_retry_after_a_timeout_gives_up_with_the_timeout() -> None:
    # No HTTP answer to say so with: the retry ends as the retry policy ends a call it
    # stops retrying, with the error it retried.
    limiter = limiter_in_virtual_time()
    await teach_five_a_latency(limiter)
    timeout = ModelTimeout(30.0)

    async with asyncio.TaskGroup() as tg:
        for _ in range(5):
            tg.create_task(succeed(limiter))
        await all_waiting()
        with retry_after(timeout, deadline_left_s=PACED), pytest.raises(ModelTimeout) as caught:
            await succeed(limiter)
    assert caught.value is timeout


async def test_over_http_a_retry_the_quota_would_hold_past_its_deadline_gives_up_at_once(
    openai_server: OpenAIServer,
) -> None:
    # The tester's case: a 500 saying the quota is spent, whole again in 6 s.
    spent = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6s"}
    openai_server.enqueue(error(500, headers=spent), text("answer"))
    policy = RetryPolicy(deadline_s=2.0, initial_wait_s=0.1, jitter_s=0)
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=policy)
    started = time.monotonic()
    try:
        async with asyncio.timeout(5.0):  # without the deadline held: answered at 6 s
            with pytest.raises(RetryAfterPastDeadline) as caught:
                await model.complete(REQUEST)
    finally:
        await model.client.close()
    assert time.monotonic() - started < policy.deadline_s
    assert len(openai_server.requests) == 1
    assert caught.value.status == 500
    assert caught.value.asked_by == BY_QUOTA
    assert 5.0 < caught.value.wait_s <= 6.0


# --- a caller that leaves gives its paced start back -----------------------------------


@pytest.mark.parametrize("paced_by", ["quota", "429s"])
@in_virtual_time
async def test_callers_cancelled_while_waiting_leave_no_start_behind(paced_by: str) -> None:
    # The tester's case: twenty calls wait for paced starts and are cancelled (a run
    # stopped); the next call starts one spacing after the last start anyone took,
    # not twenty.
    limiter = limiter_in_virtual_time(64)  # slots for all: a 429 halves the limit
    if paced_by == "quota":
        async with limiter.attempt():
            spacing = spent_quota(limiter, limit=10)
    else:
        await teach_five_a_latency(limiter)
        spacing = PACED
    began = now()
    with anyio.move_on_after(spacing / 2):
        await starts_of(limiter, 20)  # the first starts at once
    assert limiter.in_flight == 0
    assert await starts_of(limiter, 1) == pytest.approx([began + spacing])


@in_virtual_time
async def test_the_callers_booked_after_one_that_leaves_move_up() -> None:
    limiter = limiter_in_virtual_time()
    await teach_five_a_latency(limiter)
    began = now()
    starts: dict[int, float] = {}

    async def one(index: int) -> None:
        async with limiter.attempt():
            starts[index] = now()

    async with asyncio.TaskGroup() as tg:
        callers = [tg.create_task(one(index)) for index in range(6)]
        await all_waiting()
        callers[2].cancel()
    assert list(starts) == [0, 1, 3, 4, 5]
    expected = [began + n * PACED for n in range(5)]
    assert list(starts.values()) == pytest.approx(expected, rel=0.01), "a start left unused"


# --- a pace learnt from 429s --------------------------------------------------------------


@in_virtual_time
async def test_callers_leave_a_cooldown_one_by_one_slower_than_one_call_at_a_time() -> None:
    # Answers come in L / 10, but the endpoint takes about 5 a L: the pace it teaches
    # holds the callers leaving a cool-down twice as far apart as one call at a time
    # would (which a pace was once never slower than, and no pace at all once it
    # reached twice the rate learnt).
    limiter = limiter_in_virtual_time()
    await teach_five_a_latency(limiter)

    async def quick() -> None:
        async with limiter.attempt():
            await asyncio.sleep(L / 10)

    async with asyncio.TaskGroup() as tg:  # started at the pace taught, one at a time
        for _ in range(10):
            tg.create_task(quick())
    await throttle(limiter, retry_after_s=L)
    throttled_at = now()
    pace = limiter.pace
    assert pace is not None
    assert 1 / pace > 2 * (L / 10), "no slower than one call at a time"
    starts = await starts_of(limiter, 4)
    assert starts[0] == pytest.approx(throttled_at + L)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps == pytest.approx([1 / pace] * 3, rel=0.01)


@in_virtual_time
async def test_a_429_before_enough_answers_to_learn_from_halves_the_pace() -> None:
    limiter = limiter_in_virtual_time()
    await teach_five_a_latency(limiter)
    taught = limiter.pace
    assert taught == pytest.approx(1 / PACED)
    await succeed(limiter)
    await throttle(limiter)  # one answer since: the pace let the quota be spent again
    assert limiter.pace == pytest.approx((taught + 0.02 * 5 / L / 8) / 2)


@in_virtual_time
async def test_a_run_of_429s_halves_the_pace_no_slower_than_the_wait_they_ask() -> None:
    # Twenty 429s in a row, each asking for L, no answer between: halving alone took
    # the pace to one start per 2**20 / 45 L, and the next caller waited for hours (a
    # fuzz test's server hung). The endpoint said it takes a call again after L.
    limiter = limiter_in_virtual_time()
    await teach_five_a_latency(limiter)
    for _ in range(20):
        await throttle(limiter, retry_after_s=L)
    assert limiter.pace == pytest.approx(1 / L)
    throttled_at = now()
    starts = await starts_of(limiter, 3)
    assert starts[0] == pytest.approx(throttled_at + L)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps == pytest.approx([L, L], rel=0.02)  # each answer speeds the pace a little


@in_virtual_time
async def test_the_time_the_limiter_was_idle_is_left_out_of_the_rate_learnt() -> None:
    # Five answers in L, a pause of 100 L with nothing asked, five more in L, then a
    # 429: the endpoint took 5 a L (10 in 2 L), not 10 in 102 L.
    limiter = limiter_in_virtual_time()

    async def five_in_a_latency() -> None:
        for _ in range(5):
            async with limiter.attempt():
                await asyncio.sleep(L / 5)

    await five_in_a_latency()
    await asyncio.sleep(100 * L)
    await five_in_a_latency()
    await throttle(limiter)
    assert limiter.pace == pytest.approx(0.9 * 5 / L)


class Bucket:
    """An endpoint in virtual time whose quota is a bucket of ``size`` requests refilled
    ``per_s`` a second, as providers' are: a request that does not fit is answered 429
    with the exact wait until one does (``Retry-After``). Answers take ``latency``."""

    def __init__(self, size: int, per_s: float, latency: float) -> None:
        self.size, self.per_s, self.latency = size, per_s, latency
        self.level, self.refilled_at = float(size), 0.0
        self.answered = self.throttled = 0

    async def answer(self, request: ModelRequest) -> str:
        at = now()
        self.level = min(self.size, self.level + (at - self.refilled_at) * self.per_s)
        self.refilled_at = at
        fits = self.level >= 1
        self.level -= fits
        wait_s = (1 - self.level) / self.per_s
        await asyncio.sleep(self.latency)
        if fits:
            self.answered += 1
            return "ok"
        self.throttled += 1
        raise ModelHTTPError(429, "quota spent", retry_after=wait_s)


@in_virtual_time
async def test_an_exact_retry_after_brings_no_storm_of_429s() -> None:
    # The tester's case: 16 workers of 3 turns each, a quota of 12 requests per 2 s
    # (6 a second) told by exact Retry-Afters, answers in 5 ms: far faster than the
    # quota, so a pace no slower than one call at a time was no pace. That ran into a
    # storm: 53 of 91 requests answered 429, 5 workers out of their 4 attempts.
    endpoint = Bucket(12, 6.0, latency=0.005)
    limiter = limiter_in_virtual_time(32)  # as an OpenAIModel holds by default
    model = RetryingModel(
        RateLimitedModel(FunctionModel(endpoint.answer), limiter), RetryPolicy(jitter_s=0)
    )
    failed = 0

    async def worker() -> None:
        nonlocal failed
        try:
            for _ in range(3):
                await model.complete(REQUEST)
        except ModelError:
            failed += 1

    async with asyncio.TaskGroup() as tg:
        for _ in range(16):
            tg.create_task(worker())
    sent = endpoint.answered + endpoint.throttled
    assert failed == 0
    # 28 of 76 now: 16 before anything is known of the quota (the first burst, and
    # the retries that leave its cool-down together), the rest while the pace comes
    # down to it.
    assert endpoint.throttled / sent < 0.45
    assert limiter.pace is not None
    assert limiter.pace < 2 * endpoint.per_s


# --- what a retry that gives up says ---------------------------------------------------


async def test_a_retry_refusing_the_cooldown_after_a_bare_429_says_the_wait_it_refused(
    openai_server: OpenAIServer,
) -> None:
    # The tester's case: a 429 with no Retry-After, 0.3 s of deadline. The retry would
    # have waited out the limiter's cool-down for such a 429 (0.5 s), not "0s".
    openai_server.enqueue(error(429), text("ok"))
    policy = RetryPolicy(deadline_s=0.3, initial_wait_s=0.05, jitter_s=0)
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=policy)
    try:
        with pytest.raises(RetryAfterPastDeadline) as caught:
            await model.complete(REQUEST)
    finally:
        await model.client.close()
    refused = caught.value
    assert refused.retry_after is None
    assert refused.asked_by == "the rate limiter's cool-down after a 429 with no Retry-After"
    assert 0.2 < refused.wait_s <= 0.5
    said = re.search(
        r"no Retry-After asked to wait ([\d.]+)s, [\d.]+s of the retry deadline", str(refused)
    )
    assert said is not None, str(refused)
    assert float(said[1]) == pytest.approx(refused.wait_s, abs=0.01)
