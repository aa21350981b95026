"""What a test's model function reads off the request it is sent."""

from __future__ import annotations

from runtime import AssistantMessage, ModelRequest, ToolMessage

Answer = AssistantMessage | str
"""What a ``FunctionModel``'s function answers: a message, or its text."""


def role_of(request: ModelRequest) -> str:
    """The role whose worker sent ``request`` (its system prompt names it)."""
    first = str(request.messages[0].content)
    return first.removeprefix("You are the ").split(" worker", 1)[0]


def observations(request: ModelRequest) -> list[ToolMessage]:
    """The tool results in ``request``'s conversation, in order."""
    return [m for m in request.messages if isinstance(m, ToolMessage)]
