"""An eval's report: each case's attempts (one per ``repeat``), each a run with its
checks' verdicts, score, cost and times; each case's pass rate and spread; and the
totals (pass rate, cost, p50 and p95 latency). It is JSON in a run store (by its eval
id) and on ``--json``; :func:`junit` writes it as JUnit XML for CI."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

import msgspec

from honeycomb.evals.checks import Verdict
from runtime.text import encode_json
from runtime.value import Value

__all__ = ["Attempt", "CaseReport", "EvalReport", "junit", "percentile", "well_formed"]

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""A character XML 1.0 cannot hold, nor HTML show as text: NUL and the other control
characters (a terminal's escapes), a lone surrogate, U+FFFE and U+FFFF."""


class Attempt(Value, frozen=True, kw_only=True):
    """One run of a case, scored.

    Attributes:
        run_id: The run (``honeycomb trace RUN_ID``).
        passed: Whether it passed: every check did, or its weighted score reached
            the case's threshold.
        score: The weighted mean of its checks' scores, in [0, 1].
        status: How the run ended (``error``: it raised before it had a result).
        verdicts: Each check's verdict, in order.
        cost: What the run cost (dollars, from the models' prices).
        judge_cost: What its judges' calls cost, apart from the run.
        judge_tokens: Its judges' tokens, in and out, apart from the run's.
        judge_model_calls: Its judges' model calls, apart from the run's.
        latency_s: The run's wall time.
        critical_path_s: The run's critical path.
        tokens: The run's tokens, in and out.
        model_calls: The run's model calls.
        error: What went wrong in the run, if anything did (for a run that waits,
            which calls wait for a person).
        unanswered: Its run ended with no answer its checks could score (it raised,
            failed, went over budget or waits, and no check is about that): it failed
            with score 0, for that reason first.
    """

    run_id: str
    passed: bool
    score: float
    status: str
    verdicts: tuple[Verdict, ...] = ()
    cost: float = 0.0
    judge_cost: float = 0.0
    judge_tokens: int = 0
    judge_model_calls: int = 0
    latency_s: float = 0.0
    critical_path_s: float = 0.0
    tokens: int = 0
    model_calls: int = 0
    error: str | None = None
    unanswered: bool = False

    @property
    def failing(self) -> Verdict | None:
        """Its first check that failed, if one did."""
        return next((v for v in self.verdicts if not v.passed), None)

    @property
    def why(self) -> str:
        """Why it failed, in a line: how its run ended, when it ended with no answer
        to score, else its first failing check and reason (and how many more failed);
        empty when it passed."""
        return _why(self, more=True)


class CaseReport(Value, frozen=True, kw_only=True):
    """One case: its attempts (more than one with ``repeat``), and how many of its
    runs the eval's budget left unmade (``not_run``)."""

    id: str
    task: str
    attempts: tuple[Attempt, ...] = ()
    description: str = ""
    not_run: int = 0

    @property
    def passed(self) -> bool:
        """Whether every run of it was made and passed (a run not made did not pass)."""
        return bool(self.attempts) and not self.not_run and all(a.passed for a in self.attempts)

    @property
    def pass_rate(self) -> float:
        """The share of its runs that passed, those not made counting as failed."""
        runs = len(self.attempts) + self.not_run
        return sum(a.passed for a in self.attempts) / runs if runs else 0.0

    @property
    def flaky(self) -> bool:
        """Some of its runs passed and some failed."""
        passed = sum(a.passed for a in self.attempts)
        return 0 < passed < len(self.attempts)

    @property
    def score(self) -> float:
        """The mean score of its attempts."""
        return statistics.fmean(a.score for a in self.attempts) if self.attempts else 0.0

    @property
    def spread(self) -> float:
        """The highest score of its attempts less the lowest."""
        scores = [a.score for a in self.attempts]
        return max(scores) - min(scores) if scores else 0.0

    @property
    def cost(self) -> float:
        return sum(a.cost for a in self.attempts)

    @property
    def latency_s(self) -> float:
        """The median wall time of its attempts."""
        return statistics.median(a.latency_s for a in self.attempts) if self.attempts else 0.0

    @property
    def failing(self) -> Verdict | None:
        """The first failing check of its first failing attempt."""
        return next((a.failing for a in self.attempts if a.failing is not None), None)

    @property
    def error(self) -> str | None:
        return next((a.error for a in self.attempts if not a.passed and a.error), None)

    @property
    def why(self) -> str:
        """Why it failed, in a line: its first failing check and reason (and how many
        more failed in that run), else its run's error; empty when it passed."""
        attempt = next((a for a in self.attempts if not a.passed), None)
        if attempt is None:
            runs = len(self.attempts) + self.not_run
            return f"{self.not_run} of its {runs} runs not made" if self.not_run else ""
        return attempt.why


