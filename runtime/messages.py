"""Messages: read-only values with a ``role`` discriminator, and the transcript.

Messages, :class:`ToolCall`, :class:`Usage` and :class:`Transcript` (and
:class:`~runtime.model.ModelRequest` and :class:`~runtime.model.ModelResponse`) are
slotted dataclasses: cheap to make, and their constructors check nothing (type checkers
do, and treat them as frozen). Data from outside is validated where it comes in, with
pydantic: :func:`validate_messages` and :func:`validate_value` read dicts or JSON and
fail with a ``pydantic.ValidationError`` naming the field; :func:`dump_messages`,
:func:`dump_messages_json`, :func:`dump_value` and :func:`dump_value_json` write
JSON-compatible data. Pydantic models may hold them as fields (:data:`Messages` for a
tuple of messages): they are validated and dumped with the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from json.encoder import encode_basestring as _str  # JSON string, non-ASCII kept
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidatorFunctionWrapHandler, WrapValidator

from runtime._values import value_class

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from pydantic_core import SchemaSerializer

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
    "dump_messages",
    "dump_messages_json",
    "dump_value",
    "dump_value_json",
    "validate_messages",
    "validate_value",
]


@value_class
class Usage:
    """Tokens, calls and cost spent. Adds up with ``+``.

    ``cost`` is in US dollars, from the prices configured for the model (0 when none
    are: Honeycomb never guesses a price). ``reasoning_tokens`` are those of the
    ``output_tokens`` a reasoning model spent thinking, where the endpoint says.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    cost: float = 0.0
    reasoning_tokens: int = 0

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
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


@value_class
class ToolCall:
    """One call the model asked for. ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"


@value_class
class SystemMessage:
    """The instructions a conversation starts with."""

    role: Literal["system"] = "system"
    content: str


@value_class
class UserMessage:
    """The task, or what the loop tells the model (a nudge, an output error, wrap up)."""

    role: Literal["user"] = "user"
    content: str


@value_class
class AssistantMessage:
    """What the model said: text, tool calls, or both.

    ``reasoning`` is a reasoning model's thinking, where the endpoint returns it
    (``reasoning_content``: DeepSeek, vLLM's reasoning parsers); it goes back to the
    endpoint with the message, as some require within a tool loop.
    """

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None

    @property
    def is_empty(self) -> bool:
        return not self.tool_calls and not (self.content and self.content.strip())


ObservationStatus = Literal["ok", "error", "timeout", "skipped", "unknown"]
"""``unknown``: a side-effecting call whose run crashed mid-call, so it may or may not
have taken effect (see :mod:`runtime.journal`)."""


@value_class
class ToolMessage:
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
    """A tuple of message objects is kept as it is instead of being looked at message
    by message, which would make each validation cost time in proportion to the
    conversation's length."""
    if type(value) is tuple and _MESSAGE_TYPES.issuperset(map(type, value)):
        return value
    return handler(value)


Messages = Annotated[tuple[Message, ...], WrapValidator(_messages_as_given)]
"""A tuple of messages, as a field of a pydantic model: dicts (or JSON) are validated
into messages, a tuple of message objects is kept."""


@value_class
class Transcript:
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


# --- the boundaries: validating and dumping, with pydantic -----------------------------
# Adapters are built on first use: building one takes milliseconds, and importing
# Honeycomb must not.

V = TypeVar("V")

_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}
_SERIALIZERS: dict[type[Any], SchemaSerializer] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    found = _ADAPTERS.get(kind)
    if found is None:
        from pydantic import ConfigDict, TypeAdapter

        # Errors are titled by the type ("1 validation error for Messages").
        config = ConfigDict(title="Messages") if kind is Messages else None
        found = _ADAPTERS[kind] = TypeAdapter(kind, config=config)
    return found


def _serializer(kind: type[Any]) -> SchemaSerializer:
    """A message class's own serializer (the union's costs more than twice as much)."""
    found = _SERIALIZERS.get(kind)
    if found is None:
        if kind not in _MESSAGE_TYPES:
            raise TypeError(f"not a message: a {kind.__name__}")
        found = _SERIALIZERS[kind] = _adapter(kind).serializer
    return found


