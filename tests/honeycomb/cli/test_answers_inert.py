"""What a model wrote reaches the terminal inert: a run's answer, its live lines and a
chat's answers written as they come, with a terminal's escapes (which a tool's output
or a task can carry into the model's text) as spaces, on ``--plain`` as in the live
view."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from honeycomb.cli.main import demo_hive_path, main
from tests.support.hives import CHATTY

ESCAPES = "\x1b[2J\x1b]0;pwned\x07\x9b31m"
"""Clear the screen, set the window's title, and a C1 control sequence introducer."""


def test_a_runs_answer_and_lines_are_inert(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The offline model's answer quotes the task, as a model would quote a tool's output.
    task = f"Compare the weather in Oslo {ESCAPES} and Rome."
    assert main(["run", str(demo_hive_path()), task, "--plain", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "Answer:" in out
    assert "Oslo" in out
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in out


def test_a_chats_answers_are_inert_as_they_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    hive = tmp_path / "hive.yaml"
    hive.write_text(CHATTY)
    lines = [f"Find the weather in Rome {ESCAPES}.", "/exit"]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    assert main(["chat", str(hive), "--plain", "--session", "u1"]) == 0
    out = capsys.readouterr().out
    assert "[offline simulation]" in out
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in out
