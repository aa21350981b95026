"""Reading the actions out of a reply written for the text tool protocol
(:mod:`runtime.models.protocols.text_tools`).

An action is a JSON object naming a tool, ``{"tool": "<name>", "arguments": {...}}``,
in a code fence or in the prose. Reading is lenient where models are sloppy: any
fence (or none), prose around and between the actions, single quotes, unquoted keys,
Python's ``True``/``False``/``None``, trailing commas, raw newlines in strings, several
actions as a JSON array, and the shapes other formats use (``{"name": ..., "arguments"
or "parameters": ...}``, ``{"function": {"name": ..., "arguments": ...}}``, the
arguments beside the tool's name: ``{"tool": ..., "city": ...}``). It is
strict where it matters: an action naming a tool nobody has, or with arguments that
are not an object, or a block that looks like an action but is not JSON even so, is
still an action, never dropped, so the dispatcher answers it with an error
observation. A reply with no action is the final answer.

The classic ReAct format (``Action: <tool>``, then ``Action Input: <JSON>``) is read
in a reply that has no JSON action.

A reply is cut at a line starting with "Observation" after its first action: the
model went on to write the tool's answer itself, and whatever follows rests on it. A
fence opened after the actions with nothing in it (the next action's, cut off by the
output limit as it began) is not prose.

A fence inside an action's arguments (a markdown body) does not close the action's
fence. Degenerate output (thousands of brackets) is read in one pass, and JSON nested
too deeply to read is prose: reading never raises and never stalls the event loop.
"""

from __future__ import annotations

import json
import re
from typing import Any

from runtime.models.protocols.lenient_json import BracketEnds, TooDeep, loads_lenient
from runtime.value import Value

__all__ = ["Action", "Reply", "read_reply"]


class Action(Value, frozen=True, kw_only=True):
    """One action: the tool it names and its arguments as JSON text (the text as
    written, when the block is not JSON)."""

    name: str
    arguments: str


class Reply(Value, frozen=True, kw_only=True):
    """What a reply says: its actions, in order, and the prose outside them."""

    content: str | None
    actions: tuple[Action, ...] = ()
    thinking: str | None = None


_FENCE_OPEN = re.compile(r"```[ \t]*[\w+.-]*[ \t]*\n?")
_FENCE_CLOSE = re.compile(r"\s*(?:(```)|(?=[\[{]))")  # the closing fence, or another value
_OPENED_FENCE = re.compile(r"\s*```[\w+.-]*\s*\Z")  # a fence opened last, nothing in it
_THINK = re.compile(r"\s*<think>(.*?)</think>", re.S)
_OBSERVATION = re.compile(r"^[ \t>*_#]*observation\b", re.I | re.M)
# A block that is not JSON but meant as an action: a tool key near its start.
_ACTION_LIKE = re.compile(r"""\s*[\[{]\s*\{?\s*["']?(?:tool|name|function)["']?\s*:""")
# Where in a text an action may start: an object (or a list of them) whose first key
# is one an action has.
_ACTION_START = re.compile(
    r"""[\[{]\s*\{?\s*["']?(?:tool|tool_name|tool_calls|actions|calls|name|function|arguments|args"""
    r"""|parameters|input)["']?\s*:"""
)
_NAMED = re.compile(r"""["']?(?:tool|name)["']?\s*:\s*["']?([\w.:/-]+)""")
_REACT = re.compile(
    r"^[ \t]*action[ \t]*:[ \t]*`?([\w.:/-]+)`?[ \t]*\n[ \t]*action[ \t]+input[ \t]*:[ \t]*",
    re.I | re.M,
)
_TOOL_KEYS = ("tool", "tool_name")
_LIST_KEYS = ("actions", "tool_calls", "calls")
_ARGUMENT_KEYS = ("arguments", "args", "parameters", "input")


