"""Runs per second that several processes sustain on one run store: each process runs
the standard workload (small: N=4 workers, K=3 turns, T=2 tool calls a turn, no
latency) back to back, every run kept in the same store, for a while; the figure is
the runs all of them finished in that time, a second.

    python -m benchmarks.store_load --store postgresql://user@host/db   # 4 processes
    python -m benchmarks.store_load                                     # one SQLite file
    python -m benchmarks.store_load --processes 1,2,4 --seconds 10

On PostgreSQL each measurement keeps its runs in a schema of its own, dropped at its
end. This measures the store under load from many processes (the writes a run waits
for: its plan, each side effect's intent and outcome, each worker's result, its end),
not one process's cost per turn (that is scenario G of ``benchmarks.fanout``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio

from benchmarks.spec import Counts, Params
from benchmarks.workload import build_executor, drop_schema, plan, scratch_schema
from honeycomb.store import RunStore

__all__ = ["main"]

PARAMS = Params(n=4, k=3, t=2, lm=0.0, lt=0.0, store=True, side_effects=True)
"""The workload of one run: side-effecting tools, so every call's intent and outcome is
committed before it goes on, as a run that changes things commits them."""


async def _carry(where: str, seconds: float, start_at: float) -> dict[str, float]:
    """One process: runs back to back from ``start_at`` (wall clock) for ``seconds``."""
    store = RunStore(Path(where) if "://" not in where else where)
    await store.open()
    executor = build_executor(PARAMS, Counts(), (), store)
    await anyio.sleep(max(0.0, start_at - time.time()))
    done, began = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - began) < seconds:
        result = await executor.run("fan out", subtasks=plan(PARAMS), run_id=os.urandom(8).hex())
        assert result.status == "ok", result.status
        done += 1
    store.close()
    return {"runs": done, "seconds": elapsed}


def measure(where: str, processes: int, seconds: float) -> dict[str, float]:
    """Runs a second that ``processes`` processes sustain together on the store."""
    start_at = time.time() + 3.0  # every process imported and connected by then
    command = [sys.executable, "-m", "benchmarks.store_load", "--carry", where,
               "--seconds", str(seconds), "--start-at", str(start_at)]  # fmt: skip
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                for _ in range(processes)]  # fmt: skip
    reports = [json.loads(child.communicate()[0].splitlines()[-1]) for child in children]
    if any(child.returncode != 0 for child in children):
        raise SystemExit("a process failed")
    runs = sum(r["runs"] for r in reports)
    window = statistics.fmean(r["seconds"] for r in reports)
    return {"processes": processes, "runs": runs, "runs_per_s": runs / window}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store_load")
    parser.add_argument("--store", default=None, help="a PostgreSQL URL (default: SQLite)")
    parser.add_argument("--processes", default="4", help="how many processes, e.g. 1,2,4")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each measures")
    parser.add_argument("--carry", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.carry is not None:
        report = anyio.run(_carry, args.carry, args.seconds, args.start_at)
        print(json.dumps(report))
        return 0
    kind = "PostgreSQL" if args.store else "SQLite"
    print("| store | processes | runs | runs/s |\n|---|---|---|---|")
    for count in [int(p) for p in args.processes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="honeycomb-load-") as folder:
            where = str(Path(folder) / "runs.db")
            if args.store:
                where = scratch_schema(args.store, f"load_{os.getpid()}_{count}")
            try:
                found = measure(where, count, args.seconds)
            finally:
                if args.store:
                    drop_schema(RunStore(where))
        print(f"| {kind} | {count} | {found['runs']:.0f} | {found['runs_per_s']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
