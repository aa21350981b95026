"""The standard fan-out workload, run through pydantic-ai's own agent loop.

N workers run concurrently (``asyncio.gather`` over N ``Agent.run`` calls of one
``Agent``), each with the system prompt "You are a worker." and the user message
"task <i>". Each worker takes K model turns; on turns 1..K-1 the fake model asks for T
parallel calls to an async ``lookup(key)`` tool (JSON-string arguments, so pydantic-ai
parses and validates them against the tool's schema); on turn K it answers
``done-<i>``. The N answers are joined with "\\n", as the trivial aggregator does.

Extension points used, all public:

- the model: ``pydantic_ai.models.function.FunctionModel``, pydantic-ai's model for a
  local function, which its agent loop calls like any other ``Model``. The function
  receives the message history the loop built, works out the worker (from the user
  prompt) and the turn (from the number of earlier ``ModelResponse``s), and checks that
  every earlier observation came back, in order;
- the tool: ``Agent.tool_plain``, which builds the tool's JSON schema and validates the
  arguments; ``sequential=True`` when the calls have side effects, so the calls of a
  turn run one after another, in order.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
from typing import Any

import pydantic_ai
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from benchmarks.spec import Counts, Params, lookup, pause, verdict

__all__ = ["VERSION", "run"]

VERSION: str = importlib.metadata.version("pydantic-ai-slim")

# Nothing here reaches the network: ``FunctionModel`` calls a local function, so no
# provider client is made and no API key is needed, and instrumentation (OpenTelemetry /
# Logfire) is off by default; each agent also sets ``instrument = False`` so that an
# ``Agent.instrument_all()`` elsewhere in the process cannot turn it on. The
# once-per-process first-run banner (printed to stderr, no network) is switched off
# through its public flag to keep the output clean.
pydantic_ai.BANNER_ENABLED = False


def _worker_of(messages: list[ModelMessage]) -> int:
    """The worker number, from the user prompt "task <i>" in the history."""
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return int(part.content.rsplit(" ", 1)[-1])
    raise ValueError("no user prompt in the history")


def _observations(messages: list[ModelMessage]) -> list[Any]:
    """The tool results in the history, in the order the loop delivered them."""
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def _build_agent(params: Params, counts: Counts) -> Agent[None, str]:
    """One agent for the run: the fake model and the ``lookup`` tool."""

    async def fake_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        worker = _worker_of(messages)
        turn = 1 + sum(1 for m in messages if isinstance(m, ModelResponse))
        counts.model_call(params, worker, turn, _observations(messages))
        await pause(params.lm)
        # Usage as a provider reports it (the floor and Honeycomb's model report it too);
        # without it FunctionModel estimates tokens from the whole history on every turn.
        usage = RequestUsage(input_tokens=10, output_tokens=5)
        if turn < params.k:
            calls = [
                ToolCallPart(
                    tool_name="lookup",
                    args=json.dumps({"key": f"{worker}-{turn}-{j}"}),
                    tool_call_id=f"c{turn}-{j}",
                )
                for j in range(params.t)
            ]
            return ModelResponse(parts=calls, usage=usage)
        return ModelResponse(parts=[TextPart(content=f"done-{worker}")], usage=usage)

    agent: Agent[None, str] = Agent(
        FunctionModel(fake_model, model_name="bench"),
        system_prompt="You are a worker.",
    )
    agent.instrument = False  # no spans, no exporters (the default; see above)

    # sequential=True makes each call a barrier that runs alone, so the calls of a turn
    # run one after another in call order; otherwise they run concurrently (as tasks).
    agent.tool_plain(sequential=params.side_effects)(lookup(params, counts))
    return agent


async def run(params: Params) -> dict[str, Any]:
    """Run the workload once through pydantic-ai; returns counts and validity."""
    counts = Counts()
    agent = _build_agent(params, counts)
    limits = UsageLimits(request_limit=params.k + 1)  # K turns needed, K+1 allowed
    results = await asyncio.gather(
        *(agent.run(f"task {i}", usage_limits=limits) for i in range(params.n))
    )
    return verdict(params, counts, [r.output for r in results])
