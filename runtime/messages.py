"""Messages: frozen values with a ``role`` discriminator, and the immutable transcript."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, WrapValidator

__all__ = [
    "AssistantMessage",
    "Message",
    "Messages",
    "ObservationStatus",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "Transcript",
    "Usage",
    "UserMessage",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class Usage(_Frozen):
    """Tokens, calls and cost spent. Adds up with ``+``.

    ``cost`` is in US dollars, from the prices configured for the model (0 when none
    are: Honeycomb never guesses a price).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    cost: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            model_calls=self.model_calls + other.model_calls,
            tool_calls=self.tool_calls + other.tool_calls,
            cost=self.cost + other.cost,
        )


class ToolCall(_Frozen):
    """One call the model asked for. ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"


class SystemMessage(_Frozen):
    role: Literal["system"] = "system"
    content: str


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_Frozen):
    """What the model said: text, tool calls, or both."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.tool_calls and not (self.content and self.content.strip())


ObservationStatus = Literal["ok", "error", "timeout", "skipped", "unknown"]
"""``unknown``: a side-effecting call whose run crashed mid-call, so it may or may not
have taken effect (see :mod:`runtime.journal`)."""


class ToolMessage(_Frozen):
    """The observation for one tool call; exactly one exists per call."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    status: ObservationStatus = "ok"
    content: str


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]

_MESSAGE_TYPES = frozenset({SystemMessage, UserMessage, AssistantMessage, ToolMessage})


def _messages_as_given(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A tuple of message objects is already valid (they are frozen and were validated
    when made): keep it as is instead of validating every message again, which would
    make each request cost time in proportion to the conversation's length."""
    if type(value) is tuple and _MESSAGE_TYPES.issuperset(map(type, value)):
        return value
    return handler(value)


Messages = Annotated[tuple[Message, ...], WrapValidator(_messages_as_given)]
"""A tuple of messages; dicts are validated into messages, message objects kept."""


class Transcript(_Frozen):
    """An immutable sequence of messages; :meth:`add` returns a new transcript."""

    messages: Messages = ()

    def add(self, *messages: Message) -> Transcript:
        return Transcript(messages=self.messages + messages)

    def extend(self, messages: Iterable[Message]) -> Transcript:
        return self.add(*messages)

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def last(self) -> Message | None:
        return self.messages[-1] if self.messages else None
