"""The text tool protocol's wire format: a request with tools written as a tool-less
request, and a reply read back into tool calls (:mod:`runtime.models.protocols.text_tools` wraps a
model in both).

Written out: the leading system message gains the tool catalogue (one JSON object a
tool: name, description, the schema of its arguments) and the action format; an
earlier answer's tool calls become action blocks after its text; the observations of
one turn become one user message, ``Observation for <id> (<tool>): ...`` each, in the
order of the calls (one message, as chat templates that want user and assistant to
alternate need). Structured output is asked for in the instructions while tools are
offered: a response format would forbid the actions.

The instructions are the same in every turn of a conversation, whatever the turn may
do, so that each request starts with the one before it (a server's prompt cache keeps
that prefix, as it does for function calling). What one turn may do, when
``tool_choice`` narrows it (``none``, as the wrap-up asks; ``required``; a named tool),
is said after the conversation: a line at the end of its last user message
(:func:`turn_rule`).

Read back (:func:`native_request`): the request as it was before it was written out,
for a model that follows the protocol by rules rather than by reading it (the
offline model).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import get_args

import msgspec

from runtime.messages import (
    AssistantMessage,
    Message,
    ObservationStatus,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from runtime.model import ModelRequest, OutputSchema, ToolSchema
from runtime.models.openai.request import output_instruction
from runtime.models.protocols.actions import Reply, read_reply

__all__ = [
    "CATALOGUE",
    "TOOLS_HEADING",
    "catalogue",
    "in_format",
    "native_request",
    "offers_tools",
    "replied",
    "text_request",
    "tool_less",
    "turn_rule",
    "uses_tools",
    "with_actions",
    "written",
    "written_answer",
]

TOOLS_HEADING = "# Tools"
CATALOGUE = (
    "You have these tools, one a line, each as JSON: its name, what it does, and the JSON "
    "schema of its arguments."
)
_FORMAT = """\
You have no function calling: you use a tool by writing an action, one JSON object in a \
```json code block, with the tool's name and its arguments:
```json
{"tool": "<tool name>", "arguments": {<the arguments, as its schema says>}}
```"""
_PARALLEL = (
    "Write one block per action. The actions of one reply run together: write every action "
    "you need now, then stop."
)
_SERIAL = "Write one action per reply, then stop."
_RESULTS = (
    'The results come back in the next message, one "Observation for <id> (<tool>): ..." '
    "per action, in the order of your actions. Never write an observation yourself."
)
_FINAL = "When you need no more tools, reply with your final answer alone, without any action."
_OUTPUT = "Your final answer is a reply without any action. "
_NO_TOOL = "Use no tool in this reply: give your final answer."
_SOME_TOOL = "Use at least one tool in this reply."
_NAMED_TOOL = "Use the tool {} in this reply."
_CHOICES = {_NO_TOOL: "none", _SOME_TOOL: "required"}
_OBSERVATION = re.compile(
    r"^Observation for (?P<id>\S+) \((?P<name>[^,()\n]*)(?:, (?P<status>[a-z]+))?\): ", re.M
)
_STATUSES: dict[str, ObservationStatus] = {s: s for s in get_args(ObservationStatus)}
_SCHEMA = re.compile(r"JSON schema, named (?P<name>[^:\n]+):\n(?P<schema>\{.*\})$", re.M)


def offers_tools(request: ModelRequest) -> bool:
    """Whether the model may call tools in this turn (the catalogue is written out)."""
    return bool(request.tools) and request.tool_choice != "none"


def uses_tools(request: ModelRequest) -> bool:
    """Whether the reply is read for actions: tools are offered, or the conversation
    has called some (a wrap-up offers none, and its actions are the loop's to refuse)."""
    return bool(request.tools) or any(
        isinstance(m, AssistantMessage) and m.tool_calls for m in request.messages
    )


def in_format(request: ModelRequest) -> bool:
    """Whether the reply is asked for in the output schema's response format: the turn
    may use no tool, so nothing forbids one (:func:`text_request`)."""
    return request.output is not None and not offers_tools(request)


def text_request(request: ModelRequest) -> ModelRequest:
    """``request`` without tools: the catalogue and the format in its instructions,
    the conversation's calls and observations as text."""
    messages = written(request.messages, written_answer)
    protocol = _protocol(request) if request.tools else None
    # With tools offered, structured output is asked for in the instructions: a
    # response format would forbid the actions.
    output = request.output if in_format(request) else None
    return tool_less(request, messages, protocol, output)


def tool_less(
    request: ModelRequest,
    messages: list[Message],
    protocol: str | None,
    output: OutputSchema | None,
) -> ModelRequest:
    """``request`` with no tools: ``messages``, the ``protocol``'s instructions (if
    any) added to its leading system message (or one of its own), what this turn may
    do (:func:`turn_rule`) after the conversation, and ``output``."""
    if protocol is not None:
        first = messages[0] if messages else None
        if isinstance(first, SystemMessage):
            messages[0] = SystemMessage(content=f"{first.content}\n\n{protocol}")
        else:
            messages.insert(0, SystemMessage(content=protocol))
    rule = turn_rule(request)
    if rule is not None:
        last = messages[-1] if messages else None
        if isinstance(last, UserMessage):  # one message: many templates want turns to alternate
            messages[-1] = UserMessage(content=f"{last.content}\n\n{rule}")
        else:
            messages.append(UserMessage(content=rule))
    return msgspec.structs.replace(
        request,
        messages=tuple(messages),
        tools=(),
        tool_choice="auto",
        parallel_tool_calls=True,
        output=output,
    )


def catalogue(tools: Sequence[ToolSchema]) -> str:
    """The tools as the protocols write them: one line of JSON a tool."""
    return "\n".join(
        json.dumps(
            {"name": t.name, "description": t.description, "parameters": t.parameters},
            ensure_ascii=False,
        )
        for t in tools
    )


def turn_rule(request: ModelRequest) -> str | None:
    """What this turn may do, said in words, when ``tool_choice`` narrows the tools
    the conversation has (None: anything the instructions allow)."""
    choice = request.tool_choice
    if not request.tools or choice == "auto":
        return None
    if choice == "none":
        return _NO_TOOL
    return _SOME_TOOL if choice == "required" else _NAMED_TOOL.format(choice)


def _protocol(request: ModelRequest) -> str:
    """The instructions: the same in every turn of a conversation (see the module)."""
    tools = catalogue(request.tools)
    rules = f"{_PARALLEL if request.parallel_tool_calls else _SERIAL} {_RESULTS}"
    output = request.output
    final = _FINAL if output is None else _OUTPUT + output_instruction(output)
    return f"{TOOLS_HEADING}\n\n{CATALOGUE}\n{tools}\n\n{_FORMAT}\n{rules}\n\n{final}"


def written(
    messages: tuple[Message, ...], answer: Callable[[AssistantMessage], AssistantMessage]
) -> list[Message]:
    """``messages`` as text: each answer with tool calls as ``answer`` writes it, the
    observations of one turn as one user message."""
    out: list[Message] = []
    observations: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            observations.append(_observation(message))
            continue
        if observations:
            out.append(UserMessage(content="\n\n".join(observations)))
            observations = []
        if isinstance(message, AssistantMessage) and message.tool_calls:
            out.append(answer(message))
        else:
            out.append(message)
    if observations:
        out.append(UserMessage(content="\n\n".join(observations)))
    return out


def _observation(message: ToolMessage) -> str:
    status = "" if message.status == "ok" else f", {message.status}"
    return f"Observation for {message.tool_call_id} ({message.name}{status}): {message.content}"


def written_answer(message: AssistantMessage) -> AssistantMessage:
    """``message`` as a model following the protocol writes it: its calls as action
    blocks after its text."""
    if not message.tool_calls:
        return message
    blocks = [f"```json\n{_action(call)}\n```" for call in message.tool_calls]
    text = "\n\n".join([message.content, *blocks] if message.content else blocks)
    return msgspec.structs.replace(message, content=text, tool_calls=())


def _action(call: ToolCall) -> str:
    """A call as the action that asks for it; arguments that are not JSON as written
    (the observation says what is wrong with them)."""
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, RecursionError):  # nested too deeply to parse is not JSON either
        return call.arguments
    return json.dumps({"tool": call.name, "arguments": arguments}, ensure_ascii=False)


def replied(message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
    """The model's reply to ``request`` (written out) with its actions as tool calls,
    each with an id no other call of the conversation has. A reply asked for in the
    output schema's response format (a turn that may use no tool) is the answer, read
    for no action: a schema's ``tool`` or ``name`` field is no call."""
    if not uses_tools(request) or not message.content or in_format(request):
        return message
    return with_actions(message, request, read_reply(message.content))


def with_actions(
    message: AssistantMessage, request: ModelRequest, reply: Reply
) -> AssistantMessage:
    """``message`` with ``reply``'s prose as its text and its actions as tool calls,
    each with an id no other call of ``request``'s conversation has."""
    if not reply.actions and reply.thinking is None:
        return message
    earlier = [
        c.id for m in request.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    taken = {*earlier, *(c.id for c in message.tool_calls)}
    calls = list(message.tool_calls)
    number = len(earlier)
    for action in reply.actions:
        number += 1
        while f"call_{number}" in taken:
            number += 1
        calls.append(ToolCall(id=f"call_{number}", name=action.name, arguments=action.arguments))
    return msgspec.structs.replace(
        message,
        content=reply.content,
        tool_calls=tuple(calls),
        reasoning=message.reasoning or reply.thinking,
    )


# --- read back ---------------------------------------------------------------------------


def native_request(request: ModelRequest) -> ModelRequest:
    """The request :func:`text_request` wrote ``request`` from, read back from its
    text: the tools from the catalogue, the actions of earlier answers as tool calls
    (their ids from the observations that answer them), and the observations as tool
    messages. A request with none of these comes back as it is."""
    messages = list(request.messages)
    tools: tuple[ToolSchema, ...] = ()
    output = request.output
    first = messages[0] if messages else None
    marker = f"{TOOLS_HEADING}\n\n{CATALOGUE}\n"
    if isinstance(first, SystemMessage) and marker in first.content:
        head, _, protocol = first.content.rpartition(marker)
        catalogue = protocol.split("\n\n", 1)[0].splitlines()
        tools = tuple(msgspec.convert(json.loads(line), ToolSchema) for line in catalogue)
        found = _SCHEMA.search(protocol)
        if found is not None:
            schema = json.loads(found["schema"])
            output = OutputSchema(name=found["name"], json_schema=schema)
        if head.endswith("\n\n"):
            messages[0] = SystemMessage(content=head[:-2])
        else:
            messages.pop(0)  # the protocol was the whole system message
    choice = _read_turn_rule(messages) if tools else "auto"
    read = _read_messages(messages)
    if not tools and read == messages:
        return request
    return msgspec.structs.replace(
        request, messages=tuple(read), tools=tools, tool_choice=choice, output=output
    )


def _read_turn_rule(messages: list[Message]) -> str:
    """The ``tool_choice`` that :func:`turn_rule` said at the end of ``messages``
    (taken off them), or ``auto``."""
    last = messages[-1] if messages else None
    if not isinstance(last, UserMessage):
        return "auto"
    before, _, rule = last.content.rpartition("\n\n")
    start, _, end = _NAMED_TOOL.partition("{}")
    choice = _CHOICES.get(rule)
    if choice is None and rule.startswith(start) and rule.endswith(end):
        choice = rule[len(start) : -len(end)]
    if choice is None:
        return "auto"
    if before:
        messages[-1] = UserMessage(content=before)
    else:
        messages.pop()  # the rule was the whole message
    return choice


def _read_messages(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage) and _OBSERVATION.match(message.content):
            out += _observations(message.content)
        elif isinstance(message, AssistantMessage) and message.content:
            answered = messages[index + 1] if index + 1 < len(messages) else None
            out.append(_read_assistant(message, answered, len(out)))
        else:
            out.append(message)
    return out


def _observations(text: str) -> list[Message]:
    found = list(_OBSERVATION.finditer(text))
    read: list[Message] = []
    for at, match in enumerate(found):
        end = found[at + 1].start() - 2 if at + 1 < len(found) else len(text)
        read.append(
            ToolMessage(
                tool_call_id=match["id"],
                name=match["name"],
                status=_STATUSES.get(match["status"] or "ok", "ok"),
                content=text[match.end() : end],
            )
        )
    return read


def _read_assistant(
    message: AssistantMessage, answered: Message | None, position: int
) -> AssistantMessage:
    reply = read_reply(message.content or "")
    if not reply.actions:
        return message
    ids = []
    if isinstance(answered, UserMessage):
        ids = [m["id"] for m in _OBSERVATION.finditer(answered.content)]
    calls = tuple(
        ToolCall(
            id=ids[i] if i < len(ids) else f"call_{position}_{i + 1}",
            name=a.name,
            arguments=a.arguments,
        )
        for i, a in enumerate(reply.actions)
    )
    return msgspec.structs.replace(message, content=reply.content, tool_calls=calls)