class EvalReport(Value, frozen=True, kw_only=True):
    """An eval of a hive on a set of cases.

    Attributes:
        eval_id: Its id (``honeycomb eval compare A B``, ``--baseline``).
        name: The cases file's name.
        hive: The hive file evaluated (or its name, from Python).
        cases_file: The cases file, if there was one.
        started_at: When it started (seconds since the epoch).
        wall_s: How long it took.
        repeat: How many times each case ran.
        concurrency: How many runs went at once, at most.
        cases: Each case, in the file's order.
        not_run: The cases the eval's budget left unrun, or those not run when it
            was interrupted (none: every case ran).
        stopped: Why the eval stopped early (its budget, or it was interrupted), if it
            did.
        interrupted: It was cancelled (Ctrl-C) before every run was made: this is
            the report of those made (a run cut off is not one).
    """

    eval_id: str
    name: str
    hive: str
    cases_file: str | None = None
    started_at: float = 0.0
    wall_s: float = 0.0
    repeat: int = 1
    concurrency: int = 1
    cases: tuple[CaseReport, ...] = ()
    not_run: tuple[str, ...] = ()
    stopped: str | None = None
    interrupted: bool = False

    @property
    def passed(self) -> bool:
        """Whether every run of every case was made and passed."""
        return not self.not_run and not self.stopped and all(c.passed for c in self.cases)

    @property
    def unmade(self) -> list[str]:
        """The cases the eval's budget left unrun, and those it left runs of unmade
        (``lisbon (1 of 3 runs made)``), as a report names them."""
        some = [
            f"{c.id} ({len(c.attempts)} of {len(c.attempts) + c.not_run} runs made)"
            for c in self.cases
            if c.not_run
        ]
        return [*self.not_run, *some]

    @property
    def failed(self) -> list[CaseReport]:
        return [c for c in self.cases if not c.passed]

    @property
    def pass_rate(self) -> float:
        """The share of the cases that passed (those not run count as failed)."""
        total = len(self.cases) + len(self.not_run)
        return sum(c.passed for c in self.cases) / total if total else 0.0

    @property
    def attempts(self) -> list[Attempt]:
        return [a for c in self.cases for a in c.attempts]

    @property
    def cost(self) -> float:
        """What the runs cost (their judges not)."""
        return sum(a.cost for a in self.attempts)

    @property
    def judge_cost(self) -> float:
        return sum(a.judge_cost for a in self.attempts)

    def latency(self, q: float) -> float:
        """The ``q`` quantile (0.5: the median) of the runs' wall times."""
        return percentile([a.latency_s for a in self.attempts], q)

    def totals(self) -> dict[str, float | int]:
        """The figures of the whole eval, as ``--json`` and the report's foot give them."""
        attempts = self.attempts
        return {
            "cases": len(self.cases) + len(self.not_run),
            "passed": sum(c.passed for c in self.cases),
            "failed": len(self.failed),
            "not_run": len(self.not_run),
            "flaky": sum(c.flaky for c in self.cases),
            "runs": len(attempts),
            "pass_rate": round(self.pass_rate, 4),
            "cost": round(self.cost, 6),
            "judge_cost": round(self.judge_cost, 6),
            "tokens": sum(a.tokens for a in attempts),
            "model_calls": sum(a.model_calls for a in attempts),
            "judge_tokens": sum(a.judge_tokens for a in attempts),
            "judge_model_calls": sum(a.judge_model_calls for a in attempts),
            "p50_s": round(self.latency(0.5), 4),
            "p95_s": round(self.latency(0.95), 4),
            "wall_s": round(self.wall_s, 4),
        }

    def to_json(self) -> bytes:
        """The report as JSON: its fields, and each case's and the whole's figures
        (a lone surrogate an answer quoted in a reason replaced by U+FFFD, as the run
        store keeps the run's own text)."""
        cases = [
            {
                **msgspec.to_builtins(case),
                "passed": case.passed,
                "pass_rate": case.pass_rate,
                "flaky": case.flaky,
                "score": case.score,
                "spread": case.spread,
            }
            for case in self.cases
        ]
        whole = {**msgspec.to_builtins(self), "cases": cases, "passed": self.passed}
        return encode_json({**whole, "totals": self.totals()})

    @classmethod
    def from_json(cls, data: bytes | str) -> EvalReport:
        """A report from its JSON (:meth:`to_json`'s; the figures are derived again).

        Raises:
            msgspec.ValidationError: when it is not a report's JSON.
        """
        return msgspec.json.decode(data, type=cls, strict=False)


