"""Scenario K: a 50-message conversation (a session), its context kept by a rolling
summary, next to the whole conversation sent every turn.

    python -m benchmarks.conversation
    python -m benchmarks.conversation --svg benchmarks/reference/conversation.svg

One session of a hive (a planner, a researcher, an aggregator) on the offline model
takes 50 messages, one after the other; the first plants a code word. Each message is
a run whose planner and aggregator are sent the conversation before it. Two runs of
the same 50 messages: the session's conversation kept within a budget of 1,000 tokens
by compaction's rolling summary (folding once it would pass 750, the last 3 turns
kept), and the whole conversation (a budget no conversation reaches). Reported, turn
by turn: the input tokens the turn sent in all (planner, worker, aggregator and
summary calls), and the tokens of the conversation in its planner's request; and
whether the code word is still in what the planner reads at turn 50. Counts, not
timings: every figure is the same on any machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.context import Check
from honeycomb import (
    Compaction,
    Executor,
    ModelRequest,
    ModelResponse,
    OfflineModel,
    Policy,
    Role,
    SessionPolicy,
    UserMessage,
    WrapperModel,
)
from honeycomb.run.prompts import conversation_of
from workers.context import estimate_tokens

TURNS = 50
BUDGET_TOKENS = 1_000
TRIGGER_TOKENS = 750
KEEP_TURNS = 3
CODE_WORD = "ZEBRA-42"
LABEL = f"{TURNS} messages, {BUDGET_TOKENS:,}-token conversation budget"
IMPLS = ("rolling summary", "whole conversation")
CITIES = ("Rome", "Oslo", "Lima", "Kyiv", "Paris", "Madrid", "Porto", "Lisbon", "Berlin", "Vienna")


def message(turn: int) -> str:
    """The conversation's message ``turn`` (from 1): the first plants the code word."""
    city = CITIES[(turn - 1) % len(CITIES)]
    if turn == 1:
        return f"Remember the code word {CODE_WORD}. Find the weather in {city}."
    return f"Find the weather in {city} for the trip's day {turn}."


class Recorder(WrapperModel):
    """Passes calls through to the model and keeps the requests."""

    def __init__(self, inner: OfflineModel) -> None:
        super().__init__(inner)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self.inner.complete(request)


@dataclass(frozen=True)
class Figures:
    """What one run of the conversation sent, turn by turn."""

    impl: str
    sent: tuple[int, ...]  # input tokens each turn sent in all
    conversation: tuple[int, ...]  # tokens of the conversation in each planner request
    summary_calls: int
    code_word_kept: bool
    valid: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": "K",
            "label": LABEL,
            "impl": self.impl,
            "sent_per_turn": list(self.sent),
            "conversation_tokens": list(self.conversation),
            "largest_conversation_tokens": max(self.conversation),
            "total_input_tokens": sum(self.sent),
            "summary_calls": self.summary_calls,
            "code_word_kept": self.code_word_kept,
            "valid": self.valid,
        }


ROLES = [
    Role(name="planner"),
    Role(name="researcher", description="Finds facts about cities and their weather."),
    Role(name="aggregator"),
]


def policy(impl: str) -> Policy:
    budget = BUDGET_TOKENS if impl == "rolling summary" else 10_000_000
    trigger = TRIGGER_TOKENS if impl == "rolling summary" else None
    context = Compaction(budget_tokens=budget, trigger_tokens=trigger, keep_turns=KEEP_TURNS)
    return Policy(sessions=SessionPolicy(context=context))


def shown_conversation(request: ModelRequest) -> str:
    """The conversation a planner's request shows ('' on the first turn)."""
    return conversation_of(str(request.messages[1].content) if len(request.messages) > 1 else "")


async def run_one(impl: str, turns: int = TURNS) -> Figures:
    """One conversation of ``turns`` messages; its figures."""
    model = Recorder(OfflineModel(latency=0.0))
    executor = Executor(ROLES, model, policy=policy(impl), log_events=False)
    session = executor.session("bench")
    sent: list[int] = []
    shown: list[int] = []
    statuses: list[str] = []
    last = ""
    for turn in range(1, turns + 1):
        before = len(model.requests)
        result = await session.run(message(turn))
        statuses.append(result.status)
        sent.append(result.usage.input_tokens)
        planners = [r for r in model.requests[before:] if r.output is not None]
        last = shown_conversation(planners[-1]) if planners else ""
        shown.append(estimate_tokens([UserMessage(content=last)]) if last else 0)
    summaries = sum(1 for r in model.requests if not r.tools and r.output is None and _folds(r))
    return Figures(
        impl=impl,
        sent=tuple(sent),
        conversation=tuple(shown),
        summary_calls=summaries,
        code_word_kept=CODE_WORD in last,
        valid=all(s == "ok" for s in statuses) and len(sent) == turns,
    )


def _folds(request: ModelRequest) -> bool:
    from workers.compaction import is_summary_request

    return is_summary_request(request)


def measure(impls: Sequence[str] = IMPLS, turns: int = TURNS) -> list[dict[str, Any]]:
    """The figures of each run, as JSON lines hold them."""
    return [asyncio.run(run_one(impl, turns)).as_dict() for impl in impls]


