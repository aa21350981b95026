"""Every command's exit status comes from one table (honeycomb/cli/exits.py), and
docs/cli.md's table is that one."""

from __future__ import annotations

import ast
import signal
from pathlib import Path

import pytest

from honeycomb.cli.exits import ExitStatus, exit_status_table
from honeycomb.cli.main import demo_hive_path, main
from tests.support import ROOT


def test_the_exit_status_table_of_docs_cli_md_is_the_commands_table() -> None:
    section = (ROOT / "docs" / "cli.md").read_text().split("\n## Exit status\n", 1)[1]
    lines = section.strip().splitlines()
    table = lines[: next((i for i, line in enumerate(lines) if not line.startswith("|")), None)]
    assert "\n".join(table) + "\n" == exit_status_table()


def test_the_statuses_of_signals_are_a_shells() -> None:
    assert ExitStatus.INTERRUPTED == 128 + signal.SIGINT
    assert ExitStatus.TERMINATED == 128 + signal.SIGTERM
    assert ExitStatus.BROKEN_PIPE == 128 + signal.SIGPIPE


def _numbers_returned(path: Path) -> list[str]:
    """Where a function of ``path`` that returns an exit status (``-> int`` or ``->
    ExitStatus``) returns a number written there rather than one of the table's."""
    found = []
    for function in ast.walk(ast.parse(path.read_text())):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        returns = function.returns
        if not (isinstance(returns, ast.Name) and returns.id in ("int", "ExitStatus")):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and any(map(_is_number, _returned(node.value))):
                found.append(f"{path.name}:{node.lineno} ({function.name})")
    return found


def _returned(value: ast.expr | None) -> list[ast.expr]:
    """The values a ``return`` may give: both sides of ``a if c else b``, each of ``a
    or b``."""
    if isinstance(value, ast.IfExp):
        return [*_returned(value.body), *_returned(value.orelse)]
    if isinstance(value, ast.BoolOp):
        return [v for part in value.values for v in _returned(part)]
    return [] if value is None else [value]


def _is_number(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and type(value.value) is int


def test_every_command_returns_a_status_of_the_table() -> None:
    cli = ROOT / "honeycomb" / "cli"
    assert [where for path in sorted(cli.glob("*.py")) for where in _numbers_returned(path)] == []


UNUSABLE_STORES = ["/proc/nope/runs.db", "not-a-store.db", "a-folder"]
"""Stores no command can use: one whose folder cannot be made, a file that is not a run
store, a folder."""

COMMANDS = {
    "demo": ["demo", "--plain", "--latency", "0"],
    "runs": ["runs"],
    "trace": ["trace", "r1"],
    "resume": ["resume", "r1", "--plain"],
    "approve": ["approve", "r1", "call_1"],
    "serve": ["serve", "--port", "0"],
    "chat": ["chat", str(demo_hive_path()), "--plain"],
}
"""Every command that uses a run store, as it is given one (``--store``)."""

READERS = ("runs", "trace", "resume", "approve")
"""The commands that only read what runs kept: a store that is not there is none to them
(``demo`` and ``serve`` make theirs, as a run does)."""


@pytest.mark.parametrize(
    ("command", "store"),
    [(c, s) for c in COMMANDS for s in UNUSABLE_STORES] + [(c, "missing.db") for c in READERS],
)
def test_a_run_store_that_cannot_be_opened_stops_the_command_before_it_starts(
    command: str,
    store: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "not-a-store.db").write_text("my notes\n")
    (tmp_path / "a-folder").mkdir()
    code = main([*COMMANDS[command], "--store", store])
    captured = capsys.readouterr()
    assert code == ExitStatus.UNUSABLE
    assert "run store" in captured.err
    assert captured.err.startswith(f"{store}: ")  # which file, said first
    assert "kept in" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert "Answer" not in captured.out
    if command != "demo":  # whose first line says its model is offline
        assert captured.out == ""  # no listing, no page
    assert not (tmp_path / "missing.db").exists()  # a reader makes nothing
