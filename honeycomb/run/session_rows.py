"""Where a session's turns are kept: :class:`MemoryRows` in this process (an Executor
with no run store), :class:`StoreRows` in a run store (:mod:`honeycomb.store.sessions`),
each a :class:`SessionRows`."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from honeycomb.run.conversation import Conversation, Turn, TurnResult
from runtime import SessionBusy, StoreError
from runtime.secrets import any_known, masked

if TYPE_CHECKING:
    from honeycomb.store import RunStore
    from honeycomb.store.lease import Lease
    from honeycomb.store.sessions import StoredSessions

__all__ = ["MemoryRows", "SessionRows", "StoreRows", "said_masked", "turn_of"]


class SessionRows(Protocol):
    """Where the turns of an Executor's sessions are kept."""

    @property
    def kept(self) -> bool:
        """Whether the turns' runs are kept in a run store (and may be continued)."""
        ...

    async def turns(self, session_id: str) -> list[Turn]: ...
    async def begin(self, turn: Turn, follows: Turn | None) -> bool:
        """Keep a new turn, held as answered by this process until :meth:`let_go`,
        if the session's last turn is still ``follows`` (None: it has none); whether
        it was kept (not: the conversation changed since it was read, a turn taken
        back or the session cleared, forgotten or forked over by another process or
        by retention).

        Raises:
            SessionBusy: when another process took that turn meanwhile.
        """
        ...

    def let_go(self, turn: Turn) -> None:
        """The turn's run has ended (or will not start): it holds the session no more."""
        ...

    async def fitted(self, turn: Turn, conversation: Conversation) -> None: ...
    async def ended(self, turn: Turn) -> None: ...
    async def drop(self, session_id: str, after: int, *, idle: bool = True) -> None:
        """Delete the turns after ``after``; refused with ``SessionBusy`` when the last
        is being answered, unless not ``idle`` (a turn of this process's own)."""
        ...

    async def copy(self, source: str, target: str, upto: int) -> None:
        """Make ``target`` a session of ``source``'s first ``upto`` turns (``source``
        itself cut to them); refused with ``SessionBusy`` when ``target`` is answering,
        or turn ``upto`` of ``source`` is being answered."""
        ...

    async def forget(self, session_ids: Sequence[str]) -> None:
        """Delete the sessions; refused with ``SessionBusy`` when one is answering."""
        ...

    async def prune(self, *, before: float | None, keep: int | None) -> list[str]: ...


class MemoryRows:
    """Turns kept in this process (an Executor with no run store)."""

    kept = False  # their runs are not: a turn that stopped cannot go on

    def __init__(self) -> None:
        self._turns: dict[str, list[Turn]] = {}

    async def turns(self, session_id: str) -> list[Turn]:
        return [said_masked(t) for t in self._turns.get(session_id, ())]

    async def begin(self, turn: Turn, follows: Turn | None) -> bool:
        turns = self._turns.setdefault(turn.session_id, [])
        last = turns[-1].run_id if turns else None
        if last != (follows.run_id if follows is not None else None):
            return False  # another session's retention forgot it meanwhile
        turns.append(turn)
        return True

    def let_go(self, turn: Turn) -> None:
        pass  # a turn here is answered while it reads "running": until it has ended

    async def fitted(self, turn: Turn, conversation: Conversation) -> None:
        self._replace(
            msgspec.structs.replace(
                turn, summary=conversation.summary, summarized=conversation.summarized
            )
        )

    async def ended(self, turn: Turn) -> None:
        found = self._find(turn)
        if found is not None:  # the summary it was given stays as fitted
            self._replace(
                msgspec.structs.replace(turn, summary=found.summary, summarized=found.summarized)
            )

    async def drop(self, session_id: str, after: int, *, idle: bool = True) -> None:
        if idle:
            self._idle(session_id)
        kept = [t for t in self._turns.get(session_id, ()) if t.turn <= after]
        self._turns[session_id] = kept

    async def copy(self, source: str, target: str, upto: int) -> None:
        self._idle(target)
        self._idle(source, upto)
        self._turns[target] = [
            msgspec.structs.replace(t, session_id=target)
            for t in self._turns.get(source, ())
            if t.turn <= upto
        ]

    async def forget(self, session_ids: Sequence[str]) -> None:
        for session_id in session_ids:
            self._idle(session_id)
        for session_id in session_ids:
            self._turns.pop(session_id, None)

    async def prune(self, *, before: float | None, keep: int | None) -> list[str]:
        latest = sorted(
            ((turns[-1].started_at, sid) for sid, turns in self._turns.items() if turns),
            reverse=True,
        )
        expired = {sid for at, sid in latest if before is not None and at < before}
        expired |= {sid for _, sid in latest[keep:]} if keep is not None else set()
        forgotten = sorted(sid for sid in expired if self._turns[sid][-1].status != "running")
        await self.forget(forgotten)  # never one answering: its turn would be lost
        return forgotten

    def _idle(self, session_id: str, upto: int | None = None) -> None:
        """Raise if the session's last turn (of those up to ``upto``) is answered."""
        turns = [t for t in self._turns.get(session_id, ()) if upto is None or t.turn <= upto]
        if turns and turns[-1].status == "running":
            last = turns[-1]
            raise SessionBusy(
                f"session {session_id!r} is answering message {last.turn} (run {last.run_id})",
                session_id=session_id,
                turn=last.turn,
                run_id=last.run_id,
            )

    def _find(self, turn: Turn) -> Turn | None:
        found = self._turns.get(turn.session_id, [])
        return next((t for t in found if t.turn == turn.turn), None)

    def _replace(self, turn: Turn) -> None:
        found = self._turns.get(turn.session_id, [])
        self._turns[turn.session_id] = [turn if t.turn == turn.turn else t for t in found]


