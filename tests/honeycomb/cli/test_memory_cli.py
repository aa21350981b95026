"""``honeycomb memory list|search|forget`` on real memory files, and ``honeycomb demo
--memory`` recalling in its second run what its first kept."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from honeycomb.cli.main import main
from runtime import SQLiteMemory
from runtime.memory import db
from tests.support.users import as_another_user


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SQLiteMemory:
    """Three memories in ``.honeycomb/memory.db`` under the current folder (a temporary
    one), two in namespace ``trip``."""
    monkeypatch.chdir(tmp_path)
    memory = SQLiteMemory(tmp_path / ".honeycomb" / "memory.db")

    async def add() -> None:
        await memory.add("Lisbon is sunny in May", namespace="trip", role="guide", run_id="r1")
        await memory.add("Porto trains leave from Campanha", namespace="trip")
        await memory.add("the red team likes Lisbon", namespace="red")

    asyncio.run(add())
    memory.close()
    return memory


def test_list_shows_the_newest_first_of_one_namespace_or_all(
    kept: SQLiteMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("3 memories in .honeycomb/memory.db")
    assert main(["memory", "list", "--namespace", "trip"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "(namespace trip)" in lines[0]
    assert "Porto" in lines[1]
    assert "Lisbon is sunny" in lines[2]
    assert "guide" in lines[2]
    assert main(["memory", "list", "--json", "--limit", "1"]) == 0
    [record] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["text"] == "the red team likes Lisbon"


def test_search_ranks_within_a_namespace_and_any_query_is_fine(
    kept: SQLiteMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "search", "sunny lisbon", "--namespace", "trip", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits[0]["record"]["text"] == "Lisbon is sunny in May"
    assert {h["record"]["namespace"] for h in hits} == {"trip"}
    for query in ['"lisbon', "NEAR(lisbon porto", "lisb* -porto", "(", '"']:
        assert main(["memory", "search", query, "--namespace", "trip"]) == 0
    assert main(["memory", "search", "lisbon", "--namespace", "trip", "--all", "-k", "1"]) == 0
    assert "1 memory match 'lisbon'" in capsys.readouterr().out.splitlines()[-2]


def test_a_search_that_finds_nothing_says_which_namespaces_hold_memories(
    kept: SQLiteMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "search", "Lisbon"]) == 0  # namespace default holds nothing
    said = capsys.readouterr().out
    assert "nothing in namespace default matches 'Lisbon'" in said
    assert "it holds no memories" in said
    assert "red (1 memory), trip (2 memories)" in said
    assert "honeycomb memory search Lisbon --namespace red" in said
    assert main(["memory", "search", "Madrid", "--namespace", "trip"]) == 0
    said = capsys.readouterr().out
    assert "nothing in namespace trip matches 'Madrid' (it holds 2 memories)" in said
    assert "red (1 memory)" in said
    assert "trip (2" not in said


def test_forget_by_id_or_by_namespace(
    kept: SQLiteMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    [red] = asyncio.run(kept.list("red"))
    assert main(["memory", "forget", red.id]) == 0
    assert "forgot 1 memory" in capsys.readouterr().out
    # What is not there is refused as a session not kept is (it was exit 1 here).
    assert main(["memory", "forget", red.id]) == 2
    assert f"no memory {red.id}; none forgotten" in capsys.readouterr().err
    assert main(["memory", "forget", "--namespace", "red"]) == 2  # it holds none now
    assert "no memory in namespace red; none forgotten" in capsys.readouterr().err
    assert main(["memory", "forget", "--namespace", "trpi"]) == 2  # a typo: says it
    said = capsys.readouterr().err
    assert "no memory in namespace trpi (did you mean 'trip'?); none forgotten" in said
    assert main(["memory", "forget", "--namespace", "trip"]) == 0
    assert "forgot 2 memories of namespace trip" in capsys.readouterr().out
    assert main(["memory", "list"]) == 0
    assert "no memories in" in capsys.readouterr().out
    assert main(["memory", "forget"]) == 2  # neither ids nor a namespace
    assert "give memory ids, or --namespace" in capsys.readouterr().err


def test_forgetting_several_ids_rewrites_the_index_once(
    kept: SQLiteMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trip = [record.id for record in asyncio.run(kept.list("trip"))]
    writes: list[tuple[str, ...]] = []
    forget = db.delete

    def counted(connection: Any, ids: tuple[str, ...], **rest: Any) -> list[str]:
        writes.append(tuple(ids))
        return forget(connection, ids=ids, **rest)

    monkeypatch.setattr(db, "delete", counted)
    assert main(["memory", "forget", *trip, trip[0]]) == 0
    assert len(writes) == 1  # one transaction, one merge of the index, for all of them
    assert "forgot 2 memories" in capsys.readouterr().out
    assert [r.namespace for r in asyncio.run(kept.list())] == ["red"]


def test_ids_one_of_which_is_not_held_forget_none_and_say_so(
    kept: SQLiteMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``sessions forget`` of sessions one of which is not kept: a typo among the ids
    forgets none, naming it, exit 2 (it forgot the others and exited 1)."""
    trip = [record.id for record in asyncio.run(kept.list("trip"))]
    absent = "0123456789abcdef"
    assert main(["memory", "forget", trip[0], absent, trip[1]]) == 2
    out, err = capsys.readouterr()
    assert "forgot" not in out
    assert err.strip() == f".honeycomb/memory.db: no memory {absent}; none forgotten"
    assert len(asyncio.run(kept.list("trip"))) == 2


