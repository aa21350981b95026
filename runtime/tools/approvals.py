"""Approvals: a person decides on a tool call before it runs.

A call needs approval when its tool says so (``@tool(approval=True)``), when the
worker's :class:`ApprovalRule` names its tool, or when the rule asks for every
side-effecting tool. Once a call has been asked about, its recorded decision is
honoured even if the rule changed since (a resumed run never runs a denied call).

Before a turn's calls run, each call that needs approval gets a :class:`Decision`:

- recorded already (a decision of an earlier life of the run, or one made with
  ``Executor.decide``): it stands;
- else from the :class:`Approver`, if one is attached, or from another decider (a
  person on a page of the run store, ``honeycomb approve``), whichever decides first:
  the call is kept in the log as it is asked, so the others see it waiting; a decision
  recorded there first settles it, and the approver's question is withdrawn (cancelled,
  its ``CancelledError`` carrying the entry that stands: :func:`settled_by`);
- else the call is recorded as pending and :class:`ApprovalNeeded` stops the turn
  before any of its calls run: the worker pauses, the others go on.

A denied call becomes the error observation ``denied: <reason>`` and the loop goes
on; an approval with edited arguments runs the call with them, validated again. With
a timeout, no decision in time is a denial.

A person sees a call's arguments with every secret masked (``[password hidden]``), and
the run store keeps them so. An edit that leaves such a value as it was shown keeps
the call's own value (its secret, where the call holds it); one that changes a value
holding a mask (or gives a secret, which is kept masked) is refused, naming the
argument: the call would run with the mask, not the secret (:func:`unmasked_edit`).

A decision is final: a log keeps the first decision on a call and hands back the one
that stands, so a worker never acts on a decision that lost to another (a person's,
recorded in the store meanwhile).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Protocol

from msgspec.structs import replace

from runtime.concurrency import TimedOut, within
from runtime.errors import CassetteMismatch
from runtime.events import NO_TRACE, ApprovalDecided, ApprovalRequested, Tracer
from runtime.limits.room import away_for_a_person
from runtime.messages import ToolCall
from runtime.secrets import masked
from runtime.tools.define import ArgumentsError, Tool, arguments_text
from runtime.value import Value

__all__ = [
    "ApprovalEntry",
    "ApprovalGate",
    "ApprovalLog",
    "ApprovalNeeded",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "Decision",
    "MaskedEdit",
    "MemoryApprovalLog",
    "NoApprover",
    "PendingApproval",
    "Verdict",
    "decided_event",
    "described",
    "settled_by",
    "unmasked_edit",
    "withdraw",
]


class ApprovalRule(Value, frozen=True, kw_only=True):
    """Which tools of one worker need approval (besides those marked ``approval=True``).

    Attributes:
        tools: Tool names that need approval.
        side_effects: Every side-effecting tool needs approval.
        owner: Who set the rule (a role's name), to say why a call asks.
    """

    tools: frozenset[str] = frozenset()
    side_effects: bool = False
    owner: str = ""

    def why(self, tool: Tool[Any, Any]) -> str | None:
        """Why a call to ``tool`` needs approval; None when it does not."""
        if tool.approval:
            return f"tool {tool.name!r} is marked approval=True"
        if tool.name in self.tools:
            return f"{self._who} asks for approval of {tool.name!r}"
        if self.side_effects and tool.side_effects:
            return f"{self._who} asks for approval of every side-effecting tool"
        return None  # asked of every call a worker makes: nothing is formatted for it

    @property
    def _who(self) -> str:
        return f"role {self.owner!r}" if self.owner else "the worker"


class ApprovalRequest(Value, frozen=True, kw_only=True):
    """What an :class:`Approver` is asked about: one tool call.

    Attributes:
        run_id: The run, if any.
        worker: The worker making the call.
        role: The worker's role.
        call_id: The model's id for the call.
        turn: The loop turn.
        tool: The tool's name.
        arguments: The validated arguments.
        why: Why the call needs approval.
        summary: What the call will do, in the tool's own words (its ``describe``);
            None when the tool gives none.
    """

    run_id: str | None
    worker: str | None
    role: str
    call_id: str
    turn: int
    tool: str
    arguments: dict[str, Any]
    why: str
    summary: str | None = None


class Decision(Value, frozen=True, kw_only=True):
    """A person's answer about one call: approve (maybe with edited arguments), or
    deny with a reason the model is told. ``by``: who decided, as an approver knows it
    (the person it asked), kept with the decision in the run store (None: "the run's
    approver"; a decision read back from the store has it in its entry's
    ``decided_by``)."""

    approve: bool
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    by: str | None = None

    @classmethod
    def approved(
        cls, arguments: dict[str, Any] | None = None, *, by: str | None = None
    ) -> Decision:
        """Run the call; with ``arguments``, with these instead of the model's."""
        return cls(approve=True, arguments=arguments, by=by)

    @classmethod
    def denied(cls, reason: str, *, by: str | None = None) -> Decision:
        """Do not run the call; the model gets ``denied: <reason>``."""
        return cls(approve=False, reason=reason, by=by)


Approver = Callable[[ApprovalRequest], Awaitable[Decision]]
"""An async callable that decides on a call: a terminal prompt, a chat message..."""


class NoApprover:
    """The approver of work whose calls nobody can decide: no approver is attached,
    and they cannot wait in a run store (a hive called as a tool keeps none). Each is
    denied at once with ``reason`` (what to attach), decided by the run
    (:data:`NOBODY_BY`): no person is asked, so none is said to be (no
    ``approval.requested``), and the worker keeps its slot and its clock meanwhile."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def __call__(self, request: ApprovalRequest) -> Decision:
        return Decision.denied(self.reason, by=NOBODY_BY)


class PendingApproval(Value, frozen=True, kw_only=True):
    """A call waiting for a decision.

    Attributes:
        call_id: The model's id for the call (see ``Executor.decide``).
        worker: The worker that made it.
        role: The worker's role.
        turn: The loop turn it belongs to.
        tool: The tool.
        arguments: Its validated arguments.
        why: Why it needs approval.
        asked_at: When it was first asked about (``time.time()``).
        deadline: When no decision becomes a denial (None: never).
        summary: What the call will do, in the tool's own words (its ``describe``),
            told by whoever knows the tool (the run, a server given the run's
            tools); the run store does not keep it.
    """

    call_id: str
    worker: str
    role: str
    turn: int
    tool: str
    arguments: dict[str, Any]
    why: str
    asked_at: float
    deadline: float | None = None
    summary: str | None = None


class ApprovalEntry(Value, frozen=True, kw_only=True):
    """A call asked about, and its decision once there is one: when, and by whom (a
    person's name, the approver, or the time limit)."""

    pending: PendingApproval
    decision: Decision | None = None
    decided_at: float | None = None
    decided_by: str | None = None


class ApprovalLog(Protocol):
    """Where one worker's calls asked about, and their decisions, are kept (the run
    store), so a paused worker continues from exactly there."""

    def recorded(self, turn: int, call_id: str) -> ApprovalEntry | None:
        """The entry for a call asked about in this or an earlier life of the run."""

    async def record(self, entry: ApprovalEntry) -> ApprovalEntry:
        """Keep ``entry`` (a new pending call, or its decision); return once durable,
        with the entry that stands: a call decided already keeps its first decision."""

    async def decided(self, pending: PendingApproval) -> ApprovalEntry:
        """Return once a decision on ``pending`` is recorded by someone else (a person
        on a page of the run store, ``honeycomb approve``), with its entry: what the
        run's approver, asked about the call, is raced against."""


class MemoryApprovalLog:
    """An approval log held in memory (tests, a worker run on its own)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, str], ApprovalEntry] = {}
        self._changed = asyncio.Event()  # replaced as it is set: each wait sees the next

    def recorded(self, turn: int, call_id: str) -> ApprovalEntry | None:
        return self.entries.get((turn, call_id))

    async def record(self, entry: ApprovalEntry) -> ApprovalEntry:
        key = entry.pending.turn, entry.pending.call_id
        kept = self.entries.get(key)
        if kept is None or kept.decision is None:
            kept = self.entries[key] = entry
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        return kept

    async def decided(self, pending: PendingApproval) -> ApprovalEntry:
        while True:
            changed = self._changed
            kept = self.entries.get((pending.turn, pending.call_id))
            if kept is not None and kept.decision is not None:
                return kept
            await changed.wait()


TIME_LIMIT_BY = "the time limit (approval_timeout_s)"
"""Who denied a call that no one decided within its ``approval_timeout_s``."""

WITHDRAWN_BY = "the run: the call could not be made"
"""Who denied a waiting call that the run could not make when it went on."""

NOBODY_BY = "the run: nobody can decide it (no approver is attached, and it cannot wait)"
"""Who denied a call that needed approval when no approver could be asked and it had
nowhere to wait."""

CALLER_BY = "the calling run's approver"
"""Who decided a call of a hive called as a tool, its calling run's approver asked (one
that did not say who the person was)."""


class Verdict(Value, frozen=True, kw_only=True):
    """What the dispatcher does with a call that needed approval: refuse it with
    ``refusal`` as its observation, or run it with ``kwargs`` (``note`` goes before
    its observation)."""

    refusal: str | None = None
    kwargs: dict[str, Any] | None = None
    note: str = ""


class ApprovalNeeded(Exception):
    """A control signal: calls of this turn wait for a decision, so the worker pauses.

    Attributes:
        pending: The calls waiting, in call order.
    """

    def __init__(self, pending: tuple[PendingApproval, ...]) -> None:
        self.pending = pending
        names = ", ".join(f"{p.tool} ({p.call_id})" for p in pending)
        super().__init__(f"waiting for approval of {names}")

    def __reduce__(self) -> tuple[type[ApprovalNeeded], tuple[tuple[PendingApproval, ...]]]:
        """Pickled as itself (a nested worker's, called for a worker on Ray, crosses to it)."""
        return (type(self), (self.pending,))


class ApprovalGate:
    """Decides, for one worker's dispatcher, on the calls that need approval.

    Args:
        rule: Which tools need approval.
        approver: Asked when no decision is recorded (None: calls wait for one).
        log: Where asks and decisions are kept (None: with no approver either, a call
            that needs approval is denied, for it has nowhere to wait).
        worker: The worker's name.
        role: The worker's role.
        run_id: The run.
        timeout_s: Seconds a call waits for a decision before it is denied.
        tracer: Told when a call starts waiting for a decision and of the decision
            the worker goes on with (``approval.requested``, ``approval.decided``),
            once each a call, as this gate sees it.
    """

    def __init__(
        self,
        rule: ApprovalRule,
        *,
        approver: Approver | None = None,
        log: ApprovalLog | None = None,
        worker: str | None = None,
        role: str = "",
        run_id: str | None = None,
        timeout_s: float | None = None,
        tracer: Tracer = NO_TRACE,
    ) -> None:
        self.rule = rule
        self.approver = approver
        self.log = log
        self._worker = worker
        self._role = role
        self._run_id = run_id
        self._timeout_s = timeout_s
        self._tracer = tracer
        self._told: set[tuple[str, int, str]] = set()  # (event kind, turn, call id)

    def asks(self, tool: Tool[Any, Any]) -> bool:
        """Whether calls to ``tool`` need approval under the rule."""
        return self.rule.why(tool) is not None

    def involves(self, call: ToolCall, tool: Tool[Any, Any], turn: int) -> bool:
        """Whether the call needs a decision: its tool needs approval, or it was asked
        about before (its decision stands, whatever the rule says now). A turn none of
        whose calls does skips :meth:`decide` altogether."""
        if self.rule.why(tool) is not None:
            return True
        return self.log is not None and self.log.recorded(turn, call.id) is not None

    async def decide(
        self, calls: list[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]], turn: int
    ) -> list[Verdict | None]:
        """A verdict for each call that needed approval (None for the others), in
        order: denied, ``denied: <reason>``; approved with edited arguments, those,
        validated again (or refused when they fail).

        Raises:
            ApprovalNeeded: when some call has no decision yet and no approver.
        """
        decisions = await self._decisions(calls, turn)
        return [
            None if d is None else _verdict(d, tool, kwargs)
            for d, (_, tool, kwargs) in zip(decisions, calls, strict=True)
        ]

    async def _decisions(
        self, calls: list[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]], turn: int
    ) -> list[Decision | None]:
        decisions: list[Decision | None] = []
        waiting: list[PendingApproval] = []
        async with _Away() as away:
            for call, tool, kwargs in calls:
                decision = await self._decision_of(call, tool, kwargs, turn, away)
                if isinstance(decision, PendingApproval):
                    waiting.append(decision)
                    decision = None
                decisions.append(decision)
        if waiting:
            raise ApprovalNeeded(tuple(waiting))
        return decisions

    async def _decision_of(
        self,
        call: ToolCall,
        tool: Tool[Any, Any],
        kwargs: dict[str, Any],
        turn: int,
        away: _Away,
    ) -> Decision | PendingApproval | None:
        """The call's decision; the call as it waits, when it waits in the log; None
        when it needs none."""
        entry = self.log.recorded(turn, call.id) if self.log is not None else None
        why = self.rule.why(tool)
        if entry is None and why is None:
            return None
        if entry is None:
            pending = self._pending(call, tool, kwargs, turn, why)
        else:  # the store keeps no summary: the tool tells it again
            pending = replace(entry.pending, summary=described(tool, entry.pending.arguments))
        decision = await self._decision(pending, entry, away)
        if decision is None:
            if entry is None and self.log is not None:
                await self.log.record(ApprovalEntry(pending=pending))  # durable: it waits
            self._requested(pending, "store")
            return pending
        return decision

    async def _decision(
        self, pending: PendingApproval, entry: ApprovalEntry | None, away: _Away
    ) -> Decision | None:
        """The call's decision: recorded, a denial once its time to decide ran out (an
        approver attached to a resumed run is not asked about it: whatever it would
        answer now is past the deadline), the approver's, or a denial for want of one;
        None while it waits."""
        if entry is not None and entry.decision is not None:
            self._decided(pending, entry.decision, entry.decided_by)
            return entry.decision
        if pending.deadline is not None and time.time() >= pending.deadline:
            decision = _timed_out(pending.deadline - pending.asked_at)
            by = TIME_LIMIT_BY
        elif isinstance(self.approver, NoApprover):  # nobody is asked, nothing waits
            decision, by = Decision.denied(self.approver.reason), NOBODY_BY
        elif self.approver is not None:
            self._requested(pending, "approver")
            await away.leave()
            if entry is None and self.log is not None:  # kept as asked: others may decide
                await self.log.record(ApprovalEntry(pending=pending))
            first = await self._asked(pending)
            if isinstance(first, ApprovalEntry):  # another's, recorded first: it stands
                assert first.decision is not None
                self._decided(pending, first.decision, first.decided_by)
                return first.decision
            decision, by = first, first.by or "the run's approver"
        elif self.log is None:
            return Decision.denied("no approver is attached and the run has no store to wait in")
        else:
            return None
        if self.log is not None:
            stands = await self.log.record(
                ApprovalEntry(
                    pending=pending, decision=decision, decided_at=time.time(), decided_by=by
                )
            )
            if stands.decision is not None:  # the first decision recorded stands
                decision, by = stands.decision, stands.decided_by or by
        self._decided(pending, decision, by)
        return decision

    def _requested(self, pending: PendingApproval, asked: str) -> None:
        """Tell the run's listeners that ``pending`` waits for a person (once)."""
        if not self._first(ApprovalRequested.kind, pending):
            return
        self._tracer.emit(  # masked as it is emitted, as the store keeps it
            ApprovalRequested(
                worker=pending.worker or None,
                run_id=self._run_id,
                turn=pending.turn,
                call_id=pending.call_id,
                tool=pending.tool,
                role=pending.role,
                arguments=pending.arguments,
                why=pending.why,
                asked=asked,
                deadline=pending.deadline,
                summary=pending.summary,
            )
        )

    def _first(self, kind: str, pending: PendingApproval) -> bool:
        """Whether an event of ``kind`` for ``pending`` is to be told: someone listens,
        and it was not told before (it is told now)."""
        told = kind, pending.turn, pending.call_id
        if not self._tracer.enabled or told in self._told:
            return False
        self._told.add(told)
        return True

    def _decided(self, pending: PendingApproval, decision: Decision, by: str | None) -> None:
        """Tell the run's listeners the decision the worker goes on with (once)."""
        if not self._first(ApprovalDecided.kind, pending):
            return
        self._tracer.emit(decided_event(pending, decision, by, self._run_id))

    async def _asked(self, pending: PendingApproval) -> Decision | ApprovalEntry:
        """:meth:`_first_decision`; when asking fails the worker (a replay's approver:
        the call was not recorded), the call kept as asked is withdrawn (denied by the
        run), so that no call of a worker that failed is left waiting for a decision,
        which nobody would take up (an eval denies those its runs leave), or which a
        resumed run would make."""
        try:
            return await self._first_decision(pending)
        except Exception as exc:
            if self.log is not None:
                why = f"not run: its worker failed as it was asked about ({type(exc).__name__})"
                withdrawn = ApprovalEntry(
                    pending=pending,
                    decision=Decision.denied(why),
                    decided_at=time.time(),
                    decided_by=WITHDRAWN_BY,
                )
                await self.log.record(withdrawn)
            raise

    async def _first_decision(self, pending: PendingApproval) -> Decision | ApprovalEntry:
        """The approver's decision on ``pending``, unless another decider records one
        in the log first: then that entry, and the approver's question is withdrawn
        (cancelled with the entry: :func:`settled_by`)."""
        log = self.log
        if log is None:
            return await self._from_approver(pending)
        try:
            async with asyncio.TaskGroup() as group:
                asking = group.create_task(self._from_approver(pending))
                elsewhere = group.create_task(log.decided(pending))
                asking.add_done_callback(lambda _: elsewhere.cancel())
                elsewhere.add_done_callback(lambda found: _withdraw(asking, found))
        except BaseExceptionGroup as failed:  # the approver's own error, as it raised it
            raise failed.exceptions[0] from None
        return elsewhere.result() if asking.cancelled() else asking.result()

    async def _from_approver(self, pending: PendingApproval) -> Decision:
        assert self.approver is not None
        request = masked(
            ApprovalRequest(  # a person reads it: no secret
                run_id=self._run_id,
                worker=pending.worker,
                role=pending.role,
                call_id=pending.call_id,
                turn=pending.turn,
                tool=pending.tool,
                arguments=pending.arguments,
                why=pending.why,
                summary=pending.summary,
            )
        )
        left = None if pending.deadline is None else max(pending.deadline - time.time(), 0.0)
        try:
            if left is None:
                answer = await self.approver(request)
            else:
                with within(left):
                    answer = await self.approver(request)
        except TimedOut:
            return _timed_out(pending.deadline - pending.asked_at if pending.deadline else 0.0)
        except CassetteMismatch:  # a replay's approver: the run is not the one recorded
            raise
        except Exception as exc:  # a failing approver denies the call, never crashes the worker
            return Decision.denied(f"the approver failed ({type(exc).__name__}: {exc})")
        if not isinstance(answer, Decision):
            return Decision.denied(f"the approver returned {type(answer).__name__}, not a Decision")
        return answer

    def _pending(
        self,
        call: ToolCall,
        tool: Tool[Any, Any],
        kwargs: dict[str, Any],
        turn: int,
        why: str | None,
    ) -> PendingApproval:
        now = time.time()
        arguments = _plain(kwargs)
        return PendingApproval(
            call_id=call.id,
            worker=self._worker or "",
            role=self._role,
            turn=turn,
            tool=call.name,
            arguments=arguments,
            why=why or "",
            asked_at=now,
            deadline=None if self._timeout_s is None else now + self._timeout_s,
            summary=described(tool, arguments),
        )