def read_reply(text: str) -> Reply:
    """The actions of ``text`` and the prose around them (a leading ``<think>`` block,
    as some local reasoning models write, is their thinking, not read for actions)."""
    thinking = None
    found = _THINK.match(text)
    if found is not None:
        thinking, text = found[1].strip() or None, text[found.end() :].lstrip()
    spans = _spans(text) or _react_spans(text)
    if spans:
        cut = _OBSERVATION.search(text, spans[0][1])
        if cut is not None:
            text = text[: cut.start()]
            spans = [s for s in spans if s[0] < cut.start()]
    prose: list[str] = []
    at = 0
    for start, end, _ in spans:
        prose.append(text[at:start])
        at = end
    prose.append(text[at:])
    content = re.sub(r"\n{3,}", "\n\n", "".join(prose)).strip() if spans else text
    actions = tuple(a for _, _, found_actions in spans for a in found_actions)
    if actions and content.count("```") % 2:  # the fence of an action cut off as it opened
        content = _OPENED_FENCE.sub("", content)
    return Reply(content=content or None, actions=actions, thinking=thinking)


Span = tuple[int, int, list[Action]]
"""Where in the text actions were read (start, end), and the actions."""


def _spans(text: str) -> list[Span]:
    """Every stretch of ``text`` that holds actions: fences first, then the prose."""
    ends = BracketEnds(text)
    spans: list[Span] = []
    at = 0
    while (fence := _FENCE_OPEN.search(text, at)) is not None:
        around = _action_around(ends, at, fence.start())
        if around is not None:  # the "fence" is inside an action written in the prose
            spans += _in_prose(ends, at, around)
            at = around
            continue
        spans += _in_prose(ends, at, fence.start())
        inner_end, end = _fence_end(ends, fence.end())
        inner = text[fence.end() : inner_end]
        actions = _actions_in(inner)
        if actions is None:  # not JSON as a whole: actions among lines of prose
            inside = _in_prose(BracketEnds(inner), 0, len(inner))
            actions = [a for _, _, found in inside for a in found]
        if actions:
            spans.append((fence.start(), end, actions))
        at = end
    spans += _in_prose(ends, at, len(text))
    return spans


def _react_spans(text: str) -> list[Span]:
    """The actions of a reply in the classic ReAct format (``Action: <tool>`` then
    ``Action Input: <JSON>``), read when it has no JSON action: models prompted that way
    before keep writing it."""
    ends = BracketEnds(text)
    spans: list[Span] = []
    at = 0
    for found in _REACT.finditer(text):
        if found.start() < at:  # inside the previous action's input
            continue
        start = found.end()
        close = ends.close(start) if start < len(text) and text[start] in "{[" else None
        if close is None:  # not a bracketed value: the rest of the line
            line_end = text.find("\n", start)
            close = len(text) if line_end < 0 else line_end
        raw = text[start:close].strip()
        try:
            arguments = _arguments_text(loads_lenient(raw)) if raw else "{}"
        except ValueError:
            arguments = raw  # the tool refuses it, saying why
        spans.append((found.start(), close, [Action(name=found[1], arguments=arguments)]))
        at = close
    return spans


def _action_around(ends: BracketEnds, start: int, at: int) -> int | None:
    """The end of an action that opens in the prose between ``start`` and ``at`` and
    closes past ``at``, or None if ``at`` is inside none."""
    i = start
    while (found := _ACTION_START.search(ends.text, i, at)) is not None:
        close = ends.close(found.start())
        if close is not None and close > at:
            return close
        i = close if close is not None else found.start() + 1
    return None


def _fence_end(ends: BracketEnds, start: int) -> tuple[int, int]:
    """Where the fenced block whose body starts at ``start`` ends: its body's end and
    the fence's. A body of JSON values ends at the fence right after them, so one
    inside an argument (a markdown body) does not close it; any other at the first."""
    text, i, n = ends.text, start, len(ends.text)
    while (value := _FENCE_CLOSE.match(text, i)) is not None and value[1] is None:
        close = ends.close(value.end())
        if close is None:
            break
        i = close
    else:
        if value is not None and i > start:  # JSON values, then the closing fence
            return value.start(1), value.end(1)
    found = text.find("```", start)
    return (found, found + 3) if found >= 0 else (n, n)


