"""Honeycomb's values: frozen msgspec Structs made by keyword, which check nothing when
made and are validated (by msgspec) where data comes in: dicts and JSON, with errors
naming the field. Pydantic models (results) hold them as fields."""

from __future__ import annotations

import gc
import json
import pickle
from typing import Any

import msgspec
import pytest
from pydantic import ValidationError

from honeycomb import Plan, RunResult, RunTimings, Subtask, SubtaskResult
from runtime import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    ReasoningItem,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSchema,
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
from runtime.messages import with_distinct_ids
from runtime.value import Value
from workers import WorkerResult

CALL = ToolCall(id="c1", name="lookup", arguments='{"key": "a"}')
MESSAGES = (
    SystemMessage(content="s"),
    UserMessage(content="u"),
    AssistantMessage(content="thinking", tool_calls=(CALL,)),
    ToolMessage(tool_call_id="c1", name="lookup", status="error", content="v"),
)
RESULT = WorkerResult(worker="w", role="r", status="ok", output="x", text="x", turns=1)
USAGE = Usage(input_tokens=1, output_tokens=2, model_calls=3, tool_calls=4, cost=0.5)
REQUEST = ModelRequest(
    messages=MESSAGES,
    tools=(ToolSchema(name="lookup", description="Looks up.", parameters={"type": "object"}),),
    tool_choice="required",
    output=OutputSchema(name="Answer", json_schema={"type": "object"}),
    timeout=2.5,
    conversation="r/w",
)
RESPONSE = ModelResponse(message=MESSAGES[2], usage=USAGE, finish_reason="tool_calls", model="m")

VALUES: list[Any] = [
    CALL, *MESSAGES, AssistantMessage(), USAGE, Usage(), Transcript(messages=MESSAGES),
    Transcript(), REQUEST, ModelRequest(messages=()), RESPONSE,
    ModelResponse(message=AssistantMessage(content="hi")),
]  # fmt: skip


def _id(value: Any) -> str:
    return type(value).__name__


HASHABLE = [v for v in VALUES if not isinstance(v, ModelRequest) or not v.tools]
"""All but requests with tools: a tool's schema is a dict."""


@pytest.mark.parametrize("value", VALUES, ids=_id)
def test_a_value_is_frozen(value: Any) -> None:
    assert isinstance(value, Value)
    assert value.__struct_config__.frozen
    name = value.__struct_fields__[0] if value.__struct_fields__ else "role"
    with pytest.raises(AttributeError):
        setattr(value, name, None)
    with pytest.raises(AttributeError):
        value.extra = 1  # no attribute but its fields


@pytest.mark.parametrize("value", HASHABLE, ids=_id)
def test_a_value_equals_and_hashes_like_its_copy(value: Any) -> None:
    twin = msgspec.structs.replace(value)
    assert twin == value
    assert twin is not value
    assert hash(twin) == hash(value)
    assert repr(twin) == repr(value)
    assert {value, twin} == {value}


@pytest.mark.parametrize("value", VALUES, ids=_id)
def test_a_value_round_trips_through_dicts_and_json(value: Any) -> None:
    text = dump_value_json(value)
    assert validate_value(type(value), text) == value
    assert validate_value(type(value), json.loads(text)) == value
    assert dump_value(value) == json.loads(text)
    assert validate_value(type(value), dump_value(value)) == value


@pytest.mark.parametrize("value", [v for v in VALUES if not isinstance(v, ModelRequest)], ids=_id)
def test_the_garbage_collector_never_walks_a_message_or_a_response(value: Any) -> None:
    assert not gc.is_tracked(value)


def test_values_are_made_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        ToolCall("c1", "lookup")  # type: ignore[misc]
    assert UserMessage(content="u").role == "user"  # the tag, a class attribute
    with pytest.raises(TypeError):
        UserMessage(role="user", content="u")  # type: ignore[call-arg]


def test_values_of_different_types_with_the_same_fields_differ() -> None:
    assert SystemMessage(content="x") != UserMessage(content="x")  # type: ignore[comparison-overlap]
    assert AssistantMessage(content="x") != AssistantMessage(content="y")


