"""Models for tests and offline runs, shipped in the library.

- :class:`ScriptedModel` answers from a script: texts, tool calls, full responses, or
  errors to raise. One instance can serve many workers, each conversation following
  its own copy of the script.
- :class:`FunctionModel` answers with a function of the request.

Both record every request they get, so tests can assert on what the model saw. Both
stream too (``stream``): the answer's text goes to the listener word by word
(:func:`stream_text`), so tests and demos see text deltas as a real model sends them.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import msgspec

from runtime.errors import ModelResponseError, ScriptExhausted
from runtime.messages import AssistantMessage, ToolCall, Usage
from runtime.model import ModelRequest, ModelResponse, TextSink
from runtime.models.checks import check_message, kind_of
from runtime.models.tokens import simple_quarter_tokens as quarter_tokens

__all__ = [
    "FunctionModel",
    "ScriptStep",
    "ScriptedModel",
    "call",
    "estimate_usage",
    "stream_text",
    "text_pieces",
]

ScriptStep: TypeAlias = (
    str | ToolCall | Sequence[ToolCall] | AssistantMessage | ModelResponse | BaseException
)
"""One scripted answer: final text, one or several tool calls, a message, a full
response, or an exception to raise (a ``ModelHTTPError(429)`` to test retries ...)."""

Script: TypeAlias = Sequence[ScriptStep]
Latency: TypeAlias = float | Callable[[ModelRequest], float]

_ids = itertools.count(1)
_JSON = msgspec.json.Encoder()


def call(
    name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str | None = None
) -> ToolCall:
    """A tool call for a script; ``arguments`` as a dict (dumped to JSON) or raw text."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}))
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=text)


def estimate_usage(request: ModelRequest, message: AssistantMessage) -> Usage:
    """A deterministic token estimate (about four ASCII characters a token, and one a
    character of other scripts: see :mod:`runtime.models.tokens`)."""
    prompt = sum(quarter_tokens(getattr(m, "content", None) or "") for m in request.messages)
    prompt += sum(len(_JSON.encode(t.parameters)) for t in request.tools)
    answer = quarter_tokens(message.content or "") + sum(
        quarter_tokens(c.arguments) + len(c.name) for c in message.tool_calls
    )
    return Usage(input_tokens=max(1, prompt // 4), output_tokens=max(1, answer // 4))


_PIECE = re.compile(r"\s*\S+\s*|\s+")


def text_pieces(text: str) -> list[str]:
    """``text`` in word-sized pieces (each word with the spaces around it), as a model
    streams it; joined, they are the text."""
    return _PIECE.findall(text)


async def stream_text(text: str | None, on_text: TextSink, *, over_s: float = 0.0) -> None:
    """Give ``text`` to ``on_text`` piece by piece (:func:`text_pieces`), the pieces
    spread over ``over_s`` seconds (or one event-loop yield apart)."""
    pieces = text_pieces(text or "")
    gap = over_s / len(pieces) if pieces else 0.0
    for piece in pieces:
        if gap > 0:
            await asyncio.sleep(gap)
        else:
            await asyncio.sleep(0)
        on_text(piece)


class ScriptedModel:
    """Answers each call with the next step of a script.

    Args:
        script: One script that every conversation follows from its first step, each
            at its own position (requests naming no conversation share one
            position); or a mapping from conversation key to its own script; or a
            function that makes the script for a new key.
        latency: Seconds to wait before each answer (or a function of the request).
        key: How a request names its conversation; default ``request.conversation``.
        name: Reported as the model name.

    Raises:
        ScriptExhausted: from :meth:`complete`, when a conversation asks for more
            steps than its script has.
    """

    def __init__(
        self,
        script: Script | Mapping[str, Script] | Callable[[str], Script],
        *,
        latency: Latency = 0.0,
        key: Callable[[ModelRequest], str | None] | None = None,
        name: str = "scripted",
    ) -> None:
        self._shared: Script | None = None
        self._scripts: dict[str, Script] = {}
        self._factory: Callable[[str], Script] | None = None
        if isinstance(script, Mapping):
            self._scripts = dict(script)
        elif callable(script):
            self._factory = script
        else:
            self._shared = script
        self._positions: dict[str | None, int] = {}
        self._latency = latency
        self._key = key or (lambda request: request.conversation)
        self.name = name
        self.requests: list[ModelRequest] = []

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self.name!r}, calls={len(self.requests)})"

    def requests_for(self, key: str | None) -> list[ModelRequest]:
        """The requests one conversation made, in order."""
        return [r for r in self.requests if self._key(r) == key]

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        key = self._key(request)
        script = self._script_for(key)
        position = self._positions.get(key, 0)
        self._positions[key] = position + 1
        latency = self._latency(request) if callable(self._latency) else self._latency
        if latency > 0:
            await asyncio.sleep(latency)
        else:
            await asyncio.sleep(0)
        if position >= len(script):
            raise ScriptExhausted(key, position + 1)
        return _as_response(script[position], request, self)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """:meth:`complete`, its text then given to ``on_text`` word by word."""
        response = await self.complete(request)
        await stream_text(response.message.content, on_text)
        return response

    def _script_for(self, key: str | None) -> Script:
        if self._shared is not None:
            return self._shared
        if key is None:
            raise ValueError(
                "this ScriptedModel keeps one script per conversation, but the request names "
                "none; set ModelRequest.conversation or pass key="
            )
        found = self._scripts.get(key)
        if found is None:
            if self._factory is None:
                known = ", ".join(sorted(self._scripts)) or "none"
                raise ValueError(f"no script for conversation {key!r}; scripted: {known}")
            found = self._scripts[key] = self._factory(key)
        return found


