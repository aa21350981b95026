"""A hive's ``planner: {roles: [...]}``: the roles its planner gives subtasks to (a
role that only judges among them, if named), each name checked at its line."""

from __future__ import annotations

from pathlib import Path

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
