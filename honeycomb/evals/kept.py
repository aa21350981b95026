"""An eval's report in a run store: kept as JSON by its id (as it ends, and when it is
interrupted), and read back for an interrupted eval to go on with."""

from __future__ import annotations

import functools

from honeycomb.evals.report import EvalReport
from honeycomb.store import RunStore
from honeycomb.store.evals import read_eval

__all__ = ["interrupted", "keep_report"]


async def keep_report(store: RunStore, report: EvalReport) -> None:
    """Keep ``report`` in ``store`` by its eval id (one of that id is replaced).

    Raises:
        StoreError: when the store cannot be written.
    """
    data = report.to_json()
    await store.keep_eval(
        report.eval_id,
        report.name,
        report.started_at,
        report.passed,
        data,
        interrupted=report.interrupted,
    )


async def interrupted(store: RunStore, eval_id: str) -> EvalReport | None:
    """The report of eval ``eval_id`` kept in ``store`` when it was interrupted, for
    the eval to go on from (None: there is none, it ended, or it cannot be read: the
    eval then makes every run anew and replaces it)."""
    text = await store.reading(functools.partial(read_eval, eval_id=eval_id), None)
    if text is None:
        return None
    try:
        kept = EvalReport.from_json(text)
    except ValueError:  # kept by a version that wrote what this one cannot read
        return None
    return kept if kept.interrupted else None
