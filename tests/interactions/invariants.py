"""What every cell checks, whatever its features: the promises that hold for any
combination (docs/interactions.md lists them).

A check does not stop at the first broken promise: it records a :class:`Violation`
(the invariant, and what was seen) and goes on, so that a cell reports everything it
saw, and a known defect is told from a new one by the invariant it breaks and what
it says.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from honeycomb import AssistantMessage, BudgetExceeded, HoneycombError, RunResult
from honeycomb.events import ModelCallFinished, TextDelta
from honeycomb.store import RunStore
from honeycomb.tracing import build_timeline
from tests.interactions.brain import shape_problem
from tests.interactions.drive import Outcome
from tests.interactions.ledger import Span, overlap

__all__ = ["INVARIANTS", "Report", "Violation", "check_universal"]

SIDE_EFFECTS = ("effect", "ledger", "pay")
"""The toolkit's tools with side effects."""

INVARIANTS = {
    "no deadlock": "the run ends within the cell's time limit",
    "runs": "every life ends with a result or an error the features allow, never a crash",
    "usage counted": (
        "the result's usage is every model call the model functions answered, in every "
        "life (tokens and calls), and the calls cut off after they streamed text (their "
        "prompt and text by the estimate), but what a killed life spent after its last "
        "write (answers whose calls never started, asked for again; a call counts as it "
        "starts, so one started before that write lacks only its tokens)"
    ),
    "budget kept": "no budget is ever exceeded, counting every life",
    "one observation per call": (
        "every request and transcript has exactly one observation per call, in call order"
    ),
    "side effects once": "no side-effecting call runs twice, in any life",
    "side effects serial": "side-effecting calls of a turn run one at a time, in order",
    "exclusive keys": "calls sharing an exclusive key never overlap, across workers",
    "no refused text": "text a guard refused never reaches a listener",
    "compaction budget": "no request of a role with compaction exceeds its budget",
    "decisions final": "the first decision on a call stands; the others are refused",
    "timings": "a result's critical path is never longer than its wall time",
}
"""The universal invariants, by name."""


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.invariant}] {self.detail}"


@dataclass
class Report:
    """The violations a cell saw."""

    violations: list[Violation] = field(default_factory=list)

    def expect(self, ok: object, invariant: str, detail: str) -> None:
        if not ok:
            self.violations.append(Violation(invariant, detail))

    @property
    def broken(self) -> set[str]:
        return {v.invariant for v in self.violations}


def check_universal(outcome: Outcome, report: Report, allowed: Iterable[type]) -> None:
    """Check every universal invariant of ``outcome``; ``allowed`` are the errors
    its features let a run end with."""
    _ends(outcome, report, tuple(allowed))
    _usage(outcome, report)
    _budget(outcome, report)
    _observations(outcome, report)
    _side_effects(outcome, report)
    _refused_text(outcome, report)
    _compaction(outcome, report)
    _decisions(outcome, report)
    _timings(outcome, report)


def _ends(outcome: Outcome, report: Report, allowed: tuple[type, ...]) -> None:
    for life in outcome.lives:
        error = life.error
        if error is None:
            continue
        ok = isinstance(error, HoneycombError) and isinstance(error, allowed)
        report.expect(ok, "runs", f"life {life.number} raised {type(error).__name__}: {error}")
    report.expect(
        outcome.last.status not in ("interrupted", "waiting"),
        "runs",
        f"the run is still {outcome.last.status} after {len(outcome.lives)} lives",
    )


def _usage(outcome: Outcome, report: Report) -> None:
    result = outcome.result
    if result is None:
        return
    calls = outcome.hive.ledger.model_calls()
    # A call cut off after it streamed text was paid for, though no model answered it:
    # it counts its prompt and its text by the estimate, as its event says.
    cut = [e for e in outcome.events if isinstance(e, ModelCallFinished) and _cut_off(e)]
    seen = (
        len(calls) + len(cut),
        sum(c["input"] for c in calls) + sum(e.input_tokens for e in cut),
        sum(c["output"] for c in calls) + sum(e.output_tokens for e in cut),
    )
    usage = result.usage
    counted = (usage.model_calls, usage.input_tokens, usage.output_tokens)
    short_calls, short_tokens = seen[0] - counted[0], sum(seen[1:]) - sum(counted[1:])
    # A budget stops a run with calls reserved (counted) and cancelled before they
    # were made: they count, though no model answered them; and so does a call that
    # the end of a life cut off (its trace has it, cancelled), which the next life
    # makes again.
    reserved = isinstance(outcome.last.error, BudgetExceeded)
    extra = reserved or (outcome.hive.store and -short_calls <= _cut_off_calls(outcome))
    ok = short_tokens == 0 and (short_calls == 0 or (extra and short_calls < 0))
    ok = ok or forgotten(outcome) == (short_calls, seen[1] - counted[1], seen[2] - counted[2])
    why = _shortfall(calls, short_calls, short_tokens, reserved)
    report.expect(
        ok,
        "usage counted",
        f"the result counts (calls, input, output) = {counted}; the model answered {seen} "
        f"over {len(outcome.lives)} lives: {why}",
    )
    if outcome.hive.store:
        _store_figures(outcome, report, counted, seen, reserved=bool(extra))
        _traced_as_told(outcome, report, result)


