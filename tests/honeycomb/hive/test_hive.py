"""The hive file: one test per kind of mistake, each asserting file, line and field."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, Field, ValidationError

from honeycomb import ConfigErrors, Executor, Policy
from honeycomb.cli.main import demo_hive_path, main
from honeycomb.hive import load_hive
from honeycomb.hive.specs import HiveSpec
from honeycomb.offline import OfflineModel
from honeycomb.planning import RolePlanner
from runtime import AdaptiveLimiter, Limits, OpenAIModel, Price, PricedModel, RetryPolicy
from runtime.tools.mcp import McpServer, McpToolSettings
from runtime.value import Settings, validation_summary, written_fields
from tests.support.hives import errors_of, hive
from workers import Role

GOOD = """\
name: test-hive
models:
  default: offline
  gpt:
    model: gpt-4o-mini
    base_url: http://127.0.0.1:9/v1
roles:
  planner:
    description: Plans.
  counter:
    description: Counts words.
    tools: [tests.support.role_tools:word_count]
  aggregator:
    description: Merges.
    model: gpt
policy:
  max_workers: 3
  failure: quorum
  quorum: 2
  budgets: {model_calls: 10}
"""


def one_error(path: Path) -> str:
    (error,) = errors_of(path)
    return error


def test_a_good_hive_builds_its_executor(tmp_path: Path) -> None:
    loaded = load_hive(hive(tmp_path, GOOD))
    executor = Executor.from_hive(loaded)
    assert isinstance(executor, Executor)
    assert set(executor.roles) == {"planner", "counter", "aggregator"}
    assert isinstance(executor.models["default"], OfflineModel)
    assert isinstance(executor.models["gpt"], OpenAIModel)
    assert executor.policy == Policy.model_validate(
        {"max_workers": 3, "failure": "quorum", "quorum": 2, "budgets": {"model_calls": 10}}
    )


def test_yaml_syntax(tmp_path: Path) -> None:
    path = hive(tmp_path, "models:\n  default: offline\nroles: [planner\n")
    # The file ends inside the list: the mistake is where it opens, not past the end.
    assert one_error(path).startswith(f"{path}:3:8: invalid YAML: the file ends inside")


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("", "it is empty (or only comments)"),
        ("# later\n", "it is empty (or only comments)"),
        ("- planner\n", "it is a list"),
    ],
)
def test_a_file_that_is_no_mapping_says_what_it_is(tmp_path: Path, text: str, what: str) -> None:
    # An empty file was told it 'must be a mapping (models:, roles: ...)', as if it
    # held something else.
    path = hive(tmp_path, text)
    assert one_error(path) == (
        f"{path}: a hive file must be a mapping (models:, roles: ...), and {what}: "
        "honeycomb init DIR writes one to start from"
    )


def test_a_folder_or_a_misspelt_file_given_for_a_hive_is_told_the_hive_file_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 'honeycomb run myhive' after 'honeycomb init myhive' was told only that myhive
    # is a folder, and 'myhive/hive.yml' only that there is no such file.
    monkeypatch.chdir(tmp_path)
    assert main(["init", "myhive"]) == 0
    capsys.readouterr()
    assert main(["run", "myhive"]) == 2
    assert capsys.readouterr().err == (
        "1 error in configuration:\n  myhive: cannot read the file: it is a folder, not a "
        "regular file: name the hive file in it (myhive/hive.yaml)\n"
    )
    (tmp_path / "empty").mkdir()
    assert one_error(tmp_path / "empty").endswith("it is a folder, not a regular file")
    assert main(["validate", "myhive/hive.yml", "myhive/nothere.yaml"]) == 1
    assert capsys.readouterr().out == (
        "myhive/hive.yml: 1 error\n  myhive/hive.yml: cannot read the file: No such file or "
        "directory (did you mean 'myhive/hive.yaml'?)\nmyhive/nothere.yaml: 1 error\n  "
        "myhive/nothere.yaml: cannot read the file: No such file or directory\n"
    )


def test_a_file_of_the_hive_s_folder_given_for_the_hive_is_told_the_hive_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 'honeycomb run myhive/tools.py' was told the Python was invalid YAML, at its line 1.
    monkeypatch.chdir(tmp_path)
    assert main(["init", "myhive"]) == 0
    capsys.readouterr()
    assert main(["validate", "myhive/tools.py", "myhive/README.md"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "myhive/tools.py: 1 error",
        "  myhive/tools.py: not a hive file: a hive file is YAML (models:, roles: ...), and "
        "this .py file is not: name the hive file (myhive/hive.yaml)",
        "myhive/README.md: 1 error",
        "  myhive/README.md: not a hive file: a hive file is YAML (models:, roles: ...), and "
        "this .md file is not: name the hive file (myhive/hive.yaml)",
    ]


def test_an_evals_cases_file_given_for_a_hive_is_told_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 'honeycomb validate myhive/*.yaml' takes in the template's evals.yaml, which was
    # told 'the hive defines no models' and 'unknown field 'cases''.
    monkeypatch.chdir(tmp_path)
    assert main(["init", "myhive"]) == 0
    capsys.readouterr()
    assert main(["validate", "myhive/evals.yaml", "myhive/hive.yaml"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "myhive/evals.yaml: 1 error"
    assert out[1].startswith("  myhive/evals.yaml:")
    assert out[1].endswith(
        ": cases: this is an eval's cases file, not a hive file: honeycomb eval HIVE.yaml "
        "myhive/evals.yaml runs its cases on a hive"
    )
    assert out[2].startswith("myhive/hive.yaml: OK")


@pytest.mark.parametrize(
    "text", ["name: w\ndescription: Works.\ntools: [tools:x]\n", "w: {description: Works.}\n"]
)
def test_a_file_of_roles_given_for_a_hive_is_told_so(tmp_path: Path, text: str) -> None:
    # A role file of a roles_dir was told 'the hive defines no models' and 'unknown
    # field 'w'' (or 'tools: should be a mapping'): what a hive is, not what it is.
    path = tmp_path / "w.yaml"
    path.write_text(text)
    assert one_error(path) == (
        f"{path}: this reads as a file of roles, not a hive file: a hive has models: and "
        "roles: (or roles_dir:, the folder its files of roles are in, which honeycomb "
        "validate HIVE.yaml checks with it)"
    )


@pytest.mark.parametrize(
    ("field", "said"),
    [
        ("headers: {X-Team: a}", "(headers go under settings: settings: {extra_headers: "),
        ("token: ${TOKEN}", "(a model's key is its api_key: api_key: ${NAME}, from the "),
        ("temperature: 0.2", "(a parameter sent with every call goes under settings: "),
    ],
)
def test_a_models_field_written_in_the_wrong_place_is_told_where_it_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, said: str
) -> None:
    # headers: was told "did you mean 'threads'?", and token: to go under settings:,
    # sent with every call as a parameter of the request's body.
    monkeypatch.setenv("TOKEN", "tok-never-shown-123")
    text = f"models:\n  gpt:\n    model: m\n    {field}\nroles:\n  planner: {{description: P}}\n"
    error = one_error(hive(tmp_path, text))
    assert f":4:5: models.gpt.{field.split(':')[0]}: unknown field " in error
    assert said in error
    assert "tok-never-shown" not in error


@pytest.mark.parametrize("written", ["models:\n", "models: offline\n"])
def test_models_written_as_no_mapping_is_one_error(tmp_path: Path, written: str) -> None:
    # It was two at one place: what to write, and "the hive defines no models".
    path = hive(tmp_path, written + "roles:\n  planner: {description: Plans.}\n")
    given = "no value" if written == "models:\n" else "'offline'"
    assert one_error(path) == (
        f"{path}:1:1: models: should be a mapping (got {given}): write 'key: value' lines under it"
    )


def test_duplicate_key(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD + "roles:\n  x: {}\n")
    assert one_error(path).startswith(f"{path}:21:1: roles: key 'roles' appears twice")


def test_unknown_top_level_field_suggests_the_right_one(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD.replace("policy:", "polcy:"))
    error = one_error(path)
    assert error.startswith(f"{path}:16:1: polcy: unknown field 'polcy' (did you mean 'policy'?)")


def test_unknown_role_field(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD.replace("    description: Counts words.", "    descripton: x"))
    error = one_error(path)
    assert error.startswith(f"{path}:11:5: roles.counter.descripton: unknown field")
    assert "did you mean 'description'?" in error


def test_wrong_type(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD.replace("  max_workers: 3", "  max_workers: many"))
    assert one_error(path).startswith(f"{path}:17:3: policy.max_workers: Input should be")


def test_unknown_tool_name_lists_the_valid_ones(tmp_path: Path) -> None:
    text = GOOD.replace(
        "roles:\n", "tools:\n  count: tests.support.role_tools:word_count\nroles:\n"
    )
    text = text.replace("[tests.support.role_tools:word_count]", "[cuont]")
    path = hive(tmp_path, text)
    error = one_error(path)
    assert error.startswith(f"{path}:14:13: roles.counter.tools[0]: unknown tool 'cuont'")
    assert "(did you mean 'count'?)" in error
    assert "available: count" in error


def test_tool_import_path_that_does_not_import(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD.replace("role_tools:word_count", "role_tools:word_cont"))
    error = one_error(path)
    assert error.startswith(f"{path}:12:13: roles.counter.tools[0]: cannot import")
    assert "has no attribute 'word_cont'" in error


@pytest.mark.parametrize("fails", ["raise RuntimeError('no config')", "raise SystemExit(3)"])
def test_a_tool_module_that_fails_as_it_is_imported_is_located(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """Even one that exits (a script's argparse at its top level): the hive's mistake,
    located, not the process's end (with the exit status of a run waiting, 3)."""
    (tmp_path / "exits_on_import.py").write_text(f"{fails}\n\ndef count() -> int:\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = hive(
        tmp_path, GOOD.replace("tests.support.role_tools:word_count", "exits_on_import:count")
    )
    error = one_error(path)
    assert error.startswith(f"{path}:12:13: roles.counter.tools[0]: cannot import")
    assert ("raised SystemExit: 3" in error) == ("SystemExit" in fails)


def test_unknown_model_reference(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD.replace("    model: gpt\n", "    model: gtp\n"))
    error = one_error(path)
    assert error.startswith(f"{path}:15:5: roles.aggregator.model: unknown model 'gtp'")
    assert "(did you mean 'gpt'?)" in error


def test_unknown_planner_role(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD + "planner: planer\n")
    error = one_error(path)
    assert error.startswith(f"{path}:21:1: planner: unknown role 'planer'")
    assert "(did you mean 'planner'?)" in error


def test_an_unknown_aggregator_is_told_that_concat_is_one_too(tmp_path: Path) -> None:
    # 'concatenate' was told only the roles, not that 'concat' (no role) is meant.
    path = hive(tmp_path, GOOD + "aggregator: concatenate\n")
    assert one_error(path).startswith(
        f"{path}:21:1: aggregator: unknown role 'concatenate' (did you mean 'concat'?); roles: "
    )
    assert one_error(path).endswith(" (or concat: the results joined)")


def test_a_lead_that_plans_in_rounds(tmp_path: Path) -> None:
    loaded = load_hive(hive(tmp_path, GOOD + "planner: {role: planner, rounds: 4}\n"))
    planner = Executor.from_hive(loaded).shared.phases.planner
    assert isinstance(planner, RolePlanner)
    assert (planner.role, planner.rounds) == ("planner", 4)
    path = hive(tmp_path, GOOD + "planner: {role: planer, rounds: 4}\n")
    error = one_error(path)
    assert error.startswith(f"{path}:21:11: planner.role: unknown role 'planer'")
    assert "(did you mean 'planner'?)" in error
    path = hive(tmp_path, GOOD + "planner: {role: planner, rounds: 0}\n")
    assert one_error(path).startswith(f"{path}:21:26: planner.rounds: Input should be greater")


def test_a_list_whose_item_is_wrong_is_not_told_too_short(tmp_path: Path) -> None:
    """``roles: [[1]]`` was told twice, once falsely: "Tuple should have at least 1 item
    after validation, not 0", pydantic counting only the items that validated."""
    path = hive(tmp_path, GOOD + "planner: {role: planner, roles: [[1]]}\n")
    assert one_error(path) == (
        f"{path}:21:34: planner.roles[0]: Input should be a valid string (got [1])"
    )


class Pair(BaseModel):
    names: tuple[str, ...] = Field(min_length=2)


def test_a_config_error_in_python_is_not_told_too_short_either() -> None:
    with pytest.raises(ValidationError) as caught:
        Pair(names=("a", 1))  # type: ignore[arg-type]
    assert validation_summary(caught.value) == (
        "Pair.names[1]: Input should be a valid string (got 1)"
    )
    with pytest.raises(ValidationError) as caught:
        Pair(names=("a",))
    assert "at least 2 items" in validation_summary(caught.value)  # truly too short


def test_policy_rules(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD.replace("  quorum: 2\n", ""))
    assert one_error(path).startswith(f"{path}:16:1: policy: failure: quorum needs 'quorum: K'")
    path = hive(tmp_path, GOOD.replace("failure: quorum", "failure: sometimes"))
    assert one_error(path).startswith(f"{path}:18:3: policy.failure: Input should be")


def test_openai_model_needs_a_name(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD.replace("    model: gpt-4o-mini\n", ""))
    assert one_error(path).startswith(f"{path}:4:3: models.gpt: an openai model needs 'model:")


def test_max_concurrency_sets_the_models_shared_adaptive_limiter(tmp_path: Path) -> None:
    def limiter_of(text: str) -> AdaptiveLimiter | None:
        model = Executor.from_hive(load_hive(hive(tmp_path, text))).models["gpt"]
        assert isinstance(model, OpenAIModel)
        return model.limiter

    default = limiter_of(GOOD)
    assert default is not None
    assert default.max_concurrency == 32
    url = "    base_url: http://127.0.0.1:9/v1\n"
    set_to_4 = limiter_of(GOOD.replace(url, url + "    max_concurrency: 4\n"))
    assert set_to_4 is not None
    assert set_to_4.max_concurrency == 4
    assert limiter_of(GOOD.replace(url, url + "    max_concurrency: null\n")) is None
    path = hive(tmp_path, GOOD.replace(url, url + "    max_concurrency: 0\n"))
    error = one_error(path)
    assert error.startswith(f"{path}:7:5: models.gpt.max_concurrency: Input should be greater")


def test_a_key_whose_variable_is_not_set_is_asked_for_by_the_models_a_run_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key is the environment's, not the file's: ``api_key: ${NAME}`` of a variable not
    set loads, and is told (naming the variable) for the models a run calls: a warning
    of validate, a refusal of run. A model another stands in for (--model, --replay), or
    that no role uses, never asks for it. Another value's variable is the file's."""
    monkeypatch.delenv("HIVE_TEST_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyed = GOOD.replace("base_url: http://127.0.0.1:9/v1", "api_key: ${HIVE_TEST_KEY}")
    path = hive(tmp_path, keyed)
    told = "model 'gpt-4o-mini' reads its API key from the environment variable HIVE_TEST_KEY"
    [missing] = load_hive(path).missing_keys()
    assert str(missing) == f"{path}:6:5: models.gpt.api_key: {told}, which is not set"
    assert main(["validate", str(path)]) == 0
    assert f"warning: {path}:6:5: models.gpt.api_key: {told}" in capsys.readouterr().out
    assert main(["run", str(path), "Count.", "--no-store"]) == 2
    assert told in capsys.readouterr().err
    assert main(["run", str(path), "Count.", "--no-store", "--model", "offline"]) != 2
    (tmp_path / "unused").mkdir()
    unused = hive(tmp_path / "unused", keyed.replace("    model: gpt\n", ""))
    assert load_hive(unused).missing_keys() == []
    (tmp_path / "url").mkdir()
    url = hive(tmp_path / "url", GOOD.replace("http://127.0.0.1:9/v1", "${HIVE_TEST_KEY}"))
    assert one_error(url).startswith(
        f"{url}:6:15: models.gpt.base_url: environment variable HIVE_TEST_KEY is not set"
    )
    monkeypatch.setenv("HIVE_TEST_KEY", "sk-test")
    key = load_hive(path).spec.models["gpt"].api_key
    assert key is not None
    assert key.get_secret_value() == "sk-test"
    assert load_hive(path).missing_keys() == []


def test_a_key_none_gives_is_told_one_way_by_models_embeddings_and_endpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hive's models, its memory's embeddings and an endpoint made in Python are
    checked by one check, told in one way at the line to fix: the embeddings said it
    in words of their own, and on OpenAI's endpoint with no key at all they were not
    checked (validate said OK, and every search of a run failed)."""
    for name in ("HIVE_TEST_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    memory = "memory:\n  embeddings:\n    model: embed-small\n"
    remembers = "    tools: [tests.support.role_tools:word_count]\n    memory: {namespace: n}\n"
    good = GOOD.replace("    tools: [tests.support.role_tools:word_count]\n", remembers)
    keyed = good.replace("base_url: http://127.0.0.1:9/v1", "api_key: ${HIVE_TEST_KEY}")
    path = hive(tmp_path, keyed + memory + "    api_key: ${HIVE_TEST_KEY}\n")
    unset = "reads its API key from the environment variable HIVE_TEST_KEY, which is not set"
    assert [str(error) for error in load_hive(path).missing_keys()] == [
        f"{path}:6:5: models.gpt.api_key: model 'gpt-4o-mini' {unset}",
        f"{path}:25:5: memory.embeddings.api_key: the memory's embeddings model 'embed-small' "
        + unset,
    ]
    endpoint = OpenAIModel("gpt-4o-mini", api_key_env="HIVE_TEST_KEY").missing_key()
    assert endpoint is not None
    assert endpoint.message == f"model 'gpt-4o-mini' {unset}"
    (tmp_path / "openai").mkdir()
    unkeyed = good.replace("    base_url: http://127.0.0.1:9/v1\n", "") + memory
    path = hive(tmp_path / "openai", unkeyed)
    needs = "needs an API key: set OPENAI_API_KEY (or give the model an api_key, or the base_url"
    told = [str(error) for error in load_hive(path).missing_keys()]
    assert told[0].startswith(f"{path}:4:3: models.gpt: model 'gpt-4o-mini' {needs}")
    assert told[1].startswith(
        f"{path}:22:3: memory.embeddings: the memory's embeddings model 'embed-small' {needs}"
    )
    assert len(told) == 2
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-of-openai")
    assert load_hive(path).missing_keys() == []
    monkeypatch.delenv("OPENAI_API_KEY")  # embeddings no role calls need none
    (tmp_path / "unused").mkdir()
    unused = hive(tmp_path / "unused", unkeyed.replace(remembers, ""))
    assert [e.field for e in load_hive(unused).missing_keys()] == ["models.gpt"]


def _remembering_hive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hive whose role's memory calls embeddings on OpenAI's endpoint, with no key."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    remembers = "    tools: [tests.support.role_tools:word_count]\n    memory: {namespace: n}\n"
    good = GOOD.replace("    tools: [tests.support.role_tools:word_count]\n", remembers)
    return hive(tmp_path, good + "memory:\n  embeddings:\n    model: embed-small\n")


_EMBEDDINGS_NEED = (
    "the memory's embeddings model 'embed-small' needs an API key: set OPENAI_API_KEY"
)


def test_embeddings_without_their_key_stop_a_run_another_model_thinks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Embeddings a role's memory calls, with no key, and ``--model offline`` for every
    role: the run went on, and every search of its memory failed. It is refused before
    it starts, at the embeddings' line."""
    path = _remembering_hive(tmp_path, monkeypatch)
    assert main(["run", str(path), "Count.", "--no-store", "--model", "offline"]) == 2
    assert f"{path}:23:3: memory.embeddings: {_EMBEDDINGS_NEED}" in capsys.readouterr().err


async def test_embeddings_without_their_key_stop_a_run_of_the_hives_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, of the hive's Executor made in Python (``Executor.check_keys``)."""
    executor = Executor.from_hive(
        load_hive(_remembering_hive(tmp_path, monkeypatch)), model=OfflineModel()
    )
    with pytest.raises(ConfigErrors, match=re.escape(_EMBEDDINGS_NEED)):
        await executor.run("Count.")


def test_environment_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIVE_TEST_URL", raising=False)
    text = GOOD.replace("http://127.0.0.1:9/v1", "${HIVE_TEST_URL:-http://127.0.0.1:8/v1}")
    assert load_hive(hive(tmp_path, text)).spec.models["gpt"].base_url == "http://127.0.0.1:8/v1"


@pytest.mark.parametrize(
    "reference", ["${HIVE_TEST_KEY", "${}", "${HIVE TEST KEY}", "${HIVE_TEST_URL:-${X}}"]
)
def test_a_reference_to_the_environment_half_written_is_located(
    tmp_path: Path, reference: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIVE_TEST_KEY", "sk-test-1234567890")
    path = hive(tmp_path, GOOD.replace("http://127.0.0.1:9/v1", reference))
    error = one_error(path)
    assert error.startswith(f"{path}:6:15: models.gpt.base_url: '${{"), error
    assert "(write ${NAME} or ${NAME:-default} for a variable" in error


@pytest.mark.parametrize(
    ("store", "where"),
    [
        ("store: mysql://app@127.0.0.1:9/db\n", "21:1: store"),
        ("store: {url: 'mysql://app@127.0.0.1:9/db'}\n", "21:9: store.url"),
    ],
)
def test_a_store_url_honeycomb_does_not_know_is_located(
    tmp_path: Path, store: str, where: str
) -> None:
    path = hive(tmp_path, GOOD + store)
    assert one_error(path) == (
        f"{path}:{where}: the run store mysql:// is not one Honeycomb knows: give a file, "
        "or a postgresql:// URL"
    )
    for known in ("store: runs.db\n", "store: postgresql://app@127.0.0.1:9/db\n"):
        assert load_hive(hive(tmp_path, GOOD + known)).spec.store is not None


def test_roles_from_a_folder(tmp_path: Path) -> None:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "extra.yaml").write_text("writer: {description: Writes.}\n")
    loaded = load_hive(hive(tmp_path, GOOD + "roles_dir: roles\n"))
    assert "writer" in loaded.roles
    path = hive(tmp_path, GOOD + "roles_dir: nowhere\n")
    assert one_error(path).startswith(f"{path}:21:1: roles_dir: no such folder")


def test_five_mistakes_are_all_named_with_their_lines(tmp_path: Path) -> None:
    text = (
        GOOD.replace("policy:", "polcy:")
        .replace("    description: Counts words.", "    descripton: x")
        .replace("    model: gpt\n", "    model: gtp\n")
        .replace("role_tools:word_count", "role_tools:nope")
    )
    path = hive(tmp_path, text + "aggregator: agregator\n")
    errors = errors_of(path)
    lines = [e.split(":")[1] for e in errors]
    assert len(errors) == 5, errors
    assert lines == ["11", "12", "15", "16", "21"]


def test_the_demo_hive_is_valid() -> None:
    loaded = load_hive(demo_hive_path())
    assert {"planner", "aggregator", "meteorologist", "courier"} <= set(loaded.roles)
    courier = loaded.roles["courier"].resolve_tools()
    assert any(t.side_effects for t in courier)


def test_from_yaml_takes_one_test_model_as_model_or_models(tmp_path: Path) -> None:
    from honeycomb.testing import ScriptedModel

    path = hive(tmp_path, GOOD)
    for spelling in ("model", "models"):
        scripted = ScriptedModel(["the answer"])
        executor = Executor.from_yaml(path, **{spelling: scripted})
        assert {executor.shared.crew.model_for(r).__class__ for r in executor.roles.values()} == {
            ScriptedModel
        }, spelling


def test_from_yaml_models_by_name_replace_the_declared_ones(tmp_path: Path) -> None:
    from honeycomb.testing import ScriptedModel

    scripted = ScriptedModel(["merged"])
    executor = Executor.from_yaml(hive(tmp_path, GOOD), models={"gpt": scripted})
    assert executor.models["gpt"] is scripted
    assert isinstance(executor.models["default"], OfflineModel)
    assert executor.shared.crew.model_for(executor.roles["aggregator"]) is scripted


async def test_a_hive_runs_on_a_test_model(tmp_path: Path) -> None:
    from honeycomb.testing import ScriptedModel

    plan = (  # two subtasks: the quorum of GOOD is 2
        '{"subtasks": [{"id": "s1", "role": "counter", "instruction": "count"}, '
        '{"id": "s2", "role": "counter", "instruction": "count"}]}'
    )
    model = ScriptedModel(lambda key: [plan] if key.endswith("/planner") else ["done"])
    result = await Executor.from_yaml(hive(tmp_path, GOOD), models=model).run("t")
    assert result.answer == "done"


def test_from_yaml_says_which_model_names_the_hive_has(tmp_path: Path) -> None:
    from honeycomb.testing import ScriptedModel

    with pytest.raises(ConfigErrors) as caught:
        Executor.from_yaml(hive(tmp_path, GOOD), models={"gtp": ScriptedModel(["x"])})
    assert "models={'gtp': ...}: the hive has no model 'gtp' (did you mean 'gpt'?)" in str(
        caught.value
    )
    with pytest.raises(TypeError, match=r"model= .* or models= .*, not both"):
        Executor.from_yaml(
            hive(tmp_path, GOOD), model=ScriptedModel(["x"]), models=ScriptedModel(["y"])
        )


def test_a_roles_unknown_model_is_reported_beside_its_field_errors(tmp_path: Path) -> None:
    path = hive(tmp_path, GOOD.replace("    model: gpt\n", "    model: gtp\n    max_turns: 0\n"))
    errors = errors_of(path)
    assert any("roles.aggregator.max_turns: Input should be greater" in e for e in errors)
    assert any(
        "roles.aggregator.model: unknown model 'gtp' (did you mean 'gpt'?)" in e for e in errors
    ), errors


def test_an_unknown_default_model_is_told_with_the_models_there_are(tmp_path: Path) -> None:
    # A role's unknown model named the hive's models; the default_model, the first a
    # newcomer changes, named none when none was close to it.
    path = hive(tmp_path, GOOD + "default_model: claude\n")
    assert one_error(path).endswith("default_model: unknown model 'claude'; models: default, gpt")


def test_a_hive_whose_roles_are_misspelt_says_it_has_none(tmp_path: Path) -> None:
    # `role:` for `roles:` left the planner and aggregator unknown among "roles: ", an
    # empty list that read as a message cut off.
    misspelt = GOOD.replace("\nroles:\n", "\nrole:\n")
    errors = errors_of(hive(tmp_path, misspelt + "planner: planner\naggregator: writer\n"))
    assert any("role: unknown field 'role' (did you mean 'roles'?)" in e for e in errors)
    assert any(e.endswith("planner: unknown role 'planner'; roles: none") for e in errors), errors
    assert any(
        e.endswith("aggregator: unknown role 'writer'; roles: none (or concat: the results joined)")
        for e in errors
    ), errors


def test_a_roles_max_repeats_is_read_and_checked(tmp_path: Path) -> None:
    counting = "    tools: [tests.support.role_tools:word_count]\n"
    loaded = load_hive(hive(tmp_path, GOOD.replace(counting, f"{counting}    max_repeats: 5\n")))
    assert Executor.from_hive(loaded).roles["counter"].max_repeats == 5
    path = hive(tmp_path, GOOD.replace(counting, f"{counting}    max_repeats: 0\n"))
    assert "roles.counter.max_repeats: Input should be greater than or equal to 1" in one_error(
        path
    )


def test_a_roles_dir_roles_unknown_model_is_reported_beside_its_field_errors(
    tmp_path: Path,
) -> None:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "extra.yaml").write_text(
        "writer: {description: Writes., model: gtp, concurrency: 0}\n"
    )
    errors = errors_of(hive(tmp_path, GOOD + "roles_dir: roles\n"))
    assert any("writer.concurrency: Input should be greater" in e for e in errors), errors
    assert any("writer.model: unknown model 'gtp' (did you mean 'gpt'?)" in e for e in errors)


def test_a_role_both_inline_and_in_roles_dir_is_reported_beside_the_folders_mistakes(
    tmp_path: Path,
) -> None:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "bad.yaml").write_text("name: [x]\ndescription: bad\n")
    (tmp_path / "roles" / "more.yaml").write_text(
        "counter: {description: Again.}\nwriter: {description: W., tols: [x]}\n"
        "reader: {description: R.}\n"
    )
    (tmp_path / "roles" / "twice.yaml").write_text("name: reader\ndescription: Twice.\n")
    path = hive(tmp_path, GOOD + "roles_dir: roles\n")
    errors = errors_of(path)
    assert len(errors) == 4, errors
    assert any(e.startswith(f"{tmp_path / 'roles' / 'bad.yaml'}:1:1: name:") for e in errors)
    assert any("writer.tols: unknown field 'tols'" in e for e in errors)
    # Each named where the other is written (it said "is defined twice", "is also
    # defined in roles_dir", and no more).
    more = tmp_path / "roles" / "more.yaml"
    assert any(e.endswith(f"role 'reader' is defined twice (first in {more}:3)") for e in errors)
    assert f"{path}:10:3: roles.counter: role 'counter' is also defined in {more}:1" in errors


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (
            "policy:\n  max_workers: 0\n  failure: quorum\n",
            ["policy: failure: quorum needs 'quorum: K'",
             "policy.max_workers: Input should be greater"],
        ),
        (
            "policy:\n  max_workers: 0\n  quorum: 2\n",
            ["policy: 'quorum' is set but failure is 'best_effort'",
             "policy.max_workers: Input should be greater"],
        ),
        ("policy:\n  failure: quorum\n  quorum: 0\n", ["policy.quorum: Input should be greater"]),
        ("policy:\n  failure: sometimes\n  quorum: 2\n", ["policy.failure: Input should be"]),
    ],
)  # fmt: skip
def test_the_quorum_rule_is_reported_beside_the_policys_field_errors(
    tmp_path: Path, policy: str, expected: list[str]
) -> None:
    text = GOOD[: GOOD.index("policy:")] + policy
    errors = errors_of(hive(tmp_path, text))
    assert len(errors) == len(expected), errors
    for error, wanted in zip(errors, expected, strict=True):
        assert wanted in error


