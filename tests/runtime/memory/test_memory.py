"""SQLiteMemory on real SQLite files: keeping and finding texts, namespaces, content
ids, cut texts, queries that are not FTS5 syntax, files that are not memory files,
what is missing, and many writers at once, in one process and in several."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import MemoryFeatureMissing, MemoryStoreError, SQLiteMemory
from runtime.memory import db as db
from runtime.memory import fts_query, memory_id
from tests.support import ROOT
from tests.support.users import as_another_user


@pytest.fixture
def memory(tmp_path: Path) -> SQLiteMemory:
    return SQLiteMemory(tmp_path / "memory" / "memory.db")


async def test_a_text_is_kept_found_listed_and_forgotten(memory: SQLiteMemory) -> None:
    kept = await memory.add("Lisbon is sunny in May", namespace="trip", run_id="r1", role="guide")
    await memory.add("Porto is rainy; bring an umbrella", namespace="trip")
    assert memory.path.exists()  # made, with its folder, on first use
    assert await memory.get(kept.id) == kept
    assert (kept.namespace, kept.kind, kept.run_id, kept.role) == ("trip", "note", "r1", "guide")
    [hit] = await memory.search("sunny weather in lisbon", namespace="trip", k=1)
    assert hit.record == kept
    assert [r.text for r in await memory.list("trip")] == [
        "Porto is rainy; bring an umbrella",
        "Lisbon is sunny in May",
    ]  # newest first
    assert await memory.delete(kept.id) is True
    assert await memory.delete(kept.id) is False
    assert await memory.get(kept.id) is None
    assert await memory.search("lisbon", namespace="trip") == ()  # its index entry went too


@pytest.mark.parametrize("build", ["as built", "secure_delete off"])
async def test_a_forgotten_memory_is_in_no_file_of_the_memory_still_open(
    memory: SQLiteMemory, build: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forgetting a memory (by id, or its namespace) leaves its text in no file: not
    in the write-ahead log, nor in a freed page, whatever SQLite's build defaults to,
    while the memory stays open and goes on."""
    if build != "as built":  # connections made as a build with it off makes them
        connect = sqlite3.connect

        def insecure(*args: object, **kwargs: object) -> sqlite3.Connection:
            made = connect(*args, **kwargs)  # type: ignore[arg-type]
            made.execute("PRAGMA secure_delete=OFF")
            return made

        monkeypatch.setattr(sqlite3, "connect", insecure)
    folder = memory.path.parent
    kept = await memory.add("ZzAlpha pays with card 4111", namespace="trip")
    await memory.add("ZzBravo lives at 5 Elm Street", namespace="home")
    await memory.add("the weather in Porto", namespace="home")
    assert await memory.delete(kept.id)
    assert await memory.forget_namespace("home") == 2
    # The text, and the search index's terms of it (lower case, stemmed).
    forgotten = (b"ZzAlpha", b"ZzBravo", b"zzalpha", b"zzbravo", b"4111", b"elm")
    holding = [f.name for f in folder.iterdir() if any(t in f.read_bytes() for t in forgotten)]
    assert holding == []
    await memory.add("ZzCharlie is kept", namespace="trip")  # it goes on
    assert [r.text for r in await memory.list("trip")] == ["ZzCharlie is kept"]


async def test_the_best_match_comes_first(memory: SQLiteMemory) -> None:
    await memory.add("trains from Lisbon to Porto take three hours")
    await memory.add("Madrid museums close on Mondays")
    await memory.add("Porto trains leave from Campanha; Porto trains are frequent")
    hits = await memory.search("porto trains")
    assert [h.record.text[:5] for h in hits] == ["Porto", "train"]  # Madrid matches nothing
    assert hits[0].score > hits[1].score


