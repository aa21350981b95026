"""The adaptive limiter: its arithmetic (halve on 429, grow back by one), its shared
cool-down, its bound on calls in flight, its paces, and how models hold it.

Cool-downs and paces are judged in virtual time (``tests.support.virtual_time``), to the
instant: the limiter reads the loop's clock, and every wait on the loop keeps it. Calls
in flight together (a rendezvous in threads) run on real time, judged by counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from runtime import (
    AdaptiveLimiter,
    Event,
    EventLoopConflict,
    ModelHTTPError,
    ModelRequest,
    OpenAIModel,
    RateLimitedModel,
    RetryingModel,
    RetryPolicy,
    Tracer,
    UserMessage,
)
from runtime.events import CallReport, ModelCallRetrying, current_call
from runtime.testing import FunctionModel
from tests.support.concurrency import Overlap, Rendezvous
from tests.support.loops import LIMIT_S, LoopInThread
from tests.support.virtual_time import all_waiting, in_virtual_time, now

L = 0.1  # latency of one model call, in seconds
REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))


async def succeed(limiter: AdaptiveLimiter, times: int = 1) -> None:
    for _ in range(times):
        async with limiter.attempt():
            pass


async def throttle(limiter: AdaptiveLimiter, retry_after: float | None = 0.0) -> None:
    with pytest.raises(ModelHTTPError):
        async with limiter.attempt():
            raise ModelHTTPError(429, "slow down", retry_after=retry_after)


async def burst(limiter: AdaptiveLimiter, size: int, retry_after: float = 0.0) -> None:
    """``size`` attempts in flight together, all answered 429."""
    gate = anyio.Event()

    async def one() -> None:
        with contextlib.suppress(ModelHTTPError):
            async with limiter.attempt():
                await gate.wait()
                raise ModelHTTPError(429, retry_after=retry_after)

    async with anyio.create_task_group() as tg:
        for _ in range(size):
            tg.start_soon(one)
        await anyio.wait_all_tasks_blocked()
        assert limiter.in_flight == size
        gate.set()


# --- arithmetic ---------------------------------------------------------------------


async def test_a_429_halves_the_limit_down_to_the_minimum() -> None:
    limiter = AdaptiveLimiter(12, min_concurrency=2)
    seen = []
    for _ in range(4):
        await throttle(limiter)
        seen.append(limiter.limit)
    assert seen == [6, 3, 2, 2]
    assert limiter.throttled == 4


async def test_the_limit_never_goes_below_one() -> None:
    limiter = AdaptiveLimiter(3)
    for _ in range(3):
        await throttle(limiter)
    assert limiter.limit == 1


async def test_a_burst_of_429s_in_flight_together_halves_once() -> None:
    limiter = AdaptiveLimiter(8)
    await burst(limiter, 8)
    assert limiter.limit == 4, "one congestion event, one halving"
    assert limiter.throttled == 8
    await throttle(limiter)  # started after the cut: a new event
    assert limiter.limit == 2


async def test_the_limit_grows_by_one_per_n_successes_up_to_the_maximum() -> None:
    limiter = AdaptiveLimiter(8, increase_after=3)
    await throttle(limiter)
    await throttle(limiter)
    assert limiter.limit == 2
    limits = []
    for _ in range(7):
        await succeed(limiter, 3)
        limits.append(limiter.limit)
    assert limits == [3, 4, 5, 6, 7, 8, 8]
    await succeed(limiter, 2)
    await throttle(limiter)
    await succeed(limiter, 2)
    assert limiter.limit == 4, "successes before a cut do not count after it"


async def test_other_errors_neither_cut_nor_grow_the_limit() -> None:
    limiter = AdaptiveLimiter(4, increase_after=1)
    await throttle(limiter)
    for status in (500, 503, 400):
        with pytest.raises(ModelHTTPError):
            async with limiter.attempt():
                raise ModelHTTPError(status)
    with pytest.raises(ValueError, match="boom"):
        async with limiter.attempt():
            raise ValueError("boom")
    assert limiter.limit == 2
    assert limiter.in_flight == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_concurrency": 0}, "min_concurrency <= max_concurrency"),
        ({"max_concurrency": 2, "min_concurrency": 3}, "min_concurrency <= max_concurrency"),
        ({"increase_after": 0}, "increase_after"),
        ({"cooldown_s": -1}, "cooldown_s"),
        ({"cooldown_s": 5, "max_cooldown_s": 1}, "cooldown_s <= max_cooldown_s"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaptiveLimiter(**options)


# --- in flight, on real time: judged by counters ----------------------------------------


class InFlight:
    """A model of latency ``L`` that counts calls in flight and answers as told; with
    ``meet``, each call first waits for ``meet.n`` to be in at once."""

    def __init__(
        self,
        answer: Callable[[int], str | BaseException] = lambda n: "ok",
        latency: float = L,
        meet: Rendezvous | None = None,
    ) -> None:
        self.flight = Overlap()
        self.calls = 0
        self.starts: list[float] = []
        self.answer = answer
        self.latency = latency
        self.meet = meet

    async def complete(self, request: ModelRequest) -> Any:
        self.calls += 1
        number = self.calls
        self.starts.append(now())
        async with self.flight:
            if self.meet is not None:
                await self.meet.meet()
            await anyio.sleep(self.latency)
        reply = self.answer(number)
        if isinstance(reply, BaseException):
            raise reply
        return await FunctionModel(lambda _: reply).complete(request)


async def test_calls_in_flight_never_pass_the_limit() -> None:
    # Twelve calls, four at a time: each goes on only once four are in, so three
    # rounds of four, never five.
    model = InFlight(meet=Rendezvous(4))
    limited = RateLimitedModel(model, AdaptiveLimiter(4))
    async with anyio.create_task_group() as tg:
        for _ in range(12):
            tg.start_soon(limited.complete, REQUEST)
    assert (model.flight.peak, model.flight.total) == (4, 12)


CALLS_EACH = 24
"""Calls each of the test's 16 callers makes, one after another."""


