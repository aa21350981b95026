"""Judging how work grows with its input by the processor time it takes.

A test that says "eight times the input takes about eight times as long" measures
the time this thread spends computing, not the wall clock: on a loaded machine the
wall clock also counts the slices other processes ran in, which a longer measurement
meets more often than a short one, so its ratio grows with the load (a ratio of 61
was seen where the work grew eightfold).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


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