async def test_the_same_text_in_a_namespace_is_one_memory(memory: SQLiteMemory) -> None:
    first = await memory.add("Lisbon is sunny", namespace="a", run_id="r1")
    again = await memory.add("  Lisbon   is sunny\n", namespace="a", run_id="r2")
    elsewhere = await memory.add("Lisbon is sunny", namespace="b")
    assert again == first  # the one kept first, with where it came from
    assert first.id == memory_id("a", "Lisbon is sunny")
    assert elsewhere.id != first.id
    assert await memory.namespaces() == {"a": 1, "b": 1}


async def test_namespaces_keep_their_memories_apart(memory: SQLiteMemory) -> None:
    await memory.add("the red team likes Lisbon", namespace="red")
    await memory.add("the blue team likes Lisbon", namespace="blue")
    assert [h.record.namespace for h in await memory.search("lisbon", namespace="red")] == ["red"]
    assert [r.namespace for r in await memory.list("blue")] == ["blue"]
    assert len(await memory.list()) == 2
    assert await memory.forget_namespace("red") == 1
    assert await memory.namespaces() == {"blue": 1}


async def test_a_huge_text_is_cut_with_a_marker(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "m.db", max_chars=1000)
    text = "lisbon " * 2000  # 14,000 characters
    kept = await memory.add(text)
    assert kept.text.startswith(text.strip()[:1000])
    assert kept.text.endswith("[... memory cut: 12,999 of 13,999 characters not kept]")
    assert (await memory.add(text)).id == kept.id  # known by its whole text


@pytest.mark.parametrize(
    "query",
    ['"', 'say "hello', "NEAR(a b, 2)", "NEAR", "lisb*", "*", "-porto", "a - b", "AND OR NOT",
     "col:lisbon", "^lisbon", "(lisbon", "lisbon)", "{text}: lisbon", "'", "''", "+", "",
     "   ", "\x00", "😀 lisbon", "∑", "a\nb"],
)  # fmt: skip
async def test_a_query_is_never_fts_syntax(memory: SQLiteMemory, query: str) -> None:
    await memory.add("NEAR the river in lisbon, say hello")
    hits = await memory.search(query, k=3)
    words = {w.lower() for w in query.replace("*", " ").split()}
    if words & {"lisbon", "near", "hello", "say"} or "lisb" in query:
        assert len(hits) <= 1
    assert all(h.record.text.startswith("NEAR") for h in hits)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=80))
