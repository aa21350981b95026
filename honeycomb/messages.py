"""The values a conversation is made of: messages, tool calls, reasoning items, token
usage, and reading and writing them as dicts and JSON at a program's boundaries.

    from honeycomb.messages import dump_messages_json, validate_messages

The message classes, ``ToolCall`` and ``Usage`` are in ``honeycomb`` too.
"""

from runtime.messages import (
    AssistantMessage,
    Message,
    Messages,
    ObservationStatus,
    ReasoningItem,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    Usage,
    UserMessage,
    dump_messages,
    dump_messages_json,
    dump_value,
    dump_value_json,
    validate_messages,
    validate_value,
)

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
]
