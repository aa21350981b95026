"""Paced starts: attempts spaced an interval apart, each booked as its caller comes.

An :class:`~runtime.limits.ratelimit.AdaptiveLimiter` paces attempts two ways: at the
rate the quota an endpoint reported refills (:class:`QuotaPace`), and at the rate its
429s taught. Each books starts with a :class:`Pacer`. A start is booked when its caller
asks for it, so that each caller knows its wait before it waits (a retry gives up at
once when that would end past its deadline). A booking is kept only while its caller
waits for it: a caller that leaves first (cancelled, or giving up) gives its start
back, and the callers booked after it book again, one interval sooner each; no later
caller waits behind a start that nobody takes.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable

from runtime.concurrency import TimedOut, within
from runtime.limits.quota import QuotaLeft

__all__ = ["Pacer", "QuotaPace"]

_PACE = 0.97
"""Share of the quota's refill rate that paced attempts start at: a little below it,
so that jitter in when requests arrive does not empty the quota."""

_RESERVE = 0.02
"""Share of a limit that is left unspent before pacing starts (at least two calls'
worth): what requests on their way when the quota was read may still take."""


class Pacer:
    """Starts booked ``interval`` seconds apart, in the order their callers come.

    Args:
        clock: The time now, in seconds, that starts are booked by.
        sleep: Waits that many seconds of ``clock``.
    """

    def __init__(
        self, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self._now = clock
        self._sleep = sleep
        self._next = 0.0  # the earliest moment the next start may be booked for
        # The waits for a booked start, in the order they were booked, and each start.
        self._booked: dict[within, float] = {}

    async def start(
        self, interval: Callable[[], float | None], refuse: Callable[[float], None]
    ) -> bool:
        """Wait for this caller's start, ``interval()`` after the start booked before
        it (None: start now, unpaced); True if it was held back.

        Args:
            interval: The seconds between two starts, read as each start is booked.
            refuse: Called with each wait before it is made; it raises to make none
                (the start booked for it is given back).

        Raises:
            Whatever ``refuse`` raises.
        """
        held = False
        while (spacing := interval()) is not None:
            now = self._now()
            start = max(now, self._next)
            self._next = start + spacing
            if start <= now:
                break
            booked = within(None)
            self._booked[booked] = start
            try:
                refuse(start - now)
                held = True
                with contextlib.suppress(TimedOut), booked:
                    await self._sleep(start - now)
            except BaseException:
                self._give_back(booked)
                raise
            self._booked.pop(booked, None)
            if not booked.expired:
                break  # its start came; expired: booked again (restart, or given back)
        return held

    def restart(self, at: float) -> None:
        """Void every start booked: the next is at ``at``, and each caller waiting
        books again (the pace changed)."""
        self._next = at
        booked, self._booked = self._booked, {}
        for wait in booked:
            wait.expire()

    def forget(self) -> None:
        """Drop the bookings of callers that are gone with their event loop."""
        self._booked = {}

    def _give_back(self, leaving: within) -> None:
        """The start ``leaving`` booked goes unused: the next is booked for it, and the
        callers booked after it book again."""
        start = self._booked.pop(leaving, None)
        if start is None:
            return  # voided already: its caller was booking again
        self._next = start
        later = [wait for wait, booked in self._booked.items() if booked > start]
        for wait in later:
            del self._booked[wait]
            wait.expire()


class QuotaPace:
    """Starts kept within the quota an endpoint reported (``x-ratelimit-*``): free
    while enough of it is left, less a reserve, and once it runs low spaced at 97% of
    the rate it refills at (read from its limit, what is left and the time until it is
    whole again), or held until it is whole again when its limit is not said.

    Args:
        clock: The time now, in seconds, that starts are booked by.
        sleep: Waits that many seconds of ``clock``.
    """

    def __init__(
        self, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self._now = clock
        self._sleep = sleep
        self._allowance = math.inf  # attempts that may start freely
        self._interval: float | None = None  # then the seconds between two (None: unsaid)
        self._refilled_at = 0.0
        self._tokens_per_call: float | None = None
        self._starts = Pacer(clock, sleep)

    def observe(self, quota: QuotaLeft | None, *, tokens: int | None, others: int) -> None:
        """Take in what an answer said of the quota, and the tokens it cost.

        Args:
            quota: What is left; None: nothing was said.
            tokens: The answer's input plus output tokens, which a tokens limit counts.
            others: Attempts still out besides this one: spent, though the quota may
                not have counted them yet.
        """
        if tokens is not None and tokens > 0:
            known = self._tokens_per_call
            self._tokens_per_call = tokens if known is None else 0.7 * known + 0.3 * tokens
        if quota is None:
            return
        now = self._now()
        allowance, interval, refilled_at = math.inf, None, now
        for left, reset_s, limit, cost in (
            (quota.requests, quota.requests_reset_s, quota.requests_limit, 1.0),
            (quota.tokens, quota.tokens_reset_s, quota.tokens_limit, self._tokens_per_call),
        ):
            if left is None or cost is None:
                continue
            reserve = max(2 * cost, _RESERVE * (limit or 0.0))
            allowance = min(allowance, (left - reserve) / cost - others)
            if reset_s is not None:
                refilled_at = max(refilled_at, now + reset_s)
                if limit is not None and limit > left and reset_s > 0:
                    calls_per_s = (limit - left) / reset_s / cost
                    interval = max(interval or 0.0, 1 / (calls_per_s * _PACE))
        self._allowance, self._refilled_at = allowance, refilled_at
        if interval is not None:
            self._interval = interval  # a quota's rate stays; a full quota does not say it

    async def start(self, refuse: Callable[[float], None]) -> bool:
        """Start now while the quota has room, else at the next moment paced at its
        refill rate; True if this caller was held back.

        Raises:
            Whatever ``refuse`` raises, called with a wait before it is made.
        """
        if self._allowance >= 1:
            self._allowance -= 1
            return False
        if self._interval is None:  # no rate known: the quota is whole again at its reset
            wait = self._refilled_at - self._now()
            if wait <= 0:
                return False
            refuse(wait)
            await self._sleep(wait)
            return True
        return await self._starts.start(lambda: self._interval, refuse)

    def forget(self) -> None:
        """Drop the bookings of callers that are gone with their event loop."""
        self._starts.forget()