def test_any_text_searches_without_raising(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "m.db"
    memory = SQLiteMemory(path)

    async def search() -> None:
        await memory.add("lisbon porto madrid near the river")
        await memory.search(text, match="any")
        await memory.search(text, match="all")

    asyncio.run(search())
    memory.close()


def test_queries_are_quoted_words() -> None:
    assert (
        fts_query('say "hello" NEAR(porto*) -rain')
        == '"say" OR "hello" OR "near" OR "porto" OR "rain"'
    )
    assert fts_query("the weather in Lisbon", match="all") == '"weather" AND "lisbon"'
    assert fts_query("the and of") == '"the" OR "and" OR "of"'  # only common words: kept
    assert fts_query("*** --- ()") is None


async def test_bad_arguments_say_what_is_wrong(memory: SQLiteMemory) -> None:
    with pytest.raises(ValueError, match="needs some text"):
        await memory.add("   ")
    with pytest.raises(ValueError, match="k must be between 1 and 100"):
        await memory.search("x", k=0)
    with pytest.raises(ValueError, match="namespace"):
        await memory.add("x", namespace="")


async def test_another_applications_file_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE users (name TEXT)")
    before = path.read_bytes()
    with pytest.raises(MemoryStoreError, match="not a Honeycomb memory file") as caught:
        await SQLiteMemory(path).add("x")
    assert caught.value.path == str(path)
    assert path.read_bytes() == before
    assert not (tmp_path / "app.db-wal").is_file()


async def test_the_run_store_is_not_a_memory_file(tmp_path: Path) -> None:
    from honeycomb.store import RunStore

    store = RunStore(tmp_path / "runs.db")
    await store.open()
    store.close()
    before = store.path.read_bytes()
    # It said "an SQLite database of another application": given the run store by
    # mistake (--file runs.db), one is told which file it was given.
    with pytest.raises(MemoryStoreError, match="it is a Honeycomb run store"):
        await SQLiteMemory(store.path).list()
    assert store.path.read_bytes() == before


async def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just some notes, not a database at all" * 20)
    with pytest.raises(MemoryStoreError, match="not a Honeycomb memory file"):
        await SQLiteMemory(path).add("x")
    assert path.read_text().startswith("just some notes")


@pytest.mark.parametrize(
    ("where", "said"),
    [
        (".", "this is a folder, not a memory file: name its file"),
        ("notes.txt/memory.db", "notes.txt is a file, not a folder: no memory file can be in"),
        ("notes.txt/a/memory.db", "notes.txt is a file, not a folder: no memory file can be in"),
        ("pipe", "this is not a file (a device, a pipe ...): a memory is kept in a file"),
    ],
)
async def test_a_path_that_can_hold_no_memory_file_says_why(
    tmp_path: Path, where: str, said: str
) -> None:
    # SQLite's own words named nothing to fix: 'unable to open database file', 'disk
    # I/O error', '[Errno 17] File exists'.
    (tmp_path / "notes.txt").write_text("notes")
    os.mkfifo(tmp_path / "pipe")
    path = tmp_path / where
    with pytest.raises(MemoryStoreError) as caught:
        await SQLiteMemory(path).add("x")
    assert said in str(caught.value)
    assert caught.value.path == str(path)
    assert (tmp_path / "notes.txt").read_text() == "notes"


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    await SQLiteMemory(path).add("x")
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {db.SCHEMA_VERSION + 1}")
    with pytest.raises(MemoryStoreError, match="newer Honeycomb"):
        await SQLiteMemory(path).list()


async def test_the_file_is_in_wal_mode(memory: SQLiteMemory) -> None:
    await memory.add("x")
    with sqlite3.connect(memory.path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA application_id").fetchone()[0] == db.APPLICATION_ID


def test_no_fts5_names_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "_has_fts5", lambda module: False)
    with pytest.raises(MemoryFeatureMissing) as caught:
        db.driver(tmp_path / "m.db", vectors=False)
    assert caught.value.feature == "FTS5"
    assert "pip install 'honeycomb-agents[memory]'" in str(caught.value)
    assert "FTS5" in str(caught.value)
    with pytest.raises(MemoryFeatureMissing, match="FTS5 full-text search"):
        SQLiteMemory(tmp_path / "m.db")  # as it is made, not as a worker first uses it
    assert not (tmp_path / "m.db").exists()  # refused before the file was made


def test_no_sqlite_vec_names_what_to_install_as_the_memory_is_made(tmp_path: Path) -> None:
    # In a process of its own, where sqlite_vec cannot be imported. Made, the memory
    # raises: given to an Executor, its workers' recalls would each fail on it, and the
    # run go on as if nothing were remembered.
    code = (
        "import sys; sys.modules['sqlite_vec'] = None\n"
        "from runtime import MemoryFeatureMissing, OpenAIEmbeddings, SQLiteMemory\n"
        "try:\n"
        f"    SQLiteMemory({str(tmp_path / 'm.db')!r}, embeddings=OpenAIEmbeddings('e'))\n"
        "except MemoryFeatureMissing as exc:\n    print(exc.feature, '|', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert not (tmp_path / "m.db").exists(), done.stderr  # refused before making the file
    feature, _, message = done.stdout.partition(" | ")
    assert feature == "sqlite-vec"
    assert "pip install 'honeycomb-agents[memory]'" in message


def test_an_sqlite_that_cannot_load_extensions_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "_loads_extensions", lambda module: False)
    with pytest.raises(MemoryFeatureMissing, match="cannot load extensions") as caught:
        db.driver(tmp_path / "m.db", vectors=True)
    assert "pysqlite3-binary" in caught.value.install


async def test_forgetting_more_ids_than_a_statement_takes_forgets_them_all(
    memory: SQLiteMemory,
) -> None:
    kept = [await memory.add(f"note {n} of lisbon", namespace="n") for n in range(3)]
    absent = [f"{n:016x}" for n in range(300_000)]  # past SQLite's most values (32,766; 250,000)
    ids = [kept[0].id, *absent, kept[2].id]
    assert set(await memory.forget(ids)) == {kept[0].id, kept[2].id}
    assert [r.id for r in await memory.list("n")] == [kept[1].id]
    assert await memory.search("lisbon", namespace="n") != ()


async def test_many_tasks_write_at_once_and_nothing_is_lost(memory: SQLiteMemory) -> None:
    async with asyncio.TaskGroup() as group:
        for index in range(200):
            group.create_task(memory.add(f"memory number {index} of lisbon", namespace="n"))
            if index % 20 == 0:
                group.create_task(memory.search("lisbon", namespace="n"))
    assert len(await memory.list("n", limit=1000)) == 200


async def test_a_cancelled_write_is_committed_or_not_never_half(memory: SQLiteMemory) -> None:
    await memory.add("first")
    for index in range(20):
        task = asyncio.create_task(memory.add(f"cancelled {index}"))
        await asyncio.sleep(0.0005 * index)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    texts = [r.text for r in await memory.list(limit=100)]
    for record in await memory.list(limit=100):  # each kept one is indexed too
        assert [h.record.id for h in await memory.search(record.text, k=100)].count(record.id) == 1
    assert "first" in texts


def test_processes_writing_one_new_file_at_once_lose_nothing(tmp_path: Path) -> None:
    """Real processes open the same new file at the same moment (each making it a
    memory file, in WAL mode) and write it from 8 tasks each: every memory is kept,
    and no "database is locked" escapes any of them."""
    path = tmp_path / "shared.db"
    writers, count = 4, 60
    start_at = time.time() + 1.5  # after every interpreter has started
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.memory_writer",
                str(path),
                str(w),
                str(count),
                str(start_at),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for w in range(writers)
    ]
    outputs = [child.communicate(timeout=90)[0] for child in children]
    assert [child.returncode for child in children] == [0] * writers, outputs
    with sqlite3.connect(path) as raw:
        texts = {row[0] for row in raw.execute("SELECT text FROM memories")}
        indexed = raw.execute(
            "SELECT count(*) FROM memory_text WHERE memory_text MATCH 'lisbon'"
        ).fetchone()[0]
    expected = {f"writer {w} memory {i} about lisbon" for w in range(writers) for i in range(count)}
    assert texts == expected
    assert indexed == writers * count


