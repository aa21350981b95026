"""The two ways Honeycomb makes values cheaply.

- Messages, usage and model requests and responses are slotted dataclasses, frozen for
  type checkers, whose constructors check nothing: pydantic reads and writes them at
  the boundaries (dicts and JSON in, errors naming the field).
- Pydantic models made with ``trusted`` equal their validated twins in every way users
  can see: equality, hashing, fields, dumps, copies, immutability. If pydantic changes
  how it stores a model, this fails here first.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import warnings
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from honeycomb import Plan, RunResult, RunTimings, Subtask, SubtaskResult
from runtime import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    OutputSchema,
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
from runtime._values import trusted, value_class
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
    tools=(ToolSchema.of("lookup", "Looks up.", {"type": "object"}),),
    tool_choice="required",
    output=OutputSchema.of("Answer", {"type": "object"}),
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


# --- the message values ----------------------------------------------------------------


def test_type_checkers_see_the_values_as_frozen() -> None:
    # What mypy and pyright read: assigning to a field of a value is a type error.
    declared = value_class.__dataclass_transform__  # type: ignore[attr-defined]
    # Python 3.11 keeps the parameters it does not know yet (3.12 added this one) apart.
    assert {**declared, **declared.get("kwargs", {})}["frozen_default"] is True


@pytest.mark.parametrize("value", VALUES, ids=_id)
def test_a_value_is_slotted(value: Any) -> None:
    assert not hasattr(value, "__dict__")
    with pytest.raises(AttributeError):
        value.extra = 1  # no attribute but its fields


@pytest.mark.parametrize("value", VALUES, ids=_id)
def test_a_value_equals_and_hashes_like_its_copy(value: Any) -> None:
    twin = dataclasses.replace(value)
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


@pytest.mark.parametrize("value", VALUES, ids=_id)
def test_a_value_is_one_object_for_the_garbage_collector(value: Any) -> None:
    # It refers to its fields' values and its class: no __dict__, no set of field names.
    fields = [getattr(value, f.name) for f in dataclasses.fields(value)]
    assert sorted(map(id, gc.get_referents(value))) == sorted(map(id, [*fields, type(value)]))


def test_values_are_made_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        ToolCall("c1", "lookup")  # type: ignore[call-arg]
    assert UserMessage(content="u").role == "user"  # the discriminator has its default


def test_values_of_different_types_with_the_same_fields_differ() -> None:
    assert SystemMessage(content="x") != UserMessage(content="x")  # type: ignore[comparison-overlap]
    assert AssistantMessage(content="x") != AssistantMessage(content="y")


def test_messages_round_trip_through_dicts_and_json_as_one_array() -> None:
    text = dump_messages_json(MESSAGES)
    assert json.loads(text) == dump_messages(MESSAGES)
    assert json.loads(text)[2] == {
        "role": "assistant",
        "content": "thinking",
        "tool_calls": [{"id": "c1", "name": "lookup", "arguments": '{"key": "a"}'}],
        "reasoning": None,
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


def test_usage_adds_up_reasoning_tokens() -> None:
    total = Usage(output_tokens=10, reasoning_tokens=4) + Usage(output_tokens=5, reasoning_tokens=3)
    assert total == Usage(output_tokens=15, reasoning_tokens=7)
    assert validate_value(Usage, '{"input_tokens": 1}') == Usage(input_tokens=1)


TRICKY = 'quotes " and \\ backslash, \n\t\b\f\r\x00\x1f\x7f controls, é ✓ \u2028 🐝 text'


@pytest.mark.parametrize(
    "message",
    [
        *MESSAGES,
        SystemMessage(content=TRICKY),
        UserMessage(content=""),
        AssistantMessage(),
        AssistantMessage(content=TRICKY, tool_calls=(CALL, ToolCall(id=TRICKY, name="n"))),
        AssistantMessage(content=None, reasoning=TRICKY),
        ToolMessage(tool_call_id="c", name=TRICKY, status="unknown", content=TRICKY),
        UserMessage(content=3),  # type: ignore[arg-type]  # not a string: pydantic writes it
    ],
    ids=_id,
)
def test_messages_are_dumped_as_pydantic_dumps_them(message: Any) -> None:
    # The run store keeps this text: it must stay what it was when pydantic wrote it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns about the int
        written = TypeAdapter(type(message)).dump_json(message).decode()
        assert dump_messages_json([message]) == f"[{written}]"
        assert dump_messages_json(iter([message, message])) == f"[{written},{written}]"


def test_a_lone_surrogate_cannot_be_dumped() -> None:
    with pytest.raises(PydanticSerializationError, match="surrogates"):
        dump_messages_json([UserMessage(content="\ud800")])


def test_a_tuple_of_message_objects_is_kept_as_it_is() -> None:
    assert validate_messages(MESSAGES) is MESSAGES


def test_dumping_a_value_that_is_not_a_message_as_one_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not a message: a ToolCall"):
        dump_messages_json([CALL])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ([{"role": "user", "content": "u"}, {"role": "assistant", "tool_calls": [{"id": 1}]}],
         "1.assistant.tool_calls.0.id"),
        ([{"role": "user"}], "0.user.content"),
        ([{"role": "user", "content": "u", "mood": "curious"}], "0.user.mood"),
        ([{"role": "robot", "content": "u"}], "0"),
        ([{"role": "tool", "tool_call_id": "c", "name": "n", "status": "fine", "content": ""}],
         "0.tool.status"),
    ],
)  # fmt: skip
def test_invalid_messages_fail_naming_the_field(data: list[Any], where: str) -> None:
    for given in (data, json.dumps(data)):
        with pytest.raises(ValidationError) as caught:
            validate_messages(given)
        assert caught.value.title == "Messages"
        assert where in [".".join(map(str, e["loc"])) for e in caught.value.errors()]


def test_an_invalid_value_fails_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        validate_value(Usage, {"input_tokens": "many", "cots": 0.5})
    assert {".".join(map(str, e["loc"])) for e in caught.value.errors()} == {
        "input_tokens",
        "cots",
    }
    with pytest.raises(ValidationError, match=r"message\.tool_calls\.0\.name"):
        validate_value(ModelResponse, '{"message": {"tool_calls": [{"id": "c"}]}}')


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


# --- trusted pydantic models -----------------------------------------------------------

CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (WorkerResult, {"worker": "w", "role": "r", "status": "ok", "output": "x", "text": "x",
                    "transcript": Transcript(messages=MESSAGES), "usage": Usage(),
                    "turns": 1, "started_at": 1.0, "duration_s": 0.5, "error": None,
                    "exception": None}),
    (SubtaskResult, {"subtask": Subtask(id="s1", role="r", instruction="i"), "status": "ok",
                     "worker": RESULT, "error": None, "started_s": 0.0, "duration_s": 0.5}),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "values"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_trusted_equals_validated(cls: type[BaseModel], values: dict[str, Any]) -> None:
    made = trusted(cls, dict(values))
    checked = cls.model_validate(values)
    assert made == checked
    assert made.model_dump() == checked.model_dump()
    assert made.model_dump_json() == checked.model_dump_json()
    assert made.model_fields_set == checked.model_fields_set
    assert repr(made) == repr(checked)
    assert made.model_copy(update={}) == checked
    if cls.model_config.get("frozen"):
        with pytest.raises(ValidationError):
            made.__setattr__(next(iter(values)), None)
    twin = trusted(cls, dict(values))
    updated = twin.model_copy(update={next(iter(values)): values[next(iter(values))]})
    assert updated == twin
    assert twin.model_fields_set == set(cls.model_fields)  # a copy's update did not leak
    try:
        assert hash(made) == hash(checked)
    except TypeError:
        with pytest.raises(TypeError):
            hash(checked)
