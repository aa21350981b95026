"""The approval gate: it decides, for one worker's dispatcher, on the calls of a turn
that need a person's approval, as :mod:`runtime.tools.approvals` says (a decision
recorded already, the approver's or another decider's, whichever comes first, or the
call kept as waiting), within a time limit if the worker has one, its worker out of
its room while it waits."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

from msgspec.structs import replace

from runtime.concurrency import TimedOut, within
from runtime.errors import CassetteMismatch
from runtime.events import NO_TRACE, ApprovalDecided, ApprovalRequested, Tracer
from runtime.limits.room import away_for_a_person
from runtime.messages import ToolCall
from runtime.secrets import masked
from runtime.tools.approvals import (
    NOBODY_BY,
    TIME_LIMIT_BY,
    WITHDRAWN_BY,
    ApprovalEntry,
    ApprovalLog,
    ApprovalNeeded,
    ApprovalRequest,
    ApprovalRule,
    Approver,
    Decision,
    LeftWaiting,
    MaskedEdit,
    NoApprover,
    PendingApproval,
    Verdict,
    described,
    unmasked_edit,
)
from runtime.tools.define import ArgumentsError, Tool, arguments_text

__all__ = ["UNDECIDED_BY", "ApprovalGate", "decided_event", "settled_by", "withdraw"]


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
        cannot_wait: Why a call cannot wait, told in its denial when nobody decides it
            (None: it waits in ``log``; with none, the run has no store to wait in).
            Given with a ``log``, the log keeps the asks and decisions, and no call
            waits in it (a stored run's planner's and aggregator's calls).
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
        cannot_wait: str | None = None,
    ) -> None:
        self.rule = rule
        self.approver = approver
        self.log = log
        self._worker = worker
        self._role = role
        self._run_id = run_id
        self._timeout_s = timeout_s
        self._tracer = tracer
        self._cannot_wait = cannot_wait or _NO_STORE
        self._waits = log is not None and cannot_wait is None  # in the log, for a person
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
        else:  # the store keeps no summary: the tool tells it again; nor this worker's
            # name, when the log keeps it under another (a planner's attempt's)
            worker = self._worker or entry.pending.worker
            summary = described(tool, entry.pending.arguments)
            pending = replace(entry.pending, worker=worker, summary=summary)
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
            first = await self._asked_now(pending, entry, away)
            if first is None:  # it waits in the log
                return None
            if isinstance(first, ApprovalEntry):  # another's, recorded first: it stands
                assert first.decision is not None
                self._decided(pending, first.decision, first.decided_by)
                return first.decision
            decision, by = first, first.by or "the run's approver"
        elif not self._waits:
            decision = Decision.denied(f"no approver is attached and {self._cannot_wait}")
            by = NOBODY_BY
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

    async def _asked_now(
        self, pending: PendingApproval, entry: ApprovalEntry | None, away: _Away
    ) -> Decision | ApprovalEntry | None:
        """The approver's decision on ``pending``, or another decider's entry recorded
        first; None when it decides nothing and the call waits in the log; with no log,
        a denial saying why it cannot wait (:data:`UNDECIDED_BY`'s)."""
        self._requested(pending, "approver")
        await away.leave()
        if entry is None and self.log is not None:  # kept as asked: others may decide
            await self.log.record(ApprovalEntry(pending=pending))
        try:
            return await self._asked(pending)
        except LeftWaiting as left:  # the approver decides nothing: it waits, as with none
            if self._waits:
                return None
            if left.cannot_wait is not None:
                raise left.cannot_wait from None
            why = f"the approver decided nothing ({left}) and {self._cannot_wait}"
            return Decision.denied(why, by=UNDECIDED_BY)

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
        except LeftWaiting:  # kept as asked: it waits there
            raise
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
                deadline=pending.deadline,
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
        except (CassetteMismatch, LeftWaiting):  # a replay's approver: as recorded, or not
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


_NO_STORE = "the run has no store to wait in"

UNDECIDED_BY = "the run: the approver decided nothing, and the call cannot wait"
"""Who denied a call that needed approval when the approver decided nothing about it
and it had nowhere to wait."""


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