def decided_event(
    pending: PendingApproval, decision: Decision, by: str | None, run_id: str | None
) -> ApprovalDecided:
    """The ``approval.decided`` of ``pending``'s ``decision``, made by ``by`` (None: as
    the decision says)."""
    return ApprovalDecided(
        worker=pending.worker or None,
        run_id=run_id,
        turn=pending.turn,
        call_id=pending.call_id,
        tool=pending.tool,
        approved=decision.approve,
        by=by or decision.by or "",
        reason=decision.reason,
        edited=decision.approve and decision.arguments is not None,
        arguments=pending.arguments,
        edited_arguments=decision.arguments if decision.approve else None,
    )


async def withdraw(log: ApprovalLog, refused: list[tuple[ToolCall, str]], turn: int) -> None:
    """Calls of ``turn`` that will not be made (the dispatcher refused them: their tool
    gone, their arguments no longer valid), each with why: one that waits for a
    decision in ``log`` is recorded denied by the run, so that nobody is left to decide
    a call that waits for nothing (a decision on it says it was decided already)."""
    for call, why in refused:
        entry = log.recorded(turn, call.id)
        if entry is None or entry.decision is not None:
            continue
        denied = ApprovalEntry(
            pending=entry.pending,
            decision=Decision.denied(f"not run: {why}"),
            decided_at=time.time(),
            decided_by=WITHDRAWN_BY,
        )
        await log.record(denied)