async def test_opening_waits_for_whoever_holds_the_new_file(tmp_path: Path) -> None:
    """Switching a file to WAL needs it to itself, and SQLite refuses the switch at once
    ("database is locked", whatever the busy timeout) while another connection holds
    its write lock, as another process making the same new file does. Opening waits
    for it instead."""
    path = tmp_path / "m.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # the write lock of a new, still empty file
    threading.Timer(0.3, lambda: other.execute("ROLLBACK")).start()
    started = time.monotonic()
    kept = await SQLiteMemory(path).add("after the other writer")
    assert time.monotonic() - started >= 0.2  # it waited for the lock to go
    assert kept.text == "after the other writer"
    other.close()


async def test_a_new_connection_waits_for_whoever_holds_the_file(tmp_path: Path) -> None:
    """Another connection holds the file to itself (SQLite's exclusive locking mode)
    for a moment: a call that opens a connection of its own waits for it, within
    ``timeout_s``, however short SQLite's own waits are."""
    path = tmp_path / "m.db"
    memory = SQLiteMemory(path)
    await memory.add("first")
    memory.close()  # the next call opens a new connection
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA locking_mode=EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("INSERT INTO settings VALUES ('held', 'yes')")  # takes the lock
    threading.Timer(0.3, lambda: (other.execute("ROLLBACK"), other.close())).start()
    started = time.monotonic()
    assert [r.text for r in await memory.list()] == ["first"]
    assert time.monotonic() - started >= 0.2  # it waited for the lock to go