async def test_concurrency_drops_after_429s_and_recovers() -> None:
    # Calls 30 to 37 answer 429; 16 callers keep the limiter busy throughout. After the
    # burst, attempts are paced at what it taught, growing 1% of it a success, and let
    # go at twice it: 110 successes on, whatever the machine's load. The run goes on
    # long past that (with 14 calls a caller, not 24, a loaded CI once had its last 24
    # calls start at 4 or fewer), so that its last calls judge the limit alone.
    burst_calls = range(30, 38)
    model = InFlight(
        lambda n: ModelHTTPError(429, retry_after=0) if n in burst_calls else "ok", latency=L / 4
    )
    limiter = AdaptiveLimiter(8, increase_after=2)
    retrying = RetryingModel(
        RateLimitedModel(model, limiter), RetryPolicy(attempts=5, initial_wait_s=0, jitter_s=0)
    )
    in_flight_at_start: list[int] = []
    original = model.complete

    async def traced(request: ModelRequest) -> Any:
        in_flight_at_start.append(model.flight.now + 1)
        return await original(request)

    model.complete = traced  # type: ignore[method-assign]

    async def caller() -> None:
        for _ in range(CALLS_EACH):
            await retrying.complete(REQUEST)

    async with anyio.create_task_group() as tg:
        for _ in range(16):
            tg.start_soon(caller)
    first_429 = burst_calls[0] - 1
    assert max(in_flight_at_start[:first_429]) == 8
    after = in_flight_at_start[burst_calls[-1] : burst_calls[-1] + 8]
    # Sixteen callers kept eight calls in flight: a call that starts with four or fewer
    # shows the drop (the limit grows again with each success, and a loaded machine
    # finishes several before the next call starts: [1, 2, 3, 4, 4, 4, 4, 5] in CI).
    assert min(after) <= 4, f"concurrency did not drop after the 429s: {after}"
    assert limiter.pace is None, "the pace learnt from the burst was not let go"
    assert max(in_flight_at_start[-24:]) == 8, "concurrency did not recover"
    assert limiter.limit == 8
    assert model.calls == 16 * CALLS_EACH + len(burst_calls)


