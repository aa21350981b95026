"""The model of every cell: one function of the request that plays every part (the
planner and the lead, the workers, the aggregator, the judges, the summarizer), on a
``FunctionModel`` that writes each call it answered to the cell's ledger.

It keeps no state between calls, so a worker resumed in another life, or moved to a
Ray actor, is answered as it would have been: a worker's next turn is read from its
own last answer, which starts ``[turn K]`` (the newest turn is always in the context,
whatever compaction folded). Its usage is exact (``estimate_tokens`` of what it was
sent), so a test can add up what a run spent.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel

from honeycomb.run.conversation import CONVERSATION_HEADER
from honeycomb.run.prompts import parse_catalog, parse_results
from runtime import (
    AssistantMessage,
    Message,
    ModelConnectionError,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from runtime.model import Model, TextSink, WrapperModel, call_model
from runtime.testing import FunctionModel, stream_text
from tests.interactions.ledger import append, now
from workers.compaction import is_summary_request
from workers.context import estimate_tokens

__all__ = ["Brain", "Call", "LoggedModel", "Script"]

MARK = re.compile(r"\[turn (\d+)\]")
ROLE_LINE = re.compile(r"^You are the ([A-Za-z0-9_-]+) worker\.")
CORRECTION = "was not accepted"
FORBIDDEN = "forbidden"
"""What an input judge refuses in an instruction, and an argument guard in a call."""


@dataclass(frozen=True)
class Call:
    """A tool call of a script; in its string arguments ``{n}`` is the worker's part
    number (from ``part N`` in its task), ``{role}`` its role and ``{w}`` the last part
    of its name (``s1``; a nested worker's, the id of the call that runs it)."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def made(self, **values: Any) -> dict[str, Any]:
        return {k: v.format(**values) if isinstance(v, str) else v for k, v in self.args.items()}


Script = tuple[tuple[Call, ...], ...]
"""A role's turns, each the calls of one model answer; then the final answer."""


@dataclass(frozen=True)
class Brain:
    """Answers every request of a cell's run.

    Attributes:
        scripts: Each working role's turns.
        plan: The subtasks of the first plan.
        rounds: A lead's later rounds: its subtasks (none: done; None: an answer
            that is no plan at all, every time it is asked).
        secret: Written in the first final answer of the ``guarded`` roles (their
            output guards refuse it).
        guarded: The roles with output guards.
        summary_chars: How long a summary is (then cut to the request's output
            limit, as a model would, if the request has one).
        text: Speak the text tool protocol (the model sees no tools).
        pause: Yield to the event loop inside every call (calls can then overlap).
    """

    scripts: Mapping[str, Script]
    plan: Sequence[Mapping[str, Any]]
    rounds: Mapping[int, Sequence[Mapping[str, Any]] | None] = field(default_factory=dict)
    secret: str | None = None
    guarded: frozenset[str] = frozenset()
    summary_chars: int = 200
    text: bool = False
    pause: bool = False

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        if self.pause:
            await anyio.lowlevel.checkpoint()
        kind, role = describe(request)
        content, calls = self._answer(kind, role, request)
        if calls and self.text:
            content, calls = (content or "") + "\n" + _actions(calls), ()
        message = AssistantMessage(content=content, tool_calls=calls)
        said = len(content or "") + sum(len(c.name) + len(c.arguments) for c in calls)
        usage = Usage(
            input_tokens=estimate_tokens(request.messages, request.tools),
            output_tokens=max(1, said // 4),
        )
        finish = "tool_calls" if calls else "stop"
        return ModelResponse(message=message, usage=usage, finish_reason=finish, model="brain")

    def _answer(
        self, kind: str, role: str, request: ModelRequest
    ) -> tuple[str | None, tuple[ToolCall, ...]]:
        users = _users(request)
        last = users[-1] if users else ""
        if kind == "summary":
            return self._summary(request), ()
        if kind == "judge":
            return ("It asks for something forbidden." if FORBIDDEN in last else "PASS"), ()
        if kind == "plan":  # its task, not a correction that may follow it
            return self._planned(users[0] if users else ""), ()
        if kind == "aggregate":
            _, results = parse_results(last)
            merged = "; ".join(f"{r.id}={'ok' if r.ok else 'failed'}" for r in results)
            if self.secret and not _corrected(request):
                return f"{self.secret} in the merged answer", ()  # its guard refuses it
            return f"merged: {merged}", ()
        return self._work(role, request)

    def _summary(self, request: ModelRequest) -> str:
        text = ("[summary] what the folded turns found. " * 200)[: self.summary_chars]
        limit = getattr(request, "max_output_tokens", None) or getattr(request, "max_tokens", None)
        return text[: limit * 4] if isinstance(limit, int) and limit > 0 else text

    def _planned(self, text: str) -> str:
        roles = {entry.role for entry in parse_catalog(text)[1]}
        if "fact" in roles and "bee" not in roles:  # the sub-run of a hive tool
            task = text.split("\n", 1)[0].removeprefix("Task: ")
            return json.dumps({"subtasks": [{"id": "s1", "role": "fact", "instruction": task}]})
        found = re.search(r"Planning round (\d+)", text)
        if found is None:
            return json.dumps({"subtasks": list(self.plan)})
        added = self.rounds.get(int(found.group(1)), [])
        return "no plan this time" if added is None else json.dumps({"subtasks": list(added)})

    def _work(self, role: str, request: ModelRequest) -> tuple[str | None, tuple[ToolCall, ...]]:
        task = _users(request)[0] if _users(request) else ""
        part = re.search(r"part (\d+)", task)
        n = int(part.group(1)) if part else 0
        turn = _next_turn(request.messages)
        script = self.scripts.get(role, ())
        w = (request.conversation or "").rsplit("/", 1)[-1]
        if turn < len(script):
            calls = tuple(
                ToolCall(
                    id=f"call_{uuid.uuid4().hex[:10]}",
                    name=c.tool,
                    arguments=json.dumps(c.made(n=n, role=role, w=w)),
                )
                for c in script[turn]
            )
            return f"[turn {turn}]", calls
        if self.secret and role in self.guarded and not _corrected(request):
            return f"[turn {turn}] {self.secret}: a draft of {role} part {n}", ()
        return f"[turn {turn}] {role} done with part {n}", ()


def describe(request: ModelRequest) -> tuple[str, str]:
    """What a request is for (``plan``, ``aggregate``, ``judge``, ``summary`` or
    ``work``), and the role asking."""
    if is_summary_request(request):
        return "summary", ""
    first = request.messages[0] if request.messages else None
    system = first.content if isinstance(first, SystemMessage) else ""
    if "You are a guard" in system:
        return "judge", ""
    if request.output is not None and request.output.name == "Plan":
        return "plan", "planner"
    found = ROLE_LINE.match(system)
    role = found.group(1) if found else ""
    return ("aggregate" if role == "aggregator" else "work"), role


def shape_problem(messages: Sequence[Message]) -> str:
    """How ``messages`` break "exactly one observation per call, in call order", if
    they do (the observations of a turn follow its calls, one each, in their order)."""
    expected: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            if not expected:
                return f"an observation of {message.tool_call_id} answers no call"
            want = expected.pop(0)
            if message.tool_call_id != want:
                return f"the observation of {message.tool_call_id} came where {want}'s belongs"
            continue
        if expected:
            return f"calls {expected} have no observation before the next message"
        if isinstance(message, AssistantMessage):
            expected = [c.id for c in message.tool_calls]
    return ""  # calls left at the end: the request that asks for them comes next


class LoggedModel(FunctionModel):
    """A ``FunctionModel`` that writes every call it answered to the ledger, once the
    answer is given (a call cancelled before it returned is not written: it was not
    answered), with its life, conversation, role, kind, usage and times."""

    def __init__(self, brain: Brain, ledger: str, life: int, scope: str = "run") -> None:
        super().__init__(brain, name="brain")
        self.ledger = ledger
        self.life = life
        self.scope = scope

    async def complete(self, request: ModelRequest) -> ModelResponse:
        start = now()
        response = await super().complete(request)
        self._log(request, response, start)
        return response

    async def stream(self, request: ModelRequest, on_text: Any) -> ModelResponse:
        start = now()
        response = await super().complete(request)
        await stream_text(response.message.content, on_text)
        self._log(request, response, start)
        return response

    def _log(self, request: ModelRequest, response: ModelResponse, start: float) -> None:
        kind, role = describe(request)
        users = _users(request)
        # A planner worker's task (its first message) says the round; corrections follow.
        found = re.search(r"Planning round (\d+)", users[0]) if kind == "plan" and users else None
        append(
            self.ledger,
            {
                "life": self.life,
                "scope": self.scope,
                "round": int(found.group(1)) if found else 1,
                "conversation": request.conversation or "",
                "kind": kind,
                "role": role,
                "input": response.usage.input_tokens,
                "output": response.usage.output_tokens,
                "tools": len(request.tools),
                "final": not response.message.tool_calls,
                "text": response.message.content or "",
                # A session's run tells its planner and aggregator the conversation.
                "told": any(CONVERSATION_HEADER in text for text in users),
                "shape": shape_problem(request.messages),
                "start": start,
                "end": now(),
            },
        )


def _users(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, UserMessage)]


def _corrected(request: ModelRequest) -> bool:
    return any(CORRECTION in text for text in _users(request))


def _next_turn(messages: Sequence[Message]) -> int:
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            found = MARK.search(message.content or "")
            if found:
                return int(found.group(1)) + 1
    return 0


def _actions(calls: Sequence[ToolCall]) -> str:
    """Tool calls written as the text protocol's actions."""
    fence = "`" * 3
    blocks = [
        f'{fence}json\n{{"tool": {json.dumps(c.name)}, "arguments": {c.arguments}}}\n{fence}'
        for c in calls
    ]
    return "\n".join(blocks)


BROKEN = "the connection broke at its first attempt"
"""What every call's first attempt fails with, where the model is flaky."""


class FirstAttemptFails(WrapperModel):
    """A flaky endpoint: the first attempt of every call fails, as a connection that
    broke does (retryable), before its model is asked; an attempt of the same request
    again (its retry) is answered."""

    def __init__(self, inner: Model) -> None:
        super().__init__(inner)
        self._tried: list[ModelRequest] = []  # held: a request's id may be reused

    def _break_first(self, request: ModelRequest) -> None:
        if not any(tried is request for tried in self._tried):
            self._tried.append(request)
            raise ModelConnectionError(BROKEN)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self._break_first(request)
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        self._break_first(request)
        return await call_model(self.inner, request, on_text)
