"""The models a person writes (``Role``, ``Approvals``, ``Policy``, ``Compaction``,
``RoleMemory``, ``Guards``, ``SessionPolicy``), made in Python
with a wrong value, raise ``ConfigError`` naming the model and the field in
pydantic's words, as ``Budgets`` does; read from a hive file, each mistake is still
told at its line and field there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest

from honeycomb import (
    Approvals,
    Budgets,
    Compaction,
    ConfigError,
    ConfigErrors,
    Guards,
    HoneycombError,
    Policy,
    Role,
    RoleMemory,
    SessionPolicy,
)
from honeycomb.hive import load_hive


@pytest.mark.parametrize(
    ("make", "told"),
    [
        (
            lambda: Role(name="a b"),
            "Role.name: String should match pattern '^[A-Za-z0-9_-]{1,64}$' (got 'a b')",
        ),
        (
            lambda: Role(name="w", max_turns=0),
            "Role.max_turns: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            lambda: Role(name="w", approvals={"default": "always"}),
            "Role.approvals.default: Input should be 'allow' or 'ask' (got 'always')",
        ),
        (
            lambda: Approvals(default="ask_always"),
            "Approvals.default: Input should be 'allow' or 'ask' (got 'ask_always')",
        ),
        (
            lambda: Policy(failure="fastfail"),
            "Policy.failure: Input should be 'fail_fast', 'best_effort' or 'quorum' "
            "(got 'fastfail')",
        ),
        (
            lambda: Policy(failure="quorum"),
            "Policy: failure: quorum needs 'quorum: K', the successes required",
        ),
        (
            lambda: Policy(budgets={"model_calls": -1}),
            "Policy.budgets.model_calls: Input should be greater than or equal to 1 (got -1)",
        ),
        (lambda: Budgets(model_calls=-1), "Limits.model_calls: must be at least 1 (got -1)"),
        (
            lambda: Compaction(budget_tokens=10),
            "Compaction.budget_tokens: Input should be greater than or equal to 256 (got 10)",
        ),
        (
            lambda: RoleMemory(recall=99),
            "RoleMemory.recall: Input should be less than or equal to 20 (got 99)",
        ),
        (lambda: Guards(inputs=()), "Guards.inputs: unknown field (did you mean 'input'?)"),
        (
            lambda: SessionPolicy(max_sessions=0),
            "SessionPolicy.max_sessions: Input should be greater than or equal to 1 (got 0)",
        ),
    ],
)
def test_a_model_made_in_python_with_a_wrong_value_raises_a_config_error(
    make: Callable[[], Any], told: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make()
    assert isinstance(caught.value, HoneycombError)
    assert str(caught.value) == told


def test_the_original_error_is_chained() -> None:
    with pytest.raises(ConfigError) as caught:
        Role(name="a b")
    assert caught.value.field == "Role.name"
    assert isinstance(caught.value.__cause__, pydantic.ValidationError)


def test_every_mistake_is_told_at_once_and_a_misspelt_field_with_its_name() -> None:
    with pytest.raises(ConfigErrors) as caught:
        Role(nmae="w", max_turns=0)
    assert [str(error) for error in caught.value.errors] == [
        "Role.name: Field required",
        "Role.max_turns: Input should be greater than or equal to 1 (got 0)",
        "Role.nmae: unknown field (did you mean 'name'?)",
    ]


def test_data_validated_as_a_model_keeps_pydantics_error_for_its_reader() -> None:
    with pytest.raises(pydantic.ValidationError):
        Role.model_validate({"name": "a b"})
    with pytest.raises(pydantic.ValidationError):
        Policy.model_validate({"failure": "fastfail"})


def test_a_hives_mistakes_in_roles_and_policy_are_still_told_at_their_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(
        "name: n\n"
        "models:\n"
        "  o: {provider: offline, latency: 0}\n"
        "roles:\n"
        "  w:\n"
        "    max_turns: 0\n"
        "    approvals: {default: always}\n"
        "policy: {failure: fastfail}\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    told = sorted(str(error) for error in caught.value.errors)
    assert told[0].startswith(f"{path}:6:5: roles.w.max_turns: Input should be greater")
    assert told[1].startswith(f"{path}:7:17: roles.w.approvals.default: Input should be")
    assert told[2].startswith(f"{path}:8:10: policy.failure: Input should be")
