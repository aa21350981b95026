"""The stored runs: ``honeycomb runs`` lists them, ``honeycomb trace`` draws one."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence

from rich.console import Console

from honeycomb.cli.evals import written
from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.options import newest_first
from honeycomb.cli.stores import no_run, opened_store
from honeycomb.run.shown import stored_timeline
from honeycomb.store import RunSummary
from honeycomb.trace.format import cached_share, counted, format_cost, format_took, printable
from honeycomb.trace.html import to_html
from honeycomb.trace.spans import to_jsonl
from honeycomb.trace.terminal import render_timeline
from runtime import ConfigError, StoreError

__all__ = ["run_line", "runs_command", "trace_command"]


def runs_command(args: argparse.Namespace) -> ExitStatus:
    try:
        store = opened_store(args.store)
        found = store.runs(args.limit + 1)  # one more: are there more?
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    # The store as it is shown (a URL without its password, not with a mask in its place).
    if not found:
        print(f"no runs in {store.where}")
        return ExitStatus.OK
    total = len(found) if len(found) <= args.limit else None
    found = found[: args.limit]
    print(newest_first(len(found), "run", store.where, total=total))
    # As wide as the longest id shown, which is given whole, to be pasted.
    width = max(_COLUMNS[0][1], *(len(printable(run.run_id, lines=False)) for run in found))
    print(_row([label for label, _, _ in _COLUMNS], width))
    for run in found:
        print(run_line(run, width))
    return ExitStatus.OK


_COLUMNS = (
    ("run", 12, "<"),
    ("started", 19, "<"),
    ("status", 11, "<"),
    ("took", 7, ">"),
    ("ran", 7, ">"),
    ("workers", 11, ">"),
    ("model calls", 16, ">"),
    ("tokens", 14, ">"),
    ("cached", 10, ">"),
    ("cost", 8, ">"),
    ("task", 0, "<"),
)
"""The columns of ``honeycomb runs``: the header's label, the width, the alignment."""


def _row(cells: Sequence[str], id_width: int) -> str:
    """One line of the list of runs: the header's, or a run's, its first column
    ``id_width`` wide. What a store holds is shown as ``trace`` shows it: a line break
    or a terminal's escape in a run's id or task (an older store may hold one) is a
    space, never a split row or an escape."""
    widths = [id_width, *(width for _, width, _ in _COLUMNS[1:])]
    shown = (
        f"{printable(cell, lines=False):{align}{width}}"
        for cell, width, (_, _, align) in zip(cells, widths, _COLUMNS, strict=True)
    )
    return "  ".join(shown).rstrip()


def run_line(run: RunSummary, id_width: int = _COLUMNS[0][1]) -> str:
    """A run's line in ``honeycomb runs`` (under the header of :data:`_COLUMNS`, its
    ids' column ``id_width`` wide)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.started_at))
    took, ran = format_took(run.duration_s, run.wall_s)
    tokens = run.input_tokens + run.output_tokens
    task = run.task if len(run.task) <= 50 else run.task[:49] + "…"
    return _row(
        [
            run.run_id,
            when,
            run.status,
            took,
            ran,
            counted(run.workers, "worker"),
            counted(run.model_calls, "model call"),
            counted(tokens, "token"),
            cached_share(run) or "-",
            format_cost(run.cost),
            task,
        ],
        id_width,
    )


def trace_command(args: argparse.Namespace) -> ExitStatus:
    try:
        store = opened_store(args.store)
        stored = asyncio.run(store.load(args.run_id))
        spans = store.spans(args.run_id) if stored is not None else []
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    if stored is None:
        print(no_run(store, args.run_id), file=sys.stderr)
        return ExitStatus.UNUSABLE
    if not spans:
        print(f"run {args.run_id!r} has no spans: tracing was off when it ran", file=sys.stderr)
        return ExitStatus.UNUSABLE
    found = store.find(args.run_id)  # a run whose process is gone reads `interrupted`
    timeline = stored_timeline(stored, spans, found.status if found is not None else None)
    console = Console()
    console.print(render_timeline(timeline, console.width))
    if stored.error is not None:  # why a failed (or over_budget) run ended: its error
        console.print(f"{stored.status}: {printable(stored.error)}", markup=False, highlight=False)
    try:  # as eval's --html: its folders made, a file that cannot be written named
        for option, path, text in (
            ("--jsonl", args.jsonl, to_jsonl(spans)),
            ("--html", args.html, to_html(timeline)),
        ):
            if path is not None:
                written(path, text, option)
                print(f"wrote {path}", file=sys.stderr)
    except ConfigError as exc:
        print(exc.message, file=sys.stderr)
        return ExitStatus.UNUSABLE
    return ExitStatus.OK
