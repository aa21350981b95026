"""The planner's plan schema: whatever the planner accepts from a model is valid
against the schema the model was sent (local checks are at least as strict), and
the schema refuses what a grammar-following model could otherwise invent: ids and
dependencies outside the fixed set, unknown roles, endless instructions."""

from __future__ import annotations

from typing import Any

import jsonschema
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from honeycomb.run.plan import INSTRUCTION_CHARS, Plan, plan_problems, plan_type, repaired

ROLES = ("researcher", "writer")
MAX = 4

ids = st.one_of(
    st.sampled_from(["a", "b", "c", "s1", "s2", "s3", "s4", "s5", "x.y", "a-b_c"]),
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
    plan, _ = repaired(Plan.model_validate(parsed.model_dump()))
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
    good = {"subtasks": [{"id": "s1", "role": "writer", "instruction": "go"}]}
    jsonschema.validate(good, schema)
    assert accepted(good)
    long = "x" * (INSTRUCTION_CHARS + 1)
    bad_plans = [
        {"subtasks": []},
        {"subtasks": good["subtasks"] * (MAX + 1)},
        {"subtasks": [{"id": "s1", "role": "mock-role", "instruction": "go"}]},
        {"subtasks": [{"id": "a b", "role": "writer", "instruction": "go"}]},
        {"subtasks": [{"id": "s1", "role": "writer", "instruction": "go", "depends_on": ["b c"]}]},
        {"subtasks": [{"id": "s1", "role": "writer", "instruction": long}]},
    ]
    for bad in bad_plans:
        validator = jsonschema.Draft202012Validator(schema)
        assert not validator.is_valid(bad), bad
        assert not accepted(bad), bad


def test_an_instruction_over_the_cap_is_refused_naming_the_cap_and_what_to_do() -> None:
    # What the planner model is sent back, and what the run's PlanError ends with.
    long = "y" * (INSTRUCTION_CHARS + 5)
    plan = {"subtasks": [{"id": "s1", "role": "writer", "instruction": long}]}
    with pytest.raises(pydantic.ValidationError) as caught:
        plan_type(ROLES, MAX).model_validate(plan)
    [error] = [e for e in caught.value.errors() if e["loc"] == ("subtasks", 0, "instruction")]
    assert error["msg"].removeprefix("Value error, ") == (
        f"the instruction has {INSTRUCTION_CHARS + 5} characters, over the "
        f"{INSTRUCTION_CHARS} an instruction may have: say what the worker is to do in "
        "short (name what it works on rather than copy it all), or split the work among "
        "more subtasks"
    )
    schema = plan_type(ROLES, MAX).model_json_schema()  # the grammar's bound as it was
    jsonschema.validate({"subtasks": [{**plan["subtasks"][0], "instruction": "y"}]}, schema)
    subtask = schema["$defs"]["Subtask"]["properties"]["instruction"]
    assert subtask["maxLength"] == INSTRUCTION_CHARS


def test_the_schema_refuses_invented_ids_and_dependencies() -> None:
    # The ids a small model invented under a looser schema ('18447', 'Lasenella').
    validator = jsonschema.Draft202012Validator(plan_type(ROLES, MAX).model_json_schema())
    invented = [
        {"subtasks": [{"id": "18447", "role": "writer", "instruction": "go"}]},
        {"subtasks": [{"id": "s5", "role": "writer", "instruction": "go"}]},  # past s4
        {"subtasks": [{"id": "s1", "role": "writer", "instruction": "go",
                       "depends_on": ["Lasenella"]}]},
        {"subtasks": [{"id": "s1", "role": "writer", "instruction": "go",
                       "depends_on": ["s1", "s2", "s3", "s4"]}]},  # more than the others
    ]  # fmt: skip
    for bad in invented:
        assert not validator.is_valid(bad), bad
        assert not accepted(bad), bad
    some = {"subtasks": [{"id": "s2", "role": "writer", "instruction": "go",
                          "depends_on": ["s4"]}]}  # fmt: skip
    assert validator.is_valid(some)


def test_a_later_rounds_schema_takes_new_ids_and_depends_on_earlier_ones() -> None:
    schema = plan_type(ROLES, 2, 0, ("s1", "s2", "s4")).model_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    new = {"id": "s3", "role": "writer", "instruction": "go", "depends_on": ["s1", "s4", "s5"]}
    assert validator.is_valid({"subtasks": [new, {**new, "id": "s5", "depends_on": []}]})
    assert validator.is_valid({"subtasks": []})
    assert not validator.is_valid({"subtasks": [{**new, "id": "s1"}]})  # taken before
    assert not validator.is_valid({"subtasks": [{**new, "id": "s6"}]})  # past the room


def test_dangling_and_self_dependencies_are_dropped_and_said() -> None:
    plan = Plan.of(
        [
            {"id": "s1", "role": "writer", "instruction": "a", "depends_on": ["s1", "s2"]},
            {"id": "s2", "role": "writer", "instruction": "b", "depends_on": ["s9", "s0"]},
        ]
    )
    fixed, dropped = repaired(plan, earlier=("s0",))
    assert fixed.dependencies == {"s1": ("s2",), "s2": ("s0",)}
    assert dropped == (
        "subtask 's1' depended on itself",
        "subtask 's2' depended on 's9', which is not in the plan",
    )
    same, none = repaired(fixed, earlier=("s0",))
    assert same is fixed
    assert none == ()


def test_a_plan_of_the_schemas_type_reads_back_as_a_plain_plan() -> None:
    parsed = plan_type(ROLES, MAX).model_validate(
        {"subtasks": [{"id": "s1", "role": "writer", "instruction": "go"}]}
    )
    assert isinstance(parsed, Plan)
    assert type(Plan.model_validate(parsed.model_dump())) is Plan


def test_a_long_chain_of_your_own_is_checked_and_a_cycle_in_it_found() -> None:
    """A caller's plan is as long as it made it: a chain of 3,000 subtasks, each
    listed before the one it waits for, is valid, and closing it is a cycle."""
    count = 3000

    def chain(closed: bool) -> Plan:
        after = [
            f"s{i + 1}" if i < count else ("s1" if closed else None) for i in range(1, count + 1)
        ]
        return Plan.of(
            {"id": f"s{i}", "role": "w", "instruction": "x", "depends_on": [d] if d else []}
            for i, d in enumerate(after, start=1)
        )

    assert plan_problems(chain(closed=False), ["w"]) == []
    [problem] = plan_problems(chain(closed=True), ["w"])
    assert problem.startswith("the dependencies form a cycle: s1 -> s2 -> s3")
    assert problem.endswith(f"s{count} -> s1")