# --- cool-downs and paces, in virtual time: judged exactly ---------------------------------


def limiter_in_virtual_time(max_concurrency: int, **options: Any) -> AdaptiveLimiter:
    """A limiter that reads the loop's (virtual) time."""
    return AdaptiveLimiter(max_concurrency, clock=now, sleep=asyncio.sleep, **options)


@in_virtual_time
async def test_a_429_makes_every_caller_sit_out_the_retry_after() -> None:
    retry_after = 3 * L
    model = InFlight(lambda n: ModelHTTPError(429, retry_after=retry_after) if n == 1 else "ok")
    limiter = limiter_in_virtual_time(8)
    limited = RateLimitedModel(model, limiter)
    with pytest.raises(ModelHTTPError):
        await limited.complete(REQUEST)
    assert now() == pytest.approx(L)  # answered 429 after its latency
    assert limiter.cooldown_left_s == pytest.approx(retry_after)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(limited.complete, REQUEST)
    # The limit is halved to 4: four start as the cool-down ends, not before, and the
    # fifth as the first of them ends.
    ends = L + retry_after
    assert model.starts[1:] == pytest.approx([ends] * 4 + [ends + L])


async def served_at_five_a_latency(limiter: AdaptiveLimiter) -> None:
    """Ten answers in 2 L, two at a time (each 2 L / 5): what the limiter learns the
    endpoint serves (5 a L) when a 429 with no quota headers ends the stretch. Two at a
    time, so that the pace's floor (one call in flight at the answers' latency, 2.5 a
    L) stays below the pace taught."""

    async def five() -> None:
        for _ in range(5):
            async with limiter.attempt():
                await anyio.sleep(2 * L / 5)

    async with anyio.create_task_group() as tg:
        tg.start_soon(five)
        tg.start_soon(five)


TAUGHT = 5 / L
"""Answers a second that :func:`served_at_five_a_latency` teaches."""
SPACING = 1 / (0.9 * TAUGHT)
"""Between two paced starts just after the 429 that taught it: 90% of the rate taught."""


def gaps(starts: list[float]) -> list[float]:
    """The time between each start and the next."""
    return [b - a for a, b in itertools.pairwise(starts)]


def paced(starts: list[float], first: float, spacing: float = SPACING) -> None:
    """Assert that the first start was at ``first`` and each next one ``spacing`` after
    it: within 1%, which each success before a start books grows the pace by (2% of
    the rate taught / ``increase_after``)."""
    assert starts[0] == pytest.approx(first), starts
    assert gaps(starts) == pytest.approx([spacing] * (len(starts) - 1), rel=0.01), starts


@in_virtual_time
async def test_callers_leave_a_cooldown_one_by_one_at_the_rate_learnt() -> None:
    # Told only by 429s, all the callers that sat out a cool-down would leave it at
    # the same instant and meet the same empty quota: they leave paced at the rate
    # the endpoint answered at before its 429.
    limiter = limiter_in_virtual_time(16)
    await served_at_five_a_latency(limiter)
    await throttle(limiter, retry_after=L)
    throttled_at = now()
    assert throttled_at == pytest.approx(2 * L)
    starts = await starts_of(limiter, 6)
    paced(starts, first=throttled_at + L)


@in_virtual_time
async def test_retries_of_a_burst_of_429s_start_paced_not_together() -> None:
    # Six calls answered 429 with the same Retry-After: their retries wait it out
    # together (no jitter), then pass the limiter one by one, at the rate learnt.
    model = InFlight(lambda n: ModelHTTPError(429, retry_after=L) if 11 <= n <= 16 else "ok",
                     latency=0.0)  # fmt: skip
    limiter = limiter_in_virtual_time(16)
    await served_at_five_a_latency(limiter)
    model.calls = 10  # the ten answered above were this endpoint's
    retrying = RetryingModel(
        RateLimitedModel(model, limiter), RetryPolicy(attempts=2, initial_wait_s=0, jitter_s=0)
    )
    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(retrying.complete, REQUEST)
    first, retries = model.starts[:6], model.starts[6:]
    assert first == pytest.approx([2 * L] * 6)
    paced(retries, first=3 * L)  # the Retry-After, then the pace


