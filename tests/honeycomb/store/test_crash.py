"""Crash and resume: a child process runs a stored run whose side-effecting tool appends
to a file; it is killed with SIGKILL at a random moment; a second process resumes the
run. Over many trials, every side effect happens exactly once or is reported as of
unknown outcome, every run ends with an answer, and no finished worker's model call is
made again. In an SQLite file and in PostgreSQL (a third of the trials, each in a new
schema).

``HONEYCOMB_CRASH_TRIALS`` sets the number of trials (default 10);
``HONEYCOMB_CRASH_REPORT`` names a JSON file to write the totals to.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess as Process
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.durable import calls_by_worker
from tests.support.processes import forked, run_module
from tests.support.stores import KINDS, Where, query

if TYPE_CHECKING:
    from tests.support.postgres import PostgresServer

WORKERS = 6
TRIALS = int(os.environ.get("HONEYCOMB_CRASH_TRIALS", "10"))

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "SIGKILL"),
    reason="the crash test kills with SIGKILL, which this platform (Windows) lacks",
)


def _child(context: ForkServerContext, db: Where, folder: Path, life: str) -> Process:
    """Life ``life`` of the run, in a process of its own (``python -m tests.support.durable``
    as :func:`~tests.support.processes.forked` starts it), its output in
    ``life-LIFE.out`` and ``life-LIFE.err``."""
    paths = [str(db), str(folder / "effects.txt"), str(folder / "calls.txt")]
    args = (
        "tests.support.durable",
        [*paths, "run", life, str(WORKERS)],
        str(folder / f"life-{life}"),
    )
    child = context.Process(target=run_module, args=args)
    child.start()
    return child


def _finished_workers(db: Where) -> set[str]:
    """Workers whose result the store had committed when the process died."""
    if isinstance(db, Path) and not db.exists():
        return set()
    try:
        rows = query(db, "SELECT worker FROM workers WHERE result IS NOT NULL")
    except Exception:  # killed before the schema was written
        return set()
    return {r[0] for r in rows}


def _unknown_lines(db: Where) -> set[str]:
    rows = query(db, "SELECT arguments FROM journal WHERE tool = 'append' AND status = 'unknown'")
    return {json.loads(r[0])["line"] for r in rows}


@pytest.mark.parametrize("kind", KINDS)
def test_killed_runs_resume_without_repeating_a_side_effect(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(20261130)
    totals: Counter[str] = Counter()
    server: PostgresServer | None = None
    context = forked()
    if kind == "postgresql":
        server = request.getfixturevalue("postgres")
    for trial in range(TRIALS if server is None else max(1, TRIALS // 3)):
        folder = tmp_path / f"trial-{trial}"
        folder.mkdir()
        db: Where = folder / "runs.db" if server is None else server.url()
        child = _child(context, db, folder, "1")
        deadline = time.monotonic() + 30
        while not (folder / "calls.txt").exists() and child.is_alive():
            assert time.monotonic() < deadline, "the child never started its run"
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.3))  # the run takes about 0.1-0.3 s
        child.kill()
        child.join()
        totals["killed mid-run" if child.exitcode == -signal.SIGKILL else "ran to the end"] += 1
        finished = _finished_workers(db)
        totals["workers finished before the kill"] += len(finished)

        resumed = _child(context, db, folder, "2")
        resumed.join(timeout=60)
        assert resumed.exitcode == 0, (folder / "life-2.err").read_text()[-2000:]
        outcome = json.loads((folder / "life-2.out").read_text().strip().splitlines()[-1])
        assert outcome["status"] == "ok"
        for i in range(WORKERS):
            assert f"done w{i}:" in outcome["answer"]

        effects = Counter((folder / "effects.txt").read_text().splitlines())
        unknown = _unknown_lines(db)
        for i in range(WORKERS):
            for step in (1, 2):
                line = f"w{i}-{step}"
                assert effects[line] <= 1, f"trial {trial}: {line} happened {effects[line]} times"
                if effects[line] == 0:
                    assert line in unknown, f"trial {trial}: {line} lost without a word"
        totals["side effects"] += sum(effects.values())
        totals["duplicated side effects"] += sum(n - 1 for n in effects.values() if n > 1)
        totals["unknown outcomes reported"] += len(unknown)

        made = calls_by_worker(folder / "calls.txt")
        for worker in finished:
            again = [turn for turn, life in made.get(worker, []) if life == "2"]
            assert again == [], f"trial {trial}: finished {worker} was asked again: {again}"
        totals["model calls after resume"] += sum(
            1 for worker in made.values() for _, life in worker if life == "2"
        )
    assert totals["killed mid-run"] > 0, "no kill landed inside a run; the test proved nothing"
    report = os.environ.get("HONEYCOMB_CRASH_REPORT")
    if report:
        Path(report).write_text(json.dumps({"trials": TRIALS, **totals}, indent=2) + "\n")
