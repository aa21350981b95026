"""What the tests' own helpers promise, where a test relies on it."""

from __future__ import annotations

import time

from tests.support.cpu_time import cpu_seconds


def test_time_a_measured_thread_spends_not_running_does_not_count() -> None:
    # As when other processes hold the processor: the wall clock runs, the work does not.
    waited = cpu_seconds(lambda: time.sleep(0.05), repeats=2)
    assert waited < 0.01
