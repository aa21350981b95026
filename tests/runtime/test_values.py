"""Values made with ``trusted`` equal their validated twins in every way users can see:
equality, hashing, fields, dumps, copies, immutability. If pydantic changes how it
stores a model, this fails here first."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from honeycomb import Subtask, SubtaskResult
from runtime import (
    ModelRequest,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    Usage,
    UserMessage,
)
from runtime._values import trusted
from workers import WorkerResult

CALL = ToolCall(id="c1", name="lookup", arguments='{"key": "a"}')
MESSAGES = (SystemMessage(content="s"), UserMessage(content="u"))
RESULT = WorkerResult(worker="w", role="r", status="ok", output="x", text="x", turns=1)

CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (ToolMessage, {"role": "tool", "tool_call_id": "c1", "name": "lookup", "status": "ok",
                   "content": "v"}),
    (SystemMessage, {"role": "system", "content": "s"}),
    (UserMessage, {"role": "user", "content": "u"}),
    (Usage, {"input_tokens": 1, "output_tokens": 2, "model_calls": 3, "tool_calls": 4,
             "cost": 0.5}),
    (Transcript, {"messages": MESSAGES}),
    (ModelRequest, {"messages": MESSAGES, "tools": (), "tool_choice": "auto",
                    "parallel_tool_calls": True, "output": None, "timeout": None,
                    "conversation": "r/w"}),
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
