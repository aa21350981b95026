"""Fixtures of the backend tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from honeycomb.backends import RayBackend


@pytest.fixture(scope="session")
def ray_pools(ray_session: None) -> Iterator[RayBackend]:
    """The session's pool of two Ray actors (see :func:`ray_pool`)."""
    pool = RayBackend(actors=2, actor_cpus=0)
    yield pool
    pool.stop()


@pytest.fixture
def ray_pool(ray_pools: RayBackend) -> Iterator[RayBackend]:
    """A pool of two Ray actors, the session's (the test goes to the ``ray`` xdist
    group), as a service keeps one for its runs: each actor is a Python process that
    imports Honeycomb, a second of CPU or more, which a pool made a test spent on each
    test. It is as good as a new one for each test: a test that leaves it with an actor
    dead or a worker running stops it, and the next test's first worker starts it
    again."""
    yield ray_pools
    actors = ray_pools._pool or []  # (what the driver knows of each actor)
    if any(a.dead or a.stopped or a.running for a in actors):
        ray_pools.stop()


@pytest.fixture(params=["local", "ray"])
def backend(request: pytest.FixtureRequest) -> RayBackend | None:
    """None (the local backend), or the session's pool of two Ray actors
    (:func:`ray_pool`)."""
    if request.param == "local":
        return None
    pytest.importorskip("ray")
    pool: RayBackend = request.getfixturevalue("ray_pool")
    return pool
