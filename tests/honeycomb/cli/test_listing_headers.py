"""The header of a listing cut by ``--limit`` (``runs``, ``sessions``, ``memory list``)
says how many it shows of how many there are, never the one for the other."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from honeycomb import Executor, OfflineModel, Role
from honeycomb.cli.main import main
from honeycomb.cli.options import newest_first
from runtime import SQLiteMemory

ROLES = [
    Role(name="planner", description="Splits requests into subtasks."),
    Role(name="researcher", description="Finds facts about cities and their weather."),
    Role(name="aggregator", description="Merges the findings."),
]


def first_line(capsys: pytest.CaptureFixture[str], *command: str) -> str:
    assert main(list(command)) == 0
    return capsys.readouterr().out.splitlines()[0]


def test_the_header_says_how_many_of_how_many() -> None:
    assert newest_first(3, "run", "runs.db", total=3) == "3 runs in runs.db, newest first"
    assert newest_first(1, "run", "runs.db", total=3) == "1 of 3 runs in runs.db, newest first"
    assert newest_first(1, "run", "runs.db", total=None) == (
        "the newest 1 run in runs.db (it holds more)"
    )


def test_runs_and_sessions_cut_by_the_limit_say_the_store_holds_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"

    async def three_sessions() -> None:
        executor = Executor(ROLES, OfflineModel(latency=0), store=db)
        for name in ("a", "b", "c"):
            await executor.session(name).run(f"Find the weather in Rome, {name}.")

    asyncio.run(three_sessions())
    store = ["--store", str(db)]
    said = first_line(capsys, "runs", *store, "--limit", "1")
    assert said == f"the newest 1 run in {db} (it holds more)"
    assert first_line(capsys, "runs", *store, "--limit", "3") == f"3 runs in {db}, newest first"
    assert first_line(capsys, "runs", *store) == f"3 runs in {db}, newest first"
    said = first_line(capsys, "sessions", *store, "--limit", "2")
    assert said == f"the newest 2 sessions in {db} (it holds more)"
    said = first_line(capsys, "sessions", *store, "--limit", "3")
    assert said == f"3 sessions in {db}, newest first"


def test_memory_list_cut_by_the_limit_says_how_many_the_file_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    memory = SQLiteMemory(path)

    async def add() -> None:
        await memory.add("Lisbon is sunny in May", namespace="trip")
        await memory.add("Porto trains leave from Campanha", namespace="trip")
        await memory.add("the red team likes Lisbon", namespace="red")

    asyncio.run(add())
    memory.close()
    where = ["memory", "list", "--file", str(path)]
    said = first_line(capsys, *where, "--limit", "1")
    assert said == f"1 of 3 memories in {path}, newest first"
    said = first_line(capsys, *where, "--limit", "1", "--namespace", "trip")
    assert said == f"1 of 2 memories in {path} (namespace trip), newest first"
    assert first_line(capsys, *where) == f"3 memories in {path}, newest first"
