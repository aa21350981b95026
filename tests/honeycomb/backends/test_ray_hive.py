"""A hive on Ray: the keys its models read from the environment, and the life of the
pool its Executor makes (a real local Ray, the session's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor
from honeycomb.backends import RayBackend

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")  # Ray brings its own

pytestmark = pytest.mark.xdist_group("ray")  # one test process starts the session's Ray


def _hive(folder: Path, text: str) -> Path:
    path = folder / "hive.yaml"
    path.write_text(text)
    return path


_ON_RAY = """
models:
  default: offline
roles:
  r: {description: Answers.}
aggregator: concat
backend: {ray: {actors: 1, actor_cpus: 0}}
"""


async def test_an_executor_stops_the_pool_its_hive_made_when_closed(
    ray_session: None, tmp_path: Path
) -> None:
    # Nothing stopped the actors of the pool from_yaml made for backend: ray: a service
    # that made an Executor for each request kept every one of them running.
    async with Executor.from_yaml(_hive(tmp_path, _ON_RAY)) as executor:
        result = await executor.run("t", subtasks=[("r", "hello")])
        assert result.status == "ok"
        pool = executor.shared.backend
        assert isinstance(pool, RayBackend)
        (pid,) = await pool.pids()
    _, alive = psutil.wait_procs([psutil.Process(pid)], timeout=30)
    assert not alive

    # aclose does it too, as often as the Executor runs again.
    executor = Executor.from_yaml(tmp_path / "hive.yaml")
    await executor.run("t", subtasks=[("r", "hello")])
    pool = executor.shared.backend
    assert isinstance(pool, RayBackend)
    (pid,) = await pool.pids()
    await executor.aclose()
    _, alive = psutil.wait_procs([psutil.Process(pid)], timeout=30)
    assert not alive

    # A pool given is the caller's: closing the Executor leaves it running.
    given = RayBackend(actors=1, actor_cpus=0)
    try:
        async with Executor.from_yaml(tmp_path / "hive.yaml", backend=given) as executor:
            await executor.run("t", subtasks=[("r", "hello")])
        (pid,) = await given.pids()
        assert psutil.Process(pid).is_running()
    finally:
        given.stop()