OFFLINE = "models: {default: offline}\n"
TWO_MODELS = "models:\n  default: offline\n  gpt:\n    model: gpt-4o-mini\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            TWO_MODELS + "    retry: {attemps: 3}\n",
            "5:13: models.gpt.retry.attemps: unknown field 'attemps' (did you mean 'attempts'?); "
            "allowed: attempts, deadline_s, initial_wait_s, jitter_s, max_wait_s",
        ),
        (
            TWO_MODELS + "    retry: {attempts: 0}\n",
            "5:13: models.gpt.retry.attempts: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            TWO_MODELS + "    retry: 3\n",
            "5:5: models.gpt.retry: should be a mapping of attempts, deadline_s, "
            "initial_wait_s, jitter_s, max_wait_s (got 3): write its fields under it, one "
            "'field: value' a line",
        ),
        (
            TWO_MODELS + "    price: {input_per_mtok: 1}\n",
            "5:5: models.gpt.price.output_per_mtok: this field is required",
        ),
        (
            TWO_MODELS + "    price: {input_per_mtok: -1, output_per_mtok: 1}\n",
            "5:13: models.gpt.price.input_per_mtok: Input should be greater than or equal to 0 "
            "(got -1)",
        ),
        (
            OFFLINE + "policy: {budgets: {model_call: 3}}\n",
            "2:20: policy.budgets.model_call: unknown field 'model_call' (did you mean "
            "'model_calls'?); allowed: cost, cost_per_call, model_calls, tool_calls, total_tokens, "
            "wall_time_s",
        ),
        (
            OFFLINE + "policy: {budgets: {total_tokens: 1.5}}\n",
            "2:20: policy.budgets.total_tokens: Input should be a valid integer, got a number "
            "with a fractional part (got 1.5)",
        ),
        (
            OFFLINE + "mcp_servers:\n  s: {command: python, tools: {t: {timeout: 0}}}\n",
            "3:36: mcp_servers.s.tools.t.timeout: Input should be greater than 0 (got 0)",
        ),
        (
            OFFLINE + "mcp_servers:\n  s: {command: python, url: 'http://127.0.0.1:9/mcp'}\n",
            "3:3: mcp_servers.s: MCP server 's': give a command (a stdio server) or a url",
        ),
        (
            OFFLINE + "mcp_servers:\n  's p': {command: python}\n",
            "3:3: mcp_servers['s p']: MCP server 's p': a name uses only letters",
        ),
    ],
)
def test_the_runtime_values_a_hive_reads_into_name_line_and_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = hive(tmp_path, text + "roles:\n  planner: {description: Plans.}\n")
    assert one_error(path).startswith(f"{path}:{expected}")


