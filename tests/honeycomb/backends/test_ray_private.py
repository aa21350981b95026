"""The private Ray that a backend starts for its process (``RayBackend()`` with no
address), seen from outside, as a user's program would be: one driver process, run as
a program, its processes listed while it runs, then killed.

- a tool of the program itself (``__main__``) runs in the actors;
- every process of that Ray listens on the loopback interface only;
- killed with SIGKILL, the driver leaves none of them running.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")  # Ray brings its own

from tests.support.listening import listeners, wide  # noqa: E402 (it needs psutil)

pytestmark = [
    pytest.mark.xdist_group("ray"),
    pytest.mark.skipif(sys.platform != "linux", reason="lists processes and sockets on Linux"),
]


@dataclass
class Driver:
    """The driver process, what it printed, and what it started (listed while it ran)."""

    process: subprocess.Popen[str]
    report: dict[str, Any]
    started: list[Any]  # psutil.Process
    listening: dict[str, list[str]]
    log: Path


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    log = tmp_path_factory.mktemp("driver") / "stderr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    with log.open("w") as err:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.support.ray_driver", "--private"],
            stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
            env={**env, "RAY_USAGE_STATS_ENABLED": "0"},
        )  # fmt: skip
    started: list[Any] = []
    try:
        line = _first_line(child, log, within_s=100)
        me = psutil.Process(child.pid)
        started = me.children(recursive=True)
        listening = listeners([me, *started])
        yield Driver(child, json.loads(line), started, listening, log)
    finally:
        for each in [*started, child]:
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                each.kill()
        child.wait()


def _first_line(child: subprocess.Popen[str], log: Path, within_s: float) -> str:
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], within_s)
    line = child.stdout.readline() if ready else ""
    assert line, f"the driver said nothing: {log.read_text()[-2000:]}"
    return line


def test_a_tool_of_the_program_itself_runs_in_the_actor(driver: Driver) -> None:
    """A ``@tool`` defined in ``__main__`` goes to the actors by value."""
    (actor,) = driver.report["pids"]
    assert driver.report["answers"] == [f"in {actor}", "a"]
    assert actor != driver.process.pid


def test_every_process_of_the_private_ray_listens_on_loopback_only(driver: Driver) -> None:
    # The driver, the GCS, the raylet and the actor at least (not a check of nothing).
    assert len(driver.listening) >= 4, driver.listening
    assert wide(driver.listening) == {}


def test_a_killed_driver_leaves_none_of_its_ray_running(driver: Driver) -> None:
    names = {p.pid: p.name() for p in driver.started}
    assert any("raylet" in name for name in names.values()), names
    os.kill(driver.process.pid, signal.SIGKILL)  # the driver alone, not its group
    driver.process.wait()
    deadline = time.monotonic() + 30
    while left := [p for p in driver.started if _running(p)]:
        assert time.monotonic() < deadline, (
            f"still running 30 s after the driver was killed: {[names[p.pid] for p in left]}"
        )
        time.sleep(0.2)


def _running(process: Any) -> bool:
    try:
        return bool(process.is_running()) and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
