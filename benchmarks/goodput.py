"""Goodput at the provider's limit: many workers against a quota, next to a hand-written
asyncio loop over the bare ``openai`` client.

    python -m benchmarks.goodput                       # every variant (about 6 minutes)
    python -m benchmarks.goodput --headers x-ratelimit
    python -m benchmarks.goodput --smoke               # seconds: correctness, not targets

300 workers take 5 model turns each (4 asking for a tool call, then an answer) against
the local OpenAI-compatible server (``tests/support/openai_server.py``), run in a
process of its own, which enforces requests and tokens per minute as providers do
(:class:`~tests.support.openai_server.Quota`: buckets holding two seconds of the
quota), sized so that the run cannot take less than 20 s (about 48 s). It runs once
through Honeycomb (an ``Executor`` of 300 workers on one ``OpenAIModel``, its
defaults) and once as a loop written by hand over ``openai.AsyncOpenAI`` with its
default retries, for each way the server can tell its limits: ``x-ratelimit-*``
headers on every answer, a 429 with ``Retry-After``, or a bare 429. Targets, for
Honeycomb: at least 90% of the quota sustained (the quota's lower bound on the wall
time over the wall time), at most 5% of requests answered 429, and no failed worker.
Results go to ``benchmarks/results/goodput-<time>.jsonl`` and ``.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the quota server's process needs neither
    import httpx
    import openai

ROOT = Path(__file__).resolve().parent.parent

HEADERS = ("x-ratelimit", "retry-after", "bare")
"""How the server tells its limits; the first is how OpenAI does."""

TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a key up.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
    },
}


@dataclass(frozen=True)
class Scenario:
    """The workload and the quota it runs against.

    Attributes:
        workers: Workers in the run, all started at once.
        turns: Model turns of each worker (the last one answers).
        requests_per_minute: The quota's requests a minute.
        tokens_per_minute: The quota's tokens a minute.
        window_s: The buckets hold this many seconds of the quota: providers enforce a
            limit a minute over shorter intervals (OpenAI: 60,000 requests a minute may
            be enforced as 1,000 a second), so a run cannot spend a minute's worth at once.
        latency_s: How long the server takes to answer a request.
        completion_tokens: Tokens of each answer (prompts are counted from their text).
    """

    workers: int = 300
    turns: int = 5
    requests_per_minute: int = 1800
    tokens_per_minute: int = 540_000
    window_s: float = 2.0
    latency_s: float = 0.1
    completion_tokens: int = 20

    @property
    def requests(self) -> int:
        return self.workers * self.turns

    @property
    def request_rate(self) -> float:
        """Requests a second the quota sustains."""
        return self.requests_per_minute / 60

    @property
    def token_rate(self) -> float:
        """Tokens a second the quota sustains."""
        return self.tokens_per_minute / 60

    @property
    def request_bucket(self) -> int:
        return round(self.request_rate * self.window_s)

    @property
    def token_bucket(self) -> int:
        return round(self.token_rate * self.window_s)

    def lower_bound_s(self, requests: int, tokens: int) -> float:
        """The least wall time the quota allows for ``requests`` answered, costing
        ``tokens`` in all: each bucket starts full and refills at the quota's rate."""
        by_requests = (requests - self.request_bucket) / self.request_rate
        by_tokens = (tokens - self.token_bucket) / self.token_rate
        return max(by_requests, by_tokens, 0.0)


SMOKE = Scenario(workers=20, turns=5, requests_per_minute=2400, tokens_per_minute=1_200_000,
                 window_s=1.0, latency_s=0.02)  # fmt: skip
"""Small: 100 requests, of which the quota lets 40 through at once, then 40 a second."""


# --- the server, in a process of its own -------------------------------------------------


def prompt_tokens(messages: Sequence[Any]) -> int:
    """What a request's prompt costs: a token per four characters of its messages, as
    a provider's tokenizer roughly counts English."""
    return len(json.dumps(messages)) // 4 + 1


def _serve(spec: dict[str, Any]) -> None:
    """Serve the quota until standard input closes; print the base URL first."""
    from tests.support.openai_server import OpenAIServer, Quota, RecordedRequest, Reply

    scenario = Scenario(**spec["scenario"])

    def answer(request: RecordedRequest) -> Reply:
        messages = request.body.get("messages", []) if isinstance(request.body, dict) else []
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        cost = {
            "prompt_tokens": prompt_tokens(messages),
            "completion_tokens": scenario.completion_tokens,
            "delay_s": scenario.latency_s,
        }
        if turn < scenario.turns:
            call = (f"call_{turn}", "lookup", json.dumps({"key": f"k{turn}"}))
            return Reply(tool_calls=(call,), **cost)  # type: ignore[arg-type]
        return Reply(content="done", **cost)  # type: ignore[arg-type]

    quota = Quota(requests=scenario.request_bucket, tokens=scenario.token_bucket,
                  window_s=scenario.window_s, headers=spec["headers"])  # fmt: skip
    with OpenAIServer(answer, quota=quota) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


