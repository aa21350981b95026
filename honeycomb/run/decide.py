"""Deciding on a stored run's calls that wait for approval: what
:meth:`honeycomb.Executor.decide` and ``honeycomb approve`` record.

A decision is one row of the run store's ``approvals`` table; the run's workers read
it when the run is resumed (in this process or another), and a call decided once is
never asked about again. A decision is final: of several made at once (in any
processes: a web page, ``honeycomb approve``, a service), the first recorded stands and
the others get :class:`~runtime.errors.AlreadyDecided`, saying who made it and when.
"""

from __future__ import annotations

import functools
import getpass
import shlex
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from msgspec.structs import replace

from honeycomb.store import RunStore, RunSummary
from honeycomb.store.evals import eval_of
from runtime import ArgumentsError, Tool
from runtime.errors import AlreadyDecided, ApprovalError, HoneycombError
from runtime.tools.approvals import (
    ApprovalEntry,
    Decision,
    MaskedEdit,
    PendingApproval,
    described,
    unmasked_edit,
)
from runtime.tools.define import arguments_text

__all__ = [
    "ENDED",
    "EVALS_DECIDE",
    "CallKey",
    "decide",
    "decided_among",
    "ended_undecided",
    "pending_of",
    "summarized",
    "this_user",
    "waits_on",
]

ToolFinder = Callable[[PendingApproval], Tool[Any, Any] | None]
"""The tool a pending call is to, to validate edited arguments (None: unknown here)."""

ToolLister = Callable[[PendingApproval], Awaitable[None]]
"""Has the tools of a pending call's role listed (its MCP servers started for it),
for a :data:`ToolFinder` to find its tool."""


CallKey = tuple[str, int, str]
"""A call that asked for approval, as the store knows it: its worker, turn and id."""


def waits_on(pending: Iterable[PendingApproval]) -> set[CallKey]:
    """The calls a paused worker waits on (a nested worker's among them)."""
    return {(p.worker, p.turn, p.call_id) for p in pending}


def decided_among(
    entries: Iterable[ApprovalEntry], wanted: set[CallKey], now: float | None = None
) -> list[ApprovalEntry]:
    """The entries of the calls ``wanted``, once every one of them is decided or its
    time to decide ran out (``approval_timeout_s``: the worker's gate denies it as it
    goes on), else none: a paused worker that waits on them can go on."""
    now = time.time() if now is None else now
    decided = {
        (e.pending.worker, e.pending.turn, e.pending.call_id): e
        for e in entries
        if e.decision is not None or (e.pending.deadline is not None and now >= e.pending.deadline)
    }
    return [decided[key] for key in wanted] if wanted and wanted <= decided.keys() else []


async def pending_of(store: RunStore, run_id: str) -> list[PendingApproval]:
    """The calls of run ``run_id`` that wait for a decision, in the order they asked."""
    return [e.pending for e in await store.approvals_of(run_id) if e.decision is None]


def summarized(calls: Iterable[PendingApproval], tool_for: ToolFinder) -> list[PendingApproval]:
    """``calls``, each with what it will do in its tool's own words where its tool (as
    ``tool_for`` finds it) says (:func:`~runtime.tools.approvals.described`): the
    store keeps the arguments, not that summary."""
    told: list[PendingApproval] = []
    for call in calls:
        tool = tool_for(call)
        summary = described(tool, call.arguments) if tool is not None else None
        told.append(replace(call, summary=summary) if summary is not None else call)
    return told


async def decide(
    store: RunStore,
    run_id: str,
    call_id: str,
    *,
    approve: bool,
    reason: str | None = None,
    arguments: dict[str, Any] | None = None,
    worker: str | None = None,
    turn: int | None = None,
    tool_for: ToolFinder | None = None,
    listing: ToolLister | None = None,
    by: str | None = None,
) -> PendingApproval:
    """Record a decision on a call waiting for approval; return the call.

    Args:
        worker: The worker that made the call (None: any worker's call of this id).
        turn: The turn it was made in (None: any turn's): a worker's later call may
            share its id with an earlier one.
        tool_for: Finds the tool of a waiting call, whose schema edited arguments are
            checked against (None: the run's tools are not known, and arguments cannot
            be edited).
        listing: Lists the tools of the waiting call's role before ``tool_for`` is
            asked (an MCP server's, which it starts); None: they are known.
        by: Who decides, kept with the decision (default: this process's user and
            host, as ``ann@laptop``).

    Raises:
        AlreadyDecided: when the call was decided already (here or in another
            process, even a moment ago): the first decision stands.
        ApprovalError: when the run has no such call waiting, or ended (:data:`ENDED`)
            with it undecided, or is an eval's (:data:`EVALS_DECIDE`; once no process
            carries the run on, a denial is taken, an approval never), the call id is
            that of several waiting calls (of several workers, or turns) and ``worker``
            and ``turn`` do not pick one, its time to decide ran out, arguments come
            with a denial, or the edited arguments fail the tool's validation or
            cannot be checked (the tool is not known, or ``listing`` fails: an MCP
            server that cannot be started to list it), or change a value that holds a
            secret's mask (its ``__cause__`` a
            :class:`~runtime.tools.approvals.MaskedEdit`).
        StoreError: when the store cannot be read or written.
    """
    if arguments is not None and not approve:
        raise ApprovalError(run_id, call_id, "edited arguments go with an approval, not a denial")
    entries = [
        e
        for e in await store.approvals_of(run_id)
        if e.pending.call_id == call_id
        and worker in (None, e.pending.worker)
        and turn in (None, e.pending.turn)
    ]
    if not entries:
        if await store.summary(run_id) is None:
            raise ApprovalError(run_id, call_id, f"{store.where} has no such run")
        raise ApprovalError(
            run_id, call_id, "the run has no call of this id that asked for approval"
        )
    undecided = [e for e in entries if e.decision is None]
    if not undecided:
        first = entries[0]
        assert first.decision is not None
        raise AlreadyDecided(
            run_id,
            call_id,
            approved=first.decision.approve,
            decided_by=first.decided_by,
            decided_at=first.decided_at,
        )
    summary = await store.summary(run_id)
    await _not_an_evals(store, run_id, call_id, approve, summary)
    if len(undecided) > 1:
        calls = ", ".join(sorted(f"{e.pending.worker} (turn {e.pending.turn})" for e in undecided))
        raise ApprovalError(
            run_id,
            call_id,
            f"calls of {calls} each wait under this id: name the worker and the turn",
        )
    pending = undecided[0].pending
    if summary is not None and summary.status in ENDED:
        raise ApprovalError(run_id, call_id, ended_undecided(summary.status))
    now = time.time()
    if pending.deadline is not None and now >= pending.deadline:
        raise ApprovalError(
            run_id,
            call_id,
            "its time to decide ran out (approval_timeout_s): the run denies it as it goes "
            "on, or once it is resumed",
        )
    if arguments is not None:
        if listing is not None:
            await _listed(pending, listing, run_id)
        _check(pending, arguments, tool_for, run_id)
    decision = Decision(
        approve=approve,
        reason=reason if reason or approve else "denied by a person",
        arguments=arguments,
    )
    entry = ApprovalEntry(
        pending=pending, decision=decision, decided_at=now, decided_by=by or this_user()
    )
    await store.keep_approval(run_id, entry)  # AlreadyDecided: another was first
    return pending


