"""Reading a Responses API answer's JSON body into a :class:`ModelResponse`, checking
every field on the way, as :mod:`runtime.models.openai._completion` does for chat completions: a
malformed body becomes a :class:`ModelResponseError` that says what was wrong.

A streamed answer (:class:`ResponseStream`) is a series of typed events: its text
comes in ``response.output_text.delta`` events (and a refusal's in
``response.refusal.delta``), and the whole response, read as a one-shot body is, in the
last one (``response.completed``, ``response.incomplete`` or ``response.failed``); an
``error`` event is the endpoint's error. A last event whose response has no output
(some proxies and gateways send ``output: []``) is given the items the stream sent
whole (``response.output_item.done``), else the text it streamed.

The answer is a list of output items: ``message`` items (their ``output_text`` parts
are the text), ``function_call`` items (keyed by ``call_id``), and ``reasoning`` items,
kept on the message as :class:`ReasoningItem`s to pass back. Items of other types
(the API's own tools) are left out, as the chat adapter leaves out calls that are not
functions.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.errors import ModelResponseError
from runtime.messages import AssistantMessage, ReasoningItem, ToolCall, Usage
from runtime.model import ModelResponse
from runtime.models.checks import shown
from runtime.models.openai._completion import (
    _count,
    _list,
    _Malformed,
    _object,
    _required,
    _text,
    answered_error,
    new_call_id,
    token_usage,
)
from runtime.models.openai.stream import streamed_json

__all__ = ["ResponseStream", "parse_response"]

_UNFINISHED = frozenset({"in_progress", "queued"})
"""Statuses of a response the server sent before it had finished it."""

_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}
"""Why a response is incomplete, as chat completions name it in ``finish_reason``."""


def parse_response(body: bytes, model: str) -> ModelResponse:
    """The response in a Responses API body, as sent by the endpoint.

    Raises:
        ModelResponseError: naming the model and what is wrong with the body: a
            ``failed`` response with the error it says, or with none; one that is not
            finished (``in_progress``, ``queued``: retryable); ``cancelled``.
        ModelHTTPError: for a failure that stands for one (``server_error``,
            ``rate_limit_exceeded``: see :func:`answered_error`).
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # also not UTF-8, or nested too deeply
        raise ModelResponseError(
            f"model {model!r} answered with a body that is not JSON ({exc}): {shown(body)}",
            retryable=True,
        ) from exc
    return _parsed(data, model)


def _parsed(data: Any, model: str) -> ModelResponse:
    """The response ``data`` holds, the body's JSON (or a stream's last event's), as
    :func:`parse_response` reads it."""
    if isinstance(data, dict) and data.get("error") is not None:
        raise answered_error(data["error"], model, "answered with an error")
    try:
        _check_status(data, model)
        return _response(data, model)
    except _Malformed as exc:
        raise ModelResponseError(f"model {model!r} returned a malformed response: {exc}") from exc


def _check_status(data: Any, model: str) -> None:
    """Refuse a response that is not an answer: only ``completed`` ones (or those a
    server sends without a status) and ``incomplete`` ones (cut off: see
    :func:`_finish`) are.

    Raises:
        ModelResponseError: for any other status; retryable for one the server had
            not finished, as for an answer cut off.
    """
    status = _text(_object(data, "the body").get("status"), "status")
    if status in (None, "completed", "incomplete"):
        return
    if status in _UNFINISHED:
        raise ModelResponseError(
            f"model {model!r} answered before its response was finished (status {status!r})",
            retryable=True,
        )
    raise ModelResponseError(
        f"model {model!r} answered with a response of status {status!r} and no error"
    )


def _response(data: Any, model: str) -> ModelResponse:
    body = _object(data, "the body")
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningItem] = []
    if body.get("output") is None:  # what came instead: a proxy's JSON, {"detail": ...}
        raise _Malformed(f"output is missing (or null), not a list, in {shown(body)}")
    for index, raw in enumerate(_list(body.get("output"), "output")):
        where = f"output[{index}]"
        item = _object(raw, where)
        kind = item.get("type")
        if kind == "message":
            texts += _message_texts(item, where)
        elif kind == "function_call":
            calls.append(_function_call(item, where, {c.id for c in calls}))
        elif kind == "reasoning":
            reasoning.append(_reasoning(item, where))
    thoughts = [t for r in reasoning for t in (r.summary or r.content)]
    return ModelResponse(
        message=AssistantMessage(
            content="\n\n".join(texts) if texts else None,
            tool_calls=tuple(calls),
            reasoning="\n\n".join(thoughts) if thoughts else None,
            reasoning_items=tuple(reasoning),
        ),
        usage=_usage(_object(body.get("usage") or {}, "usage")),
        finish_reason=_finish(body, bool(calls)),
        model=_text(body.get("model"), "model") or model,
    )


def _message_texts(item: dict[str, Any], where: str) -> list[str]:
    """The text of a message item: its ``output_text`` parts, and a refusal's words."""
    parts = _list(item.get("content") or [], f"{where}.content")
    found: list[str] = []
    for index, raw in enumerate(parts):
        at = f"{where}.content[{index}]"
        part = _object(raw, at)
        if part.get("type") == "output_text":
            found.append(_text(part.get("text"), f"{at}.text") or "")
        elif part.get("type") == "refusal":
            found.append(_text(part.get("refusal"), f"{at}.refusal") or "")
    return ["".join(found)] if found else []


