"""What a check sees of a case's run (:class:`CaseRun`): its answer, status, spending,
times and every tool call its workers made, with their arguments; and the judges it
may ask (:class:`Judges`), whose calls cost the eval, not the run."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from honeycomb.run.result import RunResult
from runtime import AssistantMessage, HoneycombError, Model, Usage
from runtime.value import Value
from workers.guards import GuardCheck, Judge, JudgeRole

__all__ = ["CaseRun", "Judges", "ToolUse", "case_run", "tool_uses"]


class ToolUse(Value, frozen=True, kw_only=True):
    """One tool call a worker of the run made.

    Attributes:
        worker: The worker (the subtask's id).
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
        self._judge = Judge(roles, model_for)
        self.roles = roles
        self.spent = Usage()
        """What the grades asked of these judges cost."""

    def fresh(self) -> Judges:
        """The same judges, with nothing spent yet: one case's."""
        found = Judges.__new__(Judges)
        found._judge, found.roles, found.spent = self._judge, self.roles, Usage()
        return found

    async def grade(self, role: str, rubric: str, task: str, answer: str) -> str | None:
        """The verdict of ``role`` on ``answer`` by ``rubric``: None when it passes,
        else the judge's reason.

        Raises:
            HoneycombError: when the role is not one of the judges, or its call failed.
        """
        shown = f"Task: {task}\n\nRubric: {rubric}\n\nAnswer:\n{answer}"
        verdict, usage, _ = await self._judge.ask(role, GuardCheck(kind="output", text=shown))
        self.spent = self.spent + usage + Usage(model_calls=1)  # the usage of one call
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
        tool_calls: Every tool call of its workers, in the order they made them.
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
        """How many side-effecting tool calls the run made."""
        return sum(1 for use in self.tool_calls if use.side_effects)


def tool_uses(result: RunResult, side_effects: Callable[[str, str], bool]) -> tuple[ToolUse, ...]:
    """The tool calls of ``result``'s workers, in plan order then call order;
    ``side_effects(role, tool)`` says whether a tool has side effects."""
    found: list[ToolUse] = []
    for outcome in result.subtasks.values():
        worker = outcome.worker
        if worker is None:
            continue
        for message in worker.transcript.messages:
            if not isinstance(message, AssistantMessage):
                continue
            for call in message.tool_calls:
                found.append(
                    ToolUse(
                        worker=worker.worker,
                        role=worker.role,
                        tool=call.name,
                        arguments=_arguments(call.arguments),
                        side_effects=side_effects(worker.role, call.name),
                    )
                )
    return tuple(found)


def _described(error: Exception) -> str:
    """What ``error`` says: a Honeycomb error's message names what to fix; any other
    (a user's planner raising ``KeyError('x')``) says little without its type."""
    if isinstance(error, HoneycombError):
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


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
    side_effects: Callable[[str, str], bool],
    judges: Judges | None,
) -> CaseRun:
    """What the checks of case ``case`` see of its run: its result, or the partial
    result its error carries, or only the error (any exception: a Python error of a
    user's planner, aggregator or tool as well as a Honeycomb one)."""
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
            judges=judges,
        )
    failures = "; ".join(
        f"{s.subtask.id}: {s.error.message}" for s in result.failures if s.error is not None
    )
    return CaseRun(
        case=case,
        task=task,
        expected=expected,
        run_id=run_id,
        status=result.status,
        answer=result.answer,
        answer_text=result.answer_text,
        error=_described(error) if error is not None else (failures or None),
        usage=result.usage,
        wall_s=result.timings.wall_s,
        critical_path_s=result.timings.critical_path_s,
        tool_calls=tool_uses(result, side_effects),
        result=result,
        judges=judges,
    )