def test_bad_options_are_told_not_raised(
    kept: SQLiteMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "search", "lisbon", "--namespace", ""]) == 2
    assert "namespace is 1 to 200 printable characters" in capsys.readouterr().err
    assert main(["memory", "list", "--namespace", "\x07"]) == 2
    assert "namespace" in capsys.readouterr().err
    for argv, said in (
        (["memory", "list", "--limit", "0"], "argument --limit: takes a whole number from 1 to"),
        (["memory", "search", "x", "-k", "0"], "argument -k: takes a whole number from 1 to 100"),
    ):
        with pytest.raises(SystemExit) as exited:  # as the arguments are read
            main(argv)
        assert exited.value.code == 2
        assert said in capsys.readouterr().err


def test_a_missing_file_holds_nothing_and_is_not_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["memory", "list", "--file", "none.db"]) == 0
    assert "there is no memory file at none.db" in capsys.readouterr().out
    assert main(["memory", "search", "lisbon"]) == 0
    assert "no memory file at .honeycomb/memory.db" in capsys.readouterr().out
    for json_lines in (["memory", "list", "--json"], ["memory", "search", "x", "--json"]):
        assert main(json_lines) == 0
        out, err = capsys.readouterr()
        assert out == ""  # no hit, and no line that is not JSON (it said it here)
        assert "no memory file at .honeycomb/memory.db" in err
    # What a forget names is not there: exit 2, as for a file that does not hold it.
    assert main(["memory", "forget", "--namespace", "trip", "--file", "none.db"]) == 2
    said = "none.db: no memory file, so no memory in namespace trip; none forgotten"
    assert said in capsys.readouterr().err
    assert main(["memory", "forget", "3f2a9c1e0b7d4a55", "--file", "none.db"]) == 2
    said = "none.db: no memory file, so no memory 3f2a9c1e0b7d4a55; none forgotten"
    assert said in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
    assert not (tmp_path / ".honeycomb").exists()