def _cut_off(event: ModelCallFinished) -> bool:
    """Whether ``event`` tells of a call cut off after it streamed text."""
    return event.status == "cancelled" and event.output_tokens > 0


def _cut_off_calls(outcome: Outcome) -> int:
    """The model calls a life's end cut off before they were answered, as the run's
    trace has them (a ``model_call`` span each, cancelled)."""
    store = RunStore(outcome.hive.ledger.folder / "runs.db")
    try:
        spans = store.spans(outcome.hive.run_id)
    finally:
        store.close()
    return sum(1 for s in spans if s.kind == "model_call" and s.status == "cancelled")


def _store_figures(
    outcome: Outcome,
    report: Report,
    counted: tuple[int, ...],
    seen: tuple[int, ...],
    *,
    reserved: bool,
) -> None:
    """The run store's figures (``honeycomb runs``) are the result's; its trace
    (``honeycomb trace``) holds every call the model answered (and, as the result,
    the calls cut off before they were answered, by a budget that stopped the run or
    the end of a life: a model call span each, cancelled), and a critical path no
    longer than the run."""
    store = RunStore(outcome.hive.ledger.folder / "runs.db")
    try:
        kept = store.find(outcome.hive.run_id)
        spans = store.spans(outcome.hive.run_id)
    finally:
        store.close()
    figures = (kept.model_calls, kept.input_tokens, kept.output_tokens) if kept else None
    report.expect(
        figures == counted,
        "usage counted",
        f"the run store says (calls, input, output) = {figures}; the result {counted}",
    )
    if outcome.hive.crash:
        return  # the spans of a killed life that were not written yet are lost with it
    timeline = build_timeline(spans)
    traced = (timeline.model_calls, timeline.input_tokens, timeline.output_tokens)
    report.expect(
        traced == seen or (reserved and traced == counted),
        "usage counted",
        f"the trace says (calls, input, output) = {traced}; the model answered {seen}",
    )
    report.expect(
        timeline.critical_path_s <= timeline.wall_s + 0.05,
        "timings",
        f"the trace: critical path {timeline.critical_path_s:.3f}s, wall {timeline.wall_s:.3f}s",
    )


def _traced_as_told(outcome: Outcome, report: Report, result: RunResult) -> None:
    """The trace (``honeycomb trace``) tells the result's tool calls, wall time and
    critical path (``honeycomb run`` and ``resume``): every view, one set of figures."""
    if outcome.hive.crash:
        return  # the spans of a killed life that were not written yet are lost with it
    store = RunStore(outcome.hive.ledger.folder / "runs.db")
    try:
        timeline = build_timeline(store.spans(outcome.hive.run_id), result.plan.subtasks)
    finally:
        store.close()
    t = result.timings
    told = (result.usage.tool_calls, round(t.wall_s, 3), round(t.critical_path_s, 3))
    traced = (timeline.tool_calls, round(timeline.wall_s, 3), round(timeline.critical_path_s, 3))
    report.expect(
        traced == told,
        "timings",
        f"the trace says (tool calls, wall, critical path) = {traced}; the result {told}",
    )


