"""A model without function calling, played by the local test server
(:mod:`tests.support.openai_server`).

:func:`tool_less` refuses any request that carries ``tools`` with a 400, as Ollama
and llama.cpp's server do for a model whose chat template has none, so a test fails
at once if a tool reaches the wire. :func:`offline_answer` answers a chat request
as the offline model does, reading the text tool protocol from the messages alone:
what a local model that follows the instructions would write.
"""

from __future__ import annotations

from typing import Any

import pytest

from honeycomb.offline.model import follow_protocol
from runtime import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    SystemMessage,
    UserMessage,
)
from runtime.models.protocols.text_tools import ProtocolModel
from tests.support.openai_server import Behaviour, RecordedRequest, Responder, error, text

__all__ = ["NO_TOOLS", "offline_answer", "scripted", "spy_on", "tool_less"]

NO_TOOLS = "this model does not support tools"


def tool_less(answer: Responder) -> Responder:
    """``answer``, for requests without ``tools``; a 400 for any other."""

    def respond_without_tools(request: RecordedRequest) -> Behaviour:
        body = request.body
        if isinstance(body, dict) and ("tools" in body or "tool_choice" in body):
            return error(400, NO_TOOLS)
        return answer(request)

    return respond_without_tools


def scripted(*replies: str) -> Responder:
    """Answers ``replies`` in order, one per request (a test fails past the last)."""
    left = list(replies)

    def next_reply(request: RecordedRequest) -> Behaviour:
        if not left:
            raise AssertionError(f"no reply left for request {request.number}")
        return text(left.pop(0))

    return next_reply


def offline_answer(request: RecordedRequest) -> Behaviour:
    """The offline model's answer to a chat request written for the text (or the
    JSON) tool protocol."""
    body = request.body
    asked = ModelRequest(
        messages=tuple(_message(m) for m in body["messages"]),
        output=_output(body.get("response_format")),
    )
    return text(follow_protocol(asked).content or "")


def _message(sent: dict[str, Any]) -> Message:
    role, content = sent["role"], sent.get("content") or ""
    if role == "system":
        return SystemMessage(content=content)
    if role == "user":
        return UserMessage(content=content)
    if role == "assistant" and not sent.get("tool_calls"):
        return AssistantMessage(content=content or None)
    raise AssertionError(f"a tool-less model was sent a {role!r} message with tool calls")


def _output(response_format: dict[str, Any] | None) -> OutputSchema | None:
    if not response_format or response_format.get("type") != "json_schema":
        return None
    schema = response_format["json_schema"]
    return OutputSchema(name=schema["name"], json_schema=schema["schema"])


def spy_on(monkeypatch: pytest.MonkeyPatch, cls: type[ProtocolModel]) -> list[Any]:
    """Every ``(inner model, response)`` of ``cls.complete`` from now on (the test's)."""
    seen: list[Any] = []
    real = cls.complete

    async def spied(self: ProtocolModel, request: ModelRequest) -> ModelResponse:
        response = await real(self, request)
        seen.append((self.inner, response))
        return response

    monkeypatch.setattr(cls, "complete", spied)
    return seen
