"""What a run returns: the answer, the plan, every subtask's outcome, usage, timings."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, model_validator

from honeycomb.run.plan import Plan, Subtask
from honeycomb.trace.critical import figures
from runtime import AssistantMessage, Transcript, Usage
from runtime.secrets import masked
from runtime.tools.approvals import PendingApproval
from workers import WorkerError, WorkerResult

if TYPE_CHECKING:
    from honeycomb.trace.timeline import Measured, Timeline

__all__ = [
    "PlanRound",
    "RunResult",
    "RunStatus",
    "RunTimings",
    "SubtaskResult",
    "SubtaskStatus",
    "answer_as_text",
    "answers_withheld",
    "rounds_of",
    "run_timings",
    "timings_of",
    "why_failed",
]

SubtaskStatus = Literal["ok", "failed", "skipped", "cancelled", "over_budget", "waiting"]
"""How a subtask ended (see :class:`SubtaskResult`)."""

RunStatus = Literal["ok", "partial", "failed", "over_budget", "interrupted", "waiting"]
"""How a run ended (see :class:`RunResult`)."""


class SubtaskResult(BaseModel):
    """One subtask's outcome.

    Attributes:
        subtask: The subtask as planned.
        status: ``ok``; ``failed``; ``skipped`` (a subtask it depends on did not
            succeed); ``cancelled`` (the run stopped before it finished: its failure
            policy gave up, or it was cancelled); or ``over_budget`` (a budget of the
            run stopped it: its own next model call would have gone past it, or
            another worker's did and the run stopped, before it finished or started);
            or ``waiting`` (its worker's calls wait for approval, or a subtask it
            depends on does).
        worker: The worker's result, when it ran.
        error: Why it did not succeed (every subtask that did not, and does not
            wait, has one: its worker's error, or what stopped it).
        started_s: When it started, in seconds since the run's worker phase began.
        duration_s: How long its worker ran.
    """

    model_config = ConfigDict(defer_build=True, frozen=True)

    subtask: Subtask
    status: SubtaskStatus
    worker: WorkerResult | None = None
    error: WorkerError | None = None
    started_s: float = 0.0
    duration_s: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _with_a_reason(cls, data: Any) -> Any:
        """A subtask that did not succeed says why: its worker's error, or what its
        status means (a result kept by an older version may have had none)."""
        if not isinstance(data, dict) or data.get("error") is not None:
            return data
        status = data.get("status")
        worker = data.get("worker")
        error = getattr(worker, "error", None)
        if error is None and status in _REASONS:
            error = WorkerError(type=_REASONS[status][0], message=_REASONS[status][1])
        return data if error is None else {**data, "error": error}

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def text(self) -> str:
        return self.worker.text if self.worker is not None else ""

    @property
    def handed_on(self) -> str:
        """Its answer as another model is given it (:attr:`WorkerResult.handed_on`: a
        dependent subtask's, a lead's, the aggregator's), every secret masked."""
        return self.worker.handed_on if self.worker is not None else ""

    @property
    def why(self) -> str:
        """Why it did not succeed, as another model is told it (a lead, the
        aggregator), every secret masked: a worker's error may quote one (a tool's
        failure, a server's message)."""
        return masked(str(self.error)) if self.error is not None else ""

    @property
    def output(self) -> Any:
        return self.worker.output if self.worker is not None else None


_REASONS: dict[str, tuple[str, str]] = {
    "failed": ("WorkerFailed", "the worker failed without an error to say why"),
    "skipped": ("DependencyFailed", "not run: a subtask it depends on did not succeed"),
    "cancelled": ("Cancelled", "the run stopped before it finished"),
    "over_budget": ("BudgetExceeded", "a budget of the run stopped it before it finished"),
}
"""What a status says when nothing more is known of why a subtask did not succeed."""


class PlanRound(BaseModel):
    """One planning round of a run planned in rounds (see ``docs/rounds.md``).

    Attributes:
        round: Its number (1: the first plan).
        added: The ids of the subtasks it added, in plan order (none: the lead was done).
        error: Why the lead gave no usable round, if it did not.
    """

    model_config = ConfigDict(defer_build=True, frozen=True)

    round: int
    added: tuple[str, ...] = ()
    error: str | None = None


class RunTimings(BaseModel):
    """Where the time went, over every life of the run (a resumed run's earlier lives
    included, the time between them not): the figures ``honeycomb trace`` and the
    web page show for it too. A run that records spans tells them as its spans do
    (:func:`timings_of`); one that does not, from what it measured (:func:`run_timings`).

    Attributes:
        wall_s: The whole run, planning and aggregation included.
        plan_s: Planning.
        workers_s: The worker phase, first start to last finish.
        aggregate_s: Aggregation.
        critical_path_s: Planning, the longest chain of dependent workers that ran,
            and aggregation if it ran: no schedule can be faster.
        sum_worker_s: Every worker's time added up.
        serial_s: Planning, every worker one after another, and aggregation.
        speedup: ``serial_s / wall_s``: the gain over running subtasks one by one.
    """

    model_config = ConfigDict(defer_build=True, frozen=True)

    wall_s: float
    plan_s: float
    workers_s: float
    aggregate_s: float
    critical_path_s: float
    sum_worker_s: float
    serial_s: float
    speedup: float


_REPR_ANSWER = 60
"""The characters of a run's answer its ``repr`` shows."""


class RunResult(BaseModel):
    """The outcome of :meth:`honeycomb.Executor.run`.

    Attributes:
        run_id: The run's id.
        task: The task as given.
        status: ``ok`` (every subtask succeeded) or ``partial`` (some did not and
            the failure policy allowed it) for a run that returned; in the
            ``.partial`` of what a run raised, ``failed`` (``RunFailed``) or
            ``over_budget`` (``BudgetExceeded``); ``interrupted`` is a run store's
            word for a run that was cancelled (Ctrl-C, SIGTERM) and can be resumed;
            ``waiting``: calls wait for a person's approval (``pending``) and nothing
            else could proceed; decide them and resume the run.
        answer: The final answer: text, or the validated output-schema object.
        answer_text: The final answer as text.
        answer_cut_off: The answer ended at the aggregator's output limit (its model's
            ``finish_reason`` was ``length``): it is as far as it goes. A subtask's is
            its worker's ``cut_off``.
        plan: The subtasks that ran.
        subtasks: Each subtask's outcome, by id, in plan order.
        usage: Tokens, model calls and tool calls of the whole run.
        timings: Wall time, critical path, serial time and speedup.
        max_workers: Subtasks that could run at once (the policy's ``max_workers``):
            a plan of more ran in waves. None in results kept before it was recorded.
        pending: The calls waiting for approval, when the run is ``waiting``.
        rounds: What each planning round added (one round for a run planned once);
            the lead's last answer, if it added nothing, is a round of its own.
        rounds_ended: Why a run planned in rounds planned no more: ``done`` (the lead
            said so), ``rounds`` (its planner's rounds were used up), ``max_subtasks``
            (the plan is as large as the policy allows), ``lead_failed``, ``budget``
            (a budget stopped the run first, in the ``.partial`` of its
            ``BudgetExceeded``), ``failed`` (a failed subtask stopped it, in the
            ``.partial`` of its ``RunFailed``); None for a run planned once, or one that stopped
            before it got there.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, arbitrary_types_allowed=True)

    run_id: str
    task: str
    status: RunStatus
    answer: Any = None
    answer_text: str = ""
    answer_cut_off: bool = False
    plan: Plan
    subtasks: dict[str, SubtaskResult]
    usage: Usage
    timings: RunTimings
    max_workers: int | None = None
    pending: list[PendingApproval] = []
    rounds: list[PlanRound] = []
    rounds_ended: str | None = None

    @property
    def failures(self) -> list[SubtaskResult]:
        """The subtasks that did not succeed, with their errors."""
        return [s for s in self.subtasks.values() if not s.ok and s.status != "waiting"]

    @property
    def succeeded(self) -> list[SubtaskResult]:
        return [s for s in self.subtasks.values() if s.ok]

    def __repr__(self) -> str:
        # One line, not every field: a run's fields hold every worker's transcript
        # (about 4 MB of text for 2,000 workers), and asyncio.run on Python 3.11 builds
        # the repr of its main task's result as it returns (0.24 s for those 2,000).
        answer = self.answer_text
        clipped = answer if len(answer) <= _REPR_ANSWER else answer[: _REPR_ANSWER - 1] + "…"
        return f"RunResult(run_id={self.run_id!r}, {self.summary()}, answer_text={clipped!r})"

    def __str__(self) -> str:
        # pydantic's str writes every field: print(result), or an f-string of it in a
        # log line, would write every worker's transcript.
        return repr(self)

    def summary(self) -> str:
        """One line: status, subtasks (and how many at a time, if they ran in waves),
        wall time, critical path, speedup, usage."""
        t, u = self.timings, self.usage
        ended = [s.status for s in self.failures]  # how each that did not succeed ended
        failed = "".join(
            f", {ended.count(status)} {status.replace('_', ' ')}"
            for status in get_args(SubtaskStatus)
            if status in ended
        )
        waves = self.max_workers is not None and len(self.subtasks) > self.max_workers
        at_a_time = f", {self.max_workers} at a time" if waves else ""
        return (
            f"{self.status}: {len(self.subtasks)} subtasks{at_a_time}{failed} | "
            f"wall {t.wall_s:.2f}s, "
            f"critical path {t.critical_path_s:.2f}s, speedup x{t.speedup:.1f} over serial | "
            f"{u.total_tokens} tokens, {u.model_calls} model calls, {u.tool_calls} tool calls"
        )


WITHHELD = (
    "(withheld: the run's answer is made of its workers' answers, and its output guards "
    "did not pass it)"
)
"""What stands for a worker's answer in a run whose output guards did not pass the
answer made of its workers' answers (:func:`answers_withheld`)."""


def answers_withheld(result: RunResult) -> RunResult:
    """``result`` with its workers' answers withheld: its answer is made of them
    (``concat``, an aggregator function) and its output guards did not pass it (they
    refused it, or the run stopped before they could), so that no text they did not
    pass leaves the run, as its stream holds it back. Each worker keeps its status,
    usage, calls and what they returned; its ``output`` and ``text`` are gone, and each
    answer in its transcript (the model's text without a call) reads :data:`WITHHELD`."""

    def withheld(outcome: SubtaskResult) -> SubtaskResult:
        worker = outcome.worker
        if worker is None:
            return outcome
        messages = tuple(
            AssistantMessage(content=WITHHELD)
            if isinstance(m, AssistantMessage) and not m.tool_calls
            else m
            for m in worker.transcript.messages
        )
        kept = {"output": None, "text": "", "transcript": Transcript(messages=messages)}
        return outcome.model_copy(update={"worker": worker.model_copy(update=kept)})

    subtasks = {name: withheld(outcome) for name, outcome in result.subtasks.items()}
    return result.model_copy(update={"subtasks": subtasks})


def run_timings(
    *,
    wall_s: float,
    plan_s: float,
    workers_s: float,
    aggregate_s: float,
    outcomes: Mapping[str, SubtaskResult],
    plan: Plan,
    earlier: Timeline | None = None,
    restored: Collection[str] = (),
) -> RunTimings:
    """A run's timings from what its life measured and, for a resumed run, what its
    earlier lives' spans say (``earlier``): computed as every view computes them
    (:func:`honeycomb.trace.critical.figures`).

    Args:
        wall_s: This life's time.
        plan_s: This life's planning.
        workers_s: This life's worker phase.
        aggregate_s: This life's aggregation.
        outcomes: Each subtask's outcome.
        plan: The plan.
        earlier: The timeline of the earlier lives (None: the first life, or a
            resumed run that kept no spans).
        restored: The subtasks that finished in an earlier life: their time is
            theirs, not this life's.
    """
    before = {r.name: r.duration_s for r in earlier.subtask_workers} if earlier else {}
    durations = {
        name: before.get(name, o.duration_s)
        if name in restored
        else before.get(name, 0.0) + o.duration_s
        for name, o in outcomes.items()
    }
    found = figures(
        wall_s=wall_s + (earlier.wall_s if earlier else 0.0),
        plan_s=plan_s + (earlier.plan_s if earlier else 0.0),
        aggregate_s=aggregate_s + (earlier.aggregate_s if earlier else 0.0),
        durations=durations,
        subtasks=plan.subtasks,
    )
    return RunTimings(
        wall_s=found.wall_s,
        plan_s=found.plan_s,
        workers_s=workers_s + (earlier.workers_s if earlier else 0.0),
        aggregate_s=found.aggregate_s,
        critical_path_s=found.critical_path_s,
        sum_worker_s=found.sum_worker_s,
        serial_s=found.serial_s,
        speedup=found.speedup,
    )


def timings_of(measured: Measured) -> RunTimings:
    """A run's timings as its spans tell them (:func:`honeycomb.trace.timeline.measure`):
    the figures every view of it shows."""
    found = measured.found
    return RunTimings(
        wall_s=found.wall_s,
        plan_s=found.plan_s,
        workers_s=measured.workers_s,
        aggregate_s=found.aggregate_s,
        critical_path_s=found.critical_path_s,
        sum_worker_s=found.sum_worker_s,
        serial_s=found.serial_s,
        speedup=found.speedup,
    )


def rounds_of(plan: Plan) -> list[PlanRound]:
    """The rounds a plan's subtasks were added in, each with its subtasks' ids in plan
    order (a resumed run's, from its stored plan)."""
    added: list[tuple[int, list[str]]] = []  # each round's ids, gathered before it is made
    for subtask in plan.subtasks:
        if not added or added[-1][0] != subtask.round:
            added.append((subtask.round, []))
        added[-1][1].append(subtask.id)
    return [PlanRound(round=number, added=tuple(ids)) for number, ids in added]


def answer_as_text(answer: Any) -> str:
    """An answer as text: itself, a model's indented JSON, or any value's JSON."""
    if answer is None:
        return ""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, BaseModel):
        return answer.model_dump_json(indent=2)
    return json.dumps(answer, indent=2, default=str)


def why_failed(outcomes: Iterable[SubtaskResult], most: int = 3) -> str:
    """Why the subtasks of ``outcomes`` that failed of themselves failed, for a run's
    error to say (`` (s1, s2: ModelCallError: ...; s4: ToolError: ...)``; '' when none
    did): those that failed for the same reason are told together, and at most
    ``most`` reasons are told. Subtasks skipped, cancelled or stopped by a budget are
    not: their reasons are another subtask's, or the run's."""
    ids_by_error: dict[str, list[str]] = {}
    for outcome in outcomes:
        if outcome.status == "failed" and outcome.error is not None:
            ids_by_error.setdefault(str(outcome.error), []).append(outcome.subtask.id)
    if not ids_by_error:
        return ""
    told = [f"{_some(ids)}: {error}" for error, ids in list(ids_by_error.items())[:most]]
    others = len(ids_by_error) - most
    if others > 0:
        told.append(f"and {others} other reason{'s' if others > 1 else ''}")
    return f" ({'; '.join(told)})"


def _some(ids: list[str], most: int = 3) -> str:
    """``s1, s2, s3 and 4 more``."""
    shown = ", ".join(ids[:most])
    return f"{shown} and {len(ids) - most} more" if len(ids) > most else shown
