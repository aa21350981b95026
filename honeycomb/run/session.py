"""``Session``: a conversation with an Executor's hive, each message a run that sees
the ones before (see ``docs/sessions.md``).

``executor.session("user-42")`` is the session of that id, new or not: with a run
store its turns are kept there (one row a turn, linking its run), so a process that
starts again continues it; without one they live as long as the Executor. The messages
of one session are answered one at a time, in the order they arrive (or a message that
comes while another is answered is refused with :class:`~runtime.errors.SessionBusy`,
as the caller chooses); those of different sessions run in parallel.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

import msgspec

from honeycomb.run.conversation import (
    Conversation,
    SessionPolicy,
    Turn,
    fit_conversation,
    folding_spent,
)
from honeycomb.run.session_checks import Busy, Unfinished, check_choices, check_id, check_task
from honeycomb.run.session_rows import MemoryRows, SessionRows, StoreRows, turn_of
from honeycomb.run.stream import RunStream, streamed
from runtime import (
    BudgetExceeded,
    ConfigError,
    EventHandler,
    GuardrailTripped,
    HoneycombError,
    Model,
    SessionBusy,
    SessionError,
    StoreError,
)
from workers.context import Compaction

if TYPE_CHECKING:
    from honeycomb.run.context import RunContext
    from honeycomb.run.result import RunResult

__all__ = [
    "Busy",
    "Converse",
    "MemoryRows",
    "Session",
    "SessionRows",
    "StoreRows",
    "TurnLock",
    "TurnRunner",
    "Unfinished",
    "check_id",
    "check_task",
    "turn_of",
]

Converse = Callable[["RunContext"], Awaitable[Conversation]]
"""What a turn's run asks for the conversation before it, once, as it starts."""


class TurnLock(Protocol):
    """What keeps a session's turns one at a time, shared by its Session objects: held
    with ``async with``, and asked whether it is held (the Executor's serves one event
    loop at a time)."""

    def locked(self) -> bool: ...

    async def __aenter__(self) -> None: ...

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class TurnRunner(Protocol):
    """How a session runs a turn: the Executor's run, told of the conversation."""

    def __call__(
        self,
        task: str,
        *,
        run_id: str,
        on_event: Sequence[EventHandler],
        text_deltas: bool,
        converse: Converse,
        resumable: bool,
        steal: bool,
    ) -> Awaitable[RunResult]: ...


