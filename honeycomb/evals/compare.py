"""Comparing two evals of the same cases: per case, whether it newly fails or newly
passes, and how its score, cost and latency moved; a regression is a case that passed
in the baseline and fails now (``honeycomb eval --baseline``, ``eval compare``). The
totals' deltas are over the cases both evals have: an eval of some of the cases
(``--case``) against one of all of them compares like with like."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from honeycomb.evals.report import CaseReport, EvalReport, percentile
from runtime.value import Value

__all__ = [
    "CaseChange",
    "Change",
    "Comparison",
    "compare",
    "dollars_delta",
    "over",
    "run_over",
]

Change = Literal["newly_failing", "newly_passing", "failing", "passing", "added", "removed"]
"""What became of a case: ``added`` (not in the baseline), ``removed`` (only in it)."""


class CaseChange(Value, frozen=True, kw_only=True):
    """One case in both evals (or in one of them).

    Attributes:
        id: The case.
        change: What became of it.
        score: Its score now less its score then (0 when it is in one eval only).
        cost: What a run of it costs now less then (the mean of its runs made: an
            eval of more ``--repeat`` runs, or one whose budget left some unmade, is
            neither dearer nor cheaper for it).
        latency_s: Its median wall time now less then.
        pass_rate: Its pass rate now less then.
        reason: Why it fails now, when it does.
        renamed_from: Its id in the baseline, when it was renamed since: the one case
            of the same task that only the baseline has.
        task_changed: Its task is not the baseline's: what it ran differs.
    """

    id: str
    change: Change
    score: float = 0.0
    cost: float = 0.0
    latency_s: float = 0.0
    pass_rate: float = 0.0
    reason: str | None = None
    renamed_from: str | None = None
    task_changed: bool = False

    @property
    def named(self) -> str:
        """Its id as the reports show it: ``lisbon-porto (was two-cities)``, ``oslo
        (its task changed)``."""
        was = f" (was {self.renamed_from})" if self.renamed_from is not None else ""
        return self.id + was + (" (its task changed)" if self.task_changed else "")


class Comparison(Value, frozen=True, kw_only=True):
    """What changed from ``baseline`` to ``current`` (their eval ids), case by case
    in the current eval's order (removed cases last), and in the totals of the
    ``compared`` cases both have: their pass rate (a case not run did not pass), and,
    over the ``ran`` of them that both ran, what a run of each costs, their p50 and p95
    latency (a case an eval's budget left unrun cost nothing, which is no saving)."""

    baseline: str
    current: str
    cases: tuple[CaseChange, ...]
    compared: int = 0
    ran: int = 0
    pass_rate: float = 0.0
    cost: float = 0.0
    p50_s: float = 0.0
    p95_s: float = 0.0

    @property
    def regressions(self) -> list[CaseChange]:
        """The cases that passed in the baseline and fail now."""
        return [c for c in self.cases if c.change == "newly_failing"]

    @property
    def improvements(self) -> list[CaseChange]:
        return [c for c in self.cases if c.change == "newly_passing"]


def compare(baseline: EvalReport, current: EvalReport) -> Comparison:
    """What changed from ``baseline`` to ``current``. A case renamed since (the one
    case of its task that only the baseline has) is compared with what it was: one
    that passed under its old id and fails now is a regression, not an added case."""
    before = {c.id: c for c in baseline.cases}
    before.update({name: CaseReport(id=name, task="") for name in baseline.not_run})
    now = {c.id: c for c in current.cases}
    now.update({name: CaseReport(id=name, task="") for name in current.not_run})
    renamed = _renamed(before, now)
    was = {name: renamed.get(name, name) for name in now if name in before or name in renamed}
    changes = [
        _change(before[was[name]] if name in was else None, case, renamed)
        for name, case in now.items()
    ]
    gone = set(was.values())
    changes += [CaseChange(id=name, change="removed") for name in before if name not in gone]
    both = list(was)
    ran = [name for name in both if now[name].attempts and before[was[name]].attempts]
    then, later = [before[was[name]] for name in ran], [now[name] for name in ran]
    return Comparison(
        baseline=baseline.eval_id,
        current=current.eval_id,
        cases=tuple(changes),
        compared=len(both),
        ran=len(ran),
        pass_rate=_pass_rate([now[name] for name in both])
        - _pass_rate([before[was[name]] for name in both]),
        cost=sum(map(_run_cost, later)) - sum(map(_run_cost, then)),
        p50_s=_latency(later, 0.5) - _latency(then, 0.5),
        p95_s=_latency(later, 0.95) - _latency(then, 0.95),
    )


def _renamed(before: dict[str, CaseReport], now: dict[str, CaseReport]) -> dict[str, str]:
    """The cases only ``now`` has that were renamed from one only ``before`` has (new
    id: old id): the one such case of each task, when that task is one such case's
    there too (two of one task, or a case not run, whose task is not kept, are not
    paired)."""
    gone = _by_task(case for name, case in before.items() if name not in now)
    new = _by_task(case for name, case in now.items() if name not in before)
    return {
        ids[0]: gone[task][0]
        for task, ids in new.items()
        if len(ids) == 1 and len(gone.get(task, ())) == 1
    }


def _by_task(cases: Iterable[CaseReport]) -> dict[str, list[str]]:
    """The ids of ``cases`` by their task (those with none left out)."""
    found: dict[str, list[str]] = {}
    for case in cases:
        if case.task:
            found.setdefault(case.task, []).append(case.id)
    return found


def _pass_rate(cases: list[CaseReport]) -> float:
    """The share of ``cases`` that passed (one not run did not), as a report's."""
    return sum(c.passed for c in cases) / len(cases) if cases else 0.0


def _run_cost(case: CaseReport) -> float:
    """What a run of ``case`` cost, the mean of its runs made (0: none was made)."""
    return case.cost / len(case.attempts) if case.attempts else 0.0


def _latency(cases: list[CaseReport], q: float) -> float:
    """The ``q`` quantile of the wall times of the runs of ``cases``, as a report's."""
    return percentile([a.latency_s for c in cases for a in c.attempts], q)


def _change(before: CaseReport | None, now: CaseReport, renamed: dict[str, str]) -> CaseChange:
    reason = now.why if now.attempts else "not run"
    was = renamed.get(now.id)
    if before is None:
        change: Change = "added"
    elif before.passed:
        change = "passing" if now.passed else "newly_failing"
    else:
        change = "newly_passing" if now.passed else "failing"
    # Kept masked alike; a case not run keeps no task, which is no change of it.
    edited = before is not None and bool(before.task and now.task) and before.task != now.task
    if before is None or not before.attempts or not now.attempts:
        return CaseChange(
            id=now.id,
            change=change,
            reason=None if now.passed else reason,
            renamed_from=was,
            task_changed=edited,
        )
    return CaseChange(
        id=now.id,
        renamed_from=was,
        task_changed=edited,
        change=change,
        score=now.score - before.score,
        cost=_run_cost(now) - _run_cost(before),
        latency_s=now.latency_s - before.latency_s,
        pass_rate=now.pass_rate - before.pass_rate,
        reason=None if now.passed else reason,
    )


def over(comparison: Comparison) -> str:
    """What the totals' deltas are over, as the reports say it before them: nothing
    when both evals have the same cases, else ``over the 2 cases in both: ``."""
    if all(c.change not in ("added", "removed") for c in comparison.cases):
        return ""
    count = comparison.compared
    return f"over the {count} case{'' if count == 1 else 's'} in both: "


def run_over(comparison: Comparison) -> str:
    """What the cost and latency deltas are over, as the reports say it before them:
    nothing when both evals ran every case they compare, else ``over the 3 cases run
    in both: ``."""
    if comparison.ran == comparison.compared:
        return ""
    count = comparison.ran
    return f"over the {count} case{'' if count == 1 else 's'} run in both: "


def dollars_delta(delta: float) -> str:
    """A change of cost as the reports show it: ``+$0.0012``, ``-$0.0100``."""
    return f"{'-' if delta < 0 else '+'}${abs(delta):.4f}"