def _in_prose(ends: BracketEnds, start: int, end: int) -> list[Span]:
    """The actions written as bare JSON between ``start`` and ``end``. A bracketed
    block that holds none is looked into only where an action may start, so each
    block is read once, however deep it nests."""
    text = ends.text
    spans: list[Span] = []
    i = start
    while i < end:
        if text[i] not in "{[":
            i += 1
            continue
        close = ends.close(i, end)
        if close is None:  # never closed: an action cut off, or a brace in prose
            if _ACTION_LIKE.match(text, i):
                spans.append((i, end, [_unreadable(text[i:end])]))
                break
            i = _next_action(text, i, end)
            continue
        block = text[i:close]
        try:
            value = loads_lenient(block)
        except ValueError as exc:
            if _ACTION_LIKE.match(block):
                spans.append((*_with_backticks(text, i, close), [_unreadable(block)]))
                i = close
            else:
                i = close if isinstance(exc, TooDeep) else _next_action(text, i, close)
            continue
        actions = _actions_of(value)
        if actions:
            spans.append((*_with_backticks(text, i, close), actions))
        i = close if actions or isinstance(value, dict) else _next_action(text, i, close)
    return spans


def _next_action(text: str, start: int, end: int) -> int:
    """Where the next action may start after the bracket at ``start`` and before
    ``end`` (``end`` if nowhere)."""
    found = _ACTION_START.search(text, start + 1, end)
    return found.start() if found is not None else end


def _with_backticks(text: str, start: int, end: int) -> tuple[int, int]:
    """The span, with the single backticks around it (inline code) if any."""
    if start > 0 and end < len(text) and text[start - 1] == "`" and text[end] == "`":
        return start - 1, end + 1
    return start, end


def _actions_in(block: str) -> list[Action] | None:
    """The actions a whole fenced block holds; None when it is not JSON, [] when it
    is JSON but no action (a code sample, or a JSON answer in a fence)."""
    try:
        value = loads_lenient(block)
    except ValueError:
        return None
    return _actions_of(value)


def _actions_of(value: Any) -> list[Action]:
    """``value`` as actions: one action object, a list of them, or ``{"actions": [...]}``
    (``tool_calls`` or ``calls`` for ``actions``)."""
    if isinstance(value, dict):
        action = _action(value)
        if action is not None:
            return [action]
        listed = (
            next((value[k] for k in _LIST_KEYS if k in value), None) if len(value) == 1 else None
        )
        return _actions_of(listed) if isinstance(listed, list) else []
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        actions = [_action(v) for v in value]
        return [a for a in actions if a is not None] if all(actions) else []
    return []


def _action(value: dict[str, Any]) -> Action | None:
    function = value.get("function")
    if isinstance(function, dict) and "name" in function:  # the OpenAI shape
        value = function
    key = next((k for k in _TOOL_KEYS if k in value), None)
    if key is None and "name" in value and any(k in value for k in _ARGUMENT_KEYS):
        key = "name"
    if key is None:
        return None
    name = value[key]
    arguments = next((value[k] for k in _ARGUMENT_KEYS if k in value), None)
    if key in _TOOL_KEYS and not any(k in value for k in _ARGUMENT_KEYS):
        arguments = {k: v for k, v in value.items() if k != key} or None  # beside the name
    return Action(
        name=name.strip() if isinstance(name, str) else json.dumps(name),
        arguments=_arguments_text(arguments),
    )


def _arguments_text(arguments: Any) -> str:
    """The arguments as JSON text: an object as it is; an object written as a string
    of JSON as that object; anything else as it is, for the tool to refuse."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        try:
            inner = loads_lenient(arguments)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            arguments = inner
    return json.dumps(arguments, ensure_ascii=False)


def _unreadable(block: str) -> Action:
    """A block meant as an action that is not JSON: the tool it names (if it can be
    read) with the block as its arguments, which the tool refuses, saying why."""
    named = _NAMED.search(block)
    return Action(name=named[1] if named else "", arguments=block.strip())
