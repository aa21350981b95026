"""One measurement in a fresh process: ``python -m benchmarks.measure '<json>'``.

Prints one JSON object: wall time, CPU time and peak RSS of one workload run, with
its counts and validity. A fresh process per measurement keeps runs independent (no
warm caches, no heap left over from the previous run). A smoke run, which times
nothing, may give a JSON list of measurements, made one after another.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import importlib
import importlib.metadata
import json
import resource
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, MutableMapping
from typing import Any

from benchmarks.peers import PEERS


def _rss_mb() -> float:
    """This process's peak resident memory, in MB.

    On Linux, the high-water mark of this process's own address space (``VmHWM``):
    ``ru_maxrss`` survives ``exec``, so a process started by a larger one (``honeycomb
    bench``, which has imported Honeycomb and its CLI) would report its parent's peak.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _quiet_structlog() -> None:
    """Events on: structlog configured as an application would, output dropped."""
    import structlog

    def drop(logger: Any, name: str, event: MutableMapping[str, Any]) -> str:
        return ""

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            drop,
        ],
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=True,
    )


Runner = Callable[[Any], Coroutine[Any, Any, dict[str, Any]]]

UVLOOP = "uvloop"
"""Honeycomb's workload on uvloop (the ``fast`` extra); every other implementation runs
on asyncio's own loop."""


def _on_loop(impl: str, main: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """``asyncio.run(main)``, on uvloop for :data:`UVLOOP`."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if impl == UVLOOP:
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def _runner(impl: str, params: Any) -> Runner:
    if impl == "floor":
        from benchmarks.floor import run_floor

        return run_floor
    if impl in PEERS:
        run: Runner = importlib.import_module(PEERS[impl].module).run
        return run
    from benchmarks.workload import run_honeycomb

    if params.events:
        _quiet_structlog()
    return run_honeycomb


def measure(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Measure one implementation, or a pair (``"pair": [a, b]``) alternating run by
    run in this one process, so both see the machine in the same state."""
    from benchmarks.spec import Params

    impls: list[str] = spec.get("pair") or [spec["impl"]]
    variants = spec.get("variants") or [spec["params"]] * len(impls)
    sides = [(impl, Params(**p)) for impl, p in zip(impls, variants, strict=True)]
    runners = [_runner(impl, params) for impl, params in sides]
    # Warm up on a small run of the same workload: first-use costs (lazy imports,
    # deferred validators) are paid once per process, not per run.
    for run, (impl, params) in zip(runners, sides, strict=True):
        _on_loop(impl, run(dataclasses.replace(params, n=min(params.n, 2))))
    gc.collect()
    rss_before = _rss_mb()
    # Short workloads are repeated (each a fresh run) and the median kept: one run of a
    # fraction of a second is at the mercy of everything else on the machine.
    runs: list[list[tuple[float, float, dict[str, Any]]]] = [[] for _ in sides]
    for _ in range(int(spec.get("inner", 1))):
        for index, run in enumerate(runners):
            impl, params = sides[index]
            cpu, wall = time.process_time(), time.perf_counter()
            outcome = _on_loop(impl, run(params))
            runs[index].append((time.perf_counter() - wall, time.process_time() - cpu, outcome))
            gc.collect()
    results = []
    for (impl, params), mine in zip(sides, runs, strict=True):
        # Each figure's own median: the median run by CPU need not be the median by wall.
        wall = statistics.median(r[0] for r in mine)
        cpu = statistics.median(r[1] for r in mine)
        outcome = mine[0][2]  # counts are the same in every valid run
        results.append(
            {
                "impl": impl,
                "version": _version(impl),
                "params": dataclasses.asdict(params),
                **outcome,
                "valid": all(r[2]["valid"] for r in mine),
                "wall_s": wall,
                "cpu_s": cpu,
                "ideal_s": params.ideal_s,
                "rss_before_mb": rss_before,
                "peak_rss_mb": _rss_mb(),
            }
        )
    return results


def _version(impl: str) -> str:
    """The version of what was measured: a peer's, or Honeycomb's (the floor has none)."""
    if impl in PEERS:
        return str(importlib.import_module(PEERS[impl].module).VERSION)
    if impl == "floor":
        return ""
    version = importlib.metadata.version("honeycomb-agents")
    if impl == UVLOOP:
        return f"{version} on uvloop {importlib.metadata.version('uvloop')}"
    return version


if __name__ == "__main__":
    request = json.loads(sys.argv[1])  # one measurement, or several one after another
    for spec in request if isinstance(request, list) else [request]:
        sys.stdout.write("".join(json.dumps(r) + "\n" for r in measure(spec)))
