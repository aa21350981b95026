"""What the tests' own helpers promise, where a test relies on it."""

from __future__ import annotations

import time

import pytest

from tests.support.cpu_time import cpu_seconds


def test_time_a_measured_thread_spends_not_running_does_not_count() -> None:
    # As when other processes hold the processor: the wall clock runs, the work does not.
    waited = cpu_seconds(lambda: time.sleep(0.05), repeats=2)
    assert waited < 0.01


def test_the_tests_of_an_xdist_group_go_to_one_process(request: pytest.FixtureRequest) -> None:
    # xdist sends a group's tests to one process by the group it adds to their ids
    # ("...@ray"); a pytest that drops the addition (9.2: pytest-dev/pytest-xdist#1386)
    # spreads them, each process starting its own Ray, model and PostgreSQL server.
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not in a test process of pytest-xdist's --dist loadgroup")
    ungrouped = [
        item.nodeid
        for item in request.session.items
        if item.get_closest_marker("xdist_group") is not None
        and item.nodeid.rfind("@") <= item.nodeid.rfind("]")  # no "@group" after a "[...]"
    ]
    assert not ungrouped, (
        f"xdist did not group {len(ungrouped)} tests, {ungrouped[0]} among them: install "
        "the pytest that pyproject.toml's dev extra allows"
    )