def settled_by(cancelled: asyncio.CancelledError) -> ApprovalEntry | None:
    """The entry that settled the call an approver was asked about, when its question
    was withdrawn for it (another decider recorded a decision first); None when it was
    cancelled for another reason (its run stopped)."""
    said = cancelled.args[0] if cancelled.args else None
    return said if isinstance(said, ApprovalEntry) else None


def _withdraw(asking: asyncio.Task[Decision], found: asyncio.Task[ApprovalEntry]) -> None:
    """Withdraw the approver's question once another decider settled the call."""
    if not found.cancelled() and found.exception() is None:
        asking.cancel(found.result())


def _verdict(decision: Decision, tool: Tool[Any, Any], kwargs: dict[str, Any]) -> Verdict:
    if not decision.approve:
        return Verdict(refusal=f"denied: {decision.reason or 'no reason given'}")
    if decision.arguments is None:
        return Verdict(kwargs=kwargs)
    try:
        arguments = unmasked_edit(decision.arguments, _plain(kwargs))
    except MaskedEdit as exc:
        return Verdict(refusal=f"Error: the edited arguments approved were not run: {exc}.")
    try:
        edited = tool.parse_arguments(arguments_text(arguments), in_full=True)
    except ArgumentsError as exc:
        return Verdict(
            refusal=f"Error: the edited arguments approved failed validation: {exc.detail}."
        )
    shown = arguments_text(masked(arguments))  # the model reads it: no secret
    return Verdict(
        kwargs=edited, note=f"(A person approved this call with edited arguments: {shown})\n"
    )


