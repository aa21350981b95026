"""The decisions ``honeycomb serve``'s pages record: in the run store, as
:meth:`honeycomb.Executor.decide` records them."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from honeycomb.run.decide import ENDED, ToolFinder, decide, pending_of, summarized
from honeycomb.store import RunStore
from honeycomb.store.evals import eval_of
from runtime import ApprovalError, HoneycombError
from runtime.tools.approvals import PendingApproval

__all__ = ["RunTools", "StoreApprovals", "decidable", "decider"]

RunTools = Callable[[str], ToolFinder | None]
"""The tools of a run, by its id (None: not known here; a HoneycombError says why they
cannot be known, a hive file that no longer loads). With an Executor at hand,
``lambda run_id: executor.tool_for``."""


def decidable(call: PendingApproval, now: float | None = None) -> bool:
    """Whether a person can still decide ``call``: its time to decide has not run out
    (past it, the run denies the call when it is resumed)."""
    return call.deadline is None or (time.time() if now is None else now) < call.deadline


def decider(request: Request) -> str:
    """Who decides through ``request``, as the run store keeps it with the decision:
    the user an authentication middleware around the app signed in (a service that
    serves the pages behind its own sign-in), else the holder of the server's token,
    as they showed it (a person on the page, with its cookie, or a script, with the
    token as a bearer), and the address they came from. Not the server's own user:
    the person who decides is at the browser, not at the process."""
    client = request.client.host if request.client is not None else "an unknown address"
    user = request.scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        return f"{user.display_name} (on the page of honeycomb serve, from {client})"
    if request.scope.get("state", {}).get("by") == "bearer":
        return f"a script with the token of honeycomb serve (from {client})"
    return f"a person with the token of honeycomb serve, on its page (from {client})"


class StoreApprovals:
    """The pending calls of a store's runs, and decisions on them.

    Args:
        store: The run store.
        resume: Called with a run's id once a decision made here leaves a waiting run
            (or one whose process is gone: interrupted) with no call a person can
            still decide (one whose time ran out is the resumed run's to deny):
            ``honeycomb serve`` continues the run then. None: the run waits for
            ``honeycomb resume``. A run decided elsewhere is left to whoever decided
            it.
        tools: The tools of a run: with them, edited arguments are checked against
            the tool's schema when decided (as ``honeycomb approve`` checks them),
            and a tool's ``describe`` tells what a call will do. Without them,
            edited arguments are checked when the call runs.
    """

    def __init__(
        self,
        store: RunStore,
        resume: Callable[[str], None] | None = None,
        tools: RunTools | None = None,
    ) -> None:
        self.store = store
        self.resume = resume
        self.tools = tools
        # What each run's calls were told as, last asked: a page polls its run's calls
        # twice a second, and telling them (a hive's tools found, each call described)
        # is done again only when they change.
        self._told: dict[str, tuple[list[PendingApproval], object, list[PendingApproval]]] = {}

    async def pending(self, run_id: str) -> list[PendingApproval]:
        """The calls of the run waiting for a decision, each with what it will do when
        its tool says (not said while the run's tools are not known: its hive file no
        longer loads, say). None of a run that ended (failed, say) with calls
        undecided: they wait no more, and a decision would never be acted on."""
        found = await pending_of(self.store, run_id)
        if found and await self._ended(run_id):
            found = []
        if not found:
            self._told.pop(run_id, None)
            return found
        try:
            finder = await self._finder(run_id)
        except HoneycombError:  # said when an edit needs the tools (decide)
            finder = None
        if finder is None:
            return found
        before = self._told.get(run_id)
        # Equal, not the same: a bound method (executor.tool_for) is made anew each read.
        if before is not None and before[1] == finder and before[0] == found:
            return before[2]
        told = summarized(found, finder)
        self._told[run_id] = (found, finder, told)
        return told

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        worker: str | None = None,
        turn: int | None = None,
        reason: str = "",
        arguments: dict[str, Any] | None = None,
        by: str | None = None,
    ) -> None:
        """Record a decision (see :func:`honeycomb.run.decide.decide`), made by ``by``
        (:func:`decider`; None: this process's user and host).

        Raises:
            ApprovalError: naming why the call cannot be decided (edited arguments
                the tool's schema refuses among them).
        """
        if arguments is not None and any(
            p.call_id == call_id and p.arguments == arguments and worker in (None, p.worker)
            for p in await pending_of(self.store, run_id)
        ):
            arguments = None  # the form sends its box as it was: the model's, no edit
        try:
            finder = await self._finder(run_id) if arguments is not None else None
        except HoneycombError as exc:  # its hive file no longer loads: said where
            raise ApprovalError(
                run_id,
                call_id,
                f"the edited arguments cannot be checked against the tool's schema here: {exc}",
            ) from exc
        await decide(
            self.store,
            run_id,
            call_id,
            approve=approve,
            worker=worker,
            turn=turn,
            reason=reason or None,
            arguments=arguments,
            tool_for=finder,
            by=by,
        )
        if self.resume is None or any(map(decidable, await pending_of(self.store, run_id))):
            return
        summary = await self.store.summary(run_id)
        # A run whose process is gone (interrupted) goes on here as a waiting one does;
        # not an eval's (a call its killed eval left waiting, denied): it is the eval's.
        if summary is None or summary.status not in ("waiting", "interrupted"):
            return
        if await self.store.reading(functools.partial(eval_of, run_id=run_id), None) is None:
            self.resume(run_id)

    async def _ended(self, run_id: str) -> bool:
        summary = await self.store.summary(run_id)
        return summary is not None and summary.status in ENDED

    async def _finder(self, run_id: str) -> ToolFinder | None:
        if self.tools is None:
            return None
        return await asyncio.to_thread(self.tools, run_id)  # it may load a hive file
