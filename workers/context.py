"""Context assembly: what the model sees each turn.

The head (the role's instructions and the task), then the summary of the turns folded
so far (see :class:`Compaction`), then as much of the rest of the transcript as fits
the window, newest first. The transcript is cut only between groups (an assistant
message with its tool observations, or a lone user message), so a tool call is never
separated from its observation. When something is left out, a note says so.

Context size is estimated by :func:`estimate_tokens`: four characters a token, plus
four tokens a message. The loop adds that estimate of what was added since the last
model call to the input tokens the server reported for it (no tokenizer is needed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime import AssistantMessage, Message, ToolMessage, ToolSchema, UserMessage
from runtime.value import Value

__all__ = [
    "Compaction",
    "ContextWindow",
    "assemble",
    "estimate_tokens",
    "fold_point",
    "summary_message",
]

CHARS_PER_TOKEN = 4
"""The estimate's rule: characters of text a token (English prose and JSON average
about four with the tokenizers of current models)."""
TOKENS_PER_MESSAGE = 4
"""What a message's framing (its role, separators) adds, in tokens."""


class Compaction(BaseModel):
    """A context budget kept by rolling summaries: before a model call whose context
    would exceed ``budget_tokens``, the oldest turns, all but the last ``keep_turns``,
    are folded with the previous summary into one summary message (a model call of
    its own), placed after the system prompt and the task. When even that does not
    fit, the window leaves out the oldest of the turns that remain. With
    ``trigger_tokens`` below the budget, the fold comes as soon as the context would
    exceed the trigger, which keeps every request small (and the tokens sent over a
    long run few); the budget stays the ceiling the window enforces.

    Attributes:
        budget_tokens: Input tokens one model call may be sent.
        trigger_tokens: The context size past which the oldest turns are folded
            (None: ``budget_tokens``); at most the budget.
        keep_turns: The most recent turns (an answer with its observations) that stay
            as they are.
        model: The model that writes the summary, by its name in the hive (an
            Executor's ``models``); None: the worker's own.
        instructions: Added to the summary prompt: what matters to keep.
    """

    model_config = ConfigDict(
        defer_build=True, frozen=True, extra="forbid", protected_namespaces=()
    )

    budget_tokens: int = Field(ge=256)
    trigger_tokens: int | None = Field(default=None, ge=256)
    keep_turns: int = Field(default=4, ge=1, le=1000)
    model: str | None = None
    instructions: str = ""

    @model_validator(mode="after")
    def _trigger_within_budget(self) -> Compaction:
        if self.trigger_tokens is not None and self.trigger_tokens > self.budget_tokens:
            raise ValueError(
                f"trigger_tokens ({self.trigger_tokens}) must not exceed budget_tokens "
                f"({self.budget_tokens}): the budget is the ceiling of every request"
            )
        return self

    @property
    def trigger(self) -> int:
        """The context size past which the oldest turns are folded."""
        return self.budget_tokens if self.trigger_tokens is None else self.trigger_tokens


class ContextWindow(Value, frozen=True, kw_only=True):
    """How much of the transcript to show.

    Attributes:
        max_chars: Characters of transcript to keep (about four per token); None
            keeps everything. The newest group is always kept, whatever its size.
    """

    max_chars: int | None = None

    def __post_init__(self) -> None:
        if self.max_chars is not None and self.max_chars < 1:
            raise ValueError(f"max_chars must be positive, got {self.max_chars}")

    def narrowest(self, other: ContextWindow) -> ContextWindow:
        """This window or ``other``, whichever keeps fewer characters."""
        if other.max_chars is None or (
            self.max_chars is not None and self.max_chars <= other.max_chars
        ):
            return self
        return other

    def fit(self, messages: Sequence[Message]) -> tuple[tuple[Message, ...], int]:
        """The messages that fit, and how many were left out."""
        if self.max_chars is None:
            return tuple(messages), 0
        groups = _groups(messages)
        kept: list[tuple[Message, ...]] = []
        size = 0
        for group in reversed(groups):
            group_size = sum(_size(m) for m in group)
            if kept and size + group_size > self.max_chars:
                break
            kept.append(group)
            size += group_size
        shown = tuple(m for group in reversed(kept) for m in group)
        return shown, len(messages) - len(shown)


def assemble(
    head: tuple[Message, ...],
    messages: tuple[Message, ...],
    window: ContextWindow,
    summary: Message | None = None,
) -> tuple[tuple[Message, ...], int]:
    """The head (system prompt and task), the summary of the folded turns if there is
    one, then the conversation (what the summary does not fold), windowed; and how many
    of ``messages`` the window left out."""
    first = head if summary is None else (*head, summary)
    if window.max_chars is None:
        return first + messages, 0
    shown, omitted = window.fit(messages)
    if not omitted:
        return first + shown, 0
    note = UserMessage(
        content=f"[{omitted} earlier messages of this conversation were left out to fit the "
        "context window; the most recent ones follow.]"
    )
    return (*first, note, *shown), omitted


SUMMARY_HEADER = "[Summary of the first {folded} messages of this conversation, folded to fit "
"""How the summary message starts (a model reading it knows what it stands for)."""


def summary_message(summary: str, folded: int) -> UserMessage:
    """The message that stands for the first ``folded`` messages of the conversation:
    the same text until the next compaction, so the prefix a provider caches holds."""
    return UserMessage(
        content=SUMMARY_HEADER.format(folded=folded) + f"the context budget:]\n{summary}"
    )


def fold_point(messages: Sequence[Message], start: int, keep_turns: int) -> int:
    """Where a fold of ``messages[start:]`` ends so that the last ``keep_turns`` turns
    stay: the index of an assistant message (a turn starts with the model's answer and
    holds its observations), or ``start`` when there are not more turns than that."""
    starts = [i for i in range(start, len(messages)) if isinstance(messages[i], AssistantMessage)]
    if len(starts) <= keep_turns:
        return start
    return starts[len(starts) - keep_turns]


def estimate_tokens(messages: Sequence[Message], tools: Sequence[ToolSchema] = ()) -> int:
    """The input tokens ``messages`` (and ``tools``' schemas) take, by the rule of
    :data:`CHARS_PER_TOKEN` and :data:`TOKENS_PER_MESSAGE`."""
    chars = sum(_size(m) for m in messages)
    chars += sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)


def _groups(messages: Sequence[Message]) -> list[tuple[Message, ...]]:
    """Split into groups that must stay together: an assistant turn and its observations."""
    groups: list[list[Message]] = []
    for message in messages:
        if isinstance(message, ToolMessage) and groups and _opens_calls(groups[-1][0]):
            groups[-1].append(message)
        else:
            groups.append([message])
    return [tuple(g) for g in groups]


def _opens_calls(message: Message) -> bool:
    return isinstance(message, AssistantMessage) and bool(message.tool_calls)


def _size(message: Message) -> int:
    if isinstance(message, AssistantMessage):
        return (
            len(message.content or "")
            + len(message.reasoning or "")
            + sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
        )
    return len(message.content)
