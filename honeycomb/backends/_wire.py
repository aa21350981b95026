"""What crosses between a Ray backend's driver and its actors: messages, errors made
portable, a worker's spec, a pinned tool's description, a result."""

from __future__ import annotations

import contextlib
import copy
import json
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import msgspec

from runtime import (
    ApprovalEntry,
    AssistantMessage,
    BudgetExceeded,
    HoneycombError,
    JournalEntry,
    Tool,
    logs,
)
from runtime.limits import Limits
from runtime.limits.ratelimit import RetryDeadline
from runtime.limits.retry_policy import wall_time_ends
from runtime.models.layers.budget import spending, spent_by
from runtime.models.layers.cassette import current_case
from runtime.tools.approvals import MaskedEdit, NoApprover, unmasked_edit
from runtime.tools.journal import OnUnknown
from workers import LoopState, Worker, WorkerResult
from workers.guards import ResolvedGuards

if TYPE_CHECKING:
    from honeycomb.run.worker_record import WorkerRecord

Message = tuple[Any, ...]
"""One message of a worker's stream: ``(kind, *payload)``."""


class RemoteFailure(HoneycombError):
    """What the driver answered a worker's request with, when it failed there (other
    than a budget, which comes back as :class:`BudgetExceeded` itself)."""


class WorkerLost(HoneycombError):
    """A worker's actor died while it ran, and the worker does not continue elsewhere:
    its run has no store (no checkpoint or journal to continue from), or its actors
    died ``max_actor_deaths`` times (see :class:`RayBackend`).

    Attributes:
        worker: The worker's name (the subtask id).
        reason: What Ray said about the (last) actor.
        role: The worker's role.
        deaths: Its actors that died.
        tools: The tools it was running when the last one died, when its events said.
        limit: The backend's ``max_actor_deaths`` (None: the run has no store).
    """

    def __init__(
        self,
        worker: str,
        reason: str,
        *,
        role: str = "",
        deaths: int = 1,
        tools: Sequence[str] = (),
        limit: int | None = None,
    ) -> None:
        self.worker = worker
        self.reason = reason
        self.role = role
        self.deaths = deaths
        self.tools = tuple(tools)
        self.limit = limit
        named = ", ".join(repr(t) for t in self.tools)
        running = (
            f", while it ran tool{'s' if len(self.tools) > 1 else ''} {named}" if named else ""
        )
        if limit is None:
            message = (
                f"worker {worker!r} was lost with its Ray actor{running} ({reason}); with a "
                "run store it would have continued on another actor from its last checkpoint"
            )
        else:
            message = (
                f"worker {worker!r} of role {role!r} was lost with its Ray actor {deaths} "
                f"times{running} (the last: {reason}); it does not move to another actor "
                f"again (RayBackend max_actor_deaths={limit}): a tool that ends its process "
                "(a crash, too little memory) ends it the same way each time"
            )
        super().__init__(message)


def portable_error(exc: BaseException) -> tuple[str, Any]:
    """An error that crosses a process and comes back the same (see :func:`raised`):
    itself, when it pickles and is made again as itself (a tool's ``ModelRetry``, say),
    else as plain values. What a judge's call it ended spent (its ``spent``, which the
    guard that asked reports) crosses with it either way."""
    spent = spent_by(exc)
    if isinstance(exc, BudgetExceeded):  # where its limit is set too, as it was named
        fields = (exc.limit, exc.allowed, exc.used, exc.requested, exc.running, exc.setting)
        return ("budget", (fields, spent))
    try:
        pickle.dumps(exc)  # its class importable where it goes ...
        again = copy.deepcopy(exc)  # ... and made again from what is pickled
    except Exception:
        again = None
    if type(again) is type(exc) and str(again) == str(exc):
        return ("raised", again)
    return ("error", (f"{type(exc).__name__}: {exc}", spent))


def raised(error: tuple[str, Any]) -> BaseException:
    """The error :func:`portable_error` made portable."""
    kind, value = error
    if kind == "raised":
        return cast(BaseException, value)
    again: BaseException
    if kind == "budget":
        (limit, allowed, used, requested, running, setting), spent = value
        refused = BudgetExceeded(limit, allowed, used, requested=requested, running=running)
        if setting is not None:
            refused.set_by(setting)
        again = refused
    else:
        text, spent = value
        again = RemoteFailure(text)
    return spending(again, spent) if spent is not None else again


SentDeadline = tuple[float, int, tuple[str, Any] | None, str]
"""A retry deadline as it crosses: the seconds it has left (two machines' monotonic
clocks differ), the attempts made before, what the last failed with, portable, and
what set it, in words."""