def validate_messages(data: str | bytes | Iterable[Any]) -> tuple[Message, ...]:
    """Messages from a JSON array, or from dicts (message objects are kept as they are).

    Raises:
        pydantic.ValidationError: naming the message and the field that is wrong
            (``1.assistant.tool_calls.0.id``: the second message, an assistant message).
    """
    adapter: TypeAdapter[tuple[Message, ...]] = _adapter(Messages)
    if isinstance(data, str | bytes):
        return adapter.validate_json(data)
    return adapter.validate_python(data if isinstance(data, tuple | list) else list(data))


def dump_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as JSON-compatible dicts (what :func:`validate_messages` reads back)."""
    return [_serializer(type(m)).to_python(m, mode="json") for m in messages]


def dump_messages_json(messages: Iterable[Message]) -> str:
    """Messages as a JSON array (what :func:`validate_messages` reads back).

    Each message is written by its class's own small encoder below, which writes the
    very text pydantic writes (``tests/runtime/test_values.py`` checks it) for about
    two thirds of the cost: a run store writes every turn's new messages. What those
    encoders cannot write (a field that is not a string, a lone surrogate) is left to
    pydantic.
    """
    messages = messages if isinstance(messages, tuple | list) else list(messages)
    try:
        text = "[" + ",".join([_ENCODERS[type(m)](m) for m in messages]) + "]"
        if not text.isascii():
            text.encode()  # fails on a lone surrogate, which pydantic refuses
        return text
    except (KeyError, TypeError, UnicodeEncodeError):
        pass
    return "[" + ",".join([_serializer(type(m)).to_json(m).decode() for m in messages]) + "]"


def _text_json(m: SystemMessage | UserMessage) -> str:
    return f'{{"role":{_str(m.role)},"content":{_str(m.content)}}}'


def _assistant_json(m: AssistantMessage) -> str:
    content = "null" if m.content is None else _str(m.content)
    calls = ",".join(
        [
            f'{{"id":{_str(c.id)},"name":{_str(c.name)},"arguments":{_str(c.arguments)}}}'
            for c in m.tool_calls
        ]
    )
    reasoning = "null" if m.reasoning is None else _str(m.reasoning)
    return (
        f'{{"role":{_str(m.role)},"content":{content},"tool_calls":[{calls}],'
        f'"reasoning":{reasoning}}}'
    )


def _tool_json(m: ToolMessage) -> str:
    return (
        f'{{"role":{_str(m.role)},"tool_call_id":{_str(m.tool_call_id)},"name":{_str(m.name)},'
        f'"status":{_str(m.status)},"content":{_str(m.content)}}}'
    )


_ENCODERS: dict[type[Any], Callable[[Any], str]] = {
    SystemMessage: _text_json,
    UserMessage: _text_json,
    AssistantMessage: _assistant_json,
    ToolMessage: _tool_json,
}


def validate_value(cls: type[V], data: str | bytes | Mapping[str, Any]) -> V:
    """A ``cls`` (a message class, :class:`ToolCall`, :class:`Usage`,
    :class:`Transcript`, ``ModelRequest``, ``ModelResponse``) from JSON text or a dict.

    Raises:
        pydantic.ValidationError: naming the field that is wrong, or that is unknown.
    """
    adapter: TypeAdapter[V] = _adapter(cls)
    if isinstance(data, str | bytes):
        return adapter.validate_json(data)
    return adapter.validate_python(data)


def dump_value(value: object) -> dict[str, Any]:
    """A value (see :func:`validate_value`) as a JSON-compatible dict."""
    dumped: dict[str, Any] = _adapter(type(value)).dump_python(value, mode="json")
    return dumped


def dump_value_json(value: object) -> str:
    """A value (see :func:`validate_value`) as JSON: the same value, the same text."""
    return _adapter(type(value)).dump_json(value).decode()
