"""What an ``equals`` value must hold to equal an answer of the hive's output schema:
its keys as the answer is dumped, by alias when the schema dumps so, and its
computed fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, computed_field, model_serializer

from honeycomb.evals.fields import field_problem


class Total(BaseModel):
    model_config = ConfigDict(serialize_by_alias=True)

    amount: int = Field(alias="Amount")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def doubled(self) -> int:
        return self.amount * 2


def test_an_equals_value_has_the_keys_the_answer_is_dumped_with() -> None:
    assert Total(Amount=2).model_dump(mode="json") == {"Amount": 2, "doubled": 4}
    assert field_problem({"Amount": 2, "doubled": 4}, Total) is None
    assert field_problem({"amount": 2, "doubled": 4}, Total) == (
        ("amount",),
        "the hive's answer, Total (Amount, doubled), has no field 'amount' (did you mean "
        "'Amount'?)",
    )
    assert field_problem({"Amount": 2}, Total) == (
        (),
        "the hive's answer, Total (Amount, doubled), has 'doubled' too: equals compares the "
        "whole answer",
    )
    assert field_problem("a text", Total) is None  # compared as text, not as fields


class Shaped(BaseModel):
    amount: int

    @model_serializer
    def shaped(self) -> dict[str, Any]:
        return {"total": self.amount}


def test_an_answer_dumped_as_no_fields_of_its_own_is_not_told_what_to_hold() -> None:
    # A serializer of its own or a root model makes the dump: the fields say nothing.
    assert field_problem({"total": 2}, Shaped) is None
    assert field_problem({"any": "key"}, RootModel[dict[str, str]]) is None
