"""What a check sees of a case's run (:class:`CaseRun`): its answer, status, spending,
times and every tool call its workers made, with their arguments; and the judges it
may ask (:class:`Judges`), whose calls cost the eval, not the run."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from honeycomb.offline.judge import ANSWER_HEADING
from honeycomb.run.events import RunFinished, RunStarted, WorkerStarted
from honeycomb.run.result import RunResult
from runtime import (
    AssistantMessage,
    Budget,
    Event,
    HoneycombError,
    Model,
    ToolCallStarted,
    Usage,
)
from runtime.value import Value
from workers.guards import GuardCheck, Judge, JudgeRole

__all__ = [
    "Asked",
    "CaseRun",
    "Judges",
    "RunCalls",
    "ToolUse",
    "asked_in",
    "asked_in_rows",
    "case_run",
    "tool_uses",
]


class ToolUse(Value, frozen=True, kw_only=True):
    """One tool call of the run that ran (a nested worker's too).

    Attributes:
        worker: The worker (the subtask's id; a nested worker's: ``s1/call_1``).
        role: Its role.
        tool: The tool's name.
        arguments: The arguments it was called with (``{}`` when they were not JSON).
        side_effects: Whether the tool has side effects (it runs one at a time and is
            journaled).
    """

    worker: str
    role: str
    tool: str
    arguments: dict[str, Any]
    side_effects: bool = False


class Judges:
    """The roles that may grade an answer, and what their calls cost (:attr:`spent`),
    counted apart from the runs they grade.

    Args:
        roles: The roles by name (the hive's, and those of the cases file's
            ``judges:`` hive).
        model_for: The model a role thinks with.
    """

    def __init__(self, roles: Mapping[str, JudgeRole], model_for: Callable[[Any], Model]) -> None:
        self.roles = roles
        self._model_for = model_for
        # A budget of no limit, which the judges' calls spend as a run's calls spend its
        # own: a call counts as it starts, what it answered as it answers, before its
        # answer is read, so that one which gave no verdict (cut off at its output
        # limit, empty) or failed still counts in the eval's spending.
        self._budget = Budget()
        self._judge = Judge(roles, model_for, budget=self._budget)

    @property
    def spent(self) -> Usage:
        """What the grades asked of these judges cost, a grade that failed too."""
        return self._budget.usage

    @property
    def models(self) -> list[Model]:
        """The models its roles think with."""
        return [self._model_for(role) for role in self.roles.values()]

    def fresh(self) -> Judges:
        """The same judges, with nothing spent yet: one case's."""
        return Judges(self.roles, self._model_for)

    async def grade(self, role: str, rubric: str, task: str, answer: str) -> str | None:
        """The verdict of ``role`` on ``answer`` by ``rubric``: None when it passes,
        else the judge's reason.

        Raises:
            HoneycombError: when the role is not one of the judges, or its call failed
                or gave no verdict (what it spent is counted in :attr:`spent` still).
        """
        shown = f"Task: {task}\n\nRubric: {rubric}{ANSWER_HEADING}{answer}"
        verdict, _, _ = await self._judge.ask(role, GuardCheck(kind="output", text=shown))
        return verdict


class CaseRun(Value, frozen=True, kw_only=True):
    """A case's run as its checks see it.

    Attributes:
        case: The case's id.
        task: The task it ran.
        expected: The case's expected answer, if it gives one.
        run_id: The run's id (``honeycomb trace RUN_ID`` shows it, when kept).
        status: How the run ended (``ok``, ``partial``, ``failed``, ``over_budget``,
            ``waiting``), or ``error`` when it raised before it had any result.
        answer: The answer: text, or the validated output-schema object.
        answer_text: The answer as text.
        error: What went wrong, when the run did not succeed.
        usage: Tokens, model calls, tool calls and cost of the run (not its judges).
        wall_s: The run's wall time.
        critical_path_s: Its critical path: planning, the longest chain of workers,
            aggregation.
        tool_calls: Every tool call of its workers that ran (nested workers'
            included), in the order they started: not one refused, denied, waiting
            for approval or skipped as a repeat.
        result: The run's whole result (None when it raised before it had one).
        judges: The roles that may grade it (``await judges.grade(...)``).
    """

    case: str
    task: str
    expected: Any = None
    run_id: str
    status: str
    answer: Any = None
    answer_text: str = ""
    error: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    wall_s: float = 0.0
    critical_path_s: float = 0.0
    tool_calls: tuple[ToolUse, ...] = ()
    result: RunResult | None = None
    judges: Judges | None = None

    @property
    def side_effects(self) -> int:
        """How many side-effecting tool calls of the run ran."""
        return sum(1 for use in self.tool_calls if use.side_effects)


class RunCalls:
    """Told of a run's events (``on_event``): the workers it started, nested ones
    (``agent:ROLE`` tools) too, with their roles; and the tool calls that ran, in the
    order they started. A call runs once the layers let it (``tool_call.started``):
    one refused (an unknown tool, arguments not valid, a guard, a person's denial),
    waiting for approval, skipped as a repeat, or answered from the journal never
    started, and is not counted. The run's id, as it starts (``run.started``). And
    how the run ended (``run.finished``): what a run that raised before it had a
    result spent, and how long it took, are told there alone."""

    def __init__(self) -> None:
        self.run_id = ""  # known once it starts: a run cut off has no result to say it
        self.roles: dict[str, str] = {}
        self.nested: list[str] = []
        self.started: list[tuple[str, str, str]] = []  # (worker, call id, tool)
        self.finished: RunFinished | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolCallStarted):
            self.started.append((event.worker or "", event.call_id, event.tool))
        elif isinstance(event, WorkerStarted) and event.worker is not None:
            self.roles[event.worker] = event.role
            if event.parent is not None:
                self.nested.append(event.worker)
        elif isinstance(event, RunStarted):
            self.run_id = event.run_id or self.run_id
        elif isinstance(event, RunFinished):
            self.finished = event  # the last life's: it says what every life spent


