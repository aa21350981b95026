"""The plain view's lines: one for each event a person follows a run by."""

from __future__ import annotations

import re
from collections.abc import Sequence

from honeycomb.run.events import (
    AggregationFinished,
    AggregationStarted,
    PlanReady,
    PlanRepaired,
    RoleToolsMissing,
    RoundPlanned,
    RoundStarted,
    RunFinished,
    RunStarted,
    WorkerFinished,
    WorkerStarted,
)
from honeycomb.run.plan import Subtask
from honeycomb.trace.format import counted, printable
from runtime import (
    CompactionFinished,
    Event,
    ModelCallFinished,
    ModelCallRetrying,
    ToolCallFinished,
)
from runtime.secrets import masked
from workers import MemoryRecalled

__all__ = ["ERROR_CHARS", "describe", "model_finished", "short_error"]


def describe(event: Event) -> str:
    """The plain line of an event (none for those it does not show)."""
    who = f"{event.worker}" if event.worker else ""
    if isinstance(event, RunStarted):
        return f"run {event.run_id} started: {event.task}"
    if isinstance(event, PlanReady):
        return f"plan ready in {event.duration_s:.2f}s: {_listed(event.plan.subtasks)}"
    if isinstance(event, PlanRepaired):  # a warning: what the planner wrote was changed
        which = "plan" if event.round == 1 else f"round {event.round}"
        return f"{which} repaired, dependencies dropped: {'; '.join(event.dropped)}"
    if isinstance(event, RoleToolsMissing):  # a warning: the planner plans without them
        which = "the planner" if event.round == 1 else f"the lead (round {event.round})"
        return f"{which} sees {event.role} without its tools: {short_error(event.error)}"
    if isinstance(event, RoundStarted):
        return f"round {event.round}: the lead reads the results so far"
    if isinstance(event, RoundPlanned):
        if event.error is not None:
            return f"round {event.round}: the lead failed: {event.error}"
        if not event.added.subtasks:
            return f"round {event.round}: the lead is done"
        added = _listed(event.added.subtasks)
        return f"round {event.round} ready in {event.duration_s:.2f}s: {added}"
    if isinstance(event, WorkerStarted):
        return f"{who} ({event.role}) started"
    if isinstance(event, WorkerFinished):
        error = f": {event.error}" if event.error else ""
        return f"{who} ({event.role}) {event.status} in {event.duration_s:.2f}s{error}"
    if isinstance(event, ToolCallFinished):
        return f"{who} turn {event.turn}: {event.tool} {event.status} in {event.duration_s:.2f}s"
    if isinstance(event, MemoryRecalled):
        if event.error:
            return f"{who} could not recall from memory {event.namespace}: {event.error}"
        found = counted(len(event.memory_ids), "memory", "memories")
        return f"{who} recalled {found} from memory {event.namespace}"
    if isinstance(event, ModelCallRetrying):
        return (
            f"{who} turn {event.turn}: model {event.status} (attempt {event.attempt}), "
            f"retrying in {event.wait_s:.2f}s"
        )
    if isinstance(event, ModelCallFinished):
        return model_finished(event, ())
    if isinstance(event, CompactionFinished):
        return _compacted(event)
    if isinstance(event, AggregationStarted):
        return f"aggregating {counted(event.results, 'result')}"
    if isinstance(event, AggregationFinished):
        return f"aggregated in {event.duration_s:.2f}s"
    if isinstance(event, RunFinished):
        error = f": {event.error}" if event.error else ""
        return f"run {event.status} in {event.wall_s:.2f}s{error}"
    return ""


def _listed(subtasks: Sequence[Subtask]) -> str:
    """``s1=researcher; s2=writer after s1``."""
    return "; ".join(
        f"{s.id}={s.role}" + (f" after {','.join(s.depends_on)}" if s.depends_on else "")
        for s in subtasks
    )


def model_finished(event: ModelCallFinished, statuses: Sequence[str]) -> str:
    """``model ok after 2 retries (429, waited 1.5s) in 2.22s, asked for 1 tool call``."""
    retried = ""
    if event.attempts > 1:
        why = "".join(f"{s}, " for s in dict.fromkeys(statuses))  # each status once
        retries = counted(event.attempts - 1, "retry", "retries")
        retried = f" after {retries} ({why}waited {event.retry_wait_s:.1f}s)"
    calls = f", asked for {counted(event.tool_calls, 'tool call')}" if event.tool_calls else ""
    return (
        f"{event.worker or ''} turn {event.turn}: model {event.status}{retried} in "
        f"{event.duration_s:.2f}s{calls}{_said(event.error)}"
    )


ERROR_CHARS = 160
"""The most of an error's text a progress line shows."""

_CLASS_NAME = re.compile(r"^[A-Z]\w*: ")


def short_error(error: str) -> str:
    """An error's text for a progress line: its secrets masked, without its class's
    name (``ModelTimeout: ``), on one line, cut at a word within :data:`ERROR_CHARS`."""
    text = " ".join(printable(masked(error), lines=False).split())
    text = _CLASS_NAME.sub("", text, count=1)
    if len(text) <= ERROR_CHARS:
        return text
    cut = text[: ERROR_CHARS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:.") + "…"


def _said(error: str | None) -> str:
    return f": {short_error(error)}" if error else ""


def _compacted(event: CompactionFinished) -> str:
    """``w1 turn 9: compacted 14 messages into a summary (now ~1900 tokens) in 0.20s``."""
    who = f"{event.worker or ''} turn {event.turn}"
    window = "; the window leaves out the oldest turns too" if event.window else ""
    if event.status == "cancelled":  # cut off with its worker: nothing more to say
        return f"{who}: compaction cancelled in {event.duration_s:.2f}s"
    if event.status != "ok":
        return (
            f"{who}: compaction failed ({event.error}); the window keeps the context "
            "within its budget"
        )
    return (
        f"{who}: compacted {counted(event.messages, 'message')} into a summary of "
        f"{counted(event.summarized, 'message')} (context now ~{event.context_tokens} tokens) "
        f"in {event.duration_s:.2f}s{window}"
    )
