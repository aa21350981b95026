"""The planner's plan schema: whatever the planner accepts from a model is valid
against the schema the model was sent (local checks are at least as strict)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pydantic
from hypothesis import given, settings
from hypothesis import strategies as st

from honeycomb.run.plan import Plan, plan_problems, plan_type

ROLES = ("researcher", "writer")
MAX = 4

ids = st.one_of(
    st.sampled_from(["a", "b", "c", "s1", "x.y", "a-b_c"]),
    st.text(alphabet="ab .-_\n/é", min_size=0, max_size=4),
    st.just("x" * 64),
    st.just("x" * 65),
)
subtasks = st.fixed_dictionaries(
    {
        "id": ids,
        "role": st.sampled_from([*ROLES, "planner", "mock-role", ""]),
        "instruction": st.sampled_from(["go", "", " "]),
    },
    optional={"depends_on": st.lists(ids, max_size=3)},
)
plans = st.fixed_dictionaries({"subtasks": st.lists(subtasks, max_size=MAX + 2)})


def accepted(data: dict[str, Any]) -> bool:
    """What the role planner does with a model's answer: validate it as the schema's
    type, then look for what no schema can say."""
    try:
        parsed = plan_type(ROLES, MAX).model_validate(data)
    except pydantic.ValidationError:
        return False
    plan = Plan.model_validate(parsed.model_dump())
    return plan_problems(plan, list(ROLES), max_subtasks=MAX) == []


@settings(max_examples=400, deadline=None)
@given(plans)
def test_every_plan_accepted_locally_is_valid_against_the_schema_sent(
    data: dict[str, Any],
) -> None:
    schema = plan_type(ROLES, MAX).model_json_schema()
    if accepted(data):
        jsonschema.validate(data, schema)


def test_the_schema_refuses_what_it_promises_to() -> None:
    schema = plan_type(ROLES, MAX).model_json_schema()
    good = {"subtasks": [{"id": "a", "role": "writer", "instruction": "go"}]}
    jsonschema.validate(good, schema)
    assert accepted(good)
    bad_plans = [
        {"subtasks": []},
        {"subtasks": good["subtasks"] * (MAX + 1)},
        {"subtasks": [{"id": "a", "role": "mock-role", "instruction": "go"}]},
        {"subtasks": [{"id": "a b", "role": "writer", "instruction": "go"}]},
        {"subtasks": [{"id": "a", "role": "writer", "instruction": "go", "depends_on": ["b c"]}]},
    ]
    for bad in bad_plans:
        validator = jsonschema.Draft202012Validator(schema)
        assert not validator.is_valid(bad), bad
        assert not accepted(bad), bad


def test_a_plan_of_the_schemas_type_reads_back_as_a_plain_plan() -> None:
    parsed = plan_type(ROLES, MAX).model_validate(
        {"subtasks": [{"id": "a", "role": "writer", "instruction": "go"}]}
    )
    assert isinstance(parsed, Plan)
    assert type(Plan.model_validate(parsed.model_dump())) is Plan
