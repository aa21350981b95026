"""The text tool protocol's reader, fuzzed: any text is read without raising; actions
written well or sloppily (fences or none, prose around them, single quotes, trailing
commas) are read back exactly, in order; unknown tools, arguments that are not an
object and blocks that are not JSON are kept as actions, never dropped; and a
conversation written out as text reads back into the one it was written from."""

from __future__ import annotations

import json
import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import (
    AssistantMessage,
    ModelRequest,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from runtime.models.protocols.actions import read_reply
from runtime.models.protocols.lenient_json import loads_lenient
from runtime.models.protocols.text_wire import native_request, text_request

FUZZ = settings(max_examples=200, deadline=None)

names = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
keys = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**9), max_value=10**9)
    | st.text(max_size=12)
    # what a markdown argument holds: fences, and braces and quotes of its own
    | st.sampled_from(["```", "```python\nprint('{')\n```", "a ``` b", "{", "'", '"}'])
)
json_objects = st.dictionaries(
    keys,
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
        max_leaves=6,
    ),
    max_size=4,
)
# Prose a model writes around its actions: no brackets, quotes or fences of its own.
prose = st.text(alphabet=string.ascii_letters + string.digits + " .,:;!?-\n", max_size=60).filter(
    lambda t: "observation" not in t.lower()
)
actions = st.lists(st.tuples(names, json_objects), min_size=1, max_size=4)


def read(text: str) -> list[tuple[str, Any]]:
    return [(a.name, json.loads(a.arguments)) for a in read_reply(text).actions]


def python_literal(value: Any) -> str:
    """``value`` as Python writes it: single quotes, True, None (what models slip into)."""
    return repr(value)


@FUZZ
@given(text=st.text())
def test_any_text_is_read_without_raising(text: str) -> None:
    reply = read_reply(text)
    assert reply.content is None or isinstance(reply.content, str)
    for action in reply.actions:
        assert isinstance(action.name, str)
        assert isinstance(action.arguments, str)


@FUZZ
@given(written=actions, around=st.lists(prose, min_size=5, max_size=5))
def test_fenced_actions_among_prose_are_read_in_order(
    written: list[tuple[str, dict[str, Any]]], around: list[str]
) -> None:
    parts = [around[0]]
    for index, (name, arguments) in enumerate(written):
        parts.append(f"\n```json\n{json.dumps({'tool': name, 'arguments': arguments})}\n```\n")
        parts.append(around[(index + 1) % len(around)])
    assert read("".join(parts)) == written


@FUZZ
@given(
    written=actions,
    style=st.sampled_from(["python", "trailing_commas", "bare", "fence_no_language", "list"]),
    lead=prose,
    trail=prose,
)
def test_sloppy_actions_are_read_the_same(
    written: list[tuple[str, dict[str, Any]]], style: str, lead: str, trail: str
) -> None:
    objects = [{"tool": name, "arguments": arguments} for name, arguments in written]
    if style == "python":
        body = "\n".join(f"```json\n{python_literal(o)}\n```" for o in objects)
    elif style == "trailing_commas":
        body = "\n".join(
            "```json\n" + json.dumps(o, indent=1).replace("\n}", ",\n}") + "\n```" for o in objects
        )
    elif style == "bare":
        body = "\n".join(json.dumps(o) for o in objects)
    elif style == "fence_no_language":
        body = "\n".join(f"```\n{json.dumps(o)}\n```" for o in objects)
    else:
        body = f"```json\n{json.dumps(objects)}\n```"
    assert read(f"{lead} {body} {trail}") == written


@FUZZ
@given(name=st.text(alphabet=string.ascii_letters + "-_ .", min_size=1, max_size=20))
def test_an_unknown_tool_is_kept_by_its_name(name: str) -> None:
    reply = read_reply(f"```json\n{json.dumps({'tool': name, 'arguments': {}})}\n```")
    assert [a.name for a in reply.actions] == [name.strip()]


@FUZZ
@given(arguments=scalars | st.lists(scalars, max_size=3), name=names)
def test_arguments_that_are_not_an_object_are_kept_for_the_tool_to_refuse(
    arguments: Any, name: str
) -> None:
    text = f"```json\n{json.dumps({'tool': name, 'arguments': arguments})}\n```"
    (action,) = read_reply(text).actions
    assert action.name == name
    if arguments is None:
        assert action.arguments == "{}"  # no arguments at all
    elif isinstance(arguments, str) and isinstance(_object_in(arguments), dict):
        assert json.loads(action.arguments) == _object_in(arguments)
    else:
        assert json.loads(action.arguments) == arguments


