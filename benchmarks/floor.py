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

from benchmarks.spec import Params, expected_observation, pause


class _Counts:
    model_calls = 0
    tool_calls = 0
    broken = 0


async def _model(
    params: Params, worker: int, messages: list[dict[str, Any]], counts: _Counts
) -> dict[str, Any]:
    counts.model_calls += 1
    turn = 1 + sum(1 for m in messages if m["role"] == "assistant")
    seen = [m["content"] for m in messages if m["role"] == "tool"]
    wanted = [expected_observation(worker, d, j) for d in range(1, turn) for j in range(params.t)]
    if seen != wanted:
        counts.broken += 1
    await pause(params.lm)
    if turn < params.k:
        calls = [
            {"id": f"c{turn}-{j}", "name": "lookup",
             "arguments": json.dumps({"key": f"{worker}-{turn}-{j}"})}
            for j in range(params.t)
        ]  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": calls}
    return {"role": "assistant", "content": f"done-{worker}", "tool_calls": []}


async def _lookup(params: Params, call: dict[str, Any], counts: _Counts) -> dict[str, Any]:
    args = json.loads(call["arguments"])
    key = args["key"]
    if not isinstance(key, str):
        raise TypeError("key must be a string")
    counts.tool_calls += 1
    await pause(params.lt)
    worker, turn, index = key.split("-")
    content = expected_observation(int(worker), int(turn), int(index))
    return {"role": "tool", "tool_call_id": call["id"], "content": content}


async def _worker(params: Params, worker: int, counts: _Counts) -> str:
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
    counts = _Counts()
    answers = await asyncio.gather(*(_worker(params, i, counts) for i in range(params.n)))
    joined = "\n".join(answers)
    problems = []
    if counts.broken:
        problems.append(f"{counts.broken} model calls saw wrong observations")
    if counts.model_calls != params.model_calls:
        problems.append(f"model calls {counts.model_calls} != {params.model_calls}")
    if counts.tool_calls != params.tool_calls:
        problems.append(f"tool calls {counts.tool_calls} != {params.tool_calls}")
    if set(joined.split("\n")) != {f"done-{i}" for i in range(params.n)}:
        problems.append("answers missing from the aggregate")
    return {"model_calls": counts.model_calls, "tool_calls": counts.tool_calls, "events": 0,
            "valid": not problems, "problems": problems}  # fmt: skip
