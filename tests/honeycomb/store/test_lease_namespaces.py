"""Where a shared run store meets processes it cannot see: replicas of a service in
containers with the host's name (host networking) but PID namespaces of their own. A
lease held by a live process of another namespace is not that of a process "gone":
a run it carries on reads as running, and no other replica takes it over."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from honeycomb.errors import RunBusy
from honeycomb.store import RunStore
from tests.support import ROOT
from tests.support.concurrency import MEET_LIMIT_S
from tests.support.durable import Setup
from tests.support.stores import Where, query

IN_ITS_OWN_NAMESPACE = [
    "unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--kill-child",
    "sh", "-c",
    # Its processes' ids start far from this namespace's: the run's is 99991.
    'echo 99990 > /proc/sys/kernel/ns_last_pid && "$0" "$@"',
]  # fmt: skip


def _namespaces_can_be_made() -> bool:
    if shutil.which("unshare") is None:
        return False
    tried = subprocess.run([*IN_ITS_OWN_NAMESPACE, "true"], capture_output=True, check=False)
    return tried.returncode == 0


@pytest.fixture
def elsewhere(store: Where, tmp_path: Path) -> Iterator[Where]:
    """Run r1 of a durable run (tests/support/durable.py, slow: its calls take up to a
    minute each) in a process of another PID namespace, on this host, holding its
    lease; stopped after the test."""
    if sys.platform != "linux" or not _namespaces_can_be_made():
        pytest.skip("needs Linux and unshare allowed to make user and PID namespaces")
    store_arg = store if isinstance(store, str) else str(store)
    paths = [store_arg, str(tmp_path / "effects.txt"), str(tmp_path / "calls.txt")]
    child = [sys.executable, "-m", "tests.support.durable", *paths, "r1", "1", "1", "60"]
    process = subprocess.Popen([*IN_ITS_OWN_NAMESPACE, *child], cwd=ROOT)
    try:
        yield store
    finally:
        process.kill()  # the namespace's processes end with it (--kill-child)
        process.wait()


async def test_a_live_run_of_another_pid_namespace_is_not_taken_over(
    elsewhere: Where, tmp_path: Path
) -> None:
    # Its owner's pid (99991) is no process here: the lease was taken for one "gone",
    # the run listed interrupted, and a resume here ran it beside its live owner.
    with anyio.fail_after(MEET_LIMIT_S):  # its first model call: it holds the lease
        while not (tmp_path / "calls.txt").exists():  # noqa: ASYNC110 - another process's file
            await anyio.sleep(0.02)
    ((pid,),) = query(elsewhere, "SELECT pid FROM leases WHERE run_id = 'r1'")
    assert pid == 99991
    if Path(f"/proc/{pid}").exists():  # noqa: ASYNC240 - a look at /proc
        pytest.skip("a process of this namespace has the owner's pid: nothing to tell apart")
    store = RunStore(elsewhere)
    try:
        found = store.find("r1")
        assert found is not None
        assert found.status == "running"
        setup = Setup(tmp_path / "effects-here.txt", tmp_path / "calls-here.txt")
        with pytest.raises(RunBusy):
            await setup.executor(store).resume("r1")
    finally:
        store.close()
    assert not (tmp_path / "calls-here.txt").exists()  # no model call made here
