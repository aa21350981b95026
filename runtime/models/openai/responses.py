"""``OpenAIResponsesModel``: the same :class:`~runtime.model.Model` over OpenAI's
Responses API (``POST /v1/responses``), through the official ``openai.AsyncOpenAI``
client.

The client, retries, rate limits, key masking, error translation and the fallback of
structured output are :class:`~runtime.models.openai.endpoint.OpenAIEndpoint`'s, shared with
the chat adapter. Every call sends the whole conversation as ``input`` items (the
transcript is Honeycomb's, not the endpoint's): messages by role, each tool call as a
``function_call`` item and its observation as a ``function_call_output`` item, keyed
by ``call_id``, and a reasoning model's ``reasoning`` items passed back as they came,
before the message that followed them. Structured output is asked for as
``text.format: json_schema``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from runtime.messages import (
    AssistantMessage,
    Message,
    ReasoningItem,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from runtime.model import ModelRequest, ModelResponse
from runtime.models.openai._responses_body import ResponseStream, parse_response
from runtime.models.openai.endpoint import OpenAIEndpoint, OutputMode
from runtime.models.openai.request import output_instruction, wire_arguments
from runtime.text import valid_text

__all__ = ["OpenAIResponsesModel"]

_ENCRYPTED = "reasoning.encrypted_content"


class OpenAIResponsesModel(OpenAIEndpoint):
    """A model behind an endpoint of OpenAI's Responses API.

    It takes the arguments of :class:`~runtime.models.openai.chat.OpenAIModel`; its
    ``settings`` are those of ``responses.create`` (``max_output_tokens``,
    ``reasoning``, ``store``, ``text`` ...). With ``store: false`` (an endpoint that
    keeps nothing), it asks for the reasoning's encrypted content, which it passes
    back in place of the stored items.

    Raises:
        ConfigError: for a setting Honeycomb sets itself (``input``, ``tools``,
            ``previous_response_id`` ...), or ``extra_headers``, ``extra_query`` or
            ``extra_body`` of another shape.
    """

    api = "responses"

    async def _send(self, params: dict[str, Any]) -> Any:
        return await self.client.responses.with_raw_response.create(**params)

    def _parse(self, body: bytes) -> ModelResponse:
        return parse_response(body, self.model)

    def _streamed(self, params: dict[str, Any]) -> contextlib.AbstractAsyncContextManager[Any]:
        return self.client.responses.with_streaming_response.create(**params)

    def _answer_stream(self) -> ResponseStream:
        return ResponseStream(self.model)

    def _params(self, request: ModelRequest, mode: OutputMode) -> dict[str, Any]:
        output = request.output
        instruction = None
        if output is not None and mode != "json_schema":
            # json_object says nothing of the schema (and OpenAI refuses it unless the
            # input speaks of JSON): the instructions say it, as the chat adapter's do.
            instruction = output_instruction(output)
        params = self._base_params(request)
        params["input"] = input_items(request.messages, instruction)
        self._limit_output(params, "max_output_tokens", request)
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    # Strict schemas need every property required and no others
                    # allowed, which tools' schemas do not promise.
                    "strict": False,
                }
                for t in request.tools
            ]
            if not request.parallel_tool_calls:
                params["parallel_tool_calls"] = False
            choice = request.tool_choice
            if choice != "auto":
                params["tool_choice"] = (
                    choice
                    if choice in ("none", "required")
                    else {"type": "function", "name": choice}
                )
        if output is not None and mode != "instructions":
            text = dict(params.get("text") or {})
            text["format"] = (
                {
                    "type": "json_schema",
                    "name": output.name,
                    "schema": output.json_schema,
                    "strict": output.strict,
                }
                if mode == "json_schema"
                else {"type": "json_object"}
            )
            params["text"] = text
        if params.get("store") is False and _ENCRYPTED not in (params.get("include") or ()):
            params["include"] = [*(params.get("include") or ()), _ENCRYPTED]
        return params


def input_items(messages: Sequence[Message], instruction: str | None) -> list[dict[str, Any]]:
    """``messages`` as Responses ``input`` items, with ``instruction`` added to the
    leading system message (as the chat adapter adds it)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage | UserMessage):
            items.append({"role": message.role, "content": valid_text(message.content)})
        elif isinstance(message, ToolMessage):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": valid_text(message.tool_call_id),
                    "output": valid_text(message.content),
                }
            )
        else:
            items += _assistant_items(message)
    if instruction is not None:
        first = items[0] if items else None
        if first is not None and first.get("role") == "system":
            items[0] = {"role": "system", "content": f"{first['content']}\n\n{instruction}"}
        else:
            items.insert(0, {"role": "system", "content": instruction})
    return items


def _assistant_items(message: AssistantMessage) -> list[dict[str, Any]]:
    """The reasoning first, then the text, then the calls: the order the API answers in."""
    items = [_reasoning_item(r) for r in message.reasoning_items]
    if message.content:
        items.append({"role": "assistant", "content": valid_text(message.content)})
    items += [
        {
            "type": "function_call",
            "call_id": valid_text(c.id),
            "name": valid_text(c.name),
            # As the chat adapter sends them: a JSON object, else {} (the observation
            # has told the model what was wrong).
            "arguments": valid_text(wire_arguments(c.arguments)),
        }
        for c in message.tool_calls
    ]
    return items


def _reasoning_item(item: ReasoningItem) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "reasoning",
        "id": item.id,
        "summary": [{"type": "summary_text", "text": valid_text(t)} for t in item.summary],
    }
    if item.content:
        out["content"] = [{"type": "reasoning_text", "text": valid_text(t)} for t in item.content]
    if item.encrypted_content is not None:
        out["encrypted_content"] = item.encrypted_content
    return out
