"""An eval's report as HTML: its totals, a row per case (its result, score, pass
rate, cost, latency, failing check and reason, runs), and, against a baseline, what
changed. :func:`report_page` is a page of its own (``honeycomb eval --html FILE``);
:func:`report_body` and :func:`comparison_table` are what ``honeycomb serve`` shows
inside its pages, linking each run to its page. Every text is escaped, and a
character a page cannot show (NUL, a terminal's escape) is shown as U+FFFD."""

from __future__ import annotations

import time
from collections.abc import Callable
from html import escape

from honeycomb.evals.compare import CaseChange, Comparison, dollars_delta, over, run_over
from honeycomb.evals.report import CaseReport, EvalReport, well_formed
from honeycomb.trace.format import counted

__all__ = ["comparison_table", "report_body", "report_page"]

RunLink = Callable[[str], str | None]
"""The address of a run's page (None: the run is shown by its id alone)."""

_STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330; }
h1 { font-size: 16px; margin: 0 0 4px; } h2 { font-size: 14px; margin: 20px 0 6px; }
.muted { color: #666; }
table.runs { border-collapse: collapse; }
table.runs th, table.runs td { border-bottom: 1px solid #e3e6ec; padding: 3px 10px 3px 0;
  text-align: left; vertical-align: top; }
table.runs td.task { max-width: 520px; }
.status.ok { color: #1a7f37; } .status.failed { color: #b42318; }
.status.partial { color: #9a6700; }
"""


def _e(text: object) -> str:
    return escape(well_formed(str(text)), quote=True)


def report_page(report: EvalReport, comparison: Comparison | None = None) -> str:
    """The whole report as one page, with nothing fetched from elsewhere."""
    body = report_body(report, lambda run_id: None)
    if comparison is not None:
        body += comparison_table(comparison)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>eval {_e(report.eval_id)} · honeycomb</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def report_body(report: EvalReport, run_link: RunLink) -> str:
    """The report's heading, totals and case table."""
    t = report.totals()
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(report.started_at))
    # One stopped before every run was made (Ctrl-C) is interrupted, as the CLI says.
    verdict = "passed" if report.passed else "interrupted" if report.interrupted else "failed"
    head = (
        f"<h1>eval {_e(report.eval_id)} · {_e(report.name)}</h1>"
        f'<p class="muted">{_e(report.hive)} · {_e(when)} · '
        f"{counted(int(t['runs']), 'run')} ({report.repeat} a case, "
        f"{report.concurrency} at once) in {report.wall_s:.2f}s</p>"
        f'<p><span class="status {"ok" if report.passed else verdict}">{verdict}</span>: '
        f"{t['passed']} of {counted(int(t['cases']), 'case')} passed ({report.pass_rate:.0%})"
        f"{_flaky(int(t['flaky']))} · cost ${report.cost:.4f} (judges ${report.judge_cost:.4f}) "
        f"· {counted(int(t['tokens']), 'token')} (judges {t['judge_tokens']}) "
        f"· p50 {report.latency(0.5):.2f}s · p95 {report.latency(0.95):.2f}s</p>"
    )
    if report.stopped:
        unrun = ", ".join(report.unmade)
        head += f'<p class="status failed">{_e(report.stopped)}: not run: {_e(unrun)}</p>'
    names = ("case", "result", "score", "pass rate", "cost", "latency", "failing check", "runs")
    rows = "\n".join(_case_row(case, run_link) for case in report.cases)
    return (
        f'{head}<table class="runs"><thead><tr>{"".join(f"<th>{n}</th>" for n in names)}'
        f"</tr></thead><tbody>\n{rows}\n</tbody></table>"
    )


def _flaky(count: int) -> str:
    return f", {count} flaky" if count else ""


def _case_row(case: CaseReport, run_link: RunLink) -> str:
    result = "pass" if case.passed else ("flaky" if case.flaky else "fail")
    status = "ok" if case.passed else ("partial" if case.flaky else "failed")
    why = case.why
    runs = " ".join(_run(a.run_id, run_link) for a in case.attempts)
    spread = f" ±{case.spread / 2:.2f}" if len(case.attempts) > 1 else ""
    return (
        f'<tr><td>{_e(case.id)}</td><td class="status {status}">{result}</td>'
        f"<td>{case.score:.2f}{spread}</td><td>{case.pass_rate:.0%}</td>"
        f"<td>${case.cost:.4f}</td><td>{case.latency_s:.2f}s</td>"
        f'<td class="task">{_e(why)}</td><td>{runs}</td></tr>'
    )


def _run(run_id: str, run_link: RunLink) -> str:
    if not run_id:  # it raised before it began (an empty task): no run of the store
        return '<span class="muted">none (it raised before it began)</span>'
    link = run_link(run_id)
    return f'<a href="{_e(link)}">{_e(run_id)}</a>' if link else _e(run_id)


_WORDS = {
    "newly_failing": ("newly failing", "failed"),
    "newly_passing": ("newly passing", "ok"),
    "failing": ("still failing", "partial"),
    "passing": ("passing", "ok"),
    "added": ("added", ""),
    "removed": ("removed", ""),
}


def comparison_table(comparison: Comparison) -> str:
    """What changed from the baseline, case by case, regressions first."""
    ordered = sorted(comparison.cases, key=lambda c: list(_WORDS).index(c.change))
    rows = "\n".join(_change_row(c) for c in ordered)
    names = ("case", "change", "score", "pass rate", "cost", "latency", "why it fails")
    return (
        f"<h2>against {_e(comparison.baseline)}</h2>"
        f'<p class="muted">{len(comparison.regressions)} newly failing, '
        f"{len(comparison.improvements)} newly passing · {_e(over(comparison))}"
        f"pass rate {comparison.pass_rate:+.0%} "
        f"· {_e(run_over(comparison))}cost {dollars_delta(comparison.cost)} "
        f"· p50 {comparison.p50_s:+.2f}s · p95 {comparison.p95_s:+.2f}s</p>"
        f'<table class="runs"><thead><tr>{"".join(f"<th>{n}</th>" for n in names)}</tr>'
        f"</thead><tbody>\n{rows}\n</tbody></table>"
    )


def _change_row(change: CaseChange) -> str:
    word, status = _WORDS[change.change]
    return (
        f'<tr><td>{_e(change.named)}</td><td class="status {status}">{word}</td>'
        f"<td>{change.score:+.2f}</td><td>{change.pass_rate:+.0%}</td>"
        f"<td>{dollars_delta(change.cost)}</td><td>{change.latency_s:+.2f}s</td>"
        f'<td class="task">{_e(change.reason or "")}</td></tr>'
    )
