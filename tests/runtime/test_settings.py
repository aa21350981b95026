"""Settings: the values a person writes (a retry policy, a price, a run's limits, an MCP
server). Each field's bounds are declared once and hold wherever a value is made: in
Python, decoded by msgspec, and validated by pydantic, field by field, as a hive's
spec does."""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
import pytest
from msgspec import Meta
from pydantic import BaseModel, TypeAdapter, ValidationError

from runtime import ConfigError, Limits, Price, RetryPolicy
from runtime.tools.mcp import McpServer, McpToolSettings
from runtime.value import Settings, written_fields


class Knob(Settings, frozen=True, kw_only=True):
    level: Annotated[int, Meta(ge=1, le=10)] = 1
    label: Annotated[str, Meta(min_length=1, pattern="^[a-z]+$")] | None = None
    step: Annotated[float, Meta(gt=0, multiple_of=0.5)] = 0.5


class Holder(BaseModel):
    knob: Knob = Knob()
    knobs: dict[str, Knob] = {}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"level": 0}, "Knob.level: must be at least 1 (got 0)"),
        ({"level": 11}, "Knob.level: must be at most 10 (got 11)"),
        ({"label": ""}, "Knob.label: must be not empty (got '')"),
        ({"label": "A"}, "Knob.label: must be matching '^[a-z]+$' (got 'A')"),
        ({"step": 0}, "Knob.step: must be positive (got 0)"),
        ({"step": 0.7}, "Knob.step: must be a multiple of 0.5 (got 0.7)"),
    ],
)
def test_a_value_out_of_bounds_is_refused_wherever_it_is_made(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Knob(**fields)
    assert str(caught.value) == message
    with pytest.raises(msgspec.ValidationError, match=f"`\\$\\.{next(iter(fields))}`"):
        msgspec.convert(fields, Knob)
    with pytest.raises(ValidationError) as invalid:
        Holder.model_validate({"knob": fields})
    (error,) = invalid.value.errors()
    assert error["loc"] == ("knob", next(iter(fields)))


def test_pydantic_reports_each_mistake_at_its_field_in_its_own_words() -> None:
    with pytest.raises(ValidationError) as caught:
        Holder.model_validate(
            {"knob": {"level": "high", "colour": "red"}, "knobs": {"a": {"step": -1}, "b": 3}}
        )
    found = {(e["loc"], e["type"]) for e in caught.value.errors()}
    assert found == {
        (("knob", "level"), "int_parsing"),
        (("knob", "colour"), "extra_forbidden"),
        (("knobs", "a", "step"), "greater_than"),
        (("knobs", "b"), "dict_type"),
    }
    with pytest.raises(ValidationError) as missing:
        TypeAdapter(Price).validate_python({"input_per_mtok": 1})
    assert [(e["loc"], e["type"]) for e in missing.value.errors()] == [
        (("output_per_mtok",), "missing")
    ]


def test_pydantic_validates_into_the_value_and_keeps_one_as_it_is() -> None:
    held = Holder.model_validate({"knob": {"level": "3"}, "knobs": {"a": {}}})
    assert held.knob == Knob(level=3)
    assert type(held.knob) is Knob
    assert held.knobs == {"a": Knob()}
    given = Knob(level=2)
    assert Holder(knob=given).knob is given
    assert Holder.model_validate({"knob": given}).knob is given
    assert held.model_dump() == {
        "knob": {"level": 3, "label": None, "step": 0.5},
        "knobs": {"a": {"level": 1, "label": None, "step": 0.5}},
    }


def test_a_check_across_fields_is_a_pydantic_error_at_the_value() -> None:
    with pytest.raises(ValidationError) as caught:
        TypeAdapter(dict[str, McpServer]).validate_python(
            {"s": {"name": "s", "command": "python", "url": "http://127.0.0.1/"}}
        )
    (error,) = caught.value.errors()
    assert error["loc"] == ("s",)
    assert "give a command (a stdio server) or a url" in error["msg"]


def test_a_callable_field_is_pythons_only() -> None:
    assert "retry_on" not in written_fields(RetryPolicy)
    with pytest.raises(ValidationError, match="retry_on"):
        TypeAdapter(RetryPolicy).validate_python({"retry_on": "builtins:print"})

    def never(exc: BaseException) -> bool:
        return False

    policy = RetryPolicy(attempts=2, retry_on=never)
    assert TypeAdapter(RetryPolicy).validate_python(policy) is policy
    dumped = TypeAdapter(RetryPolicy).dump_python(policy)
    written = {"attempts": 2, "deadline_s": 90.0, "initial_wait_s": 0.5, "max_wait_s": 30.0}
    assert dumped == {**written, "jitter_s": 0.5}


@pytest.mark.parametrize(
    ("made", "message"),
    [
        (lambda: Limits(model_calls=0), "Limits.model_calls: must be at least 1 (got 0)"),
        (lambda: Limits(wall_time_s=-1.0), "Limits.wall_time_s: must be positive (got -1.0)"),
        (lambda: RetryPolicy(attempts=21), "RetryPolicy.attempts: must be at most 20 (got 21)"),
        (lambda: RetryPolicy(deadline_s=0), "RetryPolicy.deadline_s: must be positive (got 0)"),
        (
            lambda: Price(input_per_mtok=-1, output_per_mtok=0),
            "Price.input_per_mtok: must be 0 or more",
        ),
        (lambda: McpToolSettings(timeout=0), "McpToolSettings.timeout: must be positive (got 0)"),
    ],
)
def test_the_runtime_values_a_hive_writes_hold_their_bounds_in_python(
    made: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        made()


@pytest.mark.parametrize(
    ("made", "message"),
    [
        (
            lambda: Limits(model_calls="5"),
            "Limits.model_calls: must be of type int | None (got str)",
        ),
        (lambda: Limits(cost="0.5"), "Limits.cost: must be of type float | None (got str)"),
        (lambda: Limits(cost=True), "Limits.cost: must be of type float | None (got bool)"),
        (lambda: RetryPolicy(attempts="3"), "RetryPolicy.attempts: must be of type int (got str)"),
        (lambda: Knob(label=5), "Knob.label: must be of type str | None (got int)"),
    ],
)
def test_a_value_of_another_type_is_refused_naming_its_field(made: Any, message: str) -> None:
    """Text where a number goes (a limit read from an environment variable) is told at
    its field, not as a TypeError of a comparison, by its type (a value may be a
    secret)."""
    with pytest.raises(ConfigError) as caught:
        made()
    assert str(caught.value) == message
