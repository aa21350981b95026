"""The floor: the same workload as a hand-written asyncio loop with no framework.

It does the work any agent loop must do and nothing more: keeps a message list, asks
the fake model (same latency, same answers, same observation check), parses and checks
the JSON arguments of each call, runs the calls of a turn concurrently (or one by one
when they have side effects), appends the observations in call order, and joins the
answers at the end.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from benchmarks.spec import Counts, Params, lookup_value, pause, verdict


async def _model(
    params: Params, worker: int, messages: list[dict[str, Any]], counts: Counts
) -> dict[str, Any]:
    turn = 1 + sum(1 for m in messages if m["role"] == "assistant")
    counts.model_call(params, worker, turn, [m["content"] for m in messages if m["role"] == "tool"])
    await pause(params.lm)
    if turn < params.k:
        calls = [
            {"id": f"c{turn}-{j}", "name": "lookup",
             "arguments": json.dumps({"key": f"{worker}-{turn}-{j}"})}
            for j in range(params.t)
        ]  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": calls}
    return {"role": "assistant", "content": f"done-{worker}", "tool_calls": []}


async def _lookup(params: Params, call: dict[str, Any], counts: Counts) -> dict[str, Any]:
    args = json.loads(call["arguments"])
    key = args["key"]
    if not isinstance(key, str):
        raise TypeError("key must be a string")
    counts.tool_calls += 1
    await pause(params.lt)
    return {"role": "tool", "tool_call_id": call["id"], "content": lookup_value(key)}


async def _worker(params: Params, worker: int, counts: Counts) -> str:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a worker."},
        {"role": "user", "content": f"task {worker}"},
    ]
    while True:
        reply = await _model(params, worker, messages, counts)
        messages.append(reply)
        if not reply["tool_calls"]:
            return str(reply["content"])
        if params.side_effects:
            for call in reply["tool_calls"]:
                messages.append(await _lookup(params, call, counts))
        else:
            results = await asyncio.gather(
                *(_lookup(params, c, counts) for c in reply["tool_calls"])
            )
            messages.extend(results)


async def run_floor(params: Params) -> dict[str, Any]:
    """Run the workload once on the floor; returns counts and validity."""
    counts = Counts()
    answers = await asyncio.gather(*(_worker(params, i, counts) for i in range(params.n)))
    return verdict(params, counts, "\n".join(answers).split("\n"))