async def starts_of(limiter: AdaptiveLimiter, callers: int) -> list[float]:
    """When each of ``callers`` attempts, made together, started."""
    starts: list[float] = []

    async def one() -> None:
        async with limiter.attempt():
            starts.append(now())

    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(one)
    return starts


@in_virtual_time
async def test_once_a_429_taught_a_rate_every_attempt_starts_paced_at_it() -> None:
    # Not only the callers that sat out the cool-down: long after it, attempts made
    # together still start a pace apart (90% of the rate learnt), so that the quota
    # that was spent refills instead of being met again at once.
    limiter = limiter_in_virtual_time(16)
    await served_at_five_a_latency(limiter)
    await throttle(limiter, retry_after=0)
    await anyio.sleep(2 * L)
    assert limiter.pace == pytest.approx(0.9 * TAUGHT)
    starts = await starts_of(limiter, 6)
    paced(starts, first=4 * L)
    assert limiter.paced == 5  # the first started at once


@in_virtual_time
async def test_attempts_waiting_for_their_start_book_again_when_a_429_slows_the_pace() -> None:
    # A pace is taught (5 a L), then the endpoint answers slowly and a 429 comes: the
    # callers already booked at the first pace start at the slow one instead.
    limiter = limiter_in_virtual_time(16)
    await served_at_five_a_latency(limiter)
    await throttle(limiter, retry_after=0)

    async def slowly() -> None:
        for _ in range(4):
            async with limiter.attempt():
                await anyio.sleep(2 * L)

    async with anyio.create_task_group() as tg:  # about 1 a L: what the next 429 teaches
        tg.start_soon(slowly)
        tg.start_soon(slowly)
    starts: list[float] = []
    booked = anyio.Event()
    taught: list[float | None] = []  # the pace just after the 429

    async def one(index: int) -> None:
        try:
            async with limiter.attempt():
                starts.append(now())
                if index == 0:
                    await booked.wait()
                    raise ModelHTTPError(429, retry_after=0)
        except ModelHTTPError:
            taught.append(limiter.pace)

    async with anyio.create_task_group() as tg:
        for index in range(5):  # each books its start as it first runs, in this order
            tg.start_soon(one, index)
        await all_waiting()
        assert len(starts) == 1, "the others did not wait for their booked starts"
        booked.set()
        throttled_at = now()
    [slow] = taught
    assert slow is not None
    assert slow < 0.9 * TAUGHT / 4
    # The first after the 429 starts as its cool-down (of 0) ends; the others a slow
    # pace apart (which each success there grows by 2% of the rate taught / 8), not the
    # first one they were booked at.
    paced(starts[1:], first=throttled_at, spacing=1 / slow)


@in_virtual_time
async def test_the_pace_grows_back_and_is_let_go_at_twice_the_rate_learnt() -> None:
    limiter = limiter_in_virtual_time(16, increase_after=1)
    await served_at_five_a_latency(limiter)
    await throttle(limiter, retry_after=0)
    # 90% of the rate, and 2% of it more at every success: twice the rate after 55.
    # One after another, and taking no time, every attempt but the first is held back.
    await succeed(limiter, 54)
    assert limiter.pace == pytest.approx(1.98 * TAUGHT)
    assert limiter.paced == 53
    await succeed(limiter, 2)
    assert limiter.pace is None
    assert limiter.paced == 54, "the 55th attempt is held back, the 56th is not"
    before = now()
    starts = await starts_of(limiter, 6)
    assert limiter.paced == 54, "the pace held attempts back after it was let go"
    assert starts == [before] * 6


