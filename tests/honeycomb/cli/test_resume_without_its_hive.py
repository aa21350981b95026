"""``honeycomb resume`` of a run that ended with an answer shows it, whatever became of
the hive file it was started from: showing a kept answer needs no hive, and one moved
or deleted since is no reason to refuse it."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.main import main
from tests.support.hives import CHATTY, hive


def test_a_run_that_ended_is_shown_once_its_hive_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = hive(tmp_path, CHATTY)
    run = ["run", "hive.yaml", "Find the weather in Rome.", "--plain", "--store", "runs.db"]
    assert main([*run, "--run-id", "r1", "--model", "offline"]) == 0
    answered = capsys.readouterr().out
    answer = answered[answered.index("Answer:") :].split("\n\n")[0]
    path.unlink()
    assert main(["resume", "r1", "--store", "runs.db", "--plain"]) == 0, capsys.readouterr().err
    assert answer in capsys.readouterr().out


WAITS = """\
models: {default: offline}
roles:
  planner: {description: Plans.}
  clerk:
    description: Files the note.
    tools: [notes:file_note]
    approvals: {tools: [file_note]}
"""

NOTES = '''\
from honeycomb import tool


@tool(side_effects=True)
def file_note(text: str) -> str:
    """File a note.

    Args:
        text: The note.
    """
    return "filed"
'''


def test_a_run_whose_hive_moved_is_told_the_command_that_continues_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was told only that the hive file it was started from cannot be read, though
    # 'honeycomb run' of the hive where it is now, with its --run-id, continues it.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old").mkdir()
    hive(tmp_path / "old", WAITS)
    (tmp_path / "old" / "notes.py").write_text(NOTES)
    run = ["old/hive.yaml", "File a note.", "--plain", "--store", "runs.db", "--run-id", "r2"]
    assert main(["run", *run]) == 3  # it waits for the note's approval
    capsys.readouterr()
    (tmp_path / "old").rename(tmp_path / "new")
    assert main(["resume", "r2", "--store", "runs.db"]) == 2
    assert capsys.readouterr().err == (
        f"run r2 was started from {tmp_path / 'old' / 'hive.yaml'}, which is not there: if "
        "the hive moved, continue the run with it where it is now (honeycomb run HIVE.yaml "
        "--run-id r2 --store runs.db)\n"
    )
    assert main(["run", "new/hive.yaml", *run[1:]]) == 3  # continued, and waiting still
