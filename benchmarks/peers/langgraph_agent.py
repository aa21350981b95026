"""The standard fan-out workload, run through LangGraph's prebuilt ReAct agent.

N workers run concurrently (``asyncio.gather`` over N ``ainvoke`` calls of one compiled
agent graph, one per worker), each with the system prompt "You are a worker." and the
user message "task <i>". Each takes K model turns: on turns 1..K-1 the fake model asks
for T parallel calls to an async ``lookup(key)`` tool in one assistant message, with
JSON-string arguments, and on turn K it answers ``done-<i>``. The answers are joined
with newlines, as in ``benchmarks.floor``.

Extension points used, as a LangGraph user would:

- the model is a ``langchain_core`` ``BaseChatModel`` subclass (``_agenerate`` and
  ``_generate``, plus ``bind_tools``, which formats the tools as OpenAI tool schemas
  and binds them, as provider integrations do). Its tool calls are raw OpenAI-style
  ``tool_calls`` with JSON-string arguments, which ``AIMessage`` parses into
  ``tool_calls``; the tool's pydantic schema then validates them;
- the tool is an async function under ``langchain_core.tools.tool``;
- the agent loop is ``langgraph.prebuilt.create_react_agent`` with its defaults
  (``version="v2"``: each tool call of a turn is its own graph task, sent with
  ``Send``, and the tasks of a step run concurrently). Its successor,
  ``langchain.agents.create_agent``, lives in the separate ``langchain`` package.

The fake model works out the worker from the "task <i>" message and the turn from the
number of earlier ``AIMessage``s in the history the agent passes it, and checks that
every earlier observation came back, in order.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10
from langsmith import tracing_context
from pydantic import ConfigDict

from benchmarks.spec import Counts, Params, lookup, pause, verdict

__all__ = ["VERSION", "run"]

VERSION: str = version("langgraph")


class BenchChatModel(BaseChatModel):
    """The fake model: a real chat model that scripts the workload and checks that the
    agent delivered every observation of earlier turns, in order."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    params: Params
    counts: Counts

    @property
    def _llm_type(self) -> str:
        return "bench-fake"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        worker, turn = self._check(messages)
        await pause(self.params.lm)
        return self._answer(worker, turn)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # The agent is run with ainvoke, so only _agenerate is called; the sync path
        # answers the same way, without the latency.
        worker, turn = self._check(messages)
        return self._answer(worker, turn)

    def _check(self, messages: list[BaseMessage]) -> tuple[int, int]:
        """The worker and turn, from the history; counts the call and checks it."""
        task = next(m for m in messages if isinstance(m, HumanMessage))
        worker = int(str(task.content).removeprefix("task "))
        turn = 1 + sum(1 for m in messages if isinstance(m, AIMessage))
        seen = [m.content for m in messages if isinstance(m, ToolMessage)]
        self.counts.model_call(self.params, worker, turn, seen)
        return worker, turn

    def _answer(self, worker: int, turn: int) -> ChatResult:
        if turn < self.params.k:
            raw = [
                {
                    "id": f"c{turn}-{j}",
                    "type": "function",
                    "function": {
                        "name": "lookup",
                        "arguments": json.dumps({"key": f"{worker}-{turn}-{j}"}),
                    },
                }
                for j in range(self.params.t)
            ]
            # AIMessage parses the raw calls' JSON arguments into its tool_calls.
            message = AIMessage(content="", additional_kwargs={"tool_calls": raw})
        else:
            message = AIMessage(content=f"done-{worker}")
        return ChatResult(generations=[ChatGeneration(message=message)])


async def run(params: Params) -> dict[str, Any]:
    """Run the workload once through LangGraph; returns counts and validity."""
    counts = Counts()
    model = BenchChatModel(params=params, counts=counts)
    with warnings.catch_warnings():
        # create_react_agent still works in LangGraph 1.x but warns that it moved to
        # langchain.agents.create_agent (the langchain package, not installed here).
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        agent = create_react_agent(
            model, [tool(lookup(params, counts))], prompt="You are a worker."
        )
    # A model turn and a tool step are one graph step each, and the agent stops
    # asking for tools when fewer than 2 steps remain: 2(K+1) steps allow K+1 turns.
    config: RunnableConfig = {"recursion_limit": 2 * (params.k + 1)}
    if params.side_effects:
        # LangGraph runs a step's tasks (here one per tool call) one at a time, in
        # order, under max_concurrency=1.
        config["max_concurrency"] = 1

    async def worker(i: int) -> str:
        state = await agent.ainvoke({"messages": [("user", f"task {i}")]}, config)
        return str(state["messages"][-1].content)

    # No LangSmith tracing (it would post runs to api.smith.langchain.com if the
    # environment turned it on): disabled for this run's context, which every
    # worker's task inherits. LangGraph and langchain-core have no other telemetry.
    with tracing_context(enabled=False):
        answers = await asyncio.gather(*(worker(i) for i in range(params.n)))
    return verdict(params, counts, answers)