@in_virtual_time
async def test_a_pace_is_the_rate_learnt_even_below_min_concurrency_calls_in_flight() -> None:
    # Answers a L each, four at a time, then a 429: the rate learnt is 4 a L, and the
    # pace 90% of it, 3.6 a L, though min_concurrency=4 calls in flight (at the
    # answers' latency) would start 4 a L. The pace follows the quota, which may take
    # fewer calls than the limit in flight would make (it once could not).
    limiter = limiter_in_virtual_time(8, min_concurrency=4)

    async def two() -> None:
        for _ in range(2):
            async with limiter.attempt():
                await anyio.sleep(L)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(two)
    await throttle(limiter, retry_after=0)
    assert limiter.pace == pytest.approx(0.9 * 4 / L)
    starts = await starts_of(limiter, 4)
    paced(starts, first=2 * L, spacing=L / 3.6)


@in_virtual_time
async def test_a_429_without_retry_after_cools_down_for_the_default() -> None:
    limiter = limiter_in_virtual_time(4, cooldown_s=2 * L)
    await throttle(limiter, retry_after=None)
    started = now()
    await succeed(limiter)
    assert now() - started == pytest.approx(2 * L)


@in_virtual_time
async def test_a_retry_after_is_capped_by_the_longest_cooldown() -> None:
    limiter = limiter_in_virtual_time(4, cooldown_s=L, max_cooldown_s=L)
    await throttle(limiter, retry_after=3600)
    started = now()
    await succeed(limiter)
    assert now() - started == pytest.approx(L), "not the hour asked"


@in_virtual_time
async def test_cancelled_waiters_give_their_slots_back() -> None:
    limiter = limiter_in_virtual_time(2)
    hold = anyio.Event()

    async def holder() -> None:
        async with limiter.attempt():
            await hold.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        tg.start_soon(holder)
        with anyio.move_on_after(L):
            async with anyio.create_task_group() as waiters:
                for _ in range(5):
                    waiters.start_soon(succeed, limiter)
                await all_waiting()
                assert limiter.waiting == 5
        assert limiter.waiting == 0
        hold.set()
    assert limiter.in_flight == 0
    started = now()
    await succeed(limiter, 3)
    assert now() == started, "a slot was not given back"


@in_virtual_time
async def test_a_cancelled_cooldown_gives_its_slot_back() -> None:
    limiter = limiter_in_virtual_time(1)
    await throttle(limiter, retry_after=10 * L)
    with anyio.move_on_after(L):
        await succeed(limiter)
    assert limiter.in_flight == 0
    assert limiter.waiting == 0


def test_the_limiter_reads_the_clock_and_sleeps_with_the_sleep_it_is_given() -> None:
    # Not the loop's: a clock of its own, whose sleep moves it on by what was asked.
    clock = [100.0]
    asked: list[float] = []

    async def sleep(seconds: float) -> None:
        asked.append(seconds)
        clock[0] += seconds

    async def main() -> None:
        limiter = AdaptiveLimiter(4, cooldown_s=2.0, clock=lambda: clock[0], sleep=sleep)
        await throttle(limiter, retry_after=None)
        assert limiter.cooldown_left_s == 2.0
        await succeed(limiter)
        assert limiter.cooldown_left_s == 0.0

    asyncio.run(main())
    assert asked == [2.0]


# --- models holding a limiter ----------------------------------------------------------


@in_virtual_time
async def test_a_retry_passes_through_the_limiter_and_waits_out_the_cooldown() -> None:
    model = InFlight(lambda n: ModelHTTPError(429, retry_after=2 * L) if n == 1 else "done")
    limiter = limiter_in_virtual_time(4)
    retrying = RetryingModel(
        RateLimitedModel(model, limiter), RetryPolicy(attempts=2, initial_wait_s=0, jitter_s=0)
    )
    response = await retrying.complete(REQUEST)
    assert response.message.content == "done"
    assert model.starts == pytest.approx([0, L + 2 * L])  # its latency, then the cool-down
    assert limiter.throttled == 1
    assert limiter.limit == 2


def reporting() -> tuple[CallReport, list[Event]]:
    """A report for the model call to come, and the events it emits."""
    events: list[Event] = []
    report = CallReport(Tracer(events.append, log=False), worker="w", run_id=None, turn=1)
    current_call.set(report)
    return report, events


