"""The files of a hive's ``roles_dir`` are read as the hive file is: the environment
replaced (a variable unset, or a reference half written, an error at its line in the
role file), no error showing a value read from there, and the reader's bounds. A
mapping of roles may hold a role named ``name``; a YAML merge key may be overridden;
an empty ``roles_dir`` is refused, and a hive file is never one of its own roles, nor is
another hive file or an eval's cases file in the folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from honeycomb.cli.main import main as cli
from honeycomb.hive import load_hive
from runtime.config.yaml_config import MAX_FILE_BYTES
from tests.support.hives import errors_of, hive

HIVE = """\
models: {default: offline}
roles_dir: roles
roles:
  planner: {description: Plans.}
"""


def role_file(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / "roles" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_a_role_file_reads_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WHO", "the team")
    role_file(tmp_path, "name: w\ndescription: works for ${WHO}\ninstructions: ${HOW:-well}\n")
    role = load_hive(hive(tmp_path, HIVE)).roles["w"]
    assert (role.description, role.instructions) == ("works for the team", "well")


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (
            "works for ${WHO_IS_UNSET}",
            "3:14: description: environment variable WHO_IS_UNSET is not set (write "
            "${WHO_IS_UNSET:-default} to give a default)",
        ),
        (
            "'be ${HALF_WRITTEN'",
            "3:14: description: '${HALF_WRITTEN' is not closed: end it with } (write ${NAME} "
            "or ${NAME:-default} for a variable, $${ for a literal ${)",
        ),
    ],
)
def test_a_reference_unset_or_half_written_is_an_error_in_the_role_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, error: str
) -> None:
    monkeypatch.delenv("WHO_IS_UNSET", raising=False)
    path = role_file(tmp_path, f"# a role\nname: w\ndescription: {value}\n")
    assert errors_of(hive(tmp_path, HIVE)) == [f"{path}:{error}"]


def test_an_error_in_a_role_file_shows_no_value_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNS", "sk-not-a-number-1234")
    path = role_file(tmp_path, "name: w\nmax_turns: ${TURNS}\n")
    (error,) = errors_of(hive(tmp_path, HIVE))
    assert "sk-not-a-number-1234" not in error
    assert error.startswith(f"{path}:2:1: max_turns: Input should be a valid integer")
    assert "[$TURNS hidden]" in error


def test_the_hive_files_roles_may_hold_one_named_name(tmp_path: Path) -> None:
    text = HIVE.replace("roles_dir: roles\n", "") + "  name: {description: Picks names.}\n"
    assert list(load_hive(hive(tmp_path, text)).roles) == ["planner", "name"]


def test_a_role_file_of_many_roles_may_hold_one_named_name(tmp_path: Path) -> None:
    role_file(tmp_path, "name: {description: Picks names.}\nw: {description: Works.}\n")
    role_file(tmp_path, "name: one\ndescription: A file of one role.\n", "one.yaml")
    roles = load_hive(hive(tmp_path, HIVE)).roles
    assert sorted(roles) == ["name", "one", "planner", "w"]
    assert roles["name"].description == "Picks names."


def test_a_role_overrides_what_it_merges(tmp_path: Path) -> None:
    text = HIVE.replace("roles_dir: roles\n", "") + (
        "  base: &base {description: Plans., max_turns: 2}\n"
        "  worker: {<<: *base, description: Works.}\n"
    )
    worker = load_hive(hive(tmp_path, text)).roles["worker"]
    assert (worker.description, worker.max_turns) == ("Works.", 2)


def test_an_empty_roles_dir_is_refused(tmp_path: Path) -> None:
    path = hive(tmp_path, HIVE.replace("roles_dir: roles", "roles_dir: ''"))
    assert errors_of(path) == [
        f"{path}:2:1: roles_dir: String should have at least 1 character (got '')"
    ]


def test_a_hive_whose_roles_dir_is_its_own_folder_is_not_one_of_its_roles(
    tmp_path: Path,
) -> None:
    (tmp_path / "w.yaml").write_text("w: {description: Works.}\n")
    path = hive(tmp_path, HIVE.replace("roles_dir: roles", "roles_dir: ."))
    assert sorted(load_hive(path).roles) == ["planner", "w"]


def test_a_roles_dir_passes_over_the_hive_files_and_eval_cases_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # roles_dir: . in a folder honeycomb init made read its evals.yaml as roles:
    # "evals.yaml:3:1: defaults: unknown field 'defaults'", and a hive file its roles call
    # as a tool as a file of roles defined twice; a hidden file, a tool's settings, as
    # roles too.
    assert cli(["init", str(tmp_path / "h")]) == 0
    folder = tmp_path / "h"
    (folder / "facts.yaml").write_text(HIVE.replace("roles_dir: roles\n", ""))
    (folder / "more.yaml").write_text("cases_from: more.jsonl\n")
    (folder / "w.yaml").write_text("w: {description: Works.}\n")
    (folder / ".pre-commit-config.yaml").write_text("repos:\n  - repo: local\n")
    path = folder / "hive.yaml"
    path.write_text(path.read_text() + "roles_dir: .\n")
    assert "w" in load_hive(path).roles
    capsys.readouterr()
    assert cli(["validate", str(path)]) == 0, capsys.readouterr().out


def test_a_role_named_as_a_field_of_cases_is_a_role(tmp_path: Path) -> None:
    role_file(tmp_path, "cases: {description: Gathers cases.}\n")
    assert "cases" in load_hive(hive(tmp_path, HIVE)).roles


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.timeout(10)  # without the check, opening the pipe waits for a writer
def test_a_role_file_that_is_a_pipe_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "roles").mkdir()
    pipe = tmp_path / "roles" / "w.yaml"
    os.mkfifo(pipe)
    assert errors_of(hive(tmp_path, HIVE)) == [
        f"{pipe}: cannot read the file: it is a pipe (FIFO), not a regular file"
    ]


def test_a_hive_called_as_a_tool_larger_than_the_bound_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("#" * (MAX_FILE_BYTES + 1))
    text = HIVE.replace("roles_dir: roles\n", "") + "  w: {tools: ['hive:big.yaml']}\n"
    assert errors_of(hive(tmp_path, text)) == [
        f"{big}: the file is larger than 4 MiB, far more than a configuration needs: is it "
        "the file meant?"
    ]


def test_no_error_shows_what_a_role_file_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHO", "sk-who-0001")  # a key, written where a name was meant
    monkeypatch.setenv("GHOST", "sk-ghost-0001")
    role_file(tmp_path, "name: ${WHO}\ntools: ['agent:${GHOST}']\n")
    errors = errors_of(hive(tmp_path, HIVE + "planner: nobody\n"))
    assert not [e for e in errors if "sk-who-0001" in e or "sk-ghost-0001" in e], errors
    # An error about the hive file that names the roles, and one about the role's tool.
    assert any("roles: [$WHO hidden], planner" in e for e in errors), errors
    assert any("'agent:[$GHOST hidden]' names no role" in e for e in errors), errors


def test_a_check_across_the_hive_points_into_the_role_file_that_writes_the_role(
    tmp_path: Path,
) -> None:
    path = role_file(
        tmp_path,
        "w:\n"
        "  description: weather\n"
        "  memory: {namespace: x, remember: true}\n"
        "  tools: [agent:ghost, hive:nope.yaml]\n",
        "r.yaml",
    )
    assert errors_of(hive(tmp_path, HIVE)) == [
        f"{path}:3:3: w.memory: role 'w' has memory: but the hive declares no memory: add a "
        "top-level 'memory: {path: memory.db}'",
        f"{path}:4:11: w.tools[0]: 'agent:ghost' names no role: roles are w, planner",
        f"{path}:4:24: w.tools[1]: 'hive:nope.yaml': no hive file {tmp_path / 'nope.yaml'}",
    ]


def test_a_role_file_with_mistakes_is_a_role_the_hive_may_name(tmp_path: Path) -> None:
    # Its role was also told as no role at all, wherever the hive named it: the
    # aggregator, the planner's roles, another role's agent tool (unknown role 'w').
    role_file(tmp_path, "name: w\ndescription: Works.\nmax_turn: 3\n")
    text = HIVE.replace("roles:\n", "roles:\n  lead: {description: Leads., tools: [agent:w]}\n")
    path = hive(tmp_path, text + "aggregator: w\nplanner: {role: planner, roles: [w, lead]}\n")
    (error,) = errors_of(path)
    assert error.startswith(f"{tmp_path / 'roles' / 'w.yaml'}:3:1: max_turn: unknown field")


def test_a_roles_dir_that_is_a_file_or_misspelt_is_told_what_to_write(tmp_path: Path) -> None:
    # Both were "no such folder: ...", of a file that is there, and of a folder beside
    # it of a close name alike.
    role_file(tmp_path, "w: {description: Works.}\n")
    (tmp_path / "w.yaml").write_text("w: {description: Works.}\n")
    path = hive(tmp_path, HIVE.replace("roles_dir: roles", "roles_dir: w.yaml"))
    (error,) = errors_of(path)
    assert error == (
        f"{path}:2:1: roles_dir: {tmp_path / 'w.yaml'} is a file, not a folder: roles_dir "
        "names a folder of role files (put the file in one, or its roles under roles:)"
    )
    path = hive(tmp_path, HIVE.replace("roles_dir: roles", "roles_dir: rolez"))
    (error,) = errors_of(path)
    rolez = tmp_path / "rolez"
    assert error == f"{path}:2:1: roles_dir: no such folder: {rolez} (did you mean 'roles'?)"