def test_messages_round_trip_through_dicts_and_json_as_one_array() -> None:
    text = dump_messages_json(MESSAGES)
    assert json.loads(text) == dump_messages(MESSAGES)
    assert json.loads(text)[2] == {
        "role": "assistant",
        "content": "thinking",
        "tool_calls": [
            {"id": "c1", "name": "lookup", "arguments": '{"key": "a"}', "extra_content": None}
        ],
        "reasoning": None,
        "reasoning_items": [],
    }
    assert validate_messages(text) == MESSAGES
    assert validate_messages(text.encode()) == MESSAGES
    assert validate_messages(dump_messages(MESSAGES)) == MESSAGES
    assert validate_messages(iter(dump_messages(MESSAGES))) == MESSAGES
    assert dump_messages_json(()) == "[]"
    assert validate_messages("[]") == ()


def test_an_assistant_messages_reasoning_round_trips_and_old_transcripts_still_load() -> None:
    thought = AssistantMessage(content="42", reasoning="6 times 7")
    assert validate_messages(dump_messages_json([thought])) == (thought,)
    assert dump_messages([thought])[0]["reasoning"] == "6 times 7"
    # Written before assistant messages had a reasoning field:
    stored = '[{"role": "assistant", "content": "42", "tool_calls": []}]'
    assert validate_messages(stored) == (AssistantMessage(content="42"),)
    assert validate_messages(stored)[0].reasoning is None  # type: ignore[union-attr]


def test_a_calls_extra_content_round_trips_and_transcripts_without_it_still_load() -> None:
    signed = ToolCall(id="c1", name="look", extra_content='{"google": {"thought_signature": "x"}}')
    message = AssistantMessage(tool_calls=(signed,))
    assert validate_messages(dump_messages_json([message])) == (message,)
    # Written before tool calls had an extra_content field:
    stored = '[{"role": "assistant", "tool_calls": [{"id": "c1", "name": "look"}]}]'
    (old,) = validate_messages(stored)
    assert old == AssistantMessage(tool_calls=(ToolCall(id="c1", name="look"),))


def test_reasoning_items_round_trip_and_transcripts_without_them_still_load() -> None:
    item = ReasoningItem(id="rs_1", summary=("six", "times seven"), encrypted_content="gAAA")
    thought = AssistantMessage(
        content="42", reasoning="six\n\ntimes seven", reasoning_items=(item,)
    )
    assert validate_messages(dump_messages_json([thought])) == (thought,)
    assert dump_messages([thought])[0]["reasoning_items"] == [
        {
            "id": "rs_1",
            "summary": ["six", "times seven"],
            "content": [],
            "encrypted_content": "gAAA",
        }
    ]
    stored = '[{"role": "assistant", "content": "42", "reasoning": null}]'
    assert validate_messages(stored)[0].reasoning_items == ()  # type: ignore[union-attr]


def test_call_ids_made_distinct_keep_the_rest_of_the_message() -> None:
    item = ReasoningItem(id="rs_1", summary=("look it up",))
    earlier = (AssistantMessage(tool_calls=(CALL,)),)
    again = AssistantMessage(
        content="again", tool_calls=(CALL,), reasoning="look it up", reasoning_items=(item,)
    )
    renamed = with_distinct_ids(again, earlier, turn=2)
    assert [c.id for c in renamed.tool_calls] == ["c1_t2"]
    assert (renamed.content, renamed.reasoning, renamed.reasoning_items) == (
        "again",
        "look it up",
        (item,),
    )


def test_usage_adds_up_reasoning_tokens() -> None:
    total = Usage(output_tokens=10, reasoning_tokens=4) + Usage(output_tokens=5, reasoning_tokens=3)
    assert total == Usage(output_tokens=15, reasoning_tokens=7)
    assert validate_value(Usage, '{"input_tokens": 1}') == Usage(input_tokens=1)


TRICKY = 'quotes " and \\ backslash, \n\t\b\f\r\x00\x1f\x7f controls, é ✓ \u2028 🐝 text'


@pytest.mark.parametrize(
    "message",
    [
        SystemMessage(content=TRICKY),
        UserMessage(content=""),
        AssistantMessage(content=TRICKY, tool_calls=(CALL, ToolCall(id=TRICKY, name="n"))),
        AssistantMessage(content=None, reasoning=TRICKY),
        ToolMessage(tool_call_id="c", name=TRICKY, status="unknown", content=TRICKY),
    ],
    ids=_id,
)
def test_any_text_round_trips(message: Any) -> None:
    assert validate_messages(dump_messages_json([message])) == (message,)