SERVE = "import json, sys; from benchmarks.goodput import _serve; _serve(json.loads(sys.argv[1]))"
"""The quota server's process: it imports this module (whose own imports are the
standard library's: the client, Honeycomb and the rest are imported where they are
used, and cost each server a second of CPU) and what serving needs."""


class Server:
    """The quota server in a child process, stopped when the block ends."""

    def __init__(self, scenario: Scenario, headers: str) -> None:
        spec = {"scenario": dataclasses.asdict(scenario), "headers": headers}
        self._child = subprocess.Popen(
            [sys.executable, "-c", SERVE, json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        assert self._child.stdout is not None
        self.base_url = self._child.stdout.readline().strip()
        if not self.base_url:
            self.stop()
            raise RuntimeError("the quota server did not start")

    def stop(self) -> None:
        if self._child.stdin is not None:
            self._child.stdin.close()
        try:
            self._child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


# --- the two implementations ---------------------------------------------------------------


class Tally:
    """Every HTTP answer the client got, counted as it comes (an httpx event hook)."""

    def __init__(self) -> None:
        self.answers = self.throttled = 0

    async def hook(self, response: httpx.Response) -> None:
        self.answers += 1
        self.throttled += response.status_code == 429

    def client(self, base_url: str, **options: Any) -> openai.AsyncOpenAI:
        import openai

        http = openai.DefaultAsyncHttpxClient(event_hooks={"response": [self.hook]})
        return openai.AsyncOpenAI(api_key="unused", base_url=base_url, http_client=http,
                                  **options)  # fmt: skip


async def run_honeycomb(scenario: Scenario, base_url: str, tally: Tally) -> dict[str, Any]:
    """The workload through an Executor of ``workers`` workers on one OpenAIModel, with
    Honeycomb's defaults (its retry policy and adaptive limiter)."""
    from honeycomb import Executor, OpenAIModel, Policy, Role, Subtask, tool

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    async def join(task: str, results: Sequence[Any]) -> str:
        return "\n".join(r.text for r in results if r.ok)

    model = OpenAIModel("bench", base_url=base_url, client=tally.client(base_url))
    executor = Executor(
        [Role(name="worker", tools=("lookup",), max_turns=scenario.turns + 1)],
        model,
        tools=[lookup],
        aggregator=join,
        policy=Policy(max_workers=scenario.workers, max_subtasks=scenario.workers),
    )
    plan = [Subtask(id=f"w{i}", role="worker", instruction=f"task {i}")
            for i in range(scenario.workers)]  # fmt: skip
    result = await executor.run("fan out", subtasks=plan)
    failed = sum(1 for s in result.subtasks.values() if s.status != "ok")
    tokens = result.usage.input_tokens + result.usage.output_tokens
    return {"failed_workers": failed, "tokens": tokens, "model_calls": result.usage.model_calls}


async def run_bare(scenario: Scenario, base_url: str, tally: Tally) -> dict[str, Any]:
    """The same workload by hand: a loop per worker over ``openai.AsyncOpenAI`` with its
    default retries (two, honouring ``Retry-After``), all workers in one gather."""
    client = tally.client(base_url)
    tokens = calls = 0

    async def worker(index: int) -> None:
        nonlocal tokens, calls
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"task {index}"}]
        for _ in range(scenario.turns):
            completion = await client.chat.completions.create(
                model="bench",
                messages=messages,  # type: ignore[arg-type]
                tools=[TOOL],  # type: ignore[list-item]
            )
            calls += 1
            if completion.usage is not None:
                tokens += completion.usage.total_tokens
            message = completion.choices[0].message
            if not message.tool_calls:
                return
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                key = json.loads(call.function.arguments)["key"]  # type: ignore[union-attr]
                messages.append({"role": "tool", "tool_call_id": call.id,
                                 "content": f"value of {key}"})  # fmt: skip

    outcomes = await asyncio.gather(*(worker(i) for i in range(scenario.workers)),
                                    return_exceptions=True)  # fmt: skip
    await client.close()
    failed = sum(1 for o in outcomes if isinstance(o, BaseException))
    return {"failed_workers": failed, "tokens": tokens, "model_calls": calls}


IMPLS = {"honeycomb": run_honeycomb, "openai client": run_bare}


def measure(scenario: Scenario, headers: str, impl: str) -> dict[str, Any]:
    """One run of ``impl`` against a fresh quota told by ``headers``."""
    import openai  # noqa: F401 (loaded before the clock starts, not in the run)

    with Server(scenario, headers) as server:
        tally = Tally()
        started = time.perf_counter()
        outcome = asyncio.run(IMPLS[impl](scenario, server.base_url, tally))
        wall = time.perf_counter() - started
    bound = scenario.lower_bound_s(tally.answers - tally.throttled, outcome["tokens"])
    return {
        "impl": impl,
        "headers": headers,
        "scenario": dataclasses.asdict(scenario),
        **outcome,
        "wall_s": wall,
        "lower_bound_s": bound,
        "answers": tally.answers,
        "throttled": tally.throttled,
    }


