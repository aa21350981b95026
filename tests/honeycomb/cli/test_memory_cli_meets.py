"""``honeycomb memory`` where it meets what workers keep: a model's note may hold a
terminal's escapes, which the commands must not pass to the terminal."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from honeycomb.cli.main import main
from runtime import SQLiteMemory

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m"  # a window title, a cleared screen, red


def test_list_and_search_show_no_terminal_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "memory.db"
    memory = SQLiteMemory(file)
    note = f"Lisbon{ESCAPES} is sunny\x00 in May"
    kept = asyncio.run(memory.add(note, namespace="trip", role=f"guide{ESCAPES}"))
    memory.close()
    assert kept.text == note  # kept as it was said: only what is shown is made inert
    assert main(["memory", "list", "--file", str(file)]) == 0
    assert main(["memory", "search", "lisbon", "--namespace", "trip", "--file", str(file)]) == 0
    assert main(["memory", "search", f"madrid{ESCAPES}", "--file", str(file)]) == 0
    shown = capsys.readouterr()
    for text in (shown.out, shown.err):
        assert not set(text) & {"\x1b", "\x07", "\x00"}
    lines = shown.out.splitlines()
    assert (
        sum(f"{kept.id} " in line and "Lisbon" in line and "sunny" in line for line in lines) == 2
    )
    assert "(search one with: honeycomb memory search" in shown.out
