"""What a resumed run reads back from its :class:`~honeycomb.store.RunStore`.

:func:`restore` turns a stored run into what the scheduler needs: the results of
finished workers (not run again), the loop state each unfinished worker continues
from, what the earlier lives spent, and the journal of side-effecting calls.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec
from msgspec.structs import replace
from pydantic import BaseModel, ValidationError

from honeycomb.run.phase_names import is_phase_name
from honeycomb.run.plan import Plan
from honeycomb.run.result import RunResult, SubtaskResult
from honeycomb.store import StoredRun, StoredWorker
from honeycomb.store.runs import most
from runtime import (
    AssistantMessage,
    ConfigError,
    JournalEntry,
    Message,
    ToolCall,
    Usage,
    validate_messages,
)
from runtime.tools.approvals import ApprovalEntry
from runtime.tools.journal import began
from runtime.tools.unmasking import HiddenSecret, revealed
from runtime.value import Value, validation_summary
from workers import LoopState

__all__ = ["Resumed", "restore", "retyped", "stored_result"]


class Resumed(Value, frozen=True, kw_only=True):
    """What a resumed run starts from.

    Attributes:
        plan: The plan of the earlier life, if it got that far.
        given: Whether the earlier life was given its subtasks (then it planned once),
            not planned by its planner.
        finished: Results of subtasks that finished (they are not run again).
        states: Loop states of subtasks that had started, to continue from.
        spent: What the earlier lives spent, the planner's, aggregator's, judges' and
            summaries' included (the run's budget starts from it).
        life: The number of the life that resumes it (the first is 1; of a run whose
            lives were not recorded, a store of schema 4's, 2).
        started_at: When its first life started (what makes its calls' idempotency
            keys its own, see :mod:`runtime.tools`).
        journals: Side-effecting calls journaled so far, by worker.
        approvals: Calls asked about so far (and their decisions), by worker.
        phases: Results of the planner's and the aggregator's workers that finished,
            by the name each is kept under (:mod:`honeycomb.run.phase_workers`): no
            subtask's, nor in ``finished``.
    """

    plan: Plan | None
    given: bool = False
    finished: dict[str, SubtaskResult]
    states: dict[str, LoopState]
    spent: Usage
    life: int
    started_at: float
    journals: dict[str, dict[tuple[int, str], JournalEntry]]
    approvals: dict[str, dict[tuple[int, str], ApprovalEntry]] = msgspec.field(default_factory=dict)
    phases: dict[str, SubtaskResult] = msgspec.field(default_factory=dict)


def restore(stored: StoredRun) -> Resumed:
    """Read a stored run back for the scheduler."""
    plan = Plan.model_validate_json(stored.plan) if stored.plan else None
    finished: dict[str, SubtaskResult] = {}
    phases: dict[str, SubtaskResult] = {}
    states: dict[str, LoopState] = {}
    by_workers = Usage()
    for name, worker in stored.workers.items():
        if worker.status == "skipped":
            continue  # skipped again at once if what it depends on failed again
        if worker.result is not None:
            ended = phases if is_phase_name(name) else finished
            outcome = ended[name] = SubtaskResult.model_validate_json(worker.result)
            if outcome.worker is not None:
                by_workers += outcome.worker.usage
            continue
        state = _state(worker)
        if state is not None:
            states[name] = _revealed(name, state, worker)
            by_workers += state.usage
    journals = {name: w.journal for name, w in stored.workers.items() if w.journal}
    approvals = {name: w.approvals for name, w in stored.workers.items() if w.approvals}
    return Resumed(
        plan=plan,
        given=stored.planned_by == "given",
        finished=finished,
        states=states,
        # What the run recorded as it spent holds its workers' spending, unless a crash
        # cut off its last write, or its lives were not recorded (a store of schema 4).
        spent=most(stored.spent, by_workers),
        life=max(stored.lives, 1) + 1,
        started_at=stored.started_at,
        journals=journals,
        approvals=approvals,
        phases=phases,
    )


M = TypeVar("M", bound=BaseModel)


def retyped(value: M, field: str, wanted: type[BaseModel] | None) -> M:
    """``value`` whose ``field`` (an output read back from JSON) is made ``wanted``
    again, if it has an output type and is not already one: what was returned as an
    object of that type comes back as one.

    Raises:
        ConfigError: when what is stored does not validate as ``wanted``: it was made
            for another type (the Executor's ``output_type`` or the role's
            ``output_schema`` changed since).
    """
    current = getattr(value, field)
    if wanted is None or current is None or isinstance(current, wanted):
        return value
    try:
        typed = wanted.model_validate(current)
    except ValidationError as exc:
        raise ConfigError(
            f"the stored {field} is not a valid {wanted.__name__} ({validation_summary(exc)}): "
            "it was made for another type; run it with the type it was made for, or use a "
            "new run_id"
        ) from exc
    return value.model_copy(update={field: typed})


def stored_result(stored: StoredRun) -> RunResult | None:
    """The result of a run that ended with an answer."""
    if stored.result is None or stored.status not in ("ok", "partial"):
        return None
    return RunResult.model_validate_json(stored.result)


def _state(stored: StoredWorker) -> LoopState | None:
    """The loop state a stored worker continues from (None: start afresh)."""
    saved = stored.state
    if saved is None:
        return None
    count = saved["messages"]
    found: list[Message] = []
    for seq, batch in stored.messages:
        if seq > len(found):
            return None  # a gap: start this worker again
        found[seq:] = validate_messages(batch)
    messages = tuple(found[:count])
    if len(messages) < count:
        return None  # the store lost the tail: start this worker again
    return LoopState(
        task=saved["task"],
        messages=messages,
        turn=saved["turn"],
        input_tokens=saved["input_tokens"],
        output_tokens=saved["output_tokens"],
        cost=saved["cost"] or 0.0,
        tool_calls=saved["tool_calls"],
        previous_calls=_calls_at(saved["previous"], messages),
        nudged=bool(saved["nudged"]),
        output_attempts=saved["output_attempts"],
        wrapped_up=bool(saved["wrapped_up"]),
        repeats=saved["repeats"],
        cached_input_tokens=saved["cached_input_tokens"] or 0,
        reasoning_tokens=saved["reasoning_tokens"] or 0,
        summary=saved["summary"] or "",
        summarized=min(saved["summarized"] or 0, count),
        compactions=saved["compactions"] or 0,
        context_tokens=saved["context_tokens"] or 0,
        context_messages=saved["context_messages"] or 0,
    )


def _revealed(name: str, state: LoopState, stored: StoredWorker) -> LoopState:
    """``state`` whose calls to make (its last answer's, not made yet) have their
    secrets again, which the store kept masked (:mod:`runtime.tools.unmasking`). A call that
    will not run (its outcome journaled, or denied) is left as kept.

    Raises:
        ConfigError: when a call that will run held a secret this process does not
            know (or several it knows are masked as), naming the call and the mask.
    """
    calls = state.pending
    if not any("hidden]" in c.arguments for c in calls):
        return state
    again: list[ToolCall] = []
    for call in calls:
        ran = began(stored.journal.get((state.turn, call.id)), call)
        asked = stored.approvals.get((state.turn, call.id))
        denied = asked is not None and asked.decision is not None and not asked.decision.approve
        if (ran is not None and ran.status is not None) or denied:
            again.append(call)
            continue
        try:
            again.append(replace(call, arguments=revealed(call.arguments)))
        except HiddenSecret as exc:
            raise ConfigError(
                f"worker {name!r} goes on with call {call.id!r} to {call.name!r}, whose "
                f"arguments {exc}: a run store keeps secrets only masked, and the call "
                "would run with the mask. Let this process know the secret (add_secret, or "
                "the hive that declares it) before it resumes the run"
            ) from exc
    last = state.messages[-1]
    assert isinstance(last, AssistantMessage)
    return replace(state, messages=(*state.messages[:-1], replace(last, tool_calls=tuple(again))))


def _calls_at(index: int, messages: tuple[Message, ...]) -> tuple[ToolCall, ...]:
    message = messages[index] if 0 <= index < len(messages) else None
    return message.tool_calls if isinstance(message, AssistantMessage) else ()
