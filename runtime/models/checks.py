"""Checking what a model returns, where the agent loop receives it.

The message values check nothing when they are made (see :mod:`runtime.value`), and
a model is user code: a :class:`ModelResponse` holding a string where a tool call
should be must fail the call there, as a :class:`ModelResponseError` naming the model
and the field, not later as an ``AttributeError`` in the dispatcher or the run store.
Only the new answer is checked, never the conversation it answers.
"""

from __future__ import annotations

from typing import Any

import msgspec

from runtime.errors import ModelResponseError
from runtime.messages import AssistantMessage, ToolCall, Usage
from runtime.model import ModelResponse

__all__ = ["check_message", "check_response", "kind_of", "shown"]

_CALL_FIELDS = ("id", "name", "arguments")
_COUNTS = (
    "input_tokens",
    "output_tokens",
    "model_calls",
    "tool_calls",
    "reasoning_tokens",
    "cached_input_tokens",
)


def check_response(response: object, model: object) -> ModelResponse:
    """``response``, if it is a well-formed :class:`ModelResponse` (tool calls given
    as a list come back as a tuple).

    Raises:
        ModelResponseError: naming ``model`` and what is wrong.
    """
    if type(response) is ModelResponse:
        usage = response.usage
        if (
            _well_formed(response.message)
            and type(usage) is Usage
            and type(usage.input_tokens) is int
            and type(usage.output_tokens) is int
            and type(usage.model_calls) is int
            and type(usage.tool_calls) is int
            and type(usage.reasoning_tokens) is int
            and type(usage.cached_input_tokens) is int
            and type(usage.cost) is float
            and type(response.model) is str
            and type(response.finish_reason) is str
        ):
            return response
    _raise_if_wrong(_response_problems(response), model)
    assert isinstance(response, ModelResponse)
    message = response.message
    if type(message.tool_calls) is tuple:
        return response
    return msgspec.structs.replace(response, message=_with_tuple(message))


def check_message(message: object, model: object) -> AssistantMessage:
    """``message``, if it is a well-formed :class:`AssistantMessage` (tool calls given
    as a list come back as a tuple): the same check as :func:`check_response`, for
    models that build their response from a message (the test models).

    Raises:
        ModelResponseError: naming ``model`` and what is wrong.
    """
    if _well_formed(message):
        assert isinstance(message, AssistantMessage)
        return message
    _raise_if_wrong(_message_problems(message), model)
    assert isinstance(message, AssistantMessage)
    return _with_tuple(message)


def _well_formed(message: Any) -> bool:
    """The fast check: exact types everywhere (what every real answer has)."""
    if not (
        type(message) is AssistantMessage
        and type(message.tool_calls) is tuple
        and (message.content is None or type(message.content) is str)
        and (message.reasoning is None or type(message.reasoning) is str)
    ):
        return False
    for c in message.tool_calls:
        if not (
            type(c) is ToolCall
            and type(c.id) is str
            and type(c.name) is str
            and type(c.arguments) is str
        ):
            return False
    return True


def _with_tuple(message: AssistantMessage) -> AssistantMessage:
    if type(message.tool_calls) is tuple:
        return message
    return msgspec.structs.replace(message, tool_calls=tuple(message.tool_calls))


def _raise_if_wrong(problem: str | None, model: object) -> None:
    """The slow way: say what is wrong."""
    if problem is not None:
        raise ModelResponseError(f"model {model!r} returned {problem}")


def _response_problems(response: object) -> str | None:
    if not isinstance(response, ModelResponse):
        return f"{kind_of(response)}, not a ModelResponse"
    message = response.message
    if not isinstance(message, AssistantMessage):
        return f"a response whose message is {kind_of(message)}, not an AssistantMessage"
    wrong = [
        *_message_fields(message),
        _not(response.finish_reason, str, "finish_reason"),
        _not(response.model, str, "model"),
    ]
    usage = response.usage
    if not isinstance(usage, Usage):
        wrong.append(f"usage is {kind_of(usage)}, not a Usage")
    else:
        wrong += [_not(getattr(usage, name), int, f"usage.{name}") for name in _COUNTS]
        wrong.append(_not(usage.cost, int | float, "usage.cost"))
    return _malformed(wrong)


def _message_problems(message: object) -> str | None:
    if not isinstance(message, AssistantMessage):
        return f"a message that is {kind_of(message)}, not an AssistantMessage"
    return _malformed(_message_fields(message))


def _message_fields(message: AssistantMessage) -> list[str | None]:
    """What is wrong with each field of ``message`` (None for a right one)."""
    wrong = [
        _not(message.content, str, "message.content", optional=True),
        _not(message.reasoning, str, "message.reasoning", optional=True),
    ]
    calls: Any = message.tool_calls
    if not isinstance(calls, tuple | list):
        wrong.append(f"message.tool_calls is {kind_of(calls)}, not a tuple of ToolCalls")
        calls = ()
    for index, call in enumerate(calls):
        where = f"message.tool_calls[{index}]"
        if not isinstance(call, ToolCall):
            wrong.append(f"{where} is {kind_of(call)}, not a ToolCall")
            continue
        wrong += [_not(getattr(call, name), str, f"{where}.{name}") for name in _CALL_FIELDS]
    return wrong


def _malformed(wrong: list[str | None]) -> str | None:
    found = [w for w in wrong if w is not None]
    return f"a malformed response: {'; '.join(found)}" if found else None


def _not(value: Any, wanted: Any, where: str, *, optional: bool = False) -> str | None:
    """What is wrong with field ``where``, if its value is not a ``wanted``."""
    if (optional and value is None) or (isinstance(value, wanted) and type(value) is not bool):
        return None
    name = "a string" if wanted is str else "an integer" if wanted is int else "a number"
    return f"{where} is {kind_of(value)}, not {name}"


def kind_of(value: Any) -> str:
    """What ``value`` is, for an error message: ``an int (5)``."""
    if value is None:
        return "missing (or null)"
    if isinstance(value, str) and not value:
        return "an empty string"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name} ({shown(value, 40)})"


def shown(value: Any, limit: int = 200) -> str:
    """``value`` (or bytes, as text) cut to ``limit`` characters, for an error message."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
