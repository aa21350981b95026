"""One measurement in a fresh process: ``python -m benchmarks.measure '<json>'``.

Prints one JSON object: wall time, CPU time and peak RSS of one workload run, with
its counts and validity. A fresh process per measurement keeps runs independent (no
warm caches, no heap left over from the previous run).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import resource
import sys
import time
from typing import Any


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _quiet_structlog() -> None:
    """Events on: structlog configured as an application would, output dropped."""
    import structlog

    def drop(logger: Any, name: str, event: dict[str, Any]) -> str:
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


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.spec import Params

    params = Params(**spec["params"])
    if spec["impl"] == "floor":
        from benchmarks.floor import run_floor as run
    else:
        from benchmarks.workload import run_honeycomb as run

        if params.events:
            _quiet_structlog()
    # Warm up on a small run of the same workload: first-use costs (lazy imports,
    # deferred validators) are paid once per process, not per run.
    asyncio.run(run(dataclasses.replace(params, n=min(params.n, 2))))
    gc.collect()
    rss_before = _rss_mb()
    cpu, wall = time.process_time(), time.perf_counter()
    outcome = asyncio.run(run(params))
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    return {
        **spec,
        **outcome,
        "wall_s": wall,
        "cpu_s": cpu,
        "ideal_s": params.ideal_s,
        "rss_before_mb": rss_before,
        "peak_rss_mb": _rss_mb(),
    }


def import_time(module: str) -> dict[str, Any]:
    started = time.perf_counter()
    __import__(module)
    return {"impl": module, "import_s": time.perf_counter() - started, "peak_rss_mb": _rss_mb()}


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    result = import_time(request["import"]) if "import" in request else measure(request)
    sys.stdout.write(json.dumps(result) + "\n")
