"""Concurrency judged without a clock: a count of work in flight with its peak, and a
rendezvous that lets work go on only once ``n`` of it are inside together.

A bound on wall time cannot tell "ran two at once" from "ran on a slow machine"; a
peak and a rendezvous can. Work that runs one at a time never gathers ``n`` at the
rendezvous, and fails after a generous limit with a message that says so, instead of
hanging the suite.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

import anyio.to_thread

Traceback = TracebackType | None

MEET_LIMIT_S = 15.0
"""How long a rendezvous waits for the others: far past any load, short of a hang."""


class Overlap:
    """Counts the work inside it (``with`` in threads, ``async with`` on the loop) and
    the most at once. Thread-safe.

    Attributes:
        now: How many are inside.
        peak: The most that were inside at once.
        total: How many entered, in all.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = self.peak = self.total = 0

    def __repr__(self) -> str:
        return f"Overlap(now={self.now}, peak={self.peak}, total={self.total})"

    def __enter__(self) -> None:
        with self._lock:
            self.now += 1
            self.total += 1
            self.peak = max(self.peak, self.now)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Traceback
    ) -> None:
        with self._lock:
            self.now -= 1

    async def __aenter__(self) -> None:
        self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Traceback
    ) -> None:
        self.__exit__(kind, error, tb)


class Rendezvous:
    """Lets each party on only once ``n`` are waiting together: the proof that ``n``
    ran at once. Cyclic, as ``threading.Barrier`` is: the next ``n`` meet again.

    Threads call ``meet_here()``; tasks ``await meet()``, which waits in a thread so
    that the loop runs the other parties meanwhile.

    Raises:
        AssertionError: ``n`` did not gather within ``limit_s`` (they ran one after
            another, or fewer than ``n`` at a time); every party waiting is told.
    """

    def __init__(self, n: int, limit_s: float = MEET_LIMIT_S) -> None:
        self.n = n
        self.limit_s = limit_s
        self._barrier = threading.Barrier(n, timeout=limit_s)

    def meet_here(self) -> None:
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise AssertionError(
                f"{self.n} never ran at once: waited {self.limit_s:g}s for the others"
            ) from None

    async def meet(self) -> None:
        await anyio.to_thread.run_sync(self.meet_here, abandon_on_cancel=True)


def crowded_threads(work: Callable[[], object], threads: int = 6, times: int = 200) -> list[str]:
    """Run ``work`` ``times`` times in each of ``threads`` threads at once, with the
    threads switching as often as the interpreter allows (every collection lets the
    others run, as a finalizer would): what each raised, as ``Type: message``.
    Code that shares state between threads unguarded fails here in a fraction of a
    second, where a test suite meets it once in some hundred runs."""
    errors: list[str] = []

    def crowd() -> None:
        for _ in range(times):
            try:
                work()
            except Exception as exc:  # what the caller judges
                errors.append(f"{type(exc).__name__}: {exc}")
                return

    def let_others_run(phase: str, info: dict[str, object]) -> None:
        if phase == "start":
            time.sleep(0)

    interval = sys.getswitchinterval()
    gc.callbacks.append(let_others_run)
    sys.setswitchinterval(1e-6)
    try:
        running = [threading.Thread(target=crowd) for _ in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
        gc.callbacks.remove(let_others_run)
    return errors
