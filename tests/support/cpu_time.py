"""Judging how work grows with its input by the processor time it takes.

A test that says "eight times the input takes about eight times as long" measures
the time this thread spends computing, not the wall clock: on a loaded machine the
wall clock also counts the slices other processes ran in, which a longer measurement
meets more often than a short one, so its ratio grows with the load (a ratio of 61
was seen where the work grew eightfold).

:func:`cpu_growth` compares two sizes of one piece of work: grow the input 16 times and
linear work takes about 16 times the processor time, quadratic work 256 times; a test
bounds it at 64, their geometric middle, four times off each.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

GROWTH = 16
"""How many times :func:`cpu_growth`'s larger input is its smaller one."""
LINEAR_BOUND = 64
"""The most :func:`cpu_growth` may be for work that grows linearly (see above)."""


def cpu_seconds(work: Callable[[], object], repeats: int = 5) -> float:
    """The least processor time this thread spends doing ``work``, over ``repeats``
    tries, with the garbage collector held off (a full collection lands in one try
    and not another)."""
    best = float("inf")
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            started = time.thread_time()
            work()
            best = min(best, time.thread_time() - started)
    finally:
        if collecting:
            gc.enable()
    return best


def cpu_growth(make: Callable[[int], Callable[[], object]], size: int, repeats: int = 5) -> float:
    """How many times the processor time of ``make(GROWTH * size)``'s work is that of
    ``make(size)``'s: the least of each over ``repeats`` tries, taken in turn, so that a
    stretch of load (or of memory traffic from other processes) meets both alike."""
    small, large = make(size), make(GROWTH * size)
    least_small = least_large = float("inf")
    for _ in range(repeats):
        least_small = min(least_small, cpu_seconds(small, repeats=1))
        least_large = min(least_large, cpu_seconds(large, repeats=1))
    return least_large / least_small
