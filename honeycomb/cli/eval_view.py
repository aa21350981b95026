"""What ``honeycomb eval`` shows: a live progress line while the cases run (on a
terminal), then a table of the cases and the totals; and a comparison with a baseline."""

from __future__ import annotations

import shlex
from pathlib import Path
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from honeycomb.cli.stores import DEFAULT_STORE
from honeycomb.evals import Attempt, EvalReport
from honeycomb.evals.compare import Comparison, dollars_delta, over, run_over
from honeycomb.trace.format import counted, printable

__all__ = ["EvalProgress", "print_comparison", "print_report"]


class EvalProgress:
    """A progress bar on standard error while the runs go (``live``), each run as it
    is scored; else a line on ``lines`` at each tenth of the runs (a CI log), if given."""

    def __init__(self, total: int, *, live: bool, lines: TextIO | None = None) -> None:
        self.total = total
        self.lines = None if live else lines
        self.passed = self.failed = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if live:
            self._progress = Progress(
                TextColumn("eval"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )

    def __enter__(self) -> EvalProgress:
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task("", total=self.total)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, case: str, attempt: Attempt, done: int, total: int) -> None:
        if attempt.passed:
            self.passed += 1
        else:
            self.failed += 1
        said = f"{self.passed} passed, {self.failed} failed"
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task, completed=done, description=f"{said} · last: {_shown(case)}"
            )
        elif self.lines is not None and done * 10 // total > (done - 1) * 10 // total:
            print(f"eval: {done} of {counted(total, 'run')} · {said}", file=self.lines, flush=True)


def print_report(out: TextIO, report: EvalReport, store: Path | str | None) -> None:
    """The table of the cases (failing ones first), then the totals."""
    console = Console(file=out, highlight=False, soft_wrap=False, width=max(100, _width(out)))
    title = f"eval {_shown(report.eval_id)} · {_shown(report.name)}"
    table = Table(title=title, title_justify="left")
    for name in ("case", "result", "score", "cost", "latency", "failing check"):
        table.add_column(name, overflow="fold", no_wrap=name != "failing check")
    many = report.repeat > 1
    for case in sorted(report.cases, key=lambda c: c.passed):
        if case.passed:
            result = "[green]pass[/]"
        else:
            result = "[yellow]flaky[/]" if case.flaky else "[red]FAIL[/]"
        if many:
            result += f" {case.pass_rate:.0%}"
        why = case.why
        score = f"{case.score:.2f}" + (f" ±{case.spread / 2:.2f}" if many else "")
        table.add_row(
            _shown(case.id),
            result,
            score,
            f"${case.cost:.4f}",
            f"{case.latency_s:.2f}s",
            _shown(_cut(why)),
        )
    console.print(table)
    t = report.totals()
    console.print(
        f"{t['passed']} of {counted(int(t['cases']), 'case')} passed ({report.pass_rate:.0%})"
        + (f", {t['flaky']} flaky" if t["flaky"] else "")
        + f" · {counted(int(t['runs']), 'run')} in {report.wall_s:.2f}s · cost ${report.cost:.4f}"
        + (
            f" (+ judges ${report.judge_cost:.4f}, {counted(int(t['judge_tokens']), 'token')})"
            if t["judge_model_calls"]
            else ""
        )
        + f" · latency p50 {report.latency(0.5):.2f}s, p95 {report.latency(0.95):.2f}s"
    )
    if report.stopped:
        console.print(
            f"[red]{escape(report.stopped)}[/]: not run: {_shown(', '.join(report.unmade))}"
        )
    if store is not None:
        # A run that raised before it started has no id, and no trace to show.
        failed = [a.run_id for c in report.cases for a in c.attempts if a.run_id and not a.passed]
        words = ["honeycomb", "trace", failed[0]] if failed else []
        if words and Path(store) != DEFAULT_STORE:  # where trace looks with no --store
            words += ["--store", str(store)]
        example = f" (a failing run: {shlex.join(words)}; " if words else " ("
        console.print(
            f"eval {_shown(report.eval_id)} kept in {escape(str(store))}{escape(example)}"
            f"compare later with --baseline {_shown(report.eval_id)})"
        )


def print_comparison(out: TextIO, comparison: Comparison) -> None:
    """Cases that changed, regressions first, and the totals' deltas."""
    console = Console(file=out, highlight=False, soft_wrap=False, width=max(100, _width(out)))
    steady = sum(c.change in ("passing", "failing") for c in comparison.cases)
    # A case renamed, or whose task changed, is shown so, even when its verdict stands.
    changed = [
        c
        for c in comparison.cases
        if c.change not in ("passing", "failing") or c.renamed_from or c.task_changed
    ]
    order = ("newly_failing", "newly_passing", "added", "removed", "failing", "passing")
    baseline = _shown(comparison.baseline)
    table = Table(title=f"against {baseline}", title_justify="left")
    for name in ("case", "change", "score", "cost", "latency", "why it fails"):
        table.add_column(name, overflow="fold", no_wrap=name != "why it fails")
    for c in sorted(changed, key=lambda c: order.index(c.change)):
        word = c.change.replace("_", " ")
        if c.change == "newly_failing":
            word = f"[red]{word}[/]"
        elif c.change == "newly_passing":
            word = f"[green]{word}[/]"
        table.add_row(
            _shown(c.named),
            word,
            f"{c.score:+.2f}",
            dollars_delta(c.cost),
            f"{c.latency_s:+.2f}s",
            _shown(_cut(c.reason or "")),
        )
    if changed:
        console.print(table)
    console.print(
        f"against {baseline}: {len(comparison.regressions)} newly failing, "
        f"{len(comparison.improvements)} newly passing, {steady} unchanged · "
        f"{over(comparison)}pass rate {comparison.pass_rate:+.0%} · {run_over(comparison)}"
        f"cost {dollars_delta(comparison.cost)} · p50 {comparison.p50_s:+.2f}s, p95 "
        f"{comparison.p95_s:+.2f}s"
    )


def _shown(text: str) -> str:
    """Text of a run or a cases file, as a table shows it: its control characters (a
    terminal's escapes, which a model's answer quoted in a check's reason may hold)
    made inert, and rich's markup escaped."""
    return escape(printable(text))


def _cut(text: str, most: int = 160) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


_WIDTH = 120
"""The table's width where the output is not a terminal (a file, a CI log)."""


def _width(out: TextIO) -> int:
    import shutil

    return shutil.get_terminal_size((_WIDTH, 24)).columns if out.isatty() else _WIDTH
