"""A remote worker's calls of pinned tools, made at the driver (see ``Tool.pinned``):
an MCP server's tools, ``agent:ROLE`` and hive tools, and tools of your own.

A call is the run's, not its worker's actor's: one that the actor's death cut off from
its worker (a nested worker under way, a sub-run) goes on here, and when the worker,
gone on in another actor from its last checkpoint, makes the same call again (the same
turn, the same call id), it is given that call's answer. In one process the call is
made once; so it is here, and the nested worker's side effects are not made twice.
So is a question to the run's approver (a person at a terminal is not asked twice).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec

from honeycomb.backends._setup import unsendable
from runtime import ApprovalRequest, Decision, Tool, ToolContext, ToolRegistry
from runtime.limits.room import away_for_a_person
from runtime.secrets import masked
from runtime.tools.approvals import (
    ApprovalEntry,
    Approver,
    MaskedEdit,
    PendingApproval,
    unmasked_edit,
)
from runtime.tools.render import render
from runtime.tools.threads import run_tool

T = TypeVar("T")

Key = tuple[str, int, str]
"""A call by its tool (or ``(approver)``, no tool's name), turn and call id."""


class PinnedCalls:
    """A worker's calls of pinned tools at the driver, by what they are to its turns.

    Attributes:
        keep: The worker's actor died: its calls under way go on without it, for its
            next life to take up.
    """

    def __init__(self, tools: ToolRegistry, max_output_chars: int) -> None:
        self._tools = tools
        self._limit = max_output_chars
        self._calls: dict[Key, asyncio.Task[Any]] = {}
        self.keep = False

    async def call(self, name: str, kwargs: dict[str, Any], context: Any = None) -> Any:
        """The call's value, as it goes back to the worker's actor (see
        :func:`sent_value`); the answer of the same call under way, or ended, since an
        earlier life of the worker made it (``context``: the call's, whether or not the
        tool takes it)."""
        found = self._tools[name]
        key = (name, context.turn, context.call_id) if isinstance(context, ToolContext) else None
        value = await self.kept(key, lambda: call_pinned(found, kwargs))
        return sent_value(value, self._limit)

    async def kept(self, key: Key | None, make: Callable[[], Awaitable[T]]) -> T:
        """What ``make`` makes, made once for ``key`` across the worker's lives (None:
        made each time): a person asked about a call (the run's approver) is not asked
        again by its next life either."""
        made = self._calls.get(key) if key is not None else None
        if made is None:
            made = asyncio.ensure_future(make())
            if key is not None:
                self._calls[key] = made
        try:
            value: T = await asyncio.shield(made)
        except asyncio.CancelledError as cancelled:
            if not self.keep:  # its worker gave it up (a timeout, a run cancelled ...)
                self._forget(key)
                await _cancelled(made, *cancelled.args)  # (... a decision settled it)
            raise
        except Exception:
            self._forget(key)
            raise
        self._forget(key)
        return value

    def going_on(self, tool: str, turn: int, call_id: str) -> bool:
        """Whether this call of ``tool`` was made by an earlier life of the worker, and
        goes on (or ended, its answer not yet taken)."""
        return (tool, turn, call_id) in self._calls

    def _forget(self, key: Key | None) -> None:
        if key is not None:
            self._calls.pop(key, None)

    async def close(self) -> None:
        """The worker ended: the calls kept for a life of it that did not come are
        cancelled."""
        calls, self._calls = list(self._calls.values()), {}
        await asyncio.gather(*(_cancelled(c) for c in calls))


async def _cancelled(call: asyncio.Future[Any], *why: object) -> None:
    """Cancel ``call`` (saying ``why``, if given) and wait for it to end (what it
    raised is no one's now)."""
    call.cancel(*why)
    await asyncio.gather(call, return_exceptions=True)


def sent_value(value: Any, limit: int) -> Any:
    """A pinned tool's value as it goes back to its worker's actor: itself, or, when Ray
    cannot send it (a generator, rows that hold a connection of this process), the text
    the worker makes of any value there (``render``: its items, as JSON)."""
    if isinstance(value, str | bytes | int | float | bool | None) or unsendable(value) is None:
        return value
    return render(value, limit)


async def call_pinned(found: Tool[Any, Any], kwargs: dict[str, Any]) -> Any:
    """A pinned tool's call for a worker in an actor, its arguments validated here as
    the tool validates them (the actor checked only their shape)."""
    if found.parameters is None:  # its schema is its function's: validate by it
        name = found.context_param
        context = kwargs.pop(name) if name is not None else None
        kwargs = found.parse_arguments(json.dumps(kwargs))
        if name is not None:
            kwargs = {**kwargs, name: context}
    return await run_tool(found, kwargs)


async def asked(approver: Approver, request: ApprovalRequest) -> Decision:
    """The run's approver's decision on ``request``: a person's time, which the
    worker's time limit here does not count, and during which the worker leaves its
    slot to the run's others (:mod:`runtime.limits.room`). It is asked with every
    secret masked, as a worker masks it in one process (in the actor, which knows none
    of this process's secrets, that masked nothing).

    Edited arguments go back with the secrets of the values the edit left as they were
    shown, which the worker could not put back (it refused the edit, as if it had
    changed them); an edit that changed one (or typed one in) goes back masked, and
    the worker refuses it, as in one process."""
    async with away_for_a_person():
        decision = await approver(masked(request))
    return _unmasked(decision, request.arguments)


async def decided_elsewhere(
    decided: Callable[[PendingApproval], Awaitable[ApprovalEntry]], pending: PendingApproval
) -> ApprovalEntry:
    """The entry ``decided`` finds once a decision on ``pending`` is recorded elsewhere
    (the run store: a person on the page of ``honeycomb serve``, ``honeycomb
    approve``), which the run's approver is raced against. The store keeps the call's
    secrets masked, so an edit made there leaves them as shown: they go back from the
    call's own arguments (``pending``'s, as the worker sent them), which the worker
    could not do, as :func:`asked` puts them back."""
    entry = await decided(pending)
    if entry.decision is None:
        return entry
    decision = _unmasked(entry.decision, pending.arguments)
    return msgspec.structs.replace(entry, decision=decision)


def _unmasked(decision: Decision, arguments: dict[str, Any]) -> Decision:
    """``decision``, its edited arguments with the secrets of the values the edit left
    as they were shown put back from ``arguments`` (the call's own); an edit that
    changed one (or typed one in) masked, which the worker refuses, as in one process."""
    if decision.arguments is None:
        return decision
    try:
        edited = unmasked_edit(decision.arguments, arguments)
    except MaskedEdit:
        edited = masked(decision.arguments)
    return msgspec.structs.replace(decision, arguments=edited)