def targets(results: Sequence[dict[str, Any]]) -> list[Check]:
    """The scenario's targets: no turn's conversation over the budget; the tokens sent
    per turn over the last ten turns at most 40% of the whole conversation's; the code
    word of message 1 still read at the last turn."""
    by = {r["impl"]: r for r in results}
    mine, whole = by["rolling summary"], by["whole conversation"]
    tail = slice(-10, None)
    share = sum(mine["sent_per_turn"][tail]) / sum(whole["sent_per_turn"][tail])
    valid = all(r["valid"] for r in results)
    largest = mine["largest_conversation_tokens"]
    return [
        Check(f"conversation within the budget ({BUDGET_TOKENS:,}) every turn", f"{largest:,}",
              valid and largest <= BUDGET_TOKENS),
        Check("tokens sent per turn, last 10 turns, <= 40% of the whole conversation's",
              f"{share:.1%}", valid and share <= 0.40),
        Check(f"message 1's code word read at turn {len(mine['sent_per_turn'])}",
              "yes" if mine["code_word_kept"] else "no", valid and mine["code_word_kept"]),
    ]  # fmt: skip


SHOWN_TURNS = (1, 2, 5, 10, 20, 30, 40, 50)


def table(results: Sequence[dict[str, Any]]) -> str:
    """Tokens sent at some turns, for each run, then the targets."""
    turns = [t for t in SHOWN_TURNS if t <= len(results[0]["sent_per_turn"])]
    lines = [
        f"K conversation: one session, {TURNS} messages, a {BUDGET_TOKENS:,}-token "
        f"conversation budget (folds past {TRIGGER_TOKENS:,}, keeps {KEEP_TURNS} turns)",
        "",
        "| run | " + " | ".join(f"turn {t}" for t in turns) + " | in all | summary calls |",
        "|---|" + "---|" * (len(turns) + 2),
    ]
    for r in results:
        cells = [f"{r['sent_per_turn'][t - 1]:,} ({r['conversation_tokens'][t - 1]:,})"
                 for t in turns]  # fmt: skip
        lines.append(
            f"| {r['impl']} | "
            + " | ".join(cells)
            + f" | {r['total_input_tokens']:,} | {r['summary_calls']} |"
        )
    lines += [
        "",
        "Each cell: the input tokens the turn sent in all (the conversation's own in its "
        "planner's request).",
        "",
        "| target | figure | result |",
        "|---|---|---|",
    ]
    for check in targets(results):
        lines.append(f"| {check.name} | {check.figure} | {'met' if check.met else 'MISSED'} |")
    return "\n".join(lines) + "\n"


def svg(results: Sequence[dict[str, Any]]) -> str:
    """The tokens each turn sent, a line per run, and the conversation budget."""
    width, height, pad = 640, 320, 48
    top = max(max(r["sent_per_turn"]) for r in results)
    turns = len(results[0]["sent_per_turn"])

    def point(turn: int, tokens: float) -> str:
        x = pad + (width - 2 * pad) * (turn - 1) / max(turns - 1, 1)
        y = height - pad - (height - 2 * pad) * tokens / top
        return f"{x:.1f},{y:.1f}"

    colors = {"rolling summary": "#1f77b4", "whole conversation": "#d62728"}
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{pad}" y="20">Input tokens sent per turn, {turns}-message conversation</text>',
    ]
    for r in results:
        points = " ".join(point(t, v) for t, v in enumerate(r["sent_per_turn"], start=1))
        color = colors.get(r["impl"], "black")
        lines.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
        x, y = point(turns, r["sent_per_turn"][-1]).split(",")
        lines.append(
            f'<text x="{float(x) - 150}" y="{float(y) - 6}" fill="{color}">{r["impl"]}</text>'
        )
    budget = point(1, BUDGET_TOKENS).split(",")[1]
    lines += [
        f'<line x1="{pad}" x2="{width - pad}" y1="{budget}" y2="{budget}" stroke="gray" '
        'stroke-dasharray="4 4"/>',
        f'<text x="{pad + 4}" y="{float(budget) - 4}" fill="gray">conversation budget '
        f"({BUDGET_TOKENS:,})</text>",
        f'<text x="{pad}" y="{height - 16}">turn 1</text>',
        f'<text x="{width - pad - 40}" y="{height - 16}">turn {turns}</text>',
        f'<text x="4" y="{pad}">{top:,}</text>',
        "</svg>",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenario, print its table (and write the figure, the JSON lines); 1
    when a target is missed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conversation")
    parser.add_argument("--svg", default=None, help="write the figure to this file")
    parser.add_argument("--jsonl", default=None, help="write the results to this file")
    args = parser.parse_args(argv)
    results = measure()
    sys.stdout.write(table(results))
    if args.svg:
        with open(args.svg, "w", encoding="utf-8") as out:
            out.write(svg(results))
    if args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(r) + "\n" for r in results)
    return 0 if all(c.met for c in targets(results)) else 1


if __name__ == "__main__":
    sys.exit(main())
