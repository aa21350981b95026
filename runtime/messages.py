"""Messages: immutable values tagged by ``role``, and the transcript.

Messages, :class:`ToolCall`, :class:`Usage` and :class:`Transcript` (like every value,
see :mod:`runtime.value`) are frozen msgspec Structs made by keyword; their
constructors check nothing. Data from outside is validated where it comes in:
:func:`validate_messages` and :func:`validate_value` read dicts or JSON and fail with a
``msgspec.ValidationError`` naming the field; :func:`dump_messages`,
:func:`dump_messages_json`, :func:`dump_value` and :func:`dump_value_json` write them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar

import msgspec

from runtime.text import encode_json
from runtime.value import Value, packed

__all__ = [
    "AssistantMessage",
    "Message",
    "Messages",
    "ObservationStatus",
    "ReasoningItem",
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
    "with_distinct_ids",
]


# benchmark B: made every model turn or tool call, never walked by the GC
class Usage(Value, frozen=True, gc=False, kw_only=True):
    """Tokens, calls and cost spent. Adds up with ``+``.

    ``cost`` is in US dollars, from the prices configured for the model (0 when none
    are: Honeycomb never guesses a price). ``reasoning_tokens`` are those of the
    ``output_tokens`` a reasoning model spent thinking, and ``cached_input_tokens``
    those of the ``input_tokens`` the provider read from its prompt cache, where the
    endpoint says.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    cost: float = 0.0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cached_share(self) -> float:
        """The share of the input tokens read from the provider's cache (0 to 1)."""
        return self.cached_input_tokens / self.input_tokens if self.input_tokens else 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            model_calls=self.model_calls + other.model_calls,
            tool_calls=self.tool_calls + other.tool_calls,
            cost=self.cost + other.cost,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
        )


# benchmark B: made every model turn or tool call, never walked by the GC
class ToolCall(Value, frozen=True, gc=False, forbid_unknown_fields=True, kw_only=True):
    """One call the model asked for. ``arguments`` is the raw JSON text the model wrote.
    ``extra_content`` is what the endpoint sent with the call to have back with it, as
    JSON text (Gemini's thought signature, in its OpenAI-compatible API's
    ``extra_content``); None: nothing."""

    id: str
    name: str
    arguments: str = "{}"
    extra_content: str | None = None


