"""One cell's run and judgement: the hive its features make, run to its end under a
hard time limit, every invariant checked (the Ray backend's twice: on the local
backend and on Ray, and the two outcomes compared), then judged against the cell's
known defects."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.interactions.drive import Outcome, drive
from tests.interactions.features.base import Env, observations
from tests.interactions.features.running import Ray
from tests.interactions.hive import Hive
from tests.interactions.invariants import Report, Violation, check_universal
from tests.interactions.ledger import Ledger
from tests.interactions.matrix import Cell, Known

__all__ = ["KnownDefects", "judge", "run_cell"]

TIME_LIMIT_S = 40.0
"""A run that takes longer is deadlocked (every tool call has 5 s, every model call
answers at once)."""


ASIDE_ROLES = ("scribe", "typist")


class KnownDefects(Exception):
    """The cell broke exactly what its known defects break (an expected failure)."""


async def run_cell(cell: Cell, env: Env, folder: Path) -> Report:
    """Run the cell's hive (on the local backend, and on Ray when a feature is Ray's)
    and check it."""
    report = Report()
    if "ray" not in cell.needs:
        await _twin(cell, env, folder, report)
        return report
    local = await _twin(
        cell, Env(env.mcp_url, env.mcp_token, env.mcp_notes), folder / "local", report
    )
    remote = await _twin(cell, env, folder / "ray", report, twin="on Ray: ")
    if local is not None and remote is not None:
        here, there = signature(local), signature(remote)
        for key in sorted(here.keys() | there.keys()):
            report.expect(
                here.get(key) == there.get(key),
                "same on ray",
                f"{key}: local {here.get(key)!r}, Ray {there.get(key)!r}",
            )
    return report


async def _twin(
    cell: Cell, env: Env, folder: Path, report: Report, twin: str = ""
) -> Outcome | None:
    folder.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (once, before the run)
    hive = Hive(ledger=Ledger(folder), cell=cell.id, env=env)
    mine = Report()
    try:
        for feature in cell.features:
            feature.apply(hive, env)
        for feature in cell.features:
            await feature.prepare(hive)
        try:
            with anyio.fail_after(TIME_LIMIT_S):
                outcome = await drive(hive)
        except TimeoutError:
            mine.expect(False, "no deadlock", f"the run did not end within {TIME_LIMIT_S:.0f}s")
            outcome = None
        if outcome is not None:
            allowed = tuple(e for f in cell.features for e in f.allowed)
            check_universal(outcome, mine, allowed)
            for feature in cell.features:
                feature.check(outcome, mine)
    finally:
        hive.close()
    report.violations += [Violation(v.invariant, twin + v.detail) for v in mine.violations]
    return outcome


def signature(outcome: Outcome) -> dict[str, Any]:
    """What must not depend on where the workers ran."""
    result = outcome.result
    budget = "budgets" in outcome.hive.policy  # which calls a budget cut is a race
    # Where a life is cut off is a race: what a later life asks again depends on it.
    cut = outcome.hive.interrupt
    subtasks: dict[str, Any] = {}
    answer = None
    if result is not None and not budget:
        for sid, s in result.subtasks.items():
            if sid not in Ray.ASIDE:
                seen = sorted((m.name, m.status, m.content) for m in observations(s))
                subtasks[sid] = (s.status, s.text, seen)
        answer = re.sub(r"; s[78]=\w+", "", result.answer_text)
        if outcome.hive.token:
            subtasks = json.loads(json.dumps(subtasks).replace(outcome.hive.token, "TOKEN"))
    calls = outcome.hive.ledger.model_calls()
    status = outcome.last.status
    if result is not None and status in ("ok", "partial"):  # as if the aside ones went well
        mine = [s for sid, s in result.subtasks.items() if sid not in Ray.ASIDE]
        status = "ok" if all(s.ok for s in mine) else "partial"
    return {
        "status": status,
        "answer": answer,
        **{f"subtask {sid}": shown for sid, shown in subtasks.items()},
        "model calls": None
        if budget or cut
        else len([c for c in calls if c["role"] not in ASIDE_ROLES]),
    }


def judge(cell: Cell, report: Report) -> None:
    """Pass, or fail as expected (the cell's known defects, and nothing else), or fail
    naming what broke.

    Raises:
        AssertionError: for a violation no known defect of the cell explains, or a
            known defect that no longer shows (remove it from ``KNOWN``).
        KnownDefects: when the violations are exactly those of the known defects (the
            cell's strict xfail).
    """
    known = cell.known
    unexplained = [v for v in report.violations if not any(k.covers(v) for k in known)]
    shown = [k for k in known if any(k.covers(v) for v in report.violations)]
    gone = [k for k in known if k not in shown and not k.sometimes]
    listed = "\n".join(f"  {v}" for v in report.violations)
    if unexplained:
        raise AssertionError(
            f"cell {cell.id} broke invariants no known defect explains:\n"
            + "\n".join(f"  {v}" for v in unexplained)
            + (f"\nall it saw:\n{listed}" if len(unexplained) < len(report.violations) else "")
        )
    if gone and shown:
        raise AssertionError(
            f"cell {cell.id}: {_labels(gone)} no longer show (fixed?): remove them from "
            f"KNOWN in tests/interactions/matrix.py; it saw:\n{listed}"
        )
    if any(not k.sometimes for k in known):
        if not gone:
            raise KnownDefects(f"{_labels(shown)}:\n{listed}")
    elif shown:  # only defects that show sometimes: no strict mark, an xfail when they do
        pytest.xfail(f"{_labels(shown)}: {shown[0].why}")


def _labels(known: tuple[Known, ...] | list[Known]) -> str:
    return ", ".join(sorted({k.label for k in known}))
