"""Context assembly: what the model sees each turn.

The head (the role's instructions and the task), then as much of the transcript as fits the
window, newest first. The transcript is cut only between groups (an assistant
message with its tool observations, or a lone user message), so a tool call is never
separated from its observation. When something is left out, a note says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime import AssistantMessage, Message, ToolMessage, UserMessage
from runtime.value import Value

__all__ = ["ContextWindow", "assemble"]


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
    head: tuple[Message, ...], messages: tuple[Message, ...], window: ContextWindow
) -> tuple[Message, ...]:
    """The head (system prompt and task), then the conversation, windowed."""
    if window.max_chars is None:
        return head + messages
    shown, omitted = window.fit(messages)
    if not omitted:
        return head + shown
    note = UserMessage(
        content=f"[{omitted} earlier messages of this conversation were left out to fit the "
        "context window; the most recent ones follow.]"
    )
    return (*head, note, *shown)


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
        return len(message.content or "") + sum(
            len(c.name) + len(c.arguments) for c in message.tool_calls
        )
    return len(message.content)
