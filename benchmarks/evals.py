"""Evals: what ``honeycomb eval`` adds to the runs it scores.

    python -m benchmarks.evals                 # 1,000 cases, 64 at once
    python -m benchmarks.evals --cases 200 --json

A thousand cases of a one-worker hive (planner, writer, aggregator: three model calls
a run) on the offline model with no latency, so that what is measured is Honeycomb's
own work. First the floor: the same runs by hand, ``executor.run`` in a task group
bounded by the same concurrency; then ``evaluate`` over the same cases, each with
five checks (``contains``, ``status``, ``tool_called``, ``model_calls``, ``latency``).
The two alternate, three times each, best of each kept. Reported: wall and CPU time of
both, the eval's overhead per case (the CPU time the eval takes beyond the floor's,
per case: its checks, records and report), and the time to write the report as JSON,
JUnit XML and HTML. ``--store`` keeps every run (the floor's and the eval's) in a run
store, as ``honeycomb eval`` does: what that costs is a run's, not the eval's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio

from honeycomb import Executor, OfflineModel, RunResult, load_hive
from honeycomb.evals import Case, EvalReport, evaluate, junit, load_cases
from honeycomb.evals.checks import as_check, verdict
from honeycomb.evals.html import report_page
from honeycomb.evals.record import RunCalls, asked_in, case_run, tool_uses
from honeycomb.evals.runner import scored
from honeycomb.store import RunStore
from runtime import Usage

HIVE = """
name: tiny
models:
  offline: {provider: offline, latency: 0}
roles:
  planner: {description: Splits the request into subtasks.}
  writer: {description: Writes a short answer.}
  aggregator: {description: Merges the results.}
planner: planner
aggregator: aggregator
"""

CASES = """
name: bench
defaults:
  task: Say hello to city {{n}}
  assert:
    - contains: "city {{n}}"
    - status: ok
    - tool_called: {name: search, at_most: 0}
    - model_calls: {at_most: 5}
    - latency: {at_most: 30, of: critical_path}
cases_from: cases.jsonl
"""

ROUNDS = 3
T = TypeVar("T")


def _files(folder: Path, cases: int) -> tuple[Path, Path]:
    hive = folder / "hive.yaml"
    hive.write_text(HIVE)
    (folder / "cases.jsonl").write_text(
        "".join(json.dumps({"id": f"c{n}", "n": n}) + "\n" for n in range(cases))
    )
    evals = folder / "evals.yaml"
    evals.write_text(CASES)
    return hive, evals


async def _floor(executor: Executor, cases: Sequence[Case], concurrency: int) -> list[RunResult]:
    """The same runs by hand: at most ``concurrency`` at once, nothing scored."""
    limit = anyio.Semaphore(concurrency)
    results: list[RunResult] = []

    async def one(task: str) -> None:
        async with limit:
            results.append(await executor.run(task))

    async with anyio.create_task_group() as group:
        for case in cases:
            group.start_soon(one, case.task)
    return results


async def _scoring(cases: Sequence[Case], results: Sequence[RunResult]) -> float:
    """The CPU time of the eval's own work on runs already made: each run as its checks
    see it, its five checks, its scored attempt."""
    started = time.process_time()
    for case, result in zip(cases, results, strict=True):
        run = case_run(
            case=case.id,
            task=case.task,
            expected=None,
            run_id=result.run_id,
            result=result,
            error=None,
            tool_calls=tool_uses(RunCalls(), asked_in(result), lambda role, tool: False),
            judges=None,
        )
        verdicts = tuple([await verdict(as_check(check), run) for check in case.checks])
        scored(case, run, verdicts, Usage())
    return time.process_time() - started


def _timed(work: Callable[[], Coroutine[Any, Any, T]]) -> tuple[float, float, T]:
    """Wall and CPU time of ``work`` run on a loop of its own, and what it returned."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = asyncio.run(work())
    return time.perf_counter() - wall, time.process_time() - cpu, found


def measure(cases: int = 1000, concurrency: int = 64, store: bool = False) -> dict[str, Any]:
    """The figures, as :func:`main` prints them; with ``store``, every run (the
    floor's and the eval's) is kept in a run store, as ``honeycomb eval`` keeps them."""
    with tempfile.TemporaryDirectory() as folder:
        hive_file, evals_file = _files(Path(folder), cases)
        hive = load_hive(hive_file)
        loaded = time.perf_counter()
        suite = load_cases(evals_file, hive)
        load_s = time.perf_counter() - loaded
        kept = RunStore(Path(folder) / "runs.db") if store else None
        executor = Executor.from_hive(
            hive, model=OfflineModel(latency=0), log_events=False, store=kept
        )
        floors: list[tuple[float, float]] = []
        evals: list[tuple[float, float]] = []
        report: EvalReport | None = None
        results: list[RunResult] = []
        for _ in range(ROUNDS):
            wall, cpu, results = _timed(lambda: _floor(executor, suite.cases, concurrency))
            floors.append((wall, cpu))
            wall, cpu, report = _timed(lambda: evaluate(executor, suite, concurrency=concurrency))
            evals.append((wall, cpu))
        assert report is not None
        assert report.passed, "every case passes"
        by_task = {r.task: r for r in results}
        ordered = [by_task[case.task] for case in suite.cases]
        scoring = min(asyncio.run(_scoring(suite.cases, ordered)) for _ in range(ROUNDS))
        written = time.perf_counter()
        sizes = [len(report.to_json()), len(junit(report)), len(report_page(report))]
        write_s = time.perf_counter() - written
    floor, best = min(floors), min(evals)
    floor_cpu, eval_cpu = min(c for _, c in floors), min(c for _, c in evals)
    return {
        "cases": cases,
        "concurrency": concurrency,
        "store": store,
        "checks_per_case": 5,
        "load_cases_s": round(load_s, 3),
        "floor_wall_s": round(floor[0], 3),
        "eval_wall_s": round(best[0], 3),
        "floor_cpu_s": round(floor_cpu, 3),
        "eval_cpu_s": round(eval_cpu, 3),
        "overhead_ms_per_case": round(1000 * (eval_cpu - floor_cpu) / cases, 3),
        "scoring_ms_per_case": round(1000 * scoring / cases, 3),
        "report_write_s": round(write_s, 3),
        "report_bytes": sizes,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.evals", description=__doc__)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--store", action="store_true", help="keep every run in a run store")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    found = measure(args.cases, args.concurrency, args.store)
    if args.json:
        print(json.dumps(found))
        return 0
    f = found
    print(
        f"{f['cases']} cases, {f['concurrency']} at once, {f['checks_per_case']} checks each "
        f"(best of {ROUNDS}){', every run kept in a store' if f['store'] else ''}\n"
        f"  runs by hand  {f['floor_wall_s']:7.2f}s wall  {f['floor_cpu_s']:7.2f}s CPU\n"
        f"  evaluate      {f['eval_wall_s']:7.2f}s wall  {f['eval_cpu_s']:7.2f}s CPU\n"
        f"  eval overhead {f['overhead_ms_per_case']:7.3f} ms CPU a case (evaluate less runs)\n"
        f"  scoring alone {f['scoring_ms_per_case']:7.3f} ms CPU a case (record, checks)\n"
        f"  cases file    {f['load_cases_s']:7.3f}s to load\n"
        f"  report        {f['report_write_s']:7.3f}s to write as JSON, JUnit and HTML"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
