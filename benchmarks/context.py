"""Scenario H: one long worker's context, with compaction, with the window only, and
with the whole transcript.

    python -m benchmarks.context
    honeycomb bench --scenario H

One worker reads a 59-page log, a page a turn, and answers on turn 60: 60 model
turns, each tool result 2 KB. Facts are planted in the first ten pages. The offline
model thinks (it follows the log's ``next_page``) and writes the summaries (by rule:
the facts found so far); its token counts are the server's report (four characters
a token). Four runs of the same worker under a 24,000-token context budget:
compaction (rolling summaries, folding once the context would pass a trigger of
6,000 tokens, the budget the window's ceiling), compaction with the default trigger
(the budget itself), the window only (``max_context_chars`` of the budget), and the
whole transcript. Reported: the input tokens sent in all
(summary calls included), the largest single request, and the share of the planted
facts still in what the model is sent at turn 60. Counts, not timings: every figure
is the same on any machine.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from honeycomb import (
    AssistantMessage,
    Event,
    Executor,
    ModelRequest,
    ModelResponse,
    OfflineModel,
    Role,
    ToolMessage,
    WrapperModel,
    tool,
)
from honeycomb.events import CompactionFinished, ModelCallFinished

TURNS = 60
PAGES = TURNS - 1  # a page a turn, then the answer
RESULT_BYTES = 2048
BUDGET_TOKENS = 24_000
TRIGGER_TOKENS = 6_000
KEEP_TURNS = 2
PLANTED = 10
LABEL = f"{TURNS} turns, 2 KB results, {BUDGET_TOKENS // 1000}k budget"
IMPLS = ("compaction", "compaction at the budget", "window only", "whole transcript")
"""The runs, compaction first (what the targets judge); "compaction at the budget"
folds only once the context would pass the budget itself (the default trigger)."""

_FILLER = (
    "The crew walked the line again, checked each valve by hand and wrote down what "
    "they saw, as the manual asks. Nothing out of the ordinary was seen on the walk. "
)


def fact(page: int) -> str:
    """The fact planted on ``page`` (one of the first ten): what a summary must keep."""
    return f"Fact {page}: valve V{page * 7 + 3} reads {page * 113 % 997} kPa"


def page_text(page: int) -> str:
    """The page's JSON, ``RESULT_BYTES`` long: a fact or a reading, then narrative."""
    head = fact(page) if page <= PLANTED else f"Reading {page}: line clear"
    following = page + 1 if page < PAGES else None
    shell = {"page": page, "of": PAGES, "next_page": following, "text": head + "\n"}
    room = RESULT_BYTES - len(json.dumps(shell))
    narrative = (_FILLER * (room // len(_FILLER) + 1))[:room]
    body = json.dumps({**shell, "text": head + "\n" + narrative})
    assert len(body) == RESULT_BYTES, len(body)
    return body


@tool
def read_page(page: int = 1) -> str:
    """Read one page of the maintenance log (pages 1 to 59, in order)."""
    if not 1 <= page <= PAGES:
        raise ValueError(f"the log has pages 1 to {PAGES}, not {page}")
    return page_text(page)


class Recorder(WrapperModel):
    """Passes calls through to the model and keeps the worker turns' requests."""

    def __init__(self, inner: OfflineModel) -> None:
        super().__init__(inner)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.tools:  # a worker turn (the summary calls are tool-less)
            self.requests.append(request)
        return await self.inner.complete(request)


@dataclass(frozen=True)
class Figures:
    """What one run sent."""

    impl: str
    total_input_tokens: int
    largest_request_tokens: int
    facts_retained: float
    model_calls: int
    summary_calls: int
    turns: int
    valid: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": "H",
            "label": LABEL,
            "impl": self.impl,
            "total_input_tokens": self.total_input_tokens,
            "largest_request_tokens": self.largest_request_tokens,
            "facts_retained": self.facts_retained,
            "model_calls": self.model_calls,
            "summary_calls": self.summary_calls,
            "turns": self.turns,
            "valid": self.valid,
        }


def role(impl: str) -> Role:
    """The reader, as each run configures its context."""
    settings: dict[str, Any] = {}
    if impl.startswith("compaction"):
        trigger_tokens = TRIGGER_TOKENS if impl == "compaction" else None
        settings["compaction"] = {
            "budget_tokens": BUDGET_TOKENS,
            "trigger_tokens": trigger_tokens,
            "keep_turns": KEEP_TURNS,
        }
    elif impl == "window only":
        settings["max_context_chars"] = BUDGET_TOKENS * 4
    return Role(
        name="reader",
        description="Reads the maintenance log page by page.",
        instructions="Read every page of the log, in order, and list each fact.",
        tools=("read_page",),
        max_turns=TURNS,
        **settings,
    )


async def run_one(impl: str) -> Figures:
    """One run of the reader; its figures."""
    model = Recorder(OfflineModel(latency=0.0))
    sizes: list[int] = []
    summaries: list[CompactionFinished] = []

    def keep(event: Event) -> None:
        if isinstance(event, ModelCallFinished):
            sizes.append(event.input_tokens)
        elif isinstance(event, CompactionFinished):
            sizes.append(event.input_tokens)
            summaries.append(event)

    executor = Executor(
        [role(impl)], model, tools=[read_page], aggregator="concat",
        on_event=[keep], log_events=False,
    )  # fmt: skip
    task = "Read the whole maintenance log, listing every fact it records."
    result = await executor.run(task, subtasks=[("reader", task)])
    requests = model.requests
    last = requests[-1] if requests else None
    seen = _text(last.messages) if last is not None else ""
    kept = sum(1 for page in range(1, PLANTED + 1) if fact(page) in seen)
    read = sum(1 for m in last.messages if isinstance(m, ToolMessage)) if last else 0
    valid = (
        result.status == "ok"
        and len(requests) == TURNS
        and all(s.status == "ok" for s in summaries)
        and (impl != "whole transcript" or read == PAGES)  # the whole transcript is whole
    )
    return Figures(
        impl=impl,
        total_input_tokens=result.usage.input_tokens,
        largest_request_tokens=max(sizes, default=0),
        facts_retained=kept / PLANTED,
        model_calls=result.usage.model_calls,
        summary_calls=len(summaries),
        turns=len(requests),
        valid=valid,
    )


def _text(messages: Sequence[object]) -> str:
    parts = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            parts.append(message.content or "")
        else:
            parts.append(str(getattr(message, "content", "")))
    return "\n".join(parts)


def measure(impls: Sequence[str] = IMPLS) -> list[dict[str, Any]]:
    """The figures of each run, as JSON lines hold them."""
    return [asyncio.run(run_one(impl)).as_dict() for impl in impls]


@dataclass(frozen=True)
class Check:
    """One target, judged."""

    name: str
    figure: str
    met: bool


def targets(results: Sequence[dict[str, Any]]) -> list[Check]:
    """The scenario's targets: total input tokens <= 35% of the whole transcript's, no
    request over the budget, >= 90% of the planted facts retained at turn 60."""
    by = {r["impl"]: r for r in results}
    mine, whole = by["compaction"], by["whole transcript"]
    share = mine["total_input_tokens"] / whole["total_input_tokens"]
    valid = all(r["valid"] for r in results)
    return [
        Check("input tokens <= 35% of the whole transcript", f"{share:.1%}",
              valid and share <= 0.35),
        Check(f"no request over the budget ({BUDGET_TOKENS:,})",
              f"{mine['largest_request_tokens']:,}",
              valid and mine["largest_request_tokens"] <= BUDGET_TOKENS),
        Check("planted facts retained at turn 60 >= 90%", f"{mine['facts_retained']:.0%}",
              valid and mine["facts_retained"] >= 0.9),
    ]  # fmt: skip


def table(results: Sequence[dict[str, Any]]) -> str:
    """The figures of the three runs, then the targets, marked met or MISSED."""
    lines = [
        f"H context: one worker, {TURNS} turns, {RESULT_BYTES // 1024} KB tool results, "
        f"{BUDGET_TOKENS:,}-token budget (compaction folds past {TRIGGER_TOKENS:,}, keeps "
        f"{KEEP_TURNS} turns)",
        "",
        "| run | input tokens in all | largest request | planted facts at turn 60 "
        "| model calls (summaries) | valid |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['impl']} | {r['total_input_tokens']:,} | {r['largest_request_tokens']:,} "
            f"| {r['facts_retained']:.0%} | {r['model_calls']} ({r['summary_calls']}) "
            f"| {'yes' if r['valid'] else 'INVALID'} |"
        )
    lines += ["", "| target | figure | result |", "|---|---|---|"]
    for check in targets(results):
        lines.append(f"| {check.name} | {check.figure} | {'met' if check.met else 'MISSED'} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenario, print its table; 1 when a target is missed."""
    results = measure()
    sys.stdout.write(table(results))
    return 0 if all(c.met for c in targets(results)) else 1


if __name__ == "__main__":
    sys.exit(main())