Asked = dict[tuple[str, str], str]
"""The arguments (JSON text) of each tool call the model asked for, by worker and
call id."""


def asked_in(result: RunResult | None) -> Asked:
    """The arguments of every tool call the run's subtasks' workers asked for."""
    found: Asked = {}
    for outcome in result.subtasks.values() if result is not None else ():
        worker = outcome.worker
        if worker is None:
            continue
        for message in worker.transcript.messages:
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    found[worker.worker, call.id] = call.arguments
    return found


def asked_in_rows(worker: str, rows: Iterable[tuple[int, str]]) -> Asked:
    """The arguments of the tool calls a worker asked for, from its messages as a run
    store keeps them (``(seq, JSON array)`` rows): how a nested worker's are known."""
    found: Asked = {}
    for _, text in rows:
        for message in json.loads(text):
            if isinstance(message, dict) and message.get("role") == "assistant":
                for call in message.get("tool_calls") or ():
                    found[worker, call["id"]] = call["arguments"]
    return found


def tool_uses(
    calls: RunCalls,
    asked: Mapping[tuple[str, str], str],
    side_effects: Callable[[str, str], bool],
) -> tuple[ToolUse, ...]:
    """The tool calls of a run that ran (``calls``), nested workers' included, in the
    order they started, each with its arguments as ``asked`` (``{}`` when they are
    not known); ``side_effects(role, tool)`` says whether a tool has side effects."""
    found: list[ToolUse] = []
    for worker, call_id, tool in calls.started:
        role = calls.roles.get(worker, worker)  # a planner's, an aggregator's: its name
        found.append(
            ToolUse(
                worker=worker,
                role=role,
                tool=tool,
                arguments=_arguments(asked.get((worker, call_id), "")),
                side_effects=side_effects(role, tool),
            )
        )
    return tuple(found)


def _described(error: Exception) -> str:
    """What ``error`` says: a Honeycomb error's message names what to fix; any other
    (a user's planner raising ``KeyError('x')``) says little without its type."""
    if isinstance(error, HoneycombError):
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _waiting(result: RunResult) -> str:
    """Which calls a run that ended ``waiting`` left waiting for a person (the eval
    denies them as it ends: nobody decides on an eval's calls)."""
    return "; ".join(
        f"{p.tool} by {p.role} ({p.worker}) waits for a person's approval, which nobody "
        f"gives in an eval: {p.tool} {json.dumps(p.arguments, ensure_ascii=False)}"
        for p in result.pending
    )


def _said(told: str, failure: str) -> bool:
    """Whether a subtask's ``failure`` says nothing the run's error (``told``) does not:
    it quotes it, or is quoted there."""
    return bool(told) and (told in failure or failure in told)


def _arguments(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def case_run(
    *,
    case: str,
    task: str,
    expected: Any,
    run_id: str,
    result: RunResult | None,
    error: Exception | None,
    tool_calls: tuple[ToolUse, ...],
    judges: Judges | None,
    finished: RunFinished | None = None,
) -> CaseRun:
    """What the checks of case ``case`` see of its run: its result, or the partial
    result its error carries, or only the error (any exception: a Python error of a
    user's planner, aggregator or tool as well as a Honeycomb one) with what the run
    spent and took as its last event (``finished``) says, and the tool calls that ran
    (:func:`tool_uses`)."""
    if result is None:
        result = getattr(error, "partial", None)
    if result is None:
        return CaseRun(
            case=case,
            task=task,
            expected=expected,
            run_id=run_id,
            status="error",
            error=_described(error) if error is not None else "the run gave no result",
            usage=(finished.usage if finished is not None else None) or Usage(),
            wall_s=finished.wall_s if finished is not None else 0.0,
            tool_calls=tool_calls,
            judges=judges,
        )
    # What its subtasks failed of, which is why the case failed (a cassette's
    # mismatch, a worker's model error): those the run's own error does not say
    # already (``RunFailed`` names a few: 'its only subtask failed; nothing to
    # aggregate (s1: ...)'), nor those the run's end stopped, which say its error
    # again ('the run stopped: budget exceeded ...').
    told = str(error) if error is not None else ""
    failures = "; ".join(
        f"{s.subtask.id}: {s.error.message}"
        for s in result.failures
        if s.error is not None and not _said(told, s.error.message)
    )
    said = _described(error) if error is not None else None
    if said is not None and failures:
        said = f"{said} ({failures})"
    if result.status == "waiting" and result.pending:
        said = _waiting(result)
    return CaseRun(
        case=case,
        task=task,
        expected=expected,
        run_id=run_id,
        status=result.status,
        answer=result.answer,
        answer_text=result.answer_text,
        error=said or failures or None,
        usage=result.usage,
        wall_s=result.timings.wall_s,
        critical_path_s=result.timings.critical_path_s,
        tool_calls=tool_calls,
        result=result,
        judges=judges,
    )