def portable_deadline(deadline: RetryDeadline | None) -> SentDeadline | None:
    """``deadline`` (the retry deadline of an attempt) as it crosses a process."""
    if deadline is None:
        return None
    last = portable_error(deadline.last) if deadline.last is not None else None
    return (deadline.at - time.monotonic(), deadline.attempts, last, deadline.deadline)


def deadline_again(sent: SentDeadline | None) -> RetryDeadline | None:
    """The retry deadline :func:`portable_deadline` sent, on this process's clock."""
    if sent is None:
        return None
    left_s, attempts, last, words = sent
    again = raised(last) if last is not None else None
    return RetryDeadline(
        at=time.monotonic() + left_s, attempts=attempts, last=again, deadline=words
    )


@dataclass(frozen=True, kw_only=True)
class SentServices:
    """The part of a worker's services that crosses to its actor: the values
    themselves, and which of the rest the actor asks the driver for (see
    :func:`~honeycomb.backends._standins.served`).

    Attributes:
        run_id: The run.
        guards: The run's argument guards (its role's come with its setup).
        approval_timeout_s: Seconds a call waits for a decision.
        limits: The run's budget's limits: with any, its model calls are reserved at
            the driver (else each is counted there as it is made), and those a call
            reads (``cost_per_call``) hold in the actor too.
        budget_settings: Where each of those limits is set (the budget's ``settings``),
            which its refusals in the actor name as the driver's do (None: none).
        at_driver: What is served from the driver, of ``events`` (the run's handlers
            hear of its events), ``tool_slots``, ``model_slots``, ``approver`` and
            ``judge``.
        nobody: Its approver, when nobody can decide its calls (a sub-run's whose
            caller has none): it crosses as itself, so that such a call is denied at
            once, saying why, and is not told as asked, as in one process.
        text: The driver's handlers want answers' text as it is written.
        held: The driver holds that text until guards pass it (the run's, on an answer
            made of its workers'): nobody reads it as it is written, so no call of
            the worker streams (and each is retried after an error as any call is).
        logs: The driver logs Honeycomb's entries (structlog is configured there): the
            worker's go to it, which logs them as in one process.
        journal: Its store's journal so far (None: it keeps nothing).
        decisions: Its store's calls asked about so far, and their decisions.
        on_unknown: What a call with an intent and no outcome does.
        scope: Its journal's scope, for its calls' idempotency keys.
        wall_left_s: Seconds the run's wall time had left as the worker was sent (None:
            it has none): its model calls' retries end there, as in one process.
        case: The eval's case its model calls are those of, in a cassette (see
            ``runtime.models.layers.cassette.cassette_case``).
        cannot_wait: Why its calls cannot wait for a decision where it runs, told when
            its approver decides nothing (None: the default reason).
    """

    run_id: str | None
    guards: ResolvedGuards
    approval_timeout_s: float | None
    limits: Limits
    at_driver: frozenset[str]
    budget_settings: Mapping[str, str] | None = None
    nobody: NoApprover | None = None
    text: bool = False
    held: bool = False
    logs: bool = False
    journal: Mapping[tuple[int, str], JournalEntry] | None = None
    decisions: Mapping[tuple[int, str], ApprovalEntry] | None = None
    on_unknown: OnUnknown = "tell"
    scope: str = ""
    wall_left_s: float | None = None
    case: str | None = None
    cannot_wait: str | None = None


@dataclass(frozen=True, kw_only=True)
class WorkerSpec:
    """One worker to run in an actor: what it is and what it starts from.

    Attributes:
        name: The worker's name (the subtask id).
        setup: The key of its role's setup, installed in the actor before.
        model: The key of its model, installed before.
        summarizer: The key of its summarizer, if it has one of its own.
        task: The subtask's instruction.
        inputs: The results of the subtasks it depends on.
        conversation: What it is shown of a session's conversation.
        resume: The state it continues from (a checkpoint, or a paused worker's).
        services: What crosses of its services.
        keep: Keep its answer in its role's memory as it ends (False: the run does,
            once its output guards pass it).
    """

    name: str
    setup: str
    model: str
    summarizer: str | None
    task: str
    inputs: Mapping[str, str] | None
    conversation: str
    resume: LoopState | None
    services: SentServices
    keep: bool = True


