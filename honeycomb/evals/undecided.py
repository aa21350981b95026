"""The calls an eval's run leaves waiting for a person: the eval decides them itself,
denied, as the run ends (or is cut off), for nobody decides for an eval.

Left waiting, they would be listed by ``honeycomb serve`` and ``honeycomb approve``,
and approving one would resume the run into its side effect after the eval ended. A
denial is recorded as any decision is (the first stands: a person's made before it
is left as it is), so the call is listed as waiting nowhere, a decision on it is
refused (``AlreadyDecided``), and a resumed run never makes it. An eval whose process
was killed denied nothing: the eval gone on with (or run again) by its id denies what
its runs no process carries on left waiting (:func:`deny_left`).
"""

from __future__ import annotations

import functools
import time

from honeycomb.store import RunStore
from honeycomb.store.evals import runs_of_eval
from runtime.errors import AlreadyDecided
from runtime.tools.approvals import ApprovalEntry, Decision

__all__ = ["DECIDED_BY", "REASON", "deny_left", "deny_undecided"]

DECIDED_BY = "the eval: nobody decides on an eval's calls"
"""Who denied the calls an eval's run left undecided (an entry's ``decided_by``)."""

REASON = (
    "the eval ended with this call waiting for a decision, and nobody decides on an "
    "eval's calls: it never runs"
)
"""Why (the model reads ``denied: <reason>`` if the run is ever resumed)."""


async def deny_undecided(store: RunStore, run_id: str) -> int:
    """Deny every call of run ``run_id`` that still waits for a decision; return how
    many were denied here (one a person decided a moment before keeps that decision).

    Raises:
        StoreError: when the store cannot be read or written.
    """
    denied = 0
    now = time.time()
    for entry in await store.approvals_of(run_id):
        if entry.decision is not None:
            continue
        decided = ApprovalEntry(
            pending=entry.pending,
            decision=Decision.denied(REASON),
            decided_at=now,
            decided_by=DECIDED_BY,
        )
        try:
            await store.keep_approval(run_id, decided)
        except AlreadyDecided:
            continue  # decided meanwhile, elsewhere: the first decision stands
        denied += 1
    return denied


async def deny_left(store: RunStore, eval_id: str) -> int:
    """Deny every call that a run of eval ``eval_id`` no process carries on any more
    left waiting (the eval's process was killed before it denied them); return how
    many were denied.

    Raises:
        StoreError: when the store cannot be read or written.
    """
    denied = 0
    none: list[str] = []
    for run_id in await store.reading(functools.partial(runs_of_eval, eval_id=eval_id), none):
        summary = await store.summary(run_id)
        if summary is not None and summary.status != "running":
            denied += await deny_undecided(store, run_id)
    return denied
