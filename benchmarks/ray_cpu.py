"""The CPU-heavy variant of workload A, on Ray and on the local backend.

N workers, K=3 model turns (50 ms each), T=3 calls a turn to a sync tool that burns
2 ms of CPU: one process runs those calls one at a time (its threads share one GIL),
a pool of Ray actors runs them in as many processes. Then the trivial variant (the
tool burns nothing, the model answers at once) gives the overhead per subtask of
dispatching a worker to an actor and streaming its state back.

    python -m benchmarks.ray_cpu [N] [ACTORS]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from honeycomb import Executor, FunctionModel, Policy, RayBackend, Role, tool
from runtime import AssistantMessage, ModelRequest, ToolCall, ToolMessage, UserMessage

TURNS, CALLS, MODEL_S, BURN_S = 3, 3, 0.05, 0.002


@tool
def burn(ms: float) -> str:
    """Burn ``ms`` milliseconds of CPU.

    Args:
        ms: Milliseconds.
    """
    end = time.thread_time() + ms / 1000
    spins = 0
    while time.thread_time() < end:
        spins += 1
    return str(spins > 0)


async def model(request: ModelRequest) -> AssistantMessage | str:
    """K turns: T calls to ``burn`` each, then an answer; ``ms`` and the latency come
    in the task, as JSON."""
    task = json.loads(next(m for m in request.messages if isinstance(m, UserMessage)).content)
    if task["latency"]:
        await asyncio.sleep(task["latency"])
    turn = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
    if turn < TURNS - 1:
        calls = tuple(
            ToolCall(id=f"c{turn}_{i}", name="burn", arguments=json.dumps({"ms": task["ms"]}))
            for i in range(CALLS)
        )
        return AssistantMessage(tool_calls=calls)
    seen = sum(1 for m in request.messages if isinstance(m, ToolMessage))
    return f"done {seen}"


async def run(n: int, backend: RayBackend | None, ms: float, latency: float) -> float:
    """Seconds for N workers, every one checked to have seen all its observations."""
    role = Role(name="w", tools=("benchmarks.ray_cpu:burn",), concurrency=CALLS)
    executor = Executor(
        [role], FunctionModel(model), aggregator="concat", backend=backend,
        policy=Policy(max_workers=n), log_events=False,
    )  # fmt: skip
    task = json.dumps({"ms": ms, "latency": latency})
    started = time.perf_counter()
    result = await executor.run("t", subtasks=[("w", task)] * n)
    took = time.perf_counter() - started
    want = f"done {(TURNS - 1) * CALLS}"
    bad = [s for s in result.subtasks.values() if s.worker is None or s.worker.text != want]
    if bad:
        raise SystemExit(f"{len(bad)} workers went wrong: {bad[0].error}")
    return took


async def main(n: int, actors: int) -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    backend = RayBackend(actors=actors, num_cpus=actors)
    await run(actors * 4, backend, BURN_S * 1000, 0.0)  # the pool started and warm
    heavy_local = await run(n, None, BURN_S * 1000, MODEL_S)
    heavy_ray = await run(n, backend, BURN_S * 1000, MODEL_S)
    trivial_local = await run(n, None, 0.0, 0.0)
    trivial_ray = await run(n, backend, 0.0, 0.0)
    backend.stop()
    ideal = TURNS * MODEL_S + n * (TURNS - 1) * CALLS * BURN_S / actors
    lines = [
        f"CPU-heavy A, N={n}, {actors} actors (ideal on {actors} processes {ideal:.2f}s):",
        f"  local {heavy_local:.2f}s   ray {heavy_ray:.2f}s   "
        f"speed-up {heavy_local / heavy_ray:.2f}x (target >= 1.6x)",
        f"trivial A, N={n}: local {trivial_local:.2f}s   ray {trivial_ray:.2f}s   "
        f"ratio {trivial_ray / trivial_local:.2f}x (target <= 1.3x)",
        f"  dispatch overhead on Ray {1000 * (trivial_ray - trivial_local) / n:.2f} ms a "
        "subtask (target <= 2 ms)",
    ]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:]]
    asyncio.run(main(*(arguments + [2000, 2][len(arguments) :])))