class Session:
    """One conversation (``executor.session(id)``): each message is a run (plan,
    workers, aggregate) whose planner and aggregator, and the workers of roles that
    say so (``session:``), see the conversation so far within the policy's budget.

    Attributes:
        id: The session's id.
        busy: What a message that comes while another is answered does, unless it
            says otherwise: ``wait`` its turn, or be refused (``refuse``).
        unfinished: What a message does when the last turn did not finish, unless it
            says otherwise: ``raise``, ``resume`` that turn first, or ``drop`` it.
    """

    def __init__(
        self,
        session_id: str,
        *,
        runner: TurnRunner,
        rows: SessionRows,
        lock: TurnLock,
        policy: SessionPolicy,
        opener: Callable[[str], Session],
        busy: Busy = "wait",
        unfinished: Unfinished = "raise",
    ) -> None:
        check_choices(busy, unfinished)
        self.id = session_id
        self.busy: Busy = busy
        self.unfinished: Unfinished = unfinished
        self._runner = runner
        self._rows = rows
        self._lock = lock  # shared by every Session of this id in the Executor
        self._policy = policy
        self._open = opener

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    async def run(
        self,
        message: str,
        *,
        busy: Busy | None = None,
        unfinished: Unfinished | None = None,
        on_event: Sequence[EventHandler] = (),
        text_deltas: bool = False,
    ) -> RunResult:
        """Answer ``message``: a run that sees the conversation so far.

        Args:
            message: The message.
            busy: What it does while the session answers another (default: the
                session's ``busy``).
            unfinished: What it does when the session's last turn did not finish (its
                run was interrupted, or waits for approvals): ``raise``
                :class:`SessionError`, ``resume`` that turn first (as :meth:`resume`),
                or ``drop`` it (as :meth:`pop`); default: the session's.
            on_event: Called with every event of the message's run; with
                ``unfinished="resume"``, first with those of the unfinished turn's run
                as it goes on (each event names its run; that run's ``run.finished``
                holds its result, or the error it ended with: the message is answered
                after a turn resumed that failed or went over budget, as after any).
            text_deltas: The handlers also get the answers' text as it is written.

        Raises:
            SessionBusy: with ``busy="refuse"``, when the session is answering another
                message; or when another process answers one, or took this turn
                meanwhile.
            SessionError: when the session's last turn did not finish and
                ``unfinished`` is ``raise`` (or it was resumed and waits again).
            PlanError, RunFailed, BudgetExceeded: as ``Executor.run`` (the turn stays
                in the conversation, without an answer; none is kept when the run
                stopped before its input guards passed the message). A budget the
                conversation's summary call spent says so (``reached_by``).
            ConfigError: when the message is empty or only whitespace, ``busy`` or
                ``unfinished`` none of its choices, or the hive cannot run it (no
                planner, a missing key ...): no turn is kept.
            GuardrailTripped: when the run's input guards refuse the message (no turn
                is kept: no later turn is told it), or its output guards the answer.
        """
        check_task(message)
        check_choices(busy, unfinished)
        async with self._turn_lock(busy):
            turn, earlier = await self._begin(
                message, unfinished or self.unfinished, on_event, text_deltas
            )
            try:
                await self._retention()  # this session now the newest: never forgotten
                return await self._answer(turn, earlier, on_event, text_deltas, resumable=False)
            finally:
                self._rows.let_go(turn)

    def stream(
        self,
        message: str,
        *,
        busy: Busy | None = None,
        unfinished: Unfinished | None = None,
        text_deltas: bool = True,
    ) -> AbstractAsyncContextManager[RunStream]:
        """:meth:`run` in the background, its events as they happen (as
        ``Executor.stream``: ``async with session.stream(msg) as events: ...``).

        Raises:
            ConfigError: at once, when ``message`` is empty or only whitespace, or
                ``busy`` or ``unfinished`` is none of its choices.
        """
        check_task(message)
        check_choices(busy, unfinished)

        def run(put: EventHandler) -> Awaitable[RunResult]:
            return self.run(
                message,
                busy=busy,
                unfinished=unfinished,
                on_event=[put],
                text_deltas=text_deltas,
            )

        return streamed(run)

    async def resume(
        self,
        *,
        on_event: Sequence[EventHandler] = (),
        text_deltas: bool = False,
        steal: bool = False,
    ) -> RunResult | None:
        """Continue the last turn if it did not finish (as ``Executor.resume`` does its
        run: finished workers are not run again); None when it did.

        Args:
            on_event: Called with every event of the turn's run as it goes on.
            text_deltas: The handlers also get the answers' text as it is written.
            steal: Take the run from a process that holds it (as ``Executor.resume``).

        Raises:
            RunBusy: when another process carries that turn's run on.
            PlanError, RunFailed, BudgetExceeded: as ``Executor.run``.
            GuardrailTripped: when the run's input guards refuse its message, checked
                again as it goes on (a run that had not planned): the turn is taken
                out of the conversation, as when a budget stops it so.
        """
        async with self._turn_lock(None):
            turns = await self._rows.turns(self.id)
            if not turns or turns[-1].ended:
                return None
            self._continuable(turns[-1])
            return await self._answer(
                turns[-1], turns[:-1], on_event, text_deltas, resumable=True, steal=steal
            )

    async def resume_run(
        self,
        task: str,
        run_id: str,
        *,
        on_event: Sequence[EventHandler] = (),
        text_deltas: bool = False,
        steal: bool = False,
    ) -> RunResult:
        """Continue run ``run_id``, which answers a turn of this session (as
        ``Executor.resume`` of it does): the last turn as :meth:`resume` continues it
        (its end kept; refused by the run's input guards, it is no turn any more), an
        earlier one (a turn that ended without an answer, resumed) told the
        conversation before it.

        Raises:
            As :meth:`resume`, and ``ConfigError`` when ``task`` is not the turn's.
        """
        async with self._turn_lock(None):
            turns = await self._rows.turns(self.id)
            found = next((i for i, t in enumerate(turns) if t.run_id == run_id), None)
            if found is not None and found == len(turns) - 1:
                return await self._answer(
                    turns[found],
                    turns[:found],
                    on_event,
                    text_deltas,
                    resumable=True,
                    steal=steal,
                    task=task,
                )
            # An earlier turn: dropping it would drop the turns after it too. Or none
            # (taken back meanwhile): its run is continued as any run, told no
            # conversation.
            converse = self.converse(turns[found], turns[:found]) if found is not None else _alone
            return await self._runner(
                task,
                run_id=run_id,
                on_event=on_event,
                text_deltas=text_deltas,
                converse=converse,
                resumable=True,
                steal=steal,
            )

    async def turns(self) -> list[Turn]:
        """The conversation so far, oldest first."""
        return await self._rows.turns(self.id)

    async def pop(self) -> Turn | None:
        """Undo the last turn: the conversation goes on as if it had not been (its
        run stays in the store). The turn undone; None if there was none.

        Raises:
            SessionBusy: when that turn is being answered (here or in another process).
        """
        async with self._turn_lock(None, edit="pop"):
            turns = await self._rows.turns(self.id)
            if not turns:
                return None
            self._not_answering(turns)
            last = turns[-1]
            await self._rows.drop(self.id, last.turn - 1)  # refused if taken meanwhile
            return last

    def _not_answering(self, turns: Sequence[Turn]) -> None:
        """Raise if the last of ``turns`` is being answered (here or in another
        process).

        Raises:
            SessionBusy: naming that turn.
        """
        if turns and turns[-1].status == "running":
            raise self._unfinished(turns[-1])

    async def clear(self) -> None:
        """Start over: no turn is left (their runs stay in the store).

        Raises:
            SessionBusy: when a turn is being answered.
        """
        async with self._turn_lock(None, edit="clear"):
            self._not_answering(await self._rows.turns(self.id))
            await self._rows.drop(self.id, 0)

    async def fork(self, turn: int | Turn, session_id: str | None = None) -> Session:
        """A new session whose conversation is this one's up to ``turn`` (its number,
        or the turn), which goes on from there on its own (they share those turns'
        runs).

        Args:
            turn: The last turn the new session holds (0: none).
            session_id: The new session's id (default: this one's with a new suffix);
                a session of that id is replaced. This session's own id cuts it back
                to ``turn`` (the turns after it are dropped, as :meth:`pop` does).

        Raises:
            ValueError: for a turn this session does not have.
            SessionBusy: when ``turn`` is being answered (a fork holds only turns that
                have ended), or the session of ``session_id`` is answering a message
                (here or in another process).
        """
        number = turn.turn if isinstance(turn, Turn) else turn
        turns = await self._rows.turns(self.id)
        if number < 0 or number > len(turns):
            raise ValueError(f"session {self.id!r} has turns 1 to {len(turns)}, not {number}")
        self._not_answering(turns[:number])
        target = self._open(session_id or f"{self.id}~{os.urandom(3).hex()}")
        async with target._turn_lock(None, edit="a fork over it"):
            target._not_answering(await self._rows.turns(target.id))
            await self._rows.copy(self.id, target.id, number)  # refused if taken meanwhile
        return target

    async def forget(self) -> None:
        """Delete the session: its turns and their runs, and the runs of the turns it
        took back (``pop``, ``clear`` ...), but those another session links (a fork).

        Raises:
            SessionBusy: when a turn is being answered, or a run of the session carried
                on (resumed by its id).
        """
        async with self._turn_lock(None, edit="forget"):
            self._not_answering(await self._rows.turns(self.id))
            await self._rows.forget([self.id])

    # --- a turn -------------------------------------------------------------------------

    async def _begin(
        self,
        message: str,
        unfinished: Unfinished,
        on_event: Sequence[EventHandler],
        text: bool,
    ) -> tuple[Turn, list[Turn]]:
        """Take the turn that answers ``message``, and the turns before it: answered
        from now on, for any process. The conversation read again, when it changed
        before the turn was kept (another process took a turn back, or cleared, forgot
        or forked over the session; retention forgot it): the turn follows what is
        there now, never turns that are no more.

        Raises:
            SessionBusy: when another process took the turn meanwhile, or kept changing
                the conversation.
            SessionError: as :meth:`_finished_turns`.
        """
        for _ in range(_BEGIN_ATTEMPTS):
            earlier = await self._finished_turns(unfinished, on_event, text)
            last = earlier[-1] if earlier else None
            turn = Turn(
                session_id=self.id,
                turn=last.turn + 1 if last is not None else 1,
                run_id=os.urandom(6).hex(),
                message=message,
                started_at=time.time(),
                summary=last.summary if last is not None else "",
                summarized=last.summarized if last is not None else 0,
            )
            if await self._rows.begin(turn, last):
                return turn, earlier
        raise SessionBusy(
            f"session {self.id!r} was edited by another process each time this message "
            "was to be answered: send it again once that one is done",
            session_id=self.id,
            turn=0,
            run_id="",
        )

    async def _finished_turns(
        self, unfinished: Unfinished, on_event: Sequence[EventHandler], text: bool
    ) -> list[Turn]:
        """The turns, once the last one has finished: resumed or dropped first if it
        did not, as ``unfinished`` says. A turn resumed is told to ``on_event``, the
        message's handlers: its answer is news to the caller as much as the message's,
        and so is an error it ends with (its ``run.finished`` says it), which ends it
        as any turn: the message goes on after it.

        Raises:
            SessionBusy: when the last turn is being answered (in another process, or
                taken on there as it was to be resumed here).
            SessionError: when it did not finish, and may not be resumed or dropped
                (or was resumed and waits again).
        """
        turns = await self._rows.turns(self.id)
        last = turns[-1] if turns else None
        if last is None or last.ended:
            return turns
        if last.status == "running" or unfinished == "raise":
            raise self._unfinished(last)
        if unfinished == "drop":  # refused if another process resumed it meanwhile
            await self._rows.drop(self.id, last.turn - 1)
        else:
            self._continuable(last)
            try:
                await self._answer(last, turns[:-1], on_event, text, resumable=True)
            except HoneycombError as exc:
                # It ended without an answer (failed, over budget), as its run.finished
                # told the handlers, or was dropped (its input guards refused it): it
                # holds the session no more. One that did not end does: another process
                # took it on since it was read (RunBusy), as SessionBusy says.
                now = await self._rows.turns(self.id)
                if now and now[-1].turn == last.turn and not now[-1].ended:
                    if now[-1].status == "running":
                        raise self._unfinished(now[-1]) from exc
                    raise
        turns = await self._rows.turns(self.id)
        if turns and not turns[-1].ended:  # resumed, it waits for approvals again
            raise self._unfinished(turns[-1])
        return turns

    def _continuable(self, turn: Turn) -> None:
        """Raise if ``turn`` cannot go on from where it stopped: only a run store keeps
        what its run did (its finished workers, its journal of side effects).

        Raises:
            StoreError: when the session's turns are kept in memory alone.
        """
        if not self._rows.kept:
            raise StoreError(
                f"session {self.id!r}: message {turn.turn} (run {turn.run_id}) was "
                f"{turn.status}, and without a run store it cannot go on from where it "
                "stopped (its finished workers and their side effects would run again): "
                "session.pop() drops it (or unfinished='drop'); give the Executor a "
                "store=... to continue turns",
                path="-",
            )

    def _turn_lock(self, busy: Busy | None, *, edit: str | None = None) -> TurnLock:
        """The session's lock, once it is this caller's to take: refused at once if
        taken and ``busy`` (or the session's default) is ``refuse``; for an ``edit``
        (``pop``, ``forget`` ...), always, in words of the edit (a message's
        busy='wait' is no choice of it).

        Raises:
            SessionBusy: refused.
        """
        if (edit is not None or (busy or self.busy) == "refuse") and self._lock.locked():
            said = (
                f"is answering a message: {edit} refused; try again once it has ended"
                if edit is not None
                else "is answering another message; send this one once it has ended (or "
                "wait for it: busy='wait')"
            )
            raise SessionBusy(f"session {self.id!r} {said}", session_id=self.id, turn=0, run_id="")
        return self._lock

    async def _answer(
        self,
        turn: Turn,
        earlier: Sequence[Turn],
        on_event: Sequence[EventHandler],
        text: bool,
        *,
        resumable: bool,
        steal: bool = False,
        task: str | None = None,
    ) -> RunResult:
        """Run ``turn`` (on from where it stopped, if ``resumable``) and keep its end:
        none, if its message never became a turn (:func:`_not_taken`). ``task``: the
        run's task as its caller gave it (default: the message the turn keeps)."""
        converse = self.converse(turn, earlier)
        passed = False  # the run's input guards passed the message: it asks the conversation

        def told(context: RunContext) -> Awaitable[Conversation]:
            nonlocal passed
            passed = True
            return converse(context)

        try:
            result = await self._runner(
                turn.message if task is None else task,
                run_id=turn.run_id,
                on_event=on_event,
                text_deltas=text,
                converse=told,
                resumable=resumable,
                steal=steal,
            )
        except Exception as exc:  # a HoneycombError, or a planner's or tool's own bug
            if _not_taken(exc, resumable=resumable, passed=passed):
                await self._rows.drop(self.id, turn.turn - 1, idle=False)
            else:
                await self._rows.ended(_failed(turn, exc))
            raise
        except BaseException:  # cancelled, KeyboardInterrupt, SystemExit ...: as its run
            await _shielded(self._rows.ended(msgspec.structs.replace(turn, status="interrupted")))
            raise
        await self._rows.ended(turn.answered(result))
        return result

    def converse(self, turn: Turn, earlier: Sequence[Turn]) -> Converse:
        """What tells ``turn``'s run the conversation before it (``earlier``), fitted
        into the budget as its run starts, from the summary ``turn`` keeps (kept
        again, if it folds more): a life of the run that goes on at once (a call
        decided as it ended) starts from the summary its life before wrote."""

        async def converse(context: RunContext) -> Conversation:
            nonlocal turn
            compaction, budget = self._policy.context, context.budget
            made = budget.usage.model_calls
            try:
                found = await fit_conversation(
                    earlier,
                    summary=turn.summary,
                    summarized=turn.summarized,
                    compaction=compaction,
                    summarizer=_summarizer(compaction, context),
                    budget=budget,
                    tracer=context.tracer,
                    run_id=context.run_id,
                )
            except BudgetExceeded as stopped:
                folding_spent(budget, made, stopped)
                raise
            if (found.summary, found.summarized) != (turn.summary, turn.summarized):
                await self._rows.fitted(turn, found)  # kept, whatever the budget left
                turn = msgspec.structs.replace(
                    turn, summary=found.summary, summarized=found.summarized
                )
            folding_spent(budget, made)
            return found

        return converse

    def _unfinished(self, turn: Turn) -> SessionError:
        """The error for a message that comes while ``turn`` did not finish."""
        if turn.status == "running":
            return SessionBusy(
                f"session {self.id!r} is answering message {turn.turn} (run "
                f"{turn.run_id}), in this process or another: try again once it has ended",
                session_id=self.id,
                turn=turn.turn,
                run_id=turn.run_id,
            )
        why = f"was {turn.status}"
        fix = "session.resume() continues it (honeycomb resume), session.pop() drops it"
        if turn.status == "waiting":  # resumed undecided, it would wait again
            why = f"waits for approvals (executor.pending({turn.run_id!r}) lists them)"
            fix = f"decide them (executor.decide, honeycomb approve), then {fix} (its calls denied)"
        if not self._rows.kept:  # nothing kept to go on from (see _continuable)
            fix = (
                "without a run store it cannot go on from where it stopped: session.pop() "
                "drops it (or send the message with unfinished='drop')"
            )
        return SessionError(
            f"session {self.id!r}: message {turn.turn} (run {turn.run_id}) {why}; {fix}",
            session_id=self.id,
            turn=turn.turn,
            run_id=turn.run_id,
        )

    async def _retention(self) -> None:
        """Forget the sessions past the policy's age or count."""
        policy = self._policy
        if policy.max_age_days is None and policy.max_sessions is None:
            return
        before = None if policy.max_age_days is None else time.time() - policy.max_age_days * 86400
        await self._rows.prune(before=before, keep=policy.max_sessions)


