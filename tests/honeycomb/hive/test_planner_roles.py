"""A hive's ``planner: {roles: [...]}``: the roles its planner gives subtasks to (a
role that only judges among them, if named), each name checked at its line; and a
hive whose planner has only judges to give subtasks to, which no run could plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.main import ExitStatus, main
from honeycomb.hive import load_hive
from honeycomb.planning import RolePlanner
from tests.support.hives import errors_of, hive

HIVE = """\
models:
  default: offline
roles:
  planner: {description: Plans.}
  writer:
    description: Writes.
    guards: {output: [reviewer]}
  reviewer: {description: Judges.}
planner:
  role: planner
  roles: [writer, reviewer]
"""


def test_a_hive_names_the_roles_its_planner_gives_work(tmp_path: Path) -> None:
    planner = load_hive(hive(tmp_path, HIVE)).planner
    assert isinstance(planner, RolePlanner)
    assert planner.roles == ("writer", "reviewer")
    assert planner.rounds == 1


def test_a_hive_planner_naming_no_role_or_itself_is_told_at_its_line(tmp_path: Path) -> None:
    wrong = HIVE.replace("[writer, reviewer]", "[writer, reviwer, planner]")
    assert errors_of(hive(tmp_path, wrong)) == [
        f"{tmp_path / 'hive.yaml'}:11:19: planner.roles[1]: unknown role 'reviwer' "
        "(did you mean 'reviewer'?); roles: planner, writer, reviewer",
        f"{tmp_path / 'hive.yaml'}:11:28: planner.roles[2]: 'planner' is the planner: it "
        "plans, and gives no subtask to itself",
    ]


IDLE = """\
models:
  default: offline
roles:
  planner: {description: Plans.}
  writer:
    guards: {output: [editor]}
  editor:
    guards: {output: [writer]}
"""


def test_validate_refuses_a_hive_whose_planner_has_only_judges_to_plan_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hive(tmp_path, IDLE)
    assert main(["validate", str(path)]) == ExitStatus.FAILED
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{path}: 1 error",
        f"  {path}:3:1: roles: the planner 'planner' has no role to give subtasks to "
        "('writer', 'editor': named by a guard as its judge, given no work unless named): "
        "add a role that works, or name the roles it gives subtasks to "
        "(RolePlanner(roles=[...]); in a hive, planner: {role: ..., roles: [...]})",
    ]
    named = IDLE + "planner: {role: planner, roles: [writer]}\n"
    assert main(["validate", str(hive(tmp_path, named))]) == ExitStatus.OK


def test_validate_refuses_a_hive_whose_planner_has_no_other_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hive(tmp_path, "models:\n  default: offline\nroles:\n  planner: {}\n  aggregator: {}\n")
    assert main(["validate", str(path)]) == ExitStatus.FAILED
    assert capsys.readouterr().out.splitlines() == [
        f"{path}: 1 error",
        f"  {path}:3:1: roles: the planner 'planner' has no role to give subtasks to (the "
        "run's only other role, 'aggregator', merges the results): add one",
    ]