def test_a_hive_names_its_memory_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    hive = tmp_path / "hive.yaml"
    hive.write_text(
        "models: {default: offline}\nmemory: {path: kept/memory.db}\n"
        "roles:\n  helper:\n    description: helps\n    memory: {namespace: mine}\n"
    )
    asyncio.run(SQLiteMemory(tmp_path / "kept" / "memory.db").add("a note", namespace="mine"))
    assert main(["memory", "list", "--hive", str(hive)]) == 0
    assert "1 memory in" in capsys.readouterr().out
    bare = tmp_path / "bare.yaml"
    bare.write_text("models: {default: offline}\nroles:\n  helper: {description: helps}\n")
    assert main(["memory", "list", "--hive", str(bare)]) == 2
    # It said "the hive declares no memory: (a top-level memory:)", half a sentence.
    assert capsys.readouterr().err == (
        f"{bare}: the hive declares no memory (it has no top-level memory:): add "
        "'memory: {path: memory.db}' to it, or give the memory's file with --file\n"
    )
    assert main(["memory", "list", "--hive", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read the file" in capsys.readouterr().err


def test_a_file_that_is_not_a_memory_file_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("not a database" * 100)
    assert main(["memory", "list", "--file", str(other)]) == 2
    assert "not a Honeycomb memory file" in capsys.readouterr().err


def test_demo_with_memory_recalls_in_its_second_run_what_its_first_kept(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = SQLiteMemory(fast_demo.parent / ".honeycomb" / "memory.db")  # the demo's
    assert main(["demo", "--memory", "--plain", "--latency", "0", "--no-store"]) == 0
    first = capsys.readouterr()
    assert "recalled 0 memories from memory trip" in first.out
    assert "run it again to see the workers recall" in first.err
    kept = asyncio.run(memory.list("trip"))
    assert {r.role for r in kept} == {"meteorologist", "guide", "analyst"}
    assert {r.kind for r in kept} == {"note", "result"}
    assert all(r.run_id for r in kept)
    assert main(["demo", "--memory", "--plain", "--latency", "0", "--no-store"]) == 0
    second = capsys.readouterr()
    assert "recalled 2 memories from memory trip" in second.out
    assert "run it again" not in second.err
    answer = second.out.split("\nAnswer:\n", 1)[1].split("\n\nwall time", 1)[0]
    # The workers used what they recalled, said in sentences: no tool traces, no
    # memory cut inside a word.
    for trace in ("Recall for", "Remember for", "Remembered (memory", "k=3", "get_weather("):
        assert trace not in answer
    assert "What earlier work kept says the same (memory " in answer
    texts = [r.text for r in asyncio.run(memory.list())]
    for shown in re.findall(
        r"Recalled from memory \w+ \([^)]*\): (.*?)(?= Recalled| What|$)", answer, re.M
    ):
        whole = shown.removesuffix("…")
        text = next(t for t in texts if " ".join(t.split()).find(whole) >= 0)
        rest = " ".join(text.split()).split(whole, 1)[1]
        assert not rest[:1].isalnum(), f"cut inside a word: {shown!r}"


def test_demo_with_memory_on_an_sqlite_without_fts5_says_so_not_a_traceback(
    fast_demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "_has_fts5", lambda module: False)
    assert main(["demo", "--memory", "--plain", "--latency", "0", "--no-store"]) == 2
    err = capsys.readouterr().err
    assert "memory.yaml:" in err  # the hive file, its line
    assert "memory search needs SQLite's FTS5 full-text search" in err
    assert not (fast_demo.parent / ".honeycomb" / "memory.db").exists()


def test_demo_with_memory_recorded_replays_and_keeps_nothing_in_the_memory_file(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = ["demo", "--memory", "--plain", "--latency", "0", "--no-store"]
    assert main([*demo, "--record", "trip.jsonl"]) == 0
    recorded = capsys.readouterr()
    assert "the memory is this command's own (the hive's memory files" in recorded.err
    assert "run it again" not in recorded.err  # it kept nothing to recall
    assert not (fast_demo.parent / ".honeycomb" / "memory.db").exists()
    status = main([*demo, "--replay", "trip.jsonl"])
    replayed = capsys.readouterr()
    assert not (fast_demo.parent / ".honeycomb" / "memory.db").exists()
    # The guide remembers as the analyst recalls, at once: the memory is searched anew
    # as a replay runs (docs/evals.md), so which of them came first decides what the
    # analyst finds. Either it finds what it found as it was recorded, or the replay
    # says it asked what the cassette did not record: the search's answer.
    if status != 0:
        searched = r"\(worker 's3'\) that the cassette did not record: message \d+ \(tool\)"
        assert re.search(searched + r".*(No memory matches|Memories for) 'cost of 3", replayed.out)
        return
    answer = replayed.out.split("\nAnswer:\n", 1)[1].split("\n\nwall time", 1)[0]
    assert answer == recorded.out.split("\nAnswer:\n", 1)[1].split("\n\nwall time", 1)[0]


def test_a_file_in_a_folder_this_user_may_not_enter_is_an_error_not_a_traceback() -> None:
    # Whether the file was there raised PermissionError, out of the command.
    folder = Path(tempfile.mkdtemp())  # not under tmp_path: another user opens it
    path = folder / "inner" / "memory.db"

    def listed() -> str:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["memory", "list", "--file", str(path)])
        return f"{code}\n{out.getvalue()}{err.getvalue()}"

    try:
        path.parent.mkdir()
        folder.chmod(0o000)
        said = as_another_user(listed)
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)
    assert said.startswith(f"2\n{path}: cannot open the memory file: ")
    assert "Permission denied" in said