_BEGIN_ATTEMPTS = 5
"""Times a message reads the conversation again when it changed before its turn was
kept (each time, another process edited it in between)."""


def _failed(turn: Turn, exc: Exception) -> Turn:
    """``turn`` once its run raised ``exc``: ``over_budget`` or ``failed``, with no answer,
    having found and spent what the error's partial result says (none: nothing known)."""
    status = "over_budget" if isinstance(exc, BudgetExceeded) else "failed"
    partial: RunResult | None = getattr(exc, "partial", None)
    ended = turn.answered(partial) if partial is not None else turn
    return msgspec.structs.replace(ended, status=status, answer=None)


def _not_taken(exc: Exception, *, resumable: bool, passed: bool) -> bool:
    """Whether a message whose run raised ``exc`` is no turn of the conversation: the
    run's input guards refused it (as it started, or as it was resumed); or, as it
    started, the hive cannot run it (a ``ConfigError``) or the run stopped before its
    input guards passed it (not ``passed``: its wall time ran out as a judge checked
    it); or, resumed, the budget stopped it so before any life of its run planned
    (:func:`_unplanned`). A message kept that they refused, or never passed, would be
    told to every later turn's planner, past the guards."""
    if isinstance(exc, GuardrailTripped) and exc.kind == "input":
        return True
    if resumable:
        return not passed and _unplanned(exc)
    return isinstance(exc, ConfigError) or not passed


def _unplanned(exc: Exception) -> bool:
    """Whether ``exc`` is a budget that stopped a run holding no plan: resumed, it was
    stopped as its input guards checked its task again (a run that planned is never
    checked again), not by what keeps a run from going on at all (another process
    carrying it on, its store, another task given), which leaves its turn as it was."""
    partial: RunResult | None = getattr(exc, "partial", None)
    return isinstance(exc, BudgetExceeded) and partial is not None and not partial.plan.subtasks


async def _alone(context: RunContext) -> Conversation:
    """No conversation: that of a run whose turn was taken back."""
    return Conversation()


def _summarizer(compaction: Compaction, context: RunContext) -> Model:
    """The model that writes the conversation's summary: the one the budget names,
    else the planner's."""
    crew = context.crew
    if compaction.model is not None:
        return crew.models[compaction.model]
    planner = crew.roles.get("planner")
    return crew.model_for(planner) if planner is not None else crew.models[crew.default_model]


async def _shielded(work: Awaitable[None]) -> None:
    from runtime.concurrency import shielded

    await shielded(work)
