"""The extent of a life whose process died: kept by the life that takes its run over.

A life writes its ``run`` span as it ends. A life whose process died (or hung, and
whose lease was taken over) never does, and its spans end where its last finished
call ended: the time since (a model call that hung for minutes) would be lost, to the
run's figures and to its budget's wall time, which every life of a run shares. Its
lease says more: the writer renewed its heartbeat until the process stopped. So as a
run's lease is taken from an owner that never let go (:func:`honeycomb.store.lease.take`
says when), :func:`keep_cut_off` writes that life a ``run`` span of status ``cut off``,
from its start to its last heartbeat (or to the end of its last span, if later), in
the transaction that takes the lease: a resumed run reads it with the spans it counts
its earlier lives' wall time from.
"""

from __future__ import annotations

import os

from honeycomb.store.database import Connection
from honeycomb.store.runs import read_spans
from honeycomb.trace.lives import life_of
from honeycomb.trace.spans import Span
from runtime.text import encode_json

__all__ = ["keep_cut_off"]


def keep_cut_off(db: Connection, run_id: str, heartbeat: float) -> None:
    """Keep the ``run`` span of run ``run_id``'s last life, which never ended, until
    ``heartbeat`` (its lease's last): in ``db``'s transaction. Nothing is kept for a
    run that has no life recorded (a store of schema 4) or whose last life wrote its
    ``run`` span (its lease outlived it)."""
    if not db.columns("lives"):
        return
    life = db.execute(
        "SELECT started_at FROM lives WHERE run_id = ? ORDER BY life DESC LIMIT 1", (run_id,)
    ).fetchone()
    task = db.execute("SELECT task FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if life is None or task is None:
        return
    started_at = float(life[0])
    own = [s for s in read_spans(db, run_id) if s.start >= started_at]
    if any(s.kind == "run" and s.parent_id is None for s in own):
        return
    # Its life's digits, as its first span has them (a hive tool's sub-run may have
    # others), so that its spans and this one make one life.
    first = min(own, key=lambda s: s.start, default=None)
    life_id = life_of(first.span_id) if first is not None else os.urandom(4).hex()
    span = Span(
        span_id=f"{life_id}{0:08x}",  # its tracer counted its spans from 1
        parent_id=None,
        kind="run",
        name=task[0],
        start=started_at,  # its spans start after it (they are its life's: ``own``)
        end=max([heartbeat, *(s.end for s in own)]),
        status="cut off",
        error="its process stopped before the run ended (it is counted to its last sign of life)",
    )
    db.execute(
        "INSERT INTO spans (run_id, spans) VALUES (?, ?)",
        (run_id, encode_json([span]).decode()),
    )
