"""Fixtures of the backend tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from honeycomb.backends import RayBackend


@pytest.fixture(params=["local", "ray"])
def backend(request: pytest.FixtureRequest) -> Iterator[RayBackend | None]:
    """None (the local backend), or a pool of two Ray actors, stopped after the test
    (on the session's Ray: the test goes to the ``ray`` xdist group)."""
    if request.param == "local":
        yield None
        return
    pytest.importorskip("ray")
    request.getfixturevalue("ray_session")
    pool = RayBackend(actors=2, actor_cpus=0)
    yield pool
    pool.stop()