class MaskedEdit(ValueError):
    """Edited arguments change a value that holds a secret, which a person sees and the
    run store keeps only masked: the call would run with the mask, not the secret.

    Attributes:
        argument: Where the value is (``dsn``, ``db.url``, ``hosts[1]``).
        mask: The mask it holds (``[password hidden]``).
    """

    def __init__(self, argument: str, mask: str) -> None:
        self.argument = argument
        self.mask = mask
        super().__init__(
            f"argument {argument!r} holds a secret (shown as {mask}) in a value the edit "
            "changed: a secret is shown and kept only masked, so the call would run with "
            "the mask, not the secret. Leave that value as the call has it (its secret "
            "stays), or approve the call unedited"
        )


_MASK = re.compile(r"\[[^\[\]\n]{1,100} hidden\]")
"""A secret's mask, as :func:`runtime.secrets.masked` writes it (the secret itself may
not be known here: the process that masked it is another)."""


def unmasked_edit(edited: dict[str, Any], called: dict[str, Any]) -> dict[str, Any]:
    """``edited`` arguments (JSON values) as they run in place of ``called`` (the call's
    own): each value the edit left as it was shown, every secret masked, is the call's
    own again, its secret in it.

    Raises:
        MaskedEdit: naming the first value that holds a mask (or a secret, which what
            is kept of the decision masks) and that the edit changed.
    """
    kept: dict[str, Any] = _unmasked(edited, called, "")
    return kept


