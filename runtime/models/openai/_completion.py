"""Reading a chat completion's JSON body into a :class:`ModelResponse`, checking every
field on the way: OpenAI-compatible servers (and proxies in front of them) do answer
with truncated bodies, HTML error pages, missing fields and wrong types, and each of
those must become a :class:`ModelResponseError` that says what was wrong, never a
``KeyError`` or ``AttributeError`` from deep inside the adapter.

Some servers leave out what the next request needs: a tool call without an id
(Gemini's OpenAI-compatible endpoint and LM Studio send ``""``) gets one here, where
the answer enters, so the transcript, the journal, the observation and the wire all
use the same id.

What both adapters read the same way is here too: the usage counts
(:func:`token_usage`, cached input tokens never more than the input), and an error
the endpoint sends inside an answer (:func:`answered_error`: a body, a stream's
event, a failed response), which is the HTTP error it stands for when it names one.
"""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec

from runtime.errors import ModelError, ModelHTTPError, ModelResponseError
from runtime.messages import AssistantMessage, ToolCall, Usage
from runtime.model import ModelRequest, ModelResponse
from runtime.models.checks import kind_of, shown
from runtime.models.layers.cost_cap import prompt_tokens
from runtime.models.tokens import estimated_tokens

__all__ = [
    "answered_error",
    "completion_response",
    "content_parts",
    "error_in",
    "estimated_usage",
    "parse_completion",
    "token_usage",
]

_STANDS_FOR = {
    "server_error": 500,
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "overloaded_error": 503,
}
"""Kinds of error (an error's ``type`` or ``code``) that stand for an HTTP error worth
a retry: OpenAI's (in a stream, in a failed response), and those a proxy passes on
from Anthropic's API."""


class _Malformed(Exception):
    """One field of the body is missing or has the wrong type."""


