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
            "Role.name: should be 1 to 64 characters: letters, digits, '_' or '-' (got 'a b')",
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
        (
            lambda: Guards(inputs=()),
            "Guards.inputs: unknown field 'inputs' (did you mean 'input'?); allowed: arguments, "
            "input, output",
        ),
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


def test_every_mistake_is_told_at_once_and_a_misspelt_field_once_with_its_name() -> None:
    # The misspelt name was also told missing ("Role.name: Field required"), where a
    # hive file's misspelt field is one mistake.
    with pytest.raises(ConfigErrors) as caught:
        Role(nmae="w", max_turns=0, description=1)
    assert [str(error) for error in caught.value.errors] == [
        "Role.description: Input should be a valid string (got 1): write it in quotes, as text",
        "Role.max_turns: Input should be greater than or equal to 1 (got 0)",
        "Role.nmae: unknown field 'nmae' (did you mean 'name'?); allowed: "
        + ", ".join(sorted(Role.model_fields)),
    ]
    with pytest.raises(ConfigError, match=r"^Role\.name: this field is required$"):
        Role(description="d")


def test_data_validated_as_a_model_keeps_pydantics_error_for_its_reader() -> None:
    with pytest.raises(pydantic.ValidationError):
        Role.model_validate({"name": "a b"})
    with pytest.raises(pydantic.ValidationError):
        Policy.model_validate({"failure": "fastfail"})


def mistakes_in_a_hive(folder: Path, roles: str) -> tuple[Path, tuple[ConfigError, ...]]:
    """The hive file in ``folder`` whose roles (and what follows them) are ``roles``,
    and the mistakes loading it tells."""
    path = folder / "hive.yaml"
    path.write_text("name: n\nmodels:\n  o: {provider: offline, latency: 0}\nroles:\n" + roles)
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    return path, caught.value.errors


def test_a_hives_mistakes_in_roles_and_policy_are_still_told_at_their_line(
    tmp_path: Path,
) -> None:
    path, errors = mistakes_in_a_hive(
        tmp_path,
        "  w:\n    max_turns: 0\n    approvals: {default: always}\npolicy: {failure: fastfail}\n",
    )
    told = sorted(str(error) for error in errors)
    assert told[0].startswith(f"{path}:6:5: roles.w.max_turns: Input should be greater")
    assert told[1].startswith(f"{path}:7:17: roles.w.approvals.default: Input should be")
    assert told[2].startswith(f"{path}:8:10: policy.failure: Input should be")


def test_a_mistake_made_in_python_is_worded_as_the_same_mistake_in_a_hive_file(
    tmp_path: Path,
) -> None:
    # Made in Python, these were told in pydantic's words: "should be a valid tuple",
    # the name's regular expression, an unknown field of the budgets with no name meant.
    _, errors = mistakes_in_a_hive(
        tmp_path,
        "  my writer:\n"
        "    tools: x\n"
        "    approvals: {defualt: ask}\n"
        "policy:\n"
        "  budgets: {modle_calls: 3}\n",
    )
    in_file = {e.field: e.message for e in errors}
    with pytest.raises(ConfigErrors) as caught:
        Role(name="my writer", tools="x", approvals={"defualt": "ask"})
    in_python = {e.field: e.message for e in caught.value.errors}
    with pytest.raises(ConfigError) as budgets:
        Policy(budgets={"modle_calls": 3})
    in_python[budgets.value.field] = budgets.value.message

    name = "should be 1 to 64 characters: letters, digits, '_' or '-' (got 'my writer')"
    assert in_file["roles['my writer'].name"] == in_python["Role.name"] == name
    unknown = "unknown field 'defualt' (did you mean 'default'?); allowed: default, tools"
    assert in_file["roles['my writer'].approvals.defualt"] == unknown
    assert in_python["Role.approvals.defualt"] == unknown
    unknown = "unknown field 'modle_calls' (did you mean 'model_calls'?); allowed: cost, "
    assert in_file["policy.budgets.modle_calls"].startswith(unknown)
    assert in_python["Policy.budgets.modle_calls"] == in_file["policy.budgets.modle_calls"]
    # What to write instead, in the terms of where it was written.
    assert in_file["roles['my writer'].tools"] == (
        "should be a list (got 'x'): write it in brackets ([a, b]), or as '- item' lines"
    )
    assert in_python["Role.tools"] == (
        "should be a list or a tuple (got 'x'): give its items in brackets, even a single "
        "one (['a'], not 'a')"
    )
    with pytest.raises(ConfigError) as mapping:
        Role(name="w", approvals="ask")
    assert str(mapping.value) == (
        "Role.approvals: should be Approvals(...), or a dict of default, tools (got 'ask')"
    )
