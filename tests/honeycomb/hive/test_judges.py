"""``honeycomb validate`` warns of a role that only judges and has tools: a judge's
call is one model call without tools, so they are never called."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.main import ExitStatus, main
from honeycomb.hive import load_hive
from tests.support.hives import hive

HIVE = """\
models:
  default: offline
{planner}
roles:
  planner: {{}}
  writer:
    tools: [{writer_tools}]
    guards:
      output: [reviewer]
  reviewer:
    tools: [tests.support.role_tools:word_count]
"""


def test_a_role_that_only_judges_is_warned_its_tools_are_never_called(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was told nothing: its tools were silently never offered to it.
    path = hive(tmp_path, HIVE.format(planner="", writer_tools=""))
    [warning] = [str(w) for w in load_hive(path).judge_warnings()]
    assert warning.startswith(
        f"{path}:11:5: roles.reviewer.tools: the role 'reviewer' only judges (a guard names "
        "it as its judge, and it is given no work): a judge's call is one model call "
        "without tools, so its tools are never called; "
    )
    assert main(["validate", str(path)]) == ExitStatus.OK
    assert f"  warning: {warning}\n" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("planner", "writer_tools"),
    [("planner: {role: planner, roles: [writer, reviewer]}", ""), ("", "agent:reviewer")],
)
def test_a_judge_that_also_works_is_not_warned_of(
    tmp_path: Path, planner: str, writer_tools: str
) -> None:
    path = hive(tmp_path, HIVE.format(planner=planner, writer_tools=writer_tools))
    assert load_hive(path).judge_warnings() == []


def test_a_role_that_names_itself_as_its_judge_is_warned_it_is_given_no_work(
    tmp_path: Path,
) -> None:
    # It was told nothing: the planner silently never gave the writer a subtask.
    text = HIVE.format(planner="", writer_tools="").replace(
        "output: [reviewer]", "output: [writer]"
    )
    path = hive(tmp_path, text)
    [warning] = [str(w) for w in load_hive(path).judge_warnings()]
    assert warning.startswith(
        f"{path}:9:16: roles.writer.guards.output[0]: the role 'writer' names itself as its "
        "judge, which makes it a role that only judges: no planner gives it a subtask; "
    )