@dataclass(frozen=True)
class Pinned:
    """A pinned tool (see ``Tool.pinned``) as an actor gets it: what the model is told
    of it and how its calls are scheduled, not its function (which holds what is the
    run's process's): its calls are made at the driver, by the tool itself."""

    options: dict[str, Any]
    context_param: str | None

    @classmethod
    def of(cls, found: Tool[Any, Any]) -> Pinned:
        # Not its ``ready``: it holds what is the run's process's, as its function does
        # (its calls, made at the driver, start an MCP server there).
        options = {**found.options(), "parameters": found.schema.parameters, "ready": None}
        return cls(options, found.context_param)


def portable_result(result: WorkerResult) -> tuple[WorkerResult, tuple[str, Any] | None]:
    """A result that crosses a process: its exception as plain values (many
    exceptions cannot be unpickled)."""
    exc = result.exception
    plain = result.model_copy(update={"exception": None})
    return plain, portable_error(exc) if exc is not None else None


def sent_services(
    worker: Worker,
    model_slots: bool,
    going_on: Callable[[str, int, str], bool],
    state: LoopState | None = None,
) -> SentServices:
    """What crosses to an actor of the worker's services (now: its store's journal
    so far goes along when it moves to another actor), for it to go on from ``state``.

    A side-effecting call of a pinned tool that an earlier life of the worker made, and
    that goes on at the driver (``going_on``: by its tool, turn and call id), is in the
    journal sent as a call its guards passed that has not begun: its outcome is not
    unknown, and the next life, making it again, is given its answer (its intent is
    made again, and its outcome kept then), judging it no more than the first did."""
    services = worker.services
    nobody = services.approver if isinstance(services.approver, NoApprover) else None
    served = {
        "events": services.tracer.enabled,
        "tool_slots": services.tool_slots is not None,
        "model_slots": model_slots,
        "approver": services.approver is not None and nobody is None,
        "judge": services.judge is not None,
    }
    # A run gives its workers its record's part (honeycomb.run.worker_record).
    record = cast("WorkerRecord | None", services.store)
    ends = wall_time_ends.get()  # the run's, whose worker is sent in its task
    return SentServices(
        run_id=services.run_id,
        guards=services.guards,
        approval_timeout_s=services.approval_timeout_s,
        limits=services.budget.limits,
        budget_settings=dict(services.budget.settings),
        at_driver=frozenset(name for name, yes in served.items() if yes),
        nobody=nobody,
        text=services.tracer.text,
        held=services.tracer.holds_text,
        logs=logs.configured(),
        journal=None if record is None else _known(record.entries, going_on),
        decisions=_unmasked_edits(record.decisions, state) if record is not None else None,
        on_unknown=record.on_unknown if record is not None else "tell",
        scope=record.scope if record is not None else "",
        wall_left_s=None if ends is None else ends - time.monotonic(),
        case=current_case(),  # the eval's, whose worker is sent in its task
        cannot_wait=services.cannot_wait,
    )


def _known(
    entries: Mapping[tuple[int, str], JournalEntry], going_on: Callable[[str, int, str], bool]
) -> dict[tuple[int, str], JournalEntry]:
    """The journal's entries, those of the calls under way at the driver as calls the
    guards passed and that have not begun (see :func:`sent_services`): made again, each
    is given its answer there, and is not judged again (its guards passed it before it
    began)."""
    return {
        (turn, call_id): (
            msgspec.structs.replace(entry, status="passed")
            if entry.status is None and going_on(entry.tool, turn, call_id)
            else entry
        )
        for (turn, call_id), entry in entries.items()
    }


def _unmasked_edits(
    entries: Mapping[tuple[int, str], ApprovalEntry], state: LoopState | None
) -> dict[tuple[int, str], ApprovalEntry]:
    """``entries``, each decision's edited arguments with the secrets of the values the
    edit left as they were shown (masked, as the store keeps them) put back from the
    call in ``state``: the actor, which knows none of this process's secrets, cannot,
    and took such an edit for one that changed a secret (an edit that did change one
    stays masked, and the worker refuses it, as in one process)."""
    calls = {
        call.id: call
        for message in (state.messages if state is not None else ())
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }
    found: dict[tuple[int, str], ApprovalEntry] = {}
    for key, entry in entries.items():
        decision, call = entry.decision, calls.get(key[1])
        if decision is not None and decision.arguments is not None and call is not None:
            with contextlib.suppress(MaskedEdit, ValueError):  # refused there, as here
                own = json.loads(call.arguments)
                edited = unmasked_edit(decision.arguments, own if isinstance(own, dict) else {})
                entry = msgspec.structs.replace(
                    entry, decision=msgspec.structs.replace(decision, arguments=edited)
                )
        found[key] = entry
    return found