def test_a_file_made_while_it_is_checked_is_not_taken_for_another_applications(
    tmp_path: Path,
) -> None:
    """Opening reads the file's application id, schema version and tables to know it
    is a memory file (or an empty one). Another process may make it a memory file
    between those reads: they must see one moment of the file, not the id from before
    and the tables from after."""
    path = tmp_path / "m.db"
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA journal_mode=WAL")  # an empty file, as a maker leaves it
    checking = sqlite3.connect(path, isolation_level=None)
    other = sqlite3.connect(path, isolation_level=None)

    class MadeMidway:
        """The checking connection; the other makes the file a memory file as soon as
        the schema version has been read."""

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            cursor = checking.execute(sql, *args)
            if sql == "PRAGMA user_version":
                db._create(sqlite3, other, path)
            return cursor

        def __getattr__(self, name: str) -> object:
            return getattr(checking, name)

    assert db._checked(sqlite3, MadeMidway(), path) in (0, db.SCHEMA_VERSION)
    checking.close()
    other.close()


async def test_a_write_waiting_for_a_locked_file_stops_when_cancelled(tmp_path: Path) -> None:
    """Another program holds the file's write lock (a database browser with an edit
    under way): a write waits for it, and its caller's timeout ends the wait then, not
    after the memory's whole ``timeout_s`` (SQLite's own wait cannot be cut short: in
    it, the write held its caller, a worker's timed-out tool, for 30 s). It was not
    made; the memory goes on once the lock is let go."""
    path = tmp_path / "m.db"
    memory = SQLiteMemory(path, timeout_s=30)
    await memory.add("first")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await memory.add("waiting")
    assert time.monotonic() - started < 5  # the timeout's 0.2 s, far from 30
    other.execute("ROLLBACK")
    other.close()
    assert [r.text for r in await memory.list()] == ["first"]
    assert (await memory.add("after")).text == "after"


def test_a_file_in_a_folder_it_may_only_read_says_to_make_the_folder_writable() -> None:
    """SQLite keeps a WAL file's shared memory beside it, even to read it: in a folder
    a process may only read (a memory file shipped in an image), the file cannot be
    opened. It said 'attempt to write a readonly database', to a command that lists."""
    folder = Path(tempfile.mkdtemp())  # not under tmp_path: another user opens it
    try:
        memory = SQLiteMemory(folder / "m.db")
        asyncio.run(memory.add("Lisbon is sunny"))
        memory.close()  # the last connection takes its -wal and -shm files away
        (folder / "m.db").chmod(0o444)
        folder.chmod(0o555)
        said = _opened_by_another_user(folder / "m.db")
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)
    assert said.startswith(
        f"MemoryStoreError: {folder / 'm.db'}: cannot open the memory file: its folder {folder}"
    )
    assert "may only be read here" in said
    assert "make the folder writable" in said


def _opened_by_another_user(path: Path) -> str:
    """What opening the memory file ``path`` raises, opened by another user (one whom
    permissions stop): the error's type and text."""

    def opened() -> str:
        until = time.monotonic() + 5
        db.open_connection(
            sqlite3, path, vectors=False, until=until, check=lambda: None, first=True
        ).close()
        return "it opened"

    return as_another_user(opened)


def test_a_file_in_a_folder_it_may_not_enter_is_a_memory_store_error() -> None:
    # Telling why, the memory looked at the path, and what the file system refused
    # came out as a bare PermissionError.
    folder = Path(tempfile.mkdtemp())  # not under tmp_path: another user opens it
    try:
        (folder / "inner").mkdir()
        folder.chmod(0o000)
        said = _opened_by_another_user(folder / "inner" / "m.db")
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)
    assert said.startswith(f"MemoryStoreError: {folder / 'inner' / 'm.db'}: cannot open the")
    assert "Permission denied" in said