def _shortfall(
    calls: list[dict[str, Any]], short_calls: int, short_tokens: int, reserved: bool
) -> str:
    """What the calls the result does not count are, as far as the model's log tells:
    of the lives before the last, the calls of the planner, the aggregator and the
    judges, those of hive tools' sub-runs, and answers of workers that no checkpoint
    kept (asked for again, or lost with the life); or none of these."""
    last = max((c["life"] for c in calls), default=1)
    earlier = [c for c in calls if c["life"] < last]
    named = {
        "the earlier lives' planner, aggregator and judge calls": [
            c
            for c in earlier
            if c["scope"] == "run" and c["kind"] in ("plan", "aggregate", "judge")
        ],
        "the earlier lives' calls of hive tools' sub-runs": [
            c for c in earlier if c["scope"] == "sub"
        ],
    }
    named = {part: spent for part, spent in named.items() if spent}
    answers = [c for c in earlier if c["scope"] == "run" and c["kind"] in ("work", "summary")]
    lost = {(n, a + b) for n, (a, b) in _sums((c["input"], c["output"]) for c in answers)}
    for size in range(len(named), -1, -1):  # the known losses first
        for parts in itertools.combinations(named, size):
            chosen = [c for part in parts for c in named[part]]
            calls_left = short_calls - len(chosen)
            tokens_left = short_tokens - sum(c["input"] + c["output"] for c in chosen)
            said = list(parts)
            if calls_left > 0 and (calls_left, tokens_left) in lost:
                said.append(f"{calls_left} answers of earlier lives that no checkpoint kept")
            elif tokens_left != 0 or (calls_left != 0 and not (reserved and calls_left < 0)):
                continue
            if said:
                return "short by exactly " + " and ".join(said)
    return f"short by {short_calls} calls and {short_tokens} tokens, which no known loss explains"


def _sums(sizes: Iterable[tuple[int, int]]) -> set[tuple[int, tuple[int, int]]]:
    """Every (how many, their total) that some of ``sizes`` make (pairs of numbers,
    added in place)."""
    made = {(0, (0, 0))}
    for a, b in sizes:
        made |= {(count + 1, (x + a, y + b)) for count, (x, y) in made}
    return made


def forgotten(outcome: Outcome) -> tuple[int, int, int] | None:
    """What the result may leave out of what the model answered: in a killed life,
    calls made after the store last had what the run spent, which the next life makes
    again (calls, input, output); None when the result's shortfall is not that.

    An answer is kept, with all the run spent so far, before the calls it asks for
    start: a worker's calls before its last tool call started in the killed life are
    kept; those after it (an answer whose calls never started, a summary) may not be.
    A call counts as it starts (a budget's ``model_calls``): one that had started by
    the last write, and was answered after it, is left out of the tokens alone.
    """
    if not outcome.hive.crash or outcome.result is None:
        return None
    calls = outcome.hive.ledger.model_calls()
    last: dict[str, float] = {}
    for start in outcome.hive.ledger.tool_starts():
        if start["life"] == 1:
            last[start["worker"]] = max(last.get(start["worker"], 0.0), start["at"])
    prefix = f"{outcome.hive.run_id}/"
    after = [
        (c["input"], c["output"])
        for c in calls
        if c["life"] == 1
        and c["kind"] in ("work", "summary")
        and c["end"]
        > last.get(c["conversation"].removeprefix(prefix).removesuffix("/compaction"), 0.0)
    ]
    usage = outcome.result.usage
    short = (
        len(calls) - usage.model_calls,
        sum(c["input"] for c in calls) - usage.input_tokens,
        sum(c["output"] for c in calls) - usage.output_tokens,
    )
    tokens = (short[1], short[2])
    fits = any(lost == tokens and 0 <= short[0] <= count for count, lost in _sums(after))
    return short if fits else None


def _budget(outcome: Outcome, report: Report) -> None:
    limit = outcome.hive.policy.get("budgets")
    if limit is None or limit.model_calls is None:
        return
    lost = forgotten(outcome)
    seen = len(outcome.hive.ledger.model_calls()) - (lost[0] if lost else 0)
    counted = outcome.result.usage.model_calls if outcome.result is not None else 0
    report.expect(
        seen <= limit.model_calls and counted <= limit.model_calls,
        "budget kept",
        f"model_calls budget {limit.model_calls}: the model answered {seen} calls, the "
        f"result counts {counted}, status {outcome.last.status}",
    )


