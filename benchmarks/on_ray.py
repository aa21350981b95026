"""Workers on Ray against the local backend: what a pool of actors buys, and costs.

Three workloads, each on the local backend and then on a pool of Ray actors:

- **CPU-heavy A**: N workers, K=3 model turns of 50 ms, T=3 calls a turn to a sync
  tool that burns 2 ms of CPU. One process runs those calls one at a time (its threads
  share one GIL); a pool of actors runs them in as many processes.
- **A**: the standard workload (K=3 turns of 50 ms, T=3 calls a turn to an async tool
  of 20 ms) at N=10000: nothing to gain from more processes, so what it shows is
  what Ray costs.
- **trivial**: the CPU-heavy workload with nothing to burn and no latency, so only the
  framework works: the overhead of dispatching a subtask to an actor, as the CPU the
  driver and the actors spend beyond what the local backend spends, per subtask.

    python -m benchmarks.on_ray [--heavy N] [--standard N] [--actors K] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass

from honeycomb import Executor, Policy, Role, tool
from honeycomb.backends import RayBackend
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolCall, ToolMessage, UserMessage

TURNS, CALLS, MODEL_S, TOOL_S, BURN_MS = 3, 3, 0.05, 0.02, 2.0
SMOKE_N = 20
"""N of every workload in a smoke run (``--smoke``)."""


@tool
def burn(ms: float, call: str) -> str:
    """Burn ``ms`` milliseconds of CPU.

    Args:
        ms: Milliseconds.
        call: Which call this is (a call repeating an earlier turn's exactly would be
            skipped, and burn nothing).
    """
    end = time.thread_time() + ms / 1000
    spins = 0
    while time.thread_time() < end:
        spins += 1
    return str(spins > 0)


@tool
async def lookup(key: str, seconds: float) -> str:
    """Look ``key`` up, in ``seconds``.

    Args:
        key: What to look up.
        seconds: How long it takes.
    """
    await asyncio.sleep(seconds)
    return key


async def model(request: ModelRequest) -> AssistantMessage | str:
    """K turns of T calls to the task's tool, then an answer; the tool, its argument
    and the model's latency come in the task, as JSON."""
    task = json.loads(next(m for m in request.messages if isinstance(m, UserMessage)).content)
    if task["latency"]:
        await asyncio.sleep(task["latency"])
    turn = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
    if turn < TURNS - 1:
        name, value = ("burn", "ms") if "ms" in task else ("lookup", "seconds")
        calls = tuple(
            ToolCall(
                id=f"c{turn}_{i}",
                name=name,
                arguments=json.dumps(
                    {value: task[value], ("call" if name == "burn" else "key"): f"{turn}.{i}"}
                ),
            )
            for i in range(CALLS)
        )
        return AssistantMessage(tool_calls=calls)
    seen = sum(1 for m in request.messages if isinstance(m, ToolMessage))
    return f"done {seen}"


@dataclass(frozen=True)
class Took:
    """One run: its wall time, and the CPU the driver and the actors spent."""

    wall_s: float
    cpu_s: float


async def run(n: int, backend: RayBackend | None, task: dict[str, float]) -> Took:
    """N workers of ``task``, every one checked to have seen all its observations."""
    tools = ("benchmarks.on_ray:burn", "benchmarks.on_ray:lookup")  # as actors import them
    role = Role(name="w", tools=tools, concurrency=CALLS)
    executor = Executor(
        [role], FunctionModel(model), aggregator="concat", backend=backend,
        policy=Policy(max_workers=n, max_subtasks=n), log_events=False,
    )  # fmt: skip
    actors = await backend.pids() if backend is not None else []
    cpu = time.process_time() + sum(map(_cpu_of, actors))
    started = time.perf_counter()
    result = await executor.run("t", subtasks=[("w", json.dumps(task))] * n)
    took = time.perf_counter() - started
    cpu = time.process_time() + sum(map(_cpu_of, actors)) - cpu
    want = f"done {(TURNS - 1) * CALLS}"
    bad = [s for s in result.subtasks.values() if s.worker is None or s.worker.text != want]
    if bad:
        raise SystemExit(f"{len(bad)} workers went wrong: {bad[0].error}")
    return Took(took, cpu)


def _cpu_of(pid: int) -> float:
    """A process's CPU seconds so far (Linux's /proc; 0 where there is none)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def main(heavy_n: int, standard_n: int, actors: int, smoke: bool) -> int:
    """Run the three workloads on both backends and print their figures; 1 if a target
    is missed (a smoke run judges none). The pool's Ray is the one this process started
    already, if any (the tests'), else a private one of ``actors`` CPUs."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    backend = RayBackend(actors=actors, num_cpus=actors)
    heavy = {"ms": BURN_MS, "latency": MODEL_S}
    standard = {"seconds": TOOL_S, "latency": MODEL_S}
    trivial = {"ms": 0.0, "latency": 0.0}
    await run(actors * 4, backend, heavy)  # the pool started and warm
    figures = {}
    for name, n, task in [
        ("heavy", heavy_n, heavy),
        ("standard", standard_n, standard),
        ("trivial", heavy_n, trivial),
    ]:
        figures[name] = (await run(n, None, task), await run(n, backend, task))
    backend.stop()
    (heavy_local, heavy_ray), (a_local, a_ray), (t_local, t_ray) = figures.values()
    ideal = TURNS * MODEL_S + heavy_n * (TURNS - 1) * CALLS * BURN_MS / 1000 / actors
    speed_up = heavy_local.wall_s / heavy_ray.wall_s
    ratio = a_ray.wall_s / a_local.wall_s
    overhead_ms = 1000 * (t_ray.cpu_s - t_local.cpu_s) / heavy_n
    judged = [
        (speed_up >= 1.6, f"speed-up {speed_up:.2f}x (target >= 1.6x)"),
        (ratio <= 1.3, f"ratio {ratio:.2f}x (target <= 1.3x)"),
        (overhead_ms <= 2.0, f"{overhead_ms:.2f} ms of CPU a subtask (target <= 2 ms)"),
    ]
    marks = ["" if smoke else (" met" if ok else " MISSED") for ok, _ in judged]
    lines = [
        f"CPU-heavy A, N={heavy_n}, {actors} actors (ideal on {actors} processes {ideal:.2f}s):",
        f"  local {heavy_local.wall_s:.2f}s   ray {heavy_ray.wall_s:.2f}s   "
        f"{judged[0][1]}{marks[0]}",
        f"A, N={standard_n}: local {a_local.wall_s:.2f}s   ray {a_ray.wall_s:.2f}s   "
        f"{judged[1][1]}{marks[1]}",
        f"dispatch overhead on Ray (trivial, N={heavy_n}): {judged[2][1]}{marks[2]}",
        f"  CPU: local {t_local.cpu_s:.2f}s, ray {t_ray.cpu_s:.2f}s (driver and actors); "
        f"wall: local {t_local.wall_s:.2f}s, ray {t_ray.wall_s:.2f}s",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0 if smoke or all(ok for ok, _ in judged) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.on_ray")
    parser.add_argument("--heavy", type=int, default=2000, help="N of the CPU-heavy runs")
    parser.add_argument("--standard", type=int, default=10000, help="N of workload A")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="small, targets not judged")
    options = parser.parse_args()
    if options.smoke:
        options.heavy, options.standard = SMOKE_N, SMOKE_N
    sys.exit(asyncio.run(main(options.heavy, options.standard, options.actors, options.smoke)))