def _unmasked(edited: Any, called: Any, where: str) -> Any:
    if edited == masked(called):
        return called
    if isinstance(edited, dict):
        own = called if isinstance(called, dict) else {}
        return {
            key: _unmasked(value, own.get(key), f"{where}.{key}" if where else str(key))
            for key, value in edited.items()
        }
    if isinstance(edited, list):
        same = isinstance(called, list) and len(called) == len(edited)
        return [
            _unmasked(value, called[at] if same else None, f"{where}[{at}]")
            for at, value in enumerate(edited)
        ]
    if isinstance(edited, str):
        found = _MASK.search(masked(edited))
        if found is not None:
            raise MaskedEdit(where, found.group())
    return edited


def described(tool: Tool[Any, Any], arguments: dict[str, Any]) -> str | None:
    """What a call to ``tool`` with ``arguments`` (JSON values) will do, in the tool's
    own words (its ``describe``), every secret masked: a person reads it, and it is made
    where it is shown (a web page, the terminal), not read from the store, which masks
    what it keeps. None when it gives none. A ``describe`` that fails says so instead:
    the person still sees the arguments."""
    if tool.describe is None:
        return None
    try:
        said = str(tool.describe(arguments))
    except Exception as exc:  # a summary is a courtesy: it never stops the call being asked
        said = f"({tool.name}'s describe failed: {type(exc).__name__}: {exc})"
    return masked(said)


class _Away:
    """A worker's waits for a person in one turn, from the first question to the last
    answer: neither its own time limit counts them, nor does it hold one of the run's
    slots meanwhile (a call that needs approval pauses only its worker), nor take one
    again between two questions (the person would wait for the run's other work to
    be asked the next)."""

    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._away = False

    async def leave(self) -> None:
        """A question to a person begins: the first leaves the room and the clock."""
        if not self._away:
            self._away = True
            await self._stack.enter_async_context(away_for_a_person())

    async def __aenter__(self) -> _Away:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> bool | None:
        """The turn's questions are over: the worker takes a slot again, if it left."""
        return await self._stack.__aexit__(kind, error, trace)


def _timed_out(timeout_s: float) -> Decision:
    # Rounded: a deadline less its asking time is the timeout give or take a float's
    # last digit (0.1 read back as 0.0999999). Decided by the time limit, also when an
    # approver was asked and did not answer: nobody decided it.
    return Decision.denied(f"no decision within {round(timeout_s, 3):g}s", by=TIME_LIMIT_BY)


def _plain(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Validated arguments as JSON values (nested models as mappings), as a person and
    the store see them."""
    loaded: dict[str, Any] = json.loads(arguments_text(kwargs))
    return loaded
