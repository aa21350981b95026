"""The standard fan-out workload, run through the OpenAI Agents SDK's own agent loop.

N workers run concurrently, one ``Runner.run`` per worker under ``asyncio.gather`` (how a
user fans out with this SDK), all on one ``Agent`` with the instructions "You are a
worker." and the input "task <i>". Each worker takes K model turns; on turns 1..K-1 the
fake model asks for T parallel calls to an async ``lookup(key)`` tool (JSON-string
arguments, so the SDK parses and validates them); on turn K it answers ``done-<i>``. The
answers are joined with newlines and checked as ``benchmarks.floor.run_floor`` checks
its own.

Extension points used, all public:

- the fake model subclasses ``agents.models.interface.Model`` (``get_response``; there
  is no streaming here) and is given to the agent as ``Agent(model=...)``, so the SDK's
  loop builds every request and the model reads the worker and the turn from the input
  items it is handed, and checks that every earlier observation came back in order;
- the tool is an async function wrapped by ``agents.function_tool``, so it gets the
  SDK's JSON schema (strict mode, the default) and pydantic argument validation;
- ``agents.RunConfig`` turns tracing off for the run and, for side-effecting tools,
  limits local function tools to one at a time
  (``ToolExecutionConfig(max_function_tool_concurrency=1)``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from importlib.metadata import version
from typing import Any

from agents import (
    Agent,
    AgentOutputSchemaBase,
    Handoff,
    ModelResponse,
    ModelSettings,
    RunConfig,
    Runner,
    Tool,
    ToolExecutionConfig,
    TResponseInputItem,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.items import TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelTracing
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam

from benchmarks.spec import Counts, Params, lookup, pause, verdict

__all__ = ["VERSION", "run"]

VERSION: str = version("openai-agents")

# No network here, and nothing may try to reach a real API: the SDK's default trace
# processor exports traces and spans to api.openai.com, so tracing is switched off for
# the whole process (and again per run through RunConfig below). With the model given
# as a Model instance, no OpenAI client is ever built and no API key is read.
set_tracing_disabled(True)


class BenchModel(Model):
    """The fake model: a real SDK ``Model`` that scripts the workload and checks that the
    loop delivered every observation of earlier turns, in order."""

    def __init__(self, params: Params, counts: Counts) -> None:
        self.params = params
        self.counts = counts

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else input
        worker = _worker_of(items)
        turn = 1 + _earlier_responses(items)
        seen = [i["output"] for i in items if i.get("type") == "function_call_output"]
        self.counts.model_call(self.params, worker, turn, seen)
        await pause(self.params.lm)
        output: list[TResponseOutputItem]
        if turn < self.params.k:
            output = [
                ResponseFunctionToolCall(
                    id=f"c{turn}-{j}",
                    call_id=f"c{turn}-{j}",
                    type="function_call",
                    name="lookup",
                    arguments=json.dumps({"key": f"{worker}-{turn}-{j}"}),
                )
                for j in range(self.params.t)
            ]
        else:
            text = ResponseOutputText(type="output_text", text=f"done-{worker}", annotations=[])
            output = [
                ResponseOutputMessage(
                    id=f"m{turn}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the workload does not stream")


def _worker_of(items: Sequence[Any]) -> int:
    """The worker number, from the user message "task <i>"."""
    task = next(i["content"] for i in items if i.get("role") == "user")
    return int(str(task).rsplit(" ", 1)[-1])


def _earlier_responses(items: Sequence[Any]) -> int:
    """How many model responses the history holds: the SDK replays each response's
    output items (function calls, assistant messages) one after another, so every run
    of consecutive output items is one response."""
    responses = 0
    previous = False
    for item in items:
        output = item.get("type") == "function_call" or item.get("role") == "assistant"
        if output and not previous:
            responses += 1
        previous = output
    return responses


async def run(params: Params) -> dict[str, Any]:
    """Run the workload once through the OpenAI Agents SDK; returns counts and validity."""
    counts = Counts()
    # One Agent shared by every worker's run, as the SDK's own parallelization example
    # does. (At every turn the SDK checks that no concurrent run of the same Agent has
    # changed its tools, which costs O(N) per turn; one Agent per worker avoids that.)
    agent: Agent[None] = Agent(
        name="worker",
        instructions="You are a worker.",
        model=BenchModel(params, counts),
        tools=[function_tool(lookup(params, counts))],
    )
    config = RunConfig(
        tracing_disabled=True,  # no trace export to api.openai.com (see above)
        # The SDK starts every function call of a turn at once by default; side-effecting
        # calls run one after another.
        tool_execution=(
            ToolExecutionConfig(max_function_tool_concurrency=1) if params.side_effects else None
        ),
    )
    outcomes = await asyncio.gather(
        *(
            Runner.run(agent, input=f"task {i}", max_turns=params.k + 1, run_config=config)
            for i in range(params.n)
        ),
        return_exceptions=True,
    )
    answers = [str(o.final_output) for o in outcomes if not isinstance(o, BaseException)]
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    return verdict(params, counts, answers, failures)
