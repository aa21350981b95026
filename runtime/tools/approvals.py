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
  its ``CancelledError`` carrying the entry that stands:
  :func:`~runtime.tools.approval_gate.settled_by`);
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

The values, the log and the rules are here; :mod:`runtime.tools.approval_gate` decides
on a turn's calls.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from runtime.concurrency import Bell
from runtime.secrets import masked
from runtime.tools.define import Tool
from runtime.value import Value

__all__ = [
    "ApprovalEntry",
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
    "described",
    "unmasked_edit",
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
        deadline: When the call is denied if still undecided (``time.time()``'s
            clock: the policy's ``approval_timeout_s`` after it first asked); None:
            it waits as long as it takes. Past it the approver's question is
            withdrawn (cancelled).
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
    deadline: float | None = None


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


class LeftWaiting(Exception):
    """Raised by an approver that decides nothing about the call: it waits in the run
    store, as if no approver were attached (a replay's approver, for a call that its
    recorded run left waiting: the run ends waiting as it did). Where it cannot wait
    (a run with no store), it is denied saying so; or, given ``cannot_wait``, that
    error fails its worker (a replay, which a denial would take elsewhere than its
    recording went)."""

    def __init__(self, message: str, *, cannot_wait: Exception | None = None) -> None:
        super().__init__(message)
        self.cannot_wait = cannot_wait


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
        self._changed = Bell()  # rung as an entry is kept

    def recorded(self, turn: int, call_id: str) -> ApprovalEntry | None:
        return self.entries.get((turn, call_id))

    async def record(self, entry: ApprovalEntry) -> ApprovalEntry:
        key = entry.pending.turn, entry.pending.call_id
        kept = self.entries.get(key)
        if kept is None or kept.decision is None:
            kept = self.entries[key] = entry
        self._changed.ring()
        return kept

    async def decided(self, pending: PendingApproval) -> ApprovalEntry:
        while True:
            changed = self._changed.next_ring()
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
