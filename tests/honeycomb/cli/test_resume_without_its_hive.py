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