def test_a_hive_reads_straight_into_the_runtime_values(tmp_path: Path) -> None:
    text = TWO_MODELS + (
        "    base_url: http://127.0.0.1:9/v1\n"
        "    retry: {attempts: 2, jitter_s: 0}\n"
        "    price: {input_per_mtok: 1, output_per_mtok: 2}\n"
        "mcp_servers:\n  s: {command: python, cwd: sub, tools: {t: {timeout: 2}}}\n"
        "policy: {budgets: {cost: 0.5}}\n"
        "roles:\n  planner: {description: Plans., model: gpt}\n"
    )
    loaded = load_hive(hive(tmp_path, text))
    gpt = loaded.spec.models["gpt"]
    assert gpt.retry == RetryPolicy(attempts=2, jitter_s=0)
    assert gpt.price == Price(input_per_mtok=1, output_per_mtok=2)
    assert loaded.spec.policy.budgets == Limits(cost=0.5)
    (server,) = loaded.mcp_servers
    assert server == McpServer(
        name="s", command="python", cwd=str(tmp_path / "sub"),
        tools={"t": McpToolSettings(timeout=2)},
    )  # fmt: skip
    priced = gpt.build(tmp_path)
    assert isinstance(priced, PricedModel)
    assert priced.price is gpt.price
    assert isinstance(priced.inner, OpenAIModel)
    assert priced.inner.retry is gpt.retry