class ReasoningItem(Value, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A reasoning model's thinking as the Responses API returns it: an item to pass
    back, as it came, with the message that followed it (the API wants it within a
    tool loop). ``encrypted_content`` is there when the request asked for it
    (``include: [reasoning.encrypted_content]``, needed where the endpoint keeps
    nothing: ``store: false``). ``summary`` holds the summary's texts, ``content`` the
    reasoning's own texts where the endpoint returns them (open-weight models)."""

    id: str
    summary: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    encrypted_content: str | None = None


# benchmark B: made every model turn or tool call, never walked by the GC
class _Message(
    Value, frozen=True, gc=False, tag_field="role", forbid_unknown_fields=True, kw_only=True
):
    """Messages are tagged by ``role`` (``{"role": "tool", ...}`` in JSON)."""


class SystemMessage(_Message, frozen=True, tag="system", kw_only=True):
    """The instructions a conversation starts with."""

    role: ClassVar[Literal["system"]] = "system"
    content: str


class UserMessage(_Message, frozen=True, tag="user", kw_only=True):
    """The task, or what the loop tells the model (a nudge, an output error, wrap up)."""

    role: ClassVar[Literal["user"]] = "user"
    content: str


class AssistantMessage(_Message, frozen=True, tag="assistant", kw_only=True):
    """What the model said: text, tool calls, or both.

    ``reasoning`` is a reasoning model's thinking, where the endpoint returns it
    (``reasoning_content``: DeepSeek, vLLM's reasoning parsers); it goes back to the
    endpoint with the message, as some require within a tool loop. The Responses API
    returns it as ``reasoning_items`` (kept as they came, to pass back), whose summaries
    are also its ``reasoning``.
    """

    role: ClassVar[Literal["assistant"]] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    reasoning_items: tuple[ReasoningItem, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.tool_calls and not (self.content and self.content.strip())


ObservationStatus = Literal["ok", "error", "timeout", "skipped", "unknown"]
"""``unknown``: a side-effecting call whose run crashed mid-call, so it may or may not
have taken effect (see :mod:`runtime.tools.journal`)."""


class ToolMessage(_Message, frozen=True, tag="tool", kw_only=True):
    """The observation for one tool call; exactly one exists per call."""

    role: ClassVar[Literal["tool"]] = "tool"
    tool_call_id: str
    name: str
    status: ObservationStatus = "ok"
    content: str


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage

Messages: TypeAlias = tuple[Message, ...]
"""A conversation: messages, oldest first."""


def with_distinct_ids(message: AssistantMessage, earlier: Messages, turn: int) -> AssistantMessage:
    """``message`` whose tool calls each have an id no other call of the conversation
    has: some servers number the calls of every turn from ``call_0`` (or send none),
    and strict ones refuse a conversation that repeats an id. A repeated (or empty)
    id becomes ``<id>_t<turn>`` (then ``_2``, ``_3`` ...): the same answer at the same
    turn gets the same ids, and since they are in the transcript, the journal, the
    observations and the wire all use them."""
    calls = message.tool_calls
    if not calls:
        return message
    taken = {c.id for m in earlier if isinstance(m, AssistantMessage) for c in m.tool_calls}
    fresh: list[ToolCall] = []
    renamed = False
    for c in calls:
        new_id = c.id
        if not new_id or new_id in taken:
            base = f"{new_id or 'call'}_t{turn}"
            new_id, n = base, 1
            while new_id in taken or any(new_id == other.id for other in calls):
                n += 1
                new_id = f"{base}_{n}"
            renamed = True
        taken.add(new_id)
        fresh.append(msgspec.structs.replace(c, id=new_id) if new_id != c.id else c)
    if not renamed:
        return message
    return msgspec.structs.replace(message, tool_calls=tuple(fresh))


# benchmark B: made every model turn or tool call, never walked by the GC
class Transcript(Value, frozen=True, gc=False, kw_only=True):
    """An immutable sequence of messages; :meth:`add` returns a new transcript."""

    messages: Messages = ()

    def add(self, *messages: Message) -> Transcript:
        return Transcript(messages=self.messages + messages)

    def extend(self, messages: Iterable[Message]) -> Transcript:
        return self.add(*messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __reduce__(self) -> Any:
        return packed(self)

    @property
    def last(self) -> Message | None:
        return self.messages[-1] if self.messages else None


# --- the boundaries: reading and writing values as dicts and JSON, with msgspec -------

V = TypeVar("V")


def validate_messages(data: str | bytes | Iterable[Any]) -> Messages:
    """Messages from a JSON array, or from dicts (message objects are kept as they are).

    Raises:
        msgspec.ValidationError: (a ``ValueError``) naming the message and the field
            that is wrong (``Expected `str`, got `int` - at `$[1].content```).
    """
    if isinstance(data, str | bytes):
        return msgspec.json.decode(data, type=Messages)
    return msgspec.convert(data if isinstance(data, tuple | list) else list(data), Messages)


def dump_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as JSON-compatible dicts (what :func:`validate_messages` reads back)."""
    dumped: list[dict[str, Any]] = msgspec.json.decode(dump_messages_json(messages))
    return dumped


def dump_messages_json(messages: Iterable[Message]) -> str:
    """Messages as a JSON array (what :func:`validate_messages` reads back); lone
    surrogates in their text are replaced by U+FFFD (see :mod:`runtime.text`)."""
    return encode_json(messages if isinstance(messages, tuple | list) else list(messages)).decode()


def validate_value(cls: type[V], data: str | bytes | Mapping[str, Any]) -> V:
    """A ``cls`` (any of Honeycomb's values: a message, :class:`ToolCall`,
    :class:`Usage`, :class:`Transcript`, ``ModelRequest`` ...) from JSON or a dict.

    Raises:
        msgspec.ValidationError: (a ``ValueError``) naming the field that is wrong, or
            that is unknown.
    """
    if isinstance(data, str | bytes):
        return msgspec.json.decode(data, type=cls)
    return msgspec.convert(data, cls)


def dump_value(value: object) -> dict[str, Any]:
    """A value (see :func:`validate_value`) as a JSON-compatible dict (lists, not
    tuples: what JSON reads back)."""
    dumped: dict[str, Any] = msgspec.json.decode(encode_json(value))
    return dumped


def dump_value_json(value: object) -> str:
    """A value (see :func:`validate_value`) as JSON: the same value, the same text
    (lone surrogates replaced, as by :func:`dump_messages_json`)."""
    return encode_json(value).decode()