def _function_call(item: dict[str, Any], where: str, taken: set[str]) -> ToolCall:
    """A function call; one without a ``call_id``, or with one an earlier call of the
    answer has, gets a new one."""
    arguments = item.get("arguments")
    if isinstance(arguments, dict):  # some servers send the object itself
        arguments = json.dumps(arguments)
    call_id = _text(item.get("call_id"), f"{where}.call_id") or ""
    return ToolCall(
        id=call_id if call_id and call_id not in taken else new_call_id(),
        name=_required(item.get("name"), f"{where}.name"),
        arguments=_text(arguments, f"{where}.arguments") or "",
    )


def _reasoning(item: dict[str, Any], where: str) -> ReasoningItem:
    def texts(field: str) -> tuple[str, ...]:
        parts = _list(item.get(field) or [], f"{where}.{field}")
        return tuple(
            _text(_object(p, f"{where}.{field}[{i}]").get("text"), f"{where}.{field}[{i}].text")
            or ""
            for i, p in enumerate(parts)
        )

    return ReasoningItem(
        id=_required(item.get("id"), f"{where}.id"),
        summary=texts("summary"),
        content=texts("content"),
        encrypted_content=_text(item.get("encrypted_content"), f"{where}.encrypted_content"),
    )


def _usage(usage: dict[str, Any]) -> Usage:
    details_in = _object(usage.get("input_tokens_details") or {}, "usage.input_tokens_details")
    details_out = _object(usage.get("output_tokens_details") or {}, "usage.output_tokens_details")
    return token_usage(
        input_tokens=_count(usage.get("input_tokens"), "usage.input_tokens"),
        output_tokens=_count(usage.get("output_tokens"), "usage.output_tokens"),
        reasoning=_count(
            details_out.get("reasoning_tokens"), "usage.output_tokens_details.reasoning_tokens"
        ),
        cached=_count(details_in.get("cached_tokens"), "usage.input_tokens_details.cached_tokens"),
    )


def _finish(body: dict[str, Any], called: bool) -> str:
    """``finish_reason`` as chat completions say it: ``length`` for an answer cut at
    ``max_output_tokens``, else ``tool_calls`` or ``stop``."""
    if _text(body.get("status"), "status") == "incomplete":
        details = _object(body.get("incomplete_details") or {}, "incomplete_details")
        reason = _text(details.get("reason"), "incomplete_details.reason") or "incomplete"
        return _FINISH.get(reason, reason)
    return "tool_calls" if called else "stop"


_TEXT_EVENTS = frozenset({"response.output_text.delta", "response.refusal.delta"})
"""The events that carry a piece of the answer's text, as their ``delta``."""

_LAST_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
"""The events that end a streamed answer, the whole response in them."""

_ITEM_DONE = "response.output_item.done"
"""The event that gives one output item whole, at its ``output_index``."""


class ResponseStream:
    """One streamed Responses API answer of ``model``: :meth:`add` each event's data,
    then :meth:`response`.

    Attributes:
        done: The last event came (the whole response with it).
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.done = False
        self._last: dict[str, Any] | None = None
        self._events = 0
        self._items: dict[int, Any] = {}  # each output item given whole, by its index
        self._text: list[str] = []

    @property
    def finished(self) -> bool:
        """The last event came: the whole response did."""
        return self.done

    def add(self, data: str) -> str:
        """Take one event's data; the text it adds to the answer ("" for none).

        Raises:
            ModelResponseError: for an event that is not JSON (retryable: a proxy's or a
                connection's fault), an error sent in the stream, or a malformed event.
            ModelHTTPError: for an error sent in the stream that stands for one (a
                server error, a rate limit: see :func:`answered_error`).
        """
        self._events += 1
        where = f"event {self._events}"
        event = streamed_json(data, self.model, "an event")
        try:
            kind = _text(_object(event, where).get("type"), f"{where}.type")
            if kind == "error":
                raise answered_error(event, self.model, "sent an error in its stream")
            if kind in _TEXT_EVENTS:
                piece = _text(event.get("delta"), f"{where}.delta") or ""
                self._text.append(piece)
                return piece
            if kind == _ITEM_DONE:
                index = event.get("output_index")
                at = index if isinstance(index, int) else len(self._items)
                self._items[at] = _object(event.get("item"), f"{where}.item")
            elif kind in _LAST_EVENTS:
                self._last = _object(event.get("response"), f"{where}.response")
                self.done = True
        except _Malformed as exc:
            raise ModelResponseError(
                f"model {self.model!r} streamed a malformed event: {exc}"
            ) from exc
        return ""

    def response(self) -> ModelResponse:
        """The whole answer, as the last event gave it.

        Raises:
            ModelResponseError: when the stream ended before its last event
                (retryable), or the response is malformed or failed (as
                :func:`parse_response` says).
        """
        if self._last is None:
            raise ModelResponseError(
                f"the stream of model {self.model!r} ended before its answer did (no "
                f"response.completed in {self._events} events)",
                retryable=True,
            )
        return _parsed(self._whole(self._last), self.model)

    def _whole(self, last: dict[str, Any]) -> dict[str, Any]:
        """The last event's response, with the output the stream gave where it has none
        (``output: []`` or none at all, as some proxies and gateways end a stream whose
        items came whole in ``response.output_item.done``, or only as text)."""
        if last.get("output") or last.get("status") == "failed":
            return last
        if self._items:
            return {**last, "output": [self._items[i] for i in sorted(self._items)]}
        if self._text:
            text = {"type": "output_text", "text": "".join(self._text)}
            return {**last, "output": [{"type": "message", "content": [text]}]}
        return last