EVALS_DECIDE = (
    "it is a call of an eval's run, and nobody decides on an eval's calls: the run ends "
    "waiting, as its case may expect, and the eval denies the call"
)
"""Why a call of an eval's run is decided by nobody while the run goes (the eval
denies it as its run ends, or is cut off)."""


async def _not_an_evals(
    store: RunStore, run_id: str, call_id: str, approve: bool, summary: RunSummary | None
) -> None:
    """Refuse a decision on a call of an eval's run: its case says what the run does,
    not a person. Once no process carries the run on (its eval's process was killed,
    and left the call waiting), the call may be denied, never approved.

    Raises:
        ApprovalError: saying so, and what may be done.
    """
    eval_id = await store.reading(functools.partial(eval_of, run_id=run_id), None)
    if eval_id is None:
        return
    going = summary is not None and summary.status == "running"
    if going:
        raise ApprovalError(run_id, call_id, EVALS_DECIDE)
    if approve:
        raise ApprovalError(
            run_id,
            call_id,
            f"it is a call of a run of eval {eval_id}, and nobody approves an eval's calls; "
            "its eval no longer carries the run on (its process stopped before it denied "
            f"the call): deny it (honeycomb approve {shlex.quote(run_id)} "
            f"{shlex.quote(call_id)} --deny), or go on with the eval (honeycomb eval HIVE "
            f"CASES --eval-id {shlex.quote(eval_id)}), which denies it",
        )


ENDED = frozenset({"ok", "partial", "failed", "over_budget"})
"""How a run ends for good: a call it left undecided is acted on only if it is continued."""


def ended_undecided(status: str) -> str:
    """Why a call that a run ended (``status``, one of :data:`ENDED`) without deciding
    cannot be decided: a decision would be recorded and never acted on."""
    return (
        f"the run ended ({status}) with this call undecided: a decision now would never be "
        "acted on. If the run is continued (honeycomb resume, Executor.resume) and the "
        "call waits again, decide it then"
    )


def this_user() -> str:
    """This process's user and host (``ann@laptop``): who decides, unless told."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = "uid-unknown"
    return f"{user}@{socket.gethostname()}"


async def _listed(pending: PendingApproval, listing: ToolLister, run_id: str) -> None:
    """The tools of the waiting call's role, listed; an edit that cannot be checked for
    want of them is refused, saying why (nothing is recorded: the call still waits)."""
    try:
        await listing(pending)
    except HoneycombError as exc:  # its MCP server cannot be started, or lacks a tool
        raise ApprovalError(
            run_id,
            pending.call_id,
            f"the edited arguments cannot be checked against tool {pending.tool!r}'s "
            f"schema: {exc}. Decide once that is fixed, or approve it unedited",
        ) from exc


def _check(
    pending: PendingApproval, arguments: dict[str, Any], tool_for: ToolFinder | None, run_id: str
) -> None:
    """Edited arguments validate against the tool's schema (again, when it runs)."""
    if not isinstance(arguments, dict):
        raise ApprovalError(
            run_id,
            pending.call_id,
            f"arguments must be a JSON object, got {type(arguments).__name__}",
        )
    try:  # the call would run with a secret's mask (the run refuses it then)
        unmasked_edit(arguments, pending.arguments)
    except MaskedEdit as exc:
        raise ApprovalError(run_id, pending.call_id, f"the edited arguments: {exc}") from exc
    found = tool_for(pending) if tool_for is not None else None
    if found is None:  # an edit no schema checked would be final, and fail as it runs
        raise ApprovalError(
            run_id,
            pending.call_id,
            f"the edited arguments cannot be checked against tool {pending.tool!r}'s schema "
            "here: the run's tools are not known (it was not started from a hive file, or "
            "the file no longer loads or has no such tool). Decide it where its tools are "
            "(Executor.decide, in the Python that runs it), or approve it unedited",
        )
    try:
        found.parse_arguments(arguments_text(arguments), in_full=True)
    except ArgumentsError as exc:
        raise ApprovalError(run_id, pending.call_id, f"the edited arguments: {exc}") from exc