ModelFunction: TypeAlias = Callable[
    [ModelRequest],
    ModelResponse | AssistantMessage | str | Awaitable[ModelResponse | AssistantMessage | str],
]


class FunctionModel:
    """Answers with ``fn(request)``, sync or async, returning a response, a message or text.

    Exceptions raised by ``fn`` propagate, so it can also simulate failures.

    Args:
        fn: Makes each answer.
        name: Reported as the model name, and what its repr and errors call it
            (default: the function's name there, ``function`` as the model name).
    """

    def __init__(self, fn: ModelFunction, *, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or "function"
        self._shown = name if name is not None else getattr(fn, "__name__", repr(fn))
        self.requests: list[ModelRequest] = []

    def __repr__(self) -> str:
        return f"FunctionModel({self._shown!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        answer = self.fn(request)
        if inspect.isawaitable(answer):
            answer = await answer
        else:
            await asyncio.sleep(0)
        return _as_response(answer, request, self)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """:meth:`complete`, its text then given to ``on_text`` word by word."""
        response = await self.complete(request)
        await stream_text(response.message.content, on_text)
        return response


def _as_response(
    step: Any, request: ModelRequest, model: ScriptedModel | FunctionModel
) -> ModelResponse:
    """The response for one answer; a malformed one fails here as the loop would fail
    it (a :class:`ModelResponseError` naming the field), before its usage is counted."""
    if isinstance(step, BaseException):
        raise step
    if isinstance(step, ModelResponse):
        return step  # checked by the loop, as any model's response
    if isinstance(step, str):
        message = AssistantMessage(content=step)
    elif isinstance(step, ToolCall):
        message = AssistantMessage(tool_calls=(step,))
    elif isinstance(step, AssistantMessage):
        message = step
    elif isinstance(step, Sequence) and all(isinstance(s, ToolCall) for s in step):
        message = AssistantMessage(tool_calls=tuple(step))
    else:
        raise ModelResponseError(
            f"model {model!r} returned {kind_of(step)}, not a ModelResponse, an "
            "AssistantMessage, tool calls or text"
        )
    message = check_message(message, model)
    finish = "tool_calls" if message.tool_calls else "stop"
    return ModelResponse(
        message=message,
        usage=estimate_usage(request, message),
        finish_reason=finish,
        model=model.name,
    )