def _object_in(text: str) -> Any:
    try:
        return loads_lenient(text)
    except ValueError:
        return None


@FUZZ
@given(name=names, arguments=json_objects, data=st.data())
def test_an_action_cut_off_after_its_name_is_kept_with_arguments_that_do_not_parse(
    name: str, arguments: dict[str, Any], data: st.DataObject
) -> None:
    whole = json.dumps({"tool": name, "arguments": arguments})
    named = len(json.dumps({"tool": name})) - 1  # up to the name's closing quote
    cut = data.draw(st.integers(min_value=named, max_value=len(whole) - 1))
    for text in (whole[:cut], f"```json\n{whole[:cut]}\n```"):
        reply = read_reply(text)
        assert [a.name for a in reply.actions] == [name], text
        assert _object_in(reply.actions[0].arguments) is None or cut == len(whole) - 1


@FUZZ
@given(text=prose)
def test_prose_alone_is_the_final_answer_as_written(text: str) -> None:
    assert read_reply(text).actions == ()
    assert read_reply(text).content == (text or None)


@FUZZ
@given(written=actions, made_up=prose)
def test_nothing_after_an_observation_the_model_made_up_is_read(
    written: list[tuple[str, dict[str, Any]]], made_up: str
) -> None:
    first, *_ = written
    text = (
        f"{json.dumps({'tool': first[0], 'arguments': first[1]})}\n"
        f"Observation: {made_up}\n"
        + "\n".join(json.dumps({"tool": n, "arguments": a}) for n, a in written)
    )
    assert read(text) == [first]


# --- a conversation written out reads back into itself ----------------------------------

texts = st.text(alphabet=string.ascii_letters + " .,", min_size=1, max_size=30).map(str.strip)
tools = st.lists(
    st.builds(lambda n, d: ToolSchema(name=n, description=d), names, texts),
    min_size=1,
    max_size=3,
    unique_by=lambda t: t.name,
)


@st.composite
def conversations(draw: st.DrawFn) -> ModelRequest:
    offered = draw(tools)
    messages: list[Any] = [
        SystemMessage(content=draw(texts) or "s"),
        UserMessage(content=draw(texts) or "task"),
    ]
    number = 0
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        calls = []
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            number += 1
            arguments = json.dumps(draw(json_objects), ensure_ascii=False)
            name = draw(st.sampled_from([t.name for t in offered]))
            calls.append(ToolCall(id=f"call_{number}", name=name, arguments=arguments))
        messages.append(
            AssistantMessage(content=draw(st.none() | texts) or None, tool_calls=tuple(calls))
        )
        messages += [
            ToolMessage(
                tool_call_id=c.id,
                name=c.name,
                status=draw(st.sampled_from(["ok", "error", "timeout", "skipped"])),
                content=draw(texts),
            )
            for c in calls
        ]
    return ModelRequest(messages=tuple(messages), tools=tuple(offered))


@FUZZ
@given(request=conversations())
def test_a_conversation_written_as_text_reads_back_into_itself(request: ModelRequest) -> None:
    written = text_request(request)
    assert written.tools == ()
    assert not any(isinstance(m, ToolMessage) for m in written.messages)
    assert native_request(written) == request


@FUZZ
@given(written=actions, lead=prose, trail=prose, style=st.sampled_from(["json", "python"]))
def test_actions_in_the_react_format_are_read_in_order(
    written: list[tuple[str, dict[str, Any]]], lead: str, trail: str, style: str
) -> None:
    dump = json.dumps if style == "json" else python_literal
    lines = "\n".join(f"Action: {name}\nAction Input: {dump(args)}" for name, args in written)
    assert read(f"{lead}\n{lines}\n{trail}") == written


def test_a_surrogate_pair_after_an_escaped_backslash_is_read_as_its_character() -> None:
    """Found by the fuzzing above: in ``"\\ud800\\udc00\\\\0"`` the ``\\0`` is an escaped
    backslash and a 0, not an escape; read as if it were, the string was decoded the way
    Python reads it, whose surrogate pair escapes are two lone surrogates."""
    assert loads_lenient('{"a": ["\\ud800\\udc00\\\\0"],}') == {"a": ["\U00010000\\0"]}
    assert loads_lenient("{'a': '\\ud800\\udc00'}") == {"a": "\U00010000"}
    assert loads_lenient('{"a": "x\\q",}') == {"a": "x\\q"}  # an escape JSON lacks, kept
