"""The stored runs: ``honeycomb runs`` lists them, ``honeycomb trace`` draws one."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from rich.console import Console

from honeycomb.run.shown import stored_timeline
from honeycomb.store import RunStore, RunSummary
from honeycomb.trace.format import cached_share, counted, format_cost
from honeycomb.trace.html import to_html
from honeycomb.trace.spans import to_jsonl
from honeycomb.trace.terminal import render_timeline
from runtime import (
    StoreError,
)

__all__ = ["run_line", "runs_command", "trace_command"]


def runs_command(args: argparse.Namespace) -> int:
    try:
        found = RunStore(args.store).runs(args.limit)
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if not found:
        print(f"no runs in {args.store}")
        return 0
    print(f"{len(found)} run{'s' if len(found) != 1 else ''} in {args.store}, newest first")
    for run in found:
        print(run_line(run))
    return 0


def run_line(run: RunSummary) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.started_at))
    took = f"{run.duration_s:.1f}s" if run.duration_s is not None else "-"
    tokens = run.input_tokens + run.output_tokens
    task = run.task if len(run.task) <= 50 else run.task[:49] + "…"
    return (
        f"{run.run_id}  {when}  {run.status:<11} {took:>7}  {counted(run.workers, 'worker'):>11}  "
        f"{counted(run.model_calls, 'model call'):>16}  {counted(tokens, 'token'):>14}  "
        f"{cached_share(run) or '-':>10}  {format_cost(run.cost):>8}  {task}"
    )


def trace_command(args: argparse.Namespace) -> int:
    if not args.store.exists():
        print(f"no run store at {args.store} (use --store FILE)", file=sys.stderr)
        return 2
    store = RunStore(args.store)
    try:
        stored = asyncio.run(store.load(args.run_id))
        spans = store.spans(args.run_id) if stored is not None else []
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if stored is None:
        known = f"honeycomb runs --store {args.store}"
        print(f"{args.store}: no run {args.run_id!r} ({known})", file=sys.stderr)
        return 2
    if not spans:
        print(f"run {args.run_id!r} has no spans: tracing was off when it ran", file=sys.stderr)
        return 2
    found = store.find(args.run_id)  # a run whose process is gone reads `interrupted`
    timeline = stored_timeline(stored, spans, found.status if found is not None else None)
    console = Console()
    console.print(render_timeline(timeline, console.width))
    try:
        for path, text in ((args.jsonl, to_jsonl(spans)), (args.html, to_html(timeline))):
            if path is not None:
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path}", file=sys.stderr)
    except OSError as exc:
        print(f"cannot write: {exc}", file=sys.stderr)
        return 2
    return 0