_RESULTS = msgspec.json.Decoder(tuple[TurnResult, ...])


class StoreRows:
    """Turns kept in a run store (:mod:`honeycomb.store.sessions`): how each went
    and what it cost are its run's, as the store has them."""

    kept = True

    def __init__(self, stored: StoredSessions) -> None:
        self.stored = stored
        self._held: dict[str, Lease] = {}  # the leases of the turns begun, by run

    @classmethod
    def of(cls, store: RunStore) -> StoreRows:
        """The turns kept in ``store``."""
        from honeycomb.store.sessions import StoredSessions

        return cls(StoredSessions(store))

    async def turns(self, session_id: str) -> list[Turn]:
        """The session's turns; one whose run ended with an answer that the turn does
        not hold yet (its run resumed as any other, ``honeycomb resume``) is given it."""
        turns = [turn_of(row) for row in await self.stored.turns(session_id)]
        for index, turn in enumerate(turns):
            if turn.answer is None and turn.status in ("ok", "partial"):
                turns[index] = await self._answered(turn)
        return [said_masked(t) for t in turns]

    async def _answered(self, turn: Turn) -> Turn:
        from honeycomb.run.restore import stored_result

        stored = await self.stored.store.load(turn.run_id)
        result = stored_result(stored) if stored is not None else None
        if result is None:
            return turn
        answered = turn.answered(result)
        # Kept for the next read; a store this process may only read (honeycomb
        # sessions show by a user who may not write it) gives it all the same.
        with contextlib.suppress(StoreError):
            await self.ended(answered)
        return answered

    async def begin(self, turn: Turn, follows: Turn | None) -> bool:
        t = turn
        lease = await self.stored.begin(
            (t.session_id, t.turn, t.run_id, t.message, t.started_at, t.summary, t.summarized),
            follows.run_id if follows is not None else None,
        )
        if lease is not None:
            self._held[t.run_id] = lease
        return lease is not None

    def let_go(self, turn: Turn) -> None:
        lease = self._held.pop(turn.run_id, None)
        if lease is not None:
            self.stored.let_go(lease)

    async def fitted(self, turn: Turn, conversation: Conversation) -> None:
        c = conversation
        await self.stored.fitted(
            turn.session_id, turn.turn, c.summary, c.summarized, run_id=turn.run_id
        )

    async def ended(self, turn: Turn) -> None:
        if turn.answer is not None or turn.results:  # its status and cost are its run's row
            results = msgspec.json.encode(turn.results).decode()
            await self.stored.ended(
                turn.session_id, turn.turn, turn.answer, results, run_id=turn.run_id
            )

    async def drop(self, session_id: str, after: int, *, idle: bool = True) -> None:
        await self.stored.drop(session_id, after, idle=idle)

    async def copy(self, source: str, target: str, upto: int) -> None:
        await self.stored.copy(source, target, upto)

    async def forget(self, session_ids: Sequence[str]) -> None:
        await self.stored.forget(session_ids)

    async def prune(self, *, before: float | None, keep: int | None) -> list[str]:
        return await self.stored.prune(before=before, keep=keep)


def said_masked(turn: Turn) -> Turn:
    """``turn`` with every secret known now masked in what it says (its message, answer,
    results and summary): one kept before the process knew a secret (another process,
    an earlier start) holds it as it was given, and a later turn's models are told it."""
    if not any_known():
        return turn
    return msgspec.structs.replace(
        turn,
        message=masked(turn.message),
        answer=masked(turn.answer),
        results=masked(turn.results),
        summary=masked(turn.summary),
    )


def turn_of(row: Sequence[Any]) -> Turn:
    """A turn from a row of :data:`~honeycomb.store.sessions.TURN_COLUMNS`."""
    (session_id, number, run_id, message, started_at, summary, summarized) = row[:7]
    answer, results, status, cost = row[7:]
    return Turn(
        session_id=session_id,
        turn=number,
        run_id=run_id,
        message=message,
        started_at=started_at,
        summary=summary,
        summarized=summarized,
        answer=answer,
        results=_RESULTS.decode(results) if results else (),
        status=status,
        cost=cost,
    )