def parse_completion(body: bytes, model: str) -> ModelResponse:
    """The response in a completion's body, as sent by the endpoint.

    Raises:
        ModelResponseError: naming the model and what is wrong with the body.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # also not UTF-8, or nested too deeply
        # Empty, an HTML page, cut off: a proxy's or a connection's fault, worth a retry.
        raise ModelResponseError(
            f"model {model!r} answered with a body that is not JSON ({exc}): {shown(body)}",
            retryable=True,
        ) from exc
    error = error_in(data, "choices")
    if error is not None:
        raise answered_error(error, model, "answered with an error")
    return completion_response(data, model)


def error_in(data: Any, answer: str) -> Any:
    """The error an answer's decoded body (or a stream's chunk) is, or ends with: its
    ``error`` (OpenAI's form, and most servers'), even beside an ``answer`` field
    (OpenRouter ends a stream its provider broke off with a chunk that has both), or
    itself when it is an error object sent unwrapped (no ``answer``, ``"object":
    "error"``, its ``message``, ``type`` and ``code`` at the top: the shape of vLLM's
    error response). None for an answer."""
    if not isinstance(data, dict):
        return None
    if answer in data:  # an error beside it says something, or is none
        return data.get("error") or None
    if "error" in data:
        return data["error"]
    return data if data.get("object") == "error" else None


def answered_error(error: Any, model: str, how: str) -> ModelError:
    """The error an endpoint sent inside an answer (a 200's body, a stream's event, a
    failed response), saying ``how`` it came: one of a kind that stands for an HTTP
    error (a server error, a rate limit, or the HTTP status vLLM gives as its ``code``)
    is that :class:`ModelHTTPError`, retried (and, a 429, slowing the rate limiter)
    as the HTTP error is; any other is a :class:`ModelResponseError`."""
    status = _stands_for(error)
    if status is None:
        return ModelResponseError(f"model {model!r} {how}: {shown(error)}")
    return ModelHTTPError(status, f"{how}: {shown(error)}", model=model)


def _stands_for(error: Any) -> int | None:
    """The HTTP status worth a retry that ``error`` stands for, if any."""
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        retryable = code in ModelHTTPError.RETRYABLE_STATUSES or 500 <= code <= 599
        return code if retryable else None
    for kind in (error.get("type"), code):
        if isinstance(kind, str) and kind in _STANDS_FOR:
            return _STANDS_FOR[kind]
    return None


def token_usage(*, input_tokens: int, output_tokens: int, reasoning: int, cached: int) -> Usage:
    """The usage of one answer. Cached input tokens are among the input tokens: a
    server that reports more (a proxy that sums them over calls) is held to the input,
    so that no price of them makes a cost below zero."""
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        reasoning_tokens=reasoning,
        cached_input_tokens=min(cached, input_tokens),
    )


def estimated_usage(request: ModelRequest, message: AssistantMessage) -> Usage:
    """The usage of an answer whose endpoint reported none, by the token estimate
    (:mod:`runtime.models.tokens`): what the request sends (as a cost cap counts it)
    and what the answer holds, its text, reasoning and calls. Never 0: a call that
    was made was paid for."""
    written = estimated_tokens(
        (
            message.content or "",
            message.reasoning or "",
            *(f"{call.name} {call.arguments}" for call in message.tool_calls),
        )
    )
    return Usage(input_tokens=max(prompt_tokens(request), 1), output_tokens=max(written, 1))


def completion_response(data: Any, model: str) -> ModelResponse:
    """The response in a completion's decoded body (or a streamed one, assembled).

    Raises:
        ModelResponseError: naming the model and what is wrong with the completion.
    """
    try:
        return _response(data, model)
    except _Malformed as exc:
        raise ModelResponseError(f"model {model!r} returned a malformed completion: {exc}") from exc


def _response(data: Any, model: str) -> ModelResponse:
    body = _object(data, "the body")
    choices = body.get("choices")
    if choices is None or choices == []:
        # What came instead (a proxy's or a loading server's JSON: {"detail": ...}).
        raise ModelResponseError(f"model {model!r} returned no choices: {shown(body)}")
    choice = _object(_list(choices, "choices")[0], "choices[0]")
    finish = _text(choice.get("finish_reason"), "choices[0].finish_reason") or "stop"
    if finish in _FAILED or choice.get("error"):
        raise _failed(choice.get("error"), finish, model)
    raw = _object(choice.get("message"), "choices[0].message")
    where = "choices[0].message"
    content, thinking = content_parts(raw.get("content"), f"{where}.content")
    # A refusal (OpenAI's, under structured output) comes in its own field, with no
    # content: its words are the answer's text, as the Responses API's are.
    content = content or _text(raw.get("refusal"), f"{where}.refusal") or content
    # DeepSeek and vLLM's reasoning parsers send reasoning_content; newer vLLM sends
    # reasoning, a name other servers use for other shapes: only its text is taken.
    reasoning = _text(raw.get("reasoning_content"), f"{where}.reasoning_content")
    if reasoning is None and isinstance(raw.get("reasoning"), str):
        reasoning = raw["reasoning"]
    reasoning = thinking if reasoning is None else reasoning
    calls = _tool_calls(_list(raw.get("tool_calls") or [], f"{where}.tool_calls"), where)
    usage = _object(body.get("usage") or {}, "usage")
    details_at = "usage.completion_tokens_details"
    details = _object(usage.get("completion_tokens_details") or {}, details_at)
    return ModelResponse(
        message=AssistantMessage(
            content=content,
            tool_calls=calls,
            reasoning=reasoning,
        ),
        usage=token_usage(
            input_tokens=_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
            output_tokens=_count(usage.get("completion_tokens"), "usage.completion_tokens"),
            reasoning=_count(details.get("reasoning_tokens"), f"{details_at}.reasoning_tokens"),
            cached=_cached(usage),
        ),
        finish_reason=finish,
        model=_text(body.get("model"), "model") or model,
    )


_FAILED = frozenset({"error", "abort"})
"""Finish reasons of an answer the server did not finish: ``error`` (OpenRouter's, when
its provider failed mid-answer), ``abort`` (vLLM's and SGLang's, for a request their
engine aborted: a shutdown, a scale-down), each sent as if the answer were whole."""


def _failed(error: Any, finish: str, model: str) -> ModelError:
    """The error of a choice that ended unfinished (a finish reason of :data:`_FAILED`,
    or an ``error`` of its own): the error it names, or, naming none, one worth a
    retry, as any answer cut off is."""
    if error:
        return answered_error(error, model, "ended its answer with an error")
    return ModelResponseError(
        f"model {model!r} ended its answer unfinished (finish_reason {finish!r})",
        retryable=True,
    )


def content_parts(value: Any, where: str) -> tuple[str | None, str | None]:
    """The text and the thinking of a message's ``content`` (or a streamed delta's):
    text, or a list of typed parts, as Mistral's reasoning models send it (a
    ``thinking`` part, its ``thinking`` a list of text parts, then a ``text`` part);
    parts of other types are left out."""
    if not isinstance(value, list):
        return _text(value, where), None
    texts: list[str] = []
    thoughts: list[str] = []
    for index, raw in enumerate(value):
        at = f"{where}[{index}]"
        part = _object(raw, at)
        if part.get("type") == "text":
            texts.append(_text(part.get("text"), f"{at}.text") or "")
        elif part.get("type") == "thinking":
            thoughts += _thoughts(part.get("thinking"), f"{at}.thinking")
    return ("".join(texts) if texts else None), ("".join(thoughts) if thoughts else None)


def _thoughts(value: Any, where: str) -> list[str]:
    """The texts of a ``thinking`` part: text, or a list of text parts."""
    if not isinstance(value, list):
        return [_text(value, where) or ""]
    return [
        _text(_object(raw, f"{where}[{i}]").get("text"), f"{where}[{i}].text") or ""
        for i, raw in enumerate(value)
    ]


def _cached(usage: dict[str, Any]) -> int:
    """The input tokens read from the provider's cache: OpenAI's (and vLLM's, LiteLLM's)
    ``prompt_tokens_details.cached_tokens``, or DeepSeek's ``prompt_cache_hit_tokens``."""
    at = "usage.prompt_tokens_details"
    details = _object(usage.get("prompt_tokens_details") or {}, at)
    cached = _count(details.get("cached_tokens"), f"{at}.cached_tokens")
    if not cached:
        cached = _count(usage.get("prompt_cache_hit_tokens"), "usage.prompt_cache_hit_tokens")
    return cached