@in_virtual_time
async def test_a_retry_reports_the_wait_the_limiters_cooldown_makes_it_wait() -> None:
    # A 429 without Retry-After: the backoff is 0.01 s, the limiter's cool-down 3 L.
    model = InFlight(lambda n: ModelHTTPError(429) if n == 1 else "done", latency=0.0)
    limiter = limiter_in_virtual_time(4, cooldown_s=3 * L)
    policy = RetryPolicy(attempts=2, initial_wait_s=0.01, jitter_s=0)
    report, events = reporting()
    await RetryingModel(RateLimitedModel(model, limiter), policy).complete(REQUEST)
    [retrying] = events
    assert isinstance(retrying, ModelCallRetrying)
    assert retrying.wait_s == pytest.approx(3 * L)  # the cool-down, not the 0.01 s backoff
    assert model.starts[1] - model.starts[0] == pytest.approx(retrying.wait_s)  # and made
    assert report.retry_wait_s == retrying.wait_s


def test_openai_model_holds_one_limiter_for_all_its_callers() -> None:
    model = OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1")
    assert model.limiter is not None
    assert model.limiter.max_concurrency == 32
    assert OpenAIModel("m", base_url="http://127.0.0.1:9/v1", max_concurrency=None).limiter is None
    shared = AdaptiveLimiter(5)
    a = OpenAIModel("a", base_url="http://127.0.0.1:9/v1", limiter=shared)
    b = OpenAIModel("b", base_url="http://127.0.0.1:9/v1", limiter=shared, max_concurrency=99)
    assert a.limiter is b.limiter is shared
    assert OpenAIModel("c", max_concurrency=3).limiter.max_concurrency == 3  # type: ignore[union-attr]


# --- event loops ------------------------------------------------------------------------


def test_a_loop_that_ended_with_slots_held_and_callers_waiting_leaves_none_behind() -> None:
    """A loop closed with attempts still in it (never cancelled) leaves slots counted
    and waiters bound to it; the next loop must start clean, not wait for them forever
    or wake them on the closed loop."""
    limiter = AdaptiveLimiter(1)
    gate: list[asyncio.Event] = []

    async def hold() -> None:
        async with limiter.attempt():
            gate.append(asyncio.Event())
            await gate[0].wait()

    async def strand() -> None:
        loop = asyncio.get_running_loop()
        stranded = {loop.create_task(hold()), loop.create_task(succeed(limiter))}
        await anyio.wait_all_tasks_blocked()
        assert (limiter.in_flight, limiter.waiting) == (1, 1)
        assert not any(task.done() for task in stranded)

    ended = asyncio.new_event_loop()
    destroyed: list[dict[str, Any]] = []  # what asyncio says of tasks left pending
    ended.set_exception_handler(lambda _, context: destroyed.append(context))
    ended.run_until_complete(strand())
    ended.close()  # with both tasks pending

    async def next_loop() -> None:
        with anyio.fail_after(2):
            await succeed(limiter, 3)
        assert (limiter.in_flight, limiter.waiting) == (0, 0)

    asyncio.run(next_loop())
    del ended
    gate.clear()
    gc.collect()  # the stranded attempts end now, and must not count against the new loop
    assert limiter.in_flight == 0
    assert len(destroyed) == 2
    asyncio.run(next_loop())


def test_a_second_event_loop_at_once_is_refused_and_leaves_the_first_ones_slots() -> None:
    """Two threads' loops at once would count each other's attempts as their own (and
    wait for ever on slots the other loop forgot): the second is refused at once."""
    limiter = AdaptiveLimiter(1)
    with LoopInThread() as there:
        release = asyncio.Event()
        holding = threading.Event()

        async def hold() -> None:
            async with limiter.attempt():
                holding.set()
                await release.wait()

        held = there.start(hold())
        assert holding.wait(LIMIT_S)
        with pytest.raises(EventLoopConflict, match="AdaptiveLimiter"):
            asyncio.run(succeed(limiter))
        there.call(release.set)
        held.result(LIMIT_S)
        there.run(succeed(limiter, 2))  # its one slot was given back, not lost
        assert (limiter.in_flight, limiter.waiting) == (0, 0)
    asyncio.run(succeed(limiter))  # that loop stopped: the next one serves