def test_a_tuple_of_message_objects_is_kept_as_it_is() -> None:
    assert validate_messages(MESSAGES) == MESSAGES
    assert all(a is b for a, b in zip(validate_messages(MESSAGES), MESSAGES, strict=True))


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ([{"role": "user", "content": "u"}, {"role": "assistant", "tool_calls": [{"id": 1}]}],
         "1].tool_calls[0].id"),
        ([{"role": "user"}], "0]"),
        ([{"role": "user", "content": "u", "mood": "curious"}], "0]"),
        ([{"role": "robot", "content": "u"}], "0].role"),
        ([{"role": "tool", "tool_call_id": "c", "name": "n", "status": "fine", "content": ""}],
         "0].status"),
    ],
)  # fmt: skip
def test_invalid_messages_fail_naming_the_field(data: list[Any], where: str) -> None:
    for given in (data, json.dumps(data)):
        with pytest.raises(msgspec.ValidationError) as caught:
            validate_messages(given)
        assert f"`$[{where}" in str(caught.value)


def test_an_invalid_value_fails_naming_the_field() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"`\$\.input_tokens`"):
        validate_value(Usage, {"input_tokens": "many"})
    with pytest.raises(msgspec.ValidationError, match=r"missing required field `name`"):
        validate_value(
            ModelResponse, '{"message": {"role": "assistant", "tool_calls": [{"id": "c"}]}}'
        )


# --- pydantic models holding them ------------------------------------------------------


def test_pydantic_models_hold_values_without_copying_them() -> None:
    transcript = Transcript(messages=MESSAGES)
    result = WorkerResult(worker="w", role="r", status="ok", transcript=transcript, usage=USAGE)
    assert result.transcript is transcript
    assert result.usage is USAGE


def test_results_holding_values_round_trip_through_json() -> None:
    worker = WorkerResult(
        worker="s1",
        role="r",
        status="ok",
        output="x",
        text="x",
        transcript=Transcript(messages=MESSAGES),
        usage=USAGE,
        turns=2,
    )
    subtask = SubtaskResult(
        subtask=Subtask(id="s1", role="r", instruction="i"), status="ok", worker=worker
    )
    run = RunResult(
        run_id="run1",
        task="t",
        status="ok",
        answer="x",
        answer_text="x",
        plan=Plan(subtasks=[subtask.subtask]),
        subtasks={"s1": subtask},
        usage=USAGE,
        timings=RunTimings(**dict.fromkeys(RunTimings.model_fields, 1.0)),
    )
    for value in (worker, subtask, run):
        again = type(value).model_validate_json(value.model_dump_json())
        assert again == value
    assert json.loads(worker.model_dump_json())["transcript"] == {
        "messages": dump_messages(MESSAGES)
    }
    assert json.loads(run.model_dump_json())["usage"] == dump_value(USAGE)
    assert type(WorkerResult.model_validate(worker.model_dump()).transcript) is Transcript


def test_a_result_holding_bad_values_fails_naming_them() -> None:
    with pytest.raises(ValidationError, match="input_tokens"):
        WorkerResult.model_validate(
            {"worker": "w", "role": "r", "status": "ok", "usage": {"input_tokens": "x"}}
        )


def test_a_transcript_and_a_loop_state_pickle_as_one_msgpack_string() -> None:
    """They cross to Ray actors and back with every worker: pickled struct by struct,
    they cost several times as much (each message's class named in the pickle)."""
    from workers import LoopState

    calls = tuple(ToolCall(id=f"c{i}", name="lookup", arguments="{}") for i in range(3))
    messages: tuple[Message, ...] = (
        SystemMessage(content="sys"),
        UserMessage(content="task"),
        AssistantMessage(tool_calls=calls),
        *(ToolMessage(tool_call_id=f"c{i}", name="lookup", content=str(i)) for i in range(3)),
    )
    transcript = Transcript(messages=messages)
    state = LoopState(task="t", messages=messages[2:], turn=1, cost=0.25, previous_calls=calls)
    for value in (transcript, state):
        pickled = pickle.dumps(value)
        assert b"ToolMessage" not in pickled
        again = pickle.loads(pickled)
        assert again == value
        assert type(again.messages) is tuple  # decoded to its declared types