def _tool_calls(items: list[Any], where: str) -> tuple[ToolCall, ...]:
    """The function calls among ``items``; one without an id, or with an id an earlier
    call of the answer has, gets a new one."""
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("type", "function") != "function":
            continue
        call = _tool_call(item, f"{where}.tool_calls[{index}]")
        if not call.id or call.id in seen:
            call = msgspec.structs.replace(call, id=new_call_id())
        seen.add(call.id)
        calls.append(call)
    return tuple(calls)


def _tool_call(item: Any, where: str) -> ToolCall:
    call = _object(item, where)
    function = _object(call.get("function"), f"{where}.function")
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # some servers send the object itself
        arguments = json.dumps(arguments)
    # Gemini's thought signature: its next request wants it back with the call.
    extra = call.get("extra_content")
    return ToolCall(
        id=_text(call.get("id"), f"{where}.id") or "",
        name=_required(function.get("name"), f"{where}.function.name"),
        arguments=_text(arguments, f"{where}.function.arguments") or "",
        extra_content=json.dumps(extra) if extra is not None else None,
    )


def new_call_id() -> str:
    """A tool call id for a call the server sent without one: random, so that it is
    unique in its conversation across turns (and across the lives of a resumed run)."""
    return "call_" + os.urandom(12).hex()


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Malformed(f"{where} is {kind_of(value)}, not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Malformed(f"{where} is {kind_of(value)}, not a list")
    return value


def _required(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Malformed(f"{where} is {kind_of(value)}, not a non-empty string")
    return value


def _text(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _Malformed(f"{where} is {kind_of(value)}, not a string")
    return value


def _count(value: Any, where: str) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Malformed(f"{where} is {kind_of(value)}, not a count of tokens")
    return value