def _observations(outcome: Outcome, report: Report) -> None:
    for call in outcome.hive.ledger.model_calls():
        report.expect(
            not call["shape"],
            "one observation per call",
            f"a request of {call['conversation']} (life {call['life']}): {call['shape']}",
        )
    result = outcome.result
    for sid, subtask in result.subtasks.items() if result is not None else ():
        if subtask.worker is None:
            continue
        messages = subtask.worker.transcript.messages
        problem = shape_problem(messages)
        last = messages[-1] if messages else None
        stopped = subtask.status in ("waiting", "over_budget", "cancelled", "failed")
        if not problem and isinstance(last, AssistantMessage) and last.tool_calls and not stopped:
            problem = f"its last calls have no observation ({subtask.status})"
        report.expect(
            not problem, "one observation per call", f"the transcript of {sid}: {problem}"
        )


def _side_effects(outcome: Outcome, report: Report) -> None:
    ledger = outcome.hive.ledger
    by_id: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    by_effect: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for c in ledger.tool_starts():
        if c["tool"] in SIDE_EFFECTS:
            by_id[(c["run"], c["worker"], c["call"])].append(c["life"])
            by_effect[(c["tool"], c["run"], c["worker"], json.dumps(c["args"]))].append(c["life"])
    for key, lives in [*by_id.items(), *by_effect.items()]:
        report.expect(len(lives) == 1, "side effects once", f"{key} started in lives {lives}")
    calls = [c for c in ledger.tool_calls() if c["tool"] in SIDE_EFFECTS]
    turns: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for c in calls:
        turns[(c["life"], c["run"], c["worker"], c["turn"])].append(c)
    for key, group in turns.items():
        spans = [Span(c["start"], c["end"], c["call"]) for c in group]
        report.expect(overlap(spans) <= 1, "side effects serial", f"calls of {key} overlapped")
        effects = sorted((c for c in group if c["tool"] == "effect"), key=lambda c: c["start"])
        order = [c["args"]["n"] for c in effects]
        report.expect(
            order == sorted(order), "side effects serial", f"effects of {key} ran as {order}"
        )
    ledger = [Span(c["start"], c["end"], c["call"]) for c in calls if c["tool"] == "ledger"]
    report.expect(overlap(ledger) <= 1, "exclusive keys", "calls of the key 'ledger' overlapped")


def _refused_text(outcome: Outcome, report: Report) -> None:
    deltas = [e for e in outcome.events if isinstance(e, TextDelta)]
    for refused in outcome.hive.refused:
        for event in deltas:
            report.expect(
                refused not in event.text,
                "no refused text",
                f"{event.worker} streamed refused text {event.text!r}",
            )
        shown = "".join(e.text for e in deltas)
        report.expect(
            refused not in shown,
            "no refused text",
            f"the deltas joined hold refused text {refused!r}",
        )


def _compaction(outcome: Outcome, report: Report) -> None:
    compaction = outcome.hive.compaction
    if compaction is None:
        return
    for call in outcome.hive.ledger.model_calls():
        if call["kind"] == "work" and call["role"] in outcome.hive.working:
            report.expect(
                call["input"] <= compaction.budget_tokens,
                "compaction budget",
                f"a request of {call['conversation']} took {call['input']} tokens; the "
                f"budget is {compaction.budget_tokens}",
            )


def _decisions(outcome: Outcome, report: Report) -> None:
    if not outcome.decided:
        return
    store = RunStore(outcome.hive.ledger.folder / "runs.db")
    try:
        entries = {(e.pending.worker, e.pending.call_id): e for e in store.approvals("cell")}
    finally:
        store.close()
    for decided in outcome.decided:
        pending = decided.pending
        said = decided.raced
        winners = [i for i, s in enumerate(said) if s == "ok"]
        report.expect(
            len(winners) == 1,
            "decisions final",
            f"decisions made at once on {pending.call_id} said {said}",
        )
        report.expect(
            "decided" in decided.again,
            "decisions final",
            f"deciding {pending.call_id} again said {decided.again!r}",
        )
        entry = entries.get((pending.worker, pending.call_id))
        stored = entry.decision.approve if entry is not None and entry.decision else None
        report.expect(
            stored == decided.approve,
            "decisions final",
            f"{pending.call_id}: the store holds approve={stored}; the first decision said "
            f"approve={decided.approve}",
        )


def _timings(outcome: Outcome, report: Report) -> None:
    for life in outcome.lives:
        result = life.partial
        if result is None:
            continue
        t = result.timings
        report.expect(
            t.critical_path_s <= t.wall_s + 0.05,
            "timings",
            f"life {life.number}: critical path {t.critical_path_s:.3f}s, wall {t.wall_s:.3f}s",
        )