def _fields(model: Any) -> dict[str, Any]:
    """The annotations of what a file may write of a model or a runtime value."""
    if issubclass(model, Settings):
        return {name: info.type for name, info in written_fields(model).items()}
    return {name: info.annotation for name, info in model.model_fields.items()}


def _places(model: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    """Every place under ``path`` where a hive file holds a mapping of ``model``'s
    fields (a mapping's values under the key ``k``), with the model: a pydantic model,
    or a runtime value the hive validates into (:class:`~runtime.value.Settings`)."""
    found: list[tuple[tuple[str, ...], Any]] = [(path, model)]
    for name, annotation in _fields(model).items():
        where = (*path, name)
        while typing.get_origin(annotation) is not None:
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if typing.get_origin(annotation) is dict:
                where = (*where, "k")
            annotation = args[-1] if typing.get_origin(annotation) is dict else args[0]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel | Settings):
            found += _places(annotation, where)
    return found


HIVE_PLACES = _places(HiveSpec, ()) + _places(Role, ("roles", "counter"))


@pytest.mark.parametrize(("where", "model"), HIVE_PLACES, ids=[".".join(p) for p, _ in HIVE_PLACES])
def test_an_unknown_field_anywhere_in_a_hive_lists_every_field_allowed_there(
    tmp_path: Path, where: tuple[str, ...], model: Any
) -> None:
    data = yaml.safe_load(GOOD)
    holder = data
    for key in where:
        if not isinstance(holder.get(key), dict):
            holder[key] = {}
        holder = holder[key]
    holder["bogus_field"] = 1
    errors = errors_of(hive(tmp_path, yaml.safe_dump(data)))
    field = ".".join((*where, "bogus_field"))
    (error,) = [e for e in errors if f": {field}: unknown field 'bogus_field'" in e]
    assert error.endswith(f"; allowed: {', '.join(sorted(_fields(model)))}")


def test_what_a_hive_declares_may_be_given_instead_or_is_refused_saying_so(
    tmp_path: Path,
) -> None:
    # Executor.from_yaml(path, aggregator="concat") raised TypeError: got multiple values
    # for keyword argument 'aggregator'. A planner, an aggregator and guards given
    # replace the hive's, as a policy given does; its tools and models are its own.
    path = hive(tmp_path, GOOD)
    executor = Executor.from_yaml(path, aggregator="concat")
    assert executor.shared.phases.aggregator.__class__.__name__ == "ConcatAggregator"
    with pytest.raises(TypeError, match=r"tools: the hive file declares them \(its tools:\)"):
        Executor.from_yaml(path, tools=[])