# --- the table ---------------------------------------------------------------------------


def verdicts(result: dict[str, Any]) -> dict[str, bool]:
    """The targets, met or not: 90% of the quota, 5% of 429s, no failed worker."""
    return {
        "quota": sustained(result) >= 0.9,
        "429s": share_429(result) <= 0.05,
        "failed": result["failed_workers"] == 0,
    }


def sustained(result: dict[str, Any]) -> float:
    """The share of the quota the run sustained: its lower bound over its wall time."""
    return float(result["lower_bound_s"]) / float(result["wall_s"]) if result["wall_s"] else 0.0


def share_429(result: dict[str, Any]) -> float:
    return float(result["throttled"]) / max(int(result["answers"]), 1)


def table(results: Sequence[dict[str, Any]], *, judge: bool, on: str | None = None) -> str:
    """The runs' figures and targets; ``on``: the machine they come from (default: this one)."""
    from benchmarks.fanout import machine

    lines = [
        f"Machine: {on or machine()}. One run each, against a fresh quota served from a process "
        "of its own; targets (Honeycomb): >= 90% of the quota, <= 5% of requests "
        "answered 429, 0 failed workers.",
        "",
        "| limits told by | implementation | wall s | lower bound s | of quota | requests/s "
        "(quota) | tokens/s (quota) | 429s | failed workers | targets |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = Scenario(**r["scenario"])
        wall = float(r["wall_s"])
        rps = f"{r['model_calls'] / wall:.1f} ({s.request_rate:.1f})"
        tps = f"{r['tokens'] / wall:.0f} ({s.token_rate:.0f})"
        met = verdicts(r)
        if r["impl"] != "honeycomb" or not judge:
            judged = "" if judge else "(smoke: not judged)"
        else:
            judged = ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in met.items())
        cells = [r["headers"], r["impl"], f"{wall:.1f}", f"{r['lower_bound_s']:.1f}",
                 f"{sustained(r):.0%}", rps, tps,
                 f"{r['throttled']} of {r['answers']} ({share_429(r):.1%})",
                 str(r["failed_workers"]), judged]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.fanout import RESULTS, results_stem
    from honeycomb.cli.options import user_path

    parser = argparse.ArgumentParser(prog="python -m benchmarks.goodput",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    told = ",".join(HEADERS)
    parser.add_argument("--headers", default=told,
                        help=f"how the server tells its limits: any of {told}")  # fmt: skip
    parser.add_argument("--impls", default=",".join(IMPLS), help="honeycomb,openai client")
    parser.add_argument("--out", type=user_path, default=RESULTS, help="where results are written")
    parser.add_argument("--smoke", action="store_true",
                        help="20 workers against a small quota: runs, not targets")  # fmt: skip
    args = parser.parse_args(argv)
    scenario = SMOKE if args.smoke else Scenario()
    variants = [h.strip() for h in args.headers.split(",") if h.strip()]
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    unknown = sorted(set(variants) - set(HEADERS)) + sorted(set(impls) - set(IMPLS))
    if unknown:
        parser.error(f"unknown {', '.join(unknown)}; headers: {HEADERS}, impls: {tuple(IMPLS)}")
    stem = results_stem(args.out, "goodput")
    results = []
    with stem.with_suffix(".jsonl").open("w") as sink:
        for headers in variants:
            for impl in impls:
                result = measure(scenario, headers, impl)
                sink.write(json.dumps(result) + "\n")
                sink.flush()
                print(".", end="", file=sys.stderr, flush=True)
                results.append(result)
    print(file=sys.stderr)
    text = table(results, judge=not args.smoke)
    stem.with_suffix(".md").write_text(text)
    print(text)
    print(f"results: {stem}.jsonl (.md beside it)")
    mine = [r for r in results if r["impl"] == "honeycomb"]
    if args.smoke:
        # Correctness: every worker ran to an end and was counted; paced by the headers,
        # Honeycomb loses no worker and answers every turn. Told only by 429s, the
        # attempts a worker spends depend on when the machine lets each one start (a
        # busy one bunches them): its failures and 429s are the full run's to judge.
        ran = all(r["failed_workers"] <= scenario.workers for r in results)
        whole = all(
            r["failed_workers"] == 0 and r["answers"] - r["throttled"] == scenario.requests
            for r in mine
            if r["headers"] == "x-ratelimit"
        )
        return 0 if ran and whole and all(r["model_calls"] > 0 for r in mine) else 1
    return 0 if all(all(verdicts(r).values()) for r in mine) else 1


if __name__ == "__main__":
    sys.exit(main())
