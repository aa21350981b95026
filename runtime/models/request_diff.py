"""How a model request differs from another, first: what a cassette's mismatch
(:class:`~runtime.errors.CassetteMismatch`) names. Both requests are in the JSON form
of :func:`runtime.models.cassettes.canonical`; the texts of two embeddings calls are
compared by :func:`texts_difference`."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "OPTIONS",
    "common_messages",
    "common_start",
    "first_difference",
    "texts_difference",
]

OPTIONS = ("tools", "tool_choice", "parallel_tool_calls", "output", "max_output_tokens")
"""What a request's key holds besides its messages, as the differences name them."""

_SHORT = 80
"""The characters of a value a difference shows whole."""


def common_messages(ours: list[Any], theirs: list[Any]) -> int:
    """How many messages two requests share from the first."""
    count = 0
    for mine, other in zip(ours, theirs, strict=False):
        if mine != other:
            break
        count += 1
    return count


def first_difference(recorded: dict[str, Any], asked: dict[str, Any]) -> str:
    """The first difference between a recorded request and one asked, both
    canonical: an option, else the first message that differs, else one
    that only one of them has."""
    for name in OPTIONS:
        if recorded[name] != asked[name]:
            if name == "tools":
                return _tools_difference(recorded[name], asked[name])
            return f"{name}: {_value_difference(recorded[name], asked[name])}"
    ours, theirs = asked["messages"], recorded["messages"]
    index = common_messages(ours, theirs)
    if index < len(ours) and index < len(theirs):
        mine, other = ours[index], theirs[index]
        for field in sorted(set(mine) | set(other)):
            if mine.get(field) != other.get(field):
                return (
                    f"message {index + 1} ({mine.get('role')}), {field}: "
                    f"{_value_difference(other.get(field), mine.get(field))}"
                )
    if len(ours) > len(theirs):
        extra = ours[len(theirs)]
        return (
            f"asked with {len(ours)} messages, recorded with {len(theirs)}: message "
            f"{len(theirs) + 1} ({extra.get('role')}) is new: {_short(extra.get('content'))}"
        )
    return f"asked with {len(ours)} messages, recorded with {len(theirs)}"


def common_start(ours: str, theirs: str) -> int:
    """How many characters two texts share from the first."""
    return next(
        (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
        min(len(ours), len(theirs)),
    )


def texts_difference(recorded: list[str], asked: list[str]) -> str:
    """The first difference between the texts of a recorded embeddings call and those
    asked: the first text that differs, else one that only one of them has."""
    index = common_messages(asked, recorded)
    if index < len(asked) and index < len(recorded):
        return f"text {index + 1}: {_text_difference(recorded[index], asked[index])}"
    if len(asked) > len(recorded):
        return (
            f"asked {len(asked)} texts, recorded {len(recorded)}: text {len(recorded) + 1} "
            f"is new: {_short(asked[len(recorded)])}"
        )
    return f"asked {len(asked)} texts, recorded {len(recorded)}"


def _tools_difference(recorded: list[Any], asked: list[Any]) -> str:
    names = [tool["name"] for tool in recorded], [tool["name"] for tool in asked]
    if names[0] != names[1]:
        return f"tools: recorded {names[0]}, asked {names[1]}"
    for before, now in zip(recorded, asked, strict=True):
        if before != now:
            field = next(f for f in sorted(set(before) | set(now)) if before.get(f) != now.get(f))
            difference = _value_difference(before.get(field), now.get(field))
            return f"tool {now['name']!r}, {field}: {difference}"
    return "tools differ"


def _value_difference(recorded: Any, asked: Any) -> str:
    """Where two values first differ: a little of each around the first character
    that differs, of their texts, or of their JSON (a schema, tool calls) when either
    is too long to show whole."""
    if isinstance(recorded, str) and isinstance(asked, str):
        return _text_difference(recorded, asked)
    if len(_json(recorded)) <= _SHORT and len(_json(asked)) <= _SHORT:
        return f"recorded {_short(recorded)}, asked {_short(asked)}"
    ours, theirs = _json(recorded), _json(asked)
    at = common_start(ours, theirs)
    return (
        f"at character {at + 1} of its JSON: recorded {_around(ours, at)}, "
        f"asked {_around(theirs, at)}"
    )


def _around(text: str, at: int) -> str:
    """A little of ``text`` around character ``at``, marked where it is cut."""
    start = max(0, at - 30)
    lead, trail = "..." if start else "", "..." if at + 40 < len(text) else ""
    return f"{lead}{text[start : at + 40]}{trail}"


def _json(value: Any) -> str:
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


def _text_difference(recorded: str, asked: str) -> str:
    """Where two texts first differ: a little of each around the first character that
    differs."""
    at = common_start(recorded, asked)
    start = max(0, at - 30)
    lead = "..." if start else ""
    return (
        f"at character {at + 1}: recorded {lead}{recorded[start : at + 40]!r}, "
        f"asked {lead}{asked[start : at + 40]!r}"
    )


def _short(value: Any, limit: int = _SHORT) -> str:
    text = _json(value)
    shown = text if len(text) <= limit else text[:limit] + "..."
    return repr(shown) if isinstance(value, str) else shown