def well_formed(text: str) -> str:
    """``text`` as an XML or HTML page can hold it: each character it cannot (NUL, a
    terminal's escapes, a lone surrogate, all of which a run's answer or a check's
    reason may quote) becomes U+FFFD, the sign of a character not shown."""
    return _NOT_XML.sub("\ufffd", text)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; 0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


def junit(report: EvalReport) -> str:
    """The report as JUnit XML: a test suite of the eval, a test case per case and
    attempt, each failing one with its failing check and reason (and every failing
    check, and its run's error in full, as the failure's text)."""
    cases: list[str] = []
    for case in report.cases:
        runs = len(case.attempts) + case.not_run
        for number, attempt in enumerate(case.attempts, 1):
            name = case.id if runs == 1 else f"{case.id} #{number}"
            head = (
                f"<testcase classname={_attr(report.name)} name={_attr(name)} "
                f'time="{attempt.latency_s:.3f}">'
            )
            body = ""
            if not attempt.passed:
                said = _why(attempt, more=False)
                body = f"<failure message={_attr(said)}>{_text(_lines(attempt) or said)}</failure>"
            out = f"<system-out>run {_text(attempt.run_id)}</system-out>"
            cases.append(f"  {head}{body}{out}</testcase>")
        for number in range(len(case.attempts) + 1, runs + 1):
            cases.append(_skipped(report, case.id if runs == 1 else f"{case.id} #{number}"))
    # Named as its runs would have been: a CI server tracks a test by its name.
    many = report.repeat > 1
    cases += [
        _skipped(report, f"{name} #{number}" if many else name)
        for name in report.not_run
        for number in range(1, report.repeat + 1)
    ]
    failures = sum(1 for a in report.attempts if not a.passed)
    skipped = len(report.not_run) * report.repeat + sum(c.not_run for c in report.cases)
    suite = (
        f'<testsuite name={_attr(report.name)} tests="{len(cases)}" '
        f'failures="{failures}" skipped="{skipped}" time="{report.wall_s:.3f}">'
    )
    return (
        "\n".join(['<?xml version="1.0" encoding="utf-8"?>', suite, *cases, "</testsuite>"]) + "\n"
    )


def _text(text: str) -> str:
    """``text`` as XML character data."""
    return escape(well_formed(text))


def _attr(text: str) -> str:
    """``text`` as a quoted XML attribute value."""
    return quoteattr(well_formed(text))


def _skipped(report: EvalReport, name: str) -> str:
    """A run the eval's budget left unmade, as a JUnit test case skipped."""
    return (
        f"  <testcase classname={_attr(report.name)} name={_attr(name)}>"
        f"<skipped message={_attr(report.stopped or 'not run')}/></testcase>"
    )


def _why(attempt: Attempt, *, more: bool) -> str:
    """:attr:`Attempt.why`; without how many more checks failed (``more``), as a JUnit
    failure's message says it (its text lists them all)."""
    if attempt.passed:
        return ""
    failing = [v for v in attempt.verdicts if not v.passed]
    if not failing or attempt.status == "error" or attempt.unanswered:
        return _unscored(attempt)
    others = f" (and {len(failing) - 1} more)" if more and len(failing) > 1 else ""
    return f"{failing[0].check}: {failing[0].reason}{others}"


def _unscored(attempt: Attempt) -> str:
    """Why ``attempt`` failed when no check says so, or before what they say: its run
    raised (``error``), ended with no answer (failed, over budget, waiting), or its
    score is below the case's threshold."""
    if attempt.status == "error":
        return f"the run ended error: {attempt.error or 'it gave no result'}"
    if attempt.unanswered:
        error = f": {attempt.error}" if attempt.error else ""
        return f"the run ended {attempt.status}, with no answer{error}"
    if attempt.error:
        return attempt.error
    if attempt.status in ("failed", "over_budget", "waiting") and attempt.score == 0:
        return f"the run ended {attempt.status}, with no answer"
    return f"score {attempt.score:.2f} is below the case's threshold"


def _lines(attempt: Attempt) -> str:
    """Every failing check of ``attempt``, a line each, then its run's error in full:
    a check's reason cuts what it quotes of it (``status``), and a replay's mismatch
    says what differs at its end."""
    lines = [f"{v.check}: {v.reason}" for v in attempt.verdicts if not v.passed]
    if attempt.error:
        lines.append(f"the run's error: {attempt.error}")
    return "\n".join(lines)
