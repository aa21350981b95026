"""The JSON tool protocol's wire format (:mod:`~runtime.models.protocols.json_tools`
wraps a model in it):
a request with tools becomes a tool-less one whose answer must follow a JSON schema,
and the answer is read back into tool calls or a final answer.

The schema is a ``oneOf``: one object per tool, ``{"tool": <its name, a const>,
"arguments": <its own arguments' schema>}``; where a turn may call several tools, an
object ``{"calls": [<such objects>]}``; and the answer, ``{"answer": <text, or the
output schema>}``. ``tool_choice`` narrows it: ``required`` leaves the answer out, a
named tool leaves only that tool, ``none`` only the answer. A server that decodes
under the schema (llama.cpp, vLLM, Ollama, SGLang) cannot write anything else; one
that refuses ``json_schema`` is asked the next way, as for any structured output (see
:mod:`runtime.models.openai.endpoint`), and the instructions say the format in words too.

Written out, the conversation is as the text protocol writes it (see
:mod:`runtime.models.protocols.text_wire`): the catalogue in the leading system message,
the same in every turn (the narrowing of ``tool_choice`` is said after the
conversation), the observations of a turn as one user message; an earlier answer's
calls are the JSON object that asked for them, with arguments that are not an object
sent as ``{}``.

Read back: strict JSON first; then leniently, as the text protocol reads a reply (a
fence around it, single quotes, several calls), for a server that does not enforce
the schema; an answer cut off at the output limit keeps its text as far as it goes; a
reply with no call in it is the answer as written.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Callable
from typing import Any

import msgspec

from runtime.messages import AssistantMessage, ToolCall
from runtime.model import ModelRequest, OutputSchema, ToolSchema
from runtime.models.openai.request import wire_arguments
from runtime.models.protocols.actions import Reply, read_reply
from runtime.models.protocols.text_wire import (
    CATALOGUE,
    TOOLS_HEADING,
    catalogue,
    offers_tools,
    tool_less,
    uses_tools,
    with_actions,
    written,
)
from runtime.models.protocols.text_wire import native_request as native_text_request

__all__ = [
    "SCHEMA_NAME",
    "is_json_turn",
    "json_reply",
    "json_request",
    "native_request",
    "turn_schema",
    "written_call",
    "written_reply",
]

SCHEMA_NAME = "tool_call_or_answer"
"""The name of the response format a turn of the JSON protocol asks for."""

_FORMAT = (
    "You answer with one JSON object and nothing else. To use a tool, answer "
    '{"tool": "<tool name>", "arguments": {<its arguments, as its schema says>}}.'
)
_SEVERAL = ' To use several tools at once, answer {"calls": [<one such object per call>]}.'
_RESULTS = (
    ' The results come back in the next message, one "Observation for <id> (<tool>): ..." '
    "per call, in order."
)
_ANSWER = ' When you need no more tools, give your final answer: {"answer": "<your answer>"}.'
_STRUCTURED = (
    ' When you need no more tools, give your final answer as {"answer": <JSON that follows '
    "the schema of the answer>}."
)
_PARTIAL_ANSWER = re.compile(r'^\s*\{\s*"answer"\s*:\s*"')


def is_json_turn(request: ModelRequest) -> bool:
    """Whether ``request`` was written for the JSON protocol (its answer's format)."""
    return request.output is not None and request.output.name == SCHEMA_NAME


def json_request(request: ModelRequest) -> ModelRequest:
    """``request`` without tools, its answer's format the turn's schema; one with no
    tools offered and none called in its conversation, as it is."""
    if not uses_tools(request):
        return request
    messages = written(request.messages, written_call)
    text = _instructions(request) if request.tools else None
    output = OutputSchema(name=SCHEMA_NAME, json_schema=turn_schema(request), strict=False)
    return tool_less(request, messages, text, output)


def _instructions(request: ModelRequest) -> str:
    """The instructions: the same in every turn of a conversation, whatever the turn
    may do (its schema holds it to that, and a line after the conversation says it)."""
    several = _SEVERAL if request.parallel_tool_calls else ""
    answer = _ANSWER if request.output is None else _STRUCTURED
    rules = f"{_FORMAT}{several}{_RESULTS}{answer}"
    return f"{TOOLS_HEADING}\n\n{CATALOGUE}\n{catalogue(request.tools)}\n\n{rules}"


def _offered(request: ModelRequest) -> tuple[ToolSchema, ...]:
    """The tools this turn may call (a named ``tool_choice``: that one)."""
    if not offers_tools(request):
        return ()
    choice = request.tool_choice
    if choice in ("auto", "required"):
        return request.tools
    return tuple(t for t in request.tools if t.name == choice)


def _answers(request: ModelRequest) -> bool:
    """Whether this turn may answer rather than call a tool."""
    return not offers_tools(request) or request.tool_choice == "auto"


def turn_schema(request: ModelRequest) -> dict[str, Any]:
    """The JSON schema of one turn's answer: a tool call, several, or the answer."""
    defs: dict[str, Any] = {}
    calls: list[dict[str, Any]] = []
    for index, tool in enumerate(_offered(request)):
        name = f"call_{index}"
        arguments = _hoisted(tool.parameters, name, defs)
        defs[name] = _object({"tool": {"const": tool.name}, "arguments": arguments})
        calls.append({"$ref": f"#/$defs/{name}"})
    options = list(calls)
    if calls and request.parallel_tool_calls:
        item = calls[0] if len(calls) == 1 else {"oneOf": calls}
        listed = {"type": "array", "items": item, "minItems": 1}
        options.append(_object({"calls": listed}))
    if _answers(request) or not options:
        output = request.output
        text = {"type": "string"} if output is None else None
        answer = text or _hoisted(output.json_schema if output else {}, "answer", defs)
        options.append(_object({"answer": answer}))
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"oneOf": options}
    if "$ref" in schema:  # one call alone: the object itself
        schema = defs.pop(schema["$ref"].rpartition("/")[2])
    return {**schema, "$defs": defs} if defs else schema


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _hoisted(schema: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """``schema`` to be embedded in another: its own definitions (``$defs``,
    ``definitions``) moved into ``defs`` under ``prefix``, its references to them
    rewritten, so that two tools' definitions of one name do not meet. Its other
    references within itself (``#/properties/a``, as zod-to-json-schema writes a part
    used twice; ``#``, a recursive one) point at a copy of it in ``defs``
    (``prefix-schema``): where it is embedded is not the root they name. A reference
    to another document is left out (that part takes any value here; the tool still
    validates its arguments): no server that decodes under the schema fetches one,
    and llama.cpp refuses the whole request."""
    found = copy.deepcopy(schema)
    own: dict[str, Any] = {**found.pop("definitions", {}), **found.pop("$defs", {})}
    renamed = {name: f"{prefix}.{name}" for name in own}
    whole = f"{prefix}-schema"
    rooted: list[str] = []  # the references to its root, as found

    def moved(ref: str) -> str | None:
        for root in ("#/$defs/", "#/definitions/"):
            if ref.startswith(root):
                name, slash, rest = ref[len(root) :].partition("/")
                if name in renamed:
                    return f"#/$defs/{renamed[name]}{slash}{rest}"
        if ref != "#" and not ref.startswith("#/"):
            return None  # another document's, which no server fetches: any value
        rooted.append(ref)
        return f"#/$defs/{whole}{ref[1:]}"

    for name, body in own.items():
        defs[renamed[name]] = _rewritten(body, moved)
    result: dict[str, Any] = _rewritten(found, moved)
    if rooted:
        defs[whole] = copy.deepcopy(result)
    return result


def _rewritten(node: Any, moved: Callable[[str], str | None]) -> Any:
    if isinstance(node, list):
        return [_rewritten(v, moved) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _rewritten(v, moved) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str):
        where = moved(ref)
        if where is None:
            del out["$ref"]
        else:
            out["$ref"] = where
    return out


def written_call(message: AssistantMessage) -> AssistantMessage:
    """``message`` as a model following the JSON protocol writes it: its calls as the
    JSON object that asks for them (arguments that are not an object as ``{}``)."""
    if not message.tool_calls:
        return message
    calls = [_call(c) for c in message.tool_calls]
    value = calls[0] if len(calls) == 1 else {"calls": calls}
    text = json.dumps(value, ensure_ascii=False)
    return msgspec.structs.replace(message, content=text, tool_calls=())


def _call(call: ToolCall) -> dict[str, Any]:
    return {"tool": call.name, "arguments": json.loads(wire_arguments(call.arguments))}


def json_reply(message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
    """The model's reply to ``request`` (written out) with its calls as tool calls and
    its answer as its text."""
    if not uses_tools(request) or not message.content:
        return message
    reply = _read(message.content)
    if reply.actions or reply.thinking is not None:
        return with_actions(message, request, reply)
    if reply.content == message.content:
        return message
    return msgspec.structs.replace(message, content=reply.content)


def _read(text: str) -> Reply:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict) and set(value) == {"answer"}:
        answer = value["answer"]
        shown = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        return Reply(content=shown, thinking=None)
    reply = read_reply(text)  # a call, several, or a server that did not hold to the schema
    if reply.actions or reply.thinking is not None:
        return reply
    if value is None and _PARTIAL_ANSWER.match(text):
        return Reply(content=_partial_answer(text))
    return Reply(content=text)


def _partial_answer(text: str) -> str:
    """The text of an answer object cut off before it closed, as far as it goes."""
    body = text[_PARTIAL_ANSWER.match(text).end() :]  # type: ignore[union-attr]
    for end in range(len(body), max(len(body) - 8, -1), -1):  # an escape cut in two
        try:
            found: str = json.loads(f'"{body[:end].rstrip(chr(92))}"')
            return found
        except ValueError:
            continue
    return body


def native_request(request: ModelRequest) -> ModelRequest:
    """The request :func:`json_request` wrote ``request`` from, read back from its text
    (for a model that follows the protocol by rules: the offline model): the tools,
    the earlier calls, the observations, and the answer's own schema, if any."""
    native = native_text_request(msgspec.structs.replace(request, output=None))
    answer = _answer_schema(request.output.json_schema) if request.output else None
    output = OutputSchema(name="Answer", json_schema=answer) if answer is not None else None
    return msgspec.structs.replace(native, output=output)


def _answer_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of the answer object in a turn's schema (None: text)."""
    for option in schema.get("oneOf", [schema]):
        answer = option.get("properties", {}).get("answer")
        if answer is not None:
            if answer.get("type") == "string" and len(answer) == 1:
                return None
            return {**answer, "$defs": schema.get("$defs", {})}
    return None


def written_reply(message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
    """``message``, the answer to the native form of ``request`` (a turn written for
    the protocol), as a model following the protocol writes it: its calls as
    :func:`written_call` does, or its answer as ``{"answer": ...}``."""
    if message.tool_calls:
        return written_call(message)
    answer: Any = message.content or ""
    if request.output is not None and _answer_schema(request.output.json_schema) is not None:
        with contextlib.suppress(ValueError):  # not JSON: as written, for the loop to refuse
            answer = json.loads(answer)
    text = json.dumps({"answer": answer}, ensure_ascii=False)
    return msgspec.structs.replace(message, content=text)
