"""The decisions ``honeycomb serve``'s pages record: in the run store, as
:meth:`honeycomb.Executor.decide` records them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from honeycomb.run.decide import decide, pending_of
from honeycomb.store import RunStore
from runtime.approvals import PendingApproval

__all__ = ["StoreApprovals"]


class StoreApprovals:
    """The pending calls of a store's runs, and decisions on them.

    Args:
        store: The run store.
        resume: Called with a run's id once a decision leaves a waiting run with no
            call undecided (``honeycomb serve`` continues the run then); None: the
            run waits for ``honeycomb resume``.
    """

    def __init__(self, store: RunStore, resume: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.resume = resume

    async def pending(self, run_id: str) -> list[PendingApproval]:
        return await pending_of(self.store, run_id)

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        worker: str | None = None,
        reason: str = "",
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Record a decision (see :func:`honeycomb.run.decide.decide`).

        Raises:
            ApprovalError: naming why the call cannot be decided.
        """
        await decide(
            self.store, run_id, call_id, approve=approve, worker=worker,
            reason=reason or None, arguments=arguments,
        )  # fmt: skip
        if self.resume is None or await self.pending(run_id):
            return
        summary = await self.store.summary(run_id)
        if summary is not None and summary.status == "waiting":
            self.resume(run_id)
