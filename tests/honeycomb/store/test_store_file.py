"""The run store's file: only a Honeycomb store (or a new, empty file) is written to;
reading never creates or changes a file; a copy of the ``.db`` alone holds every run
that ended."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest

from honeycomb.cli.main import main
from honeycomb.errors import ConfigError, StoreError
from honeycomb.store import Connection, RunStore
from honeycomb.store.database import store_problem
from tests.support import ROOT
from tests.support.durable import TASK, Setup, plan
from tests.support.old_stores import digest, write_old_store


def foreign_file(path: Path) -> Path:
    """Another application's SQLite file (rollback journal, its own tables)."""
    with sqlite3.connect(path) as raw:
        raw.executescript(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT);"
            "INSERT INTO notes (text) VALUES ('keep me');"
        )
    raw.close()
    return path


def test_another_applications_file_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = foreign_file(tmp_path / "app.db")
    before = digest(db)
    store = RunStore(db)
    with pytest.raises(StoreError, match="is not a Honeycomb run store") as caught:
        anyio.run(store.open)
    assert str(db) in str(caught.value)
    with pytest.raises(StoreError, match="is not a Honeycomb run store"):
        store.runs()
    with pytest.raises(StoreError, match="is not a Honeycomb run store"):
        anyio.run(store.load, "r1")
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    with pytest.raises(StoreError, match="is not a Honeycomb run store"):
        anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="r1"))
    assert main(["runs", "--store", str(db)]) == 2
    assert "is not a Honeycomb run store" in capsys.readouterr().err
    assert main(["trace", "r1", "--store", str(db)]) == 2
    assert digest(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 0


def test_a_damaged_store_is_said_to_be_damaged_not_another_applications(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A store cut short (a copy that stopped half way) was refused as "not a Honeycomb
    # run store ... give the run store a file of its own".
    db = one_run(tmp_path / "runs.db", tmp_path)
    with db.open("r+b") as whole:
        whole.truncate(2 * 4096)  # its header, and none of its tables' pages
    before = digest(db)
    said = (
        f"{db}: the file is damaged (database disk image is malformed); it was left as it "
        "was: if it is a run store, restore it from a copy (its -wal and -shm with it), "
        "else give the run store a file of its own"
    )
    with pytest.raises(StoreError) as reading:
        RunStore(db).runs()
    with pytest.raises(StoreError) as writing:
        anyio.run(RunStore(db).open)
    assert str(reading.value) == str(writing.value) == said
    assert main(["runs", "--store", str(db)]) == 2
    assert capsys.readouterr().err == said + "\n"
    assert digest(db) == before


def test_a_file_of_another_honeycomb_version_is_refused_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    made = RunStore(db)
    anyio.run(made.open)
    made.close()  # not left to its finalizer, which would close it while the file is read
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA user_version = 99")
    raw.close()
    before = digest(db)
    with pytest.raises(StoreError, match="newer Honeycomb"):
        anyio.run(RunStore(db).open)
    with pytest.raises(StoreError, match="newer Honeycomb"):
        RunStore(db).runs()
    assert digest(db) == before


def test_reading_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "no" / "runs.db"
    store = RunStore(db)
    assert store.runs() == []
    assert store.find("r1") is None
    assert store.spans("r1") == []
    assert anyio.run(store.load, "r1") is None
    assert main(["runs", "--store", str(db)]) == 2  # no store: said, not an empty list
    assert not (tmp_path / "no").exists()


def test_a_folder_is_refused_as_a_store_in_the_same_words_to_read_and_to_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "adir"
    folder.mkdir()
    said = f"{folder}: this is a folder, not a run store: name its file"
    with pytest.raises(StoreError) as reading:
        RunStore(folder).runs()
    with pytest.raises(StoreError) as writing:
        anyio.run(RunStore(folder).open)
    assert str(reading.value) == str(writing.value) == said
    assert main(["runs", "--store", str(folder)]) == 2
    assert main(["demo", "--latency", "0", "--store", str(folder), "--plain"]) == 2
    hive = tmp_path / "hive.yaml"
    hive.write_text("models: {default: offline}\nroles: {planner: {}, writer: {}}\nstore: adir\n")
    assert main(["run", str(hive), "task", "--plain"]) == 2
    err = capsys.readouterr().err
    assert err.count(said) == 3, err
    assert "disk I/O" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "hive.yaml"]
    assert list(folder.iterdir()) == []


OPENED = """
import sys
import anyio
from honeycomb.errors import StoreError
from honeycomb.store import RunStore
for use in (lambda: RunStore(sys.argv[1]).runs(), lambda: anyio.run(RunStore(sys.argv[1]).open)):
    try:
        use()
    except StoreError as exc:
        print(exc)
"""
"""What reading and then writing the store in ``argv[1]`` say, each a line."""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes (Windows)")
def test_a_device_a_pipe_or_a_path_through_a_file_is_refused_to_read_and_to_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # /dev/null failed a run with "disk I/O error" and read as a store with no runs; a
    # named pipe hung the command that read it, and the run that wrote it, for ever; a
    # store under a file said "[Errno 17] File exists".
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    (tmp_path / "afile").write_text("notes\n")
    own = "not a file: a run store is kept in a file of its own"
    under = tmp_path / "afile"
    for where, why in [
        (pipe, f"this is a pipe, {own}"),
        (Path(os.devnull), f"this is a device, {own}"),
        (under / "runs.db", f"{under} is a file, not a folder: no run store can be in it"),
    ]:
        said = subprocess.run(
            [sys.executable, "-c", OPENED, str(where)],
            capture_output=True, text=True, check=True, cwd=ROOT, timeout=60,
        )  # fmt: skip
        assert said.stdout.splitlines() == [f"{where}: {why}"] * 2
    assert main(["runs", "--store", os.devnull]) == 2
    assert "this is a device" in capsys.readouterr().err
    assert (tmp_path / "afile").read_text() == "notes\n"


DISK_FULL = """
import resource, signal, sys
import anyio
from honeycomb.store import RunStore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, as on a full disk
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    anyio.run(RunStore(sys.argv[1]).open)
except Exception as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="no limit of a file's size (Windows)")
def test_a_store_that_cannot_be_made_on_a_full_disk_says_why(tmp_path: Path) -> None:
    # The store's first transaction failed as it committed (its -wal could not be
    # written), SQLite rolled it back, and the ROLLBACK after it failed in turn: the
    # store was refused with "cannot rollback - no transaction is active".
    db = tmp_path / "runs.db"
    said = subprocess.run(
        [sys.executable, "-c", DISK_FULL, str(db), "40000"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert said.stdout.startswith(f"StoreError {db}: cannot open the run store: "), said
    assert "rollback" not in said.stdout
    assert said.stdout.rstrip().endswith(("disk I/O error", "database or disk is full"))
    assert not db.exists()


AS_ANOTHER_USER = """
import io, os, sys, tempfile
from contextlib import redirect_stdout
import anyio, anyio.to_thread
from honeycomb.cli.main import main
from honeycomb.errors import StoreError
from honeycomb.store import RunStore
if os.geteuid() == 0:  # root may write anything: the test is that of a user who may not
    # All that the uses below load on the way, loaded first: the checkout and its
    # environment may be in a folder that user cannot read (a clone in mktemp -d's).
    with tempfile.TemporaryDirectory() as ours, redirect_stdout(io.StringIO()):
        mine = os.path.join(ours, "runs.db")
        RunStore(mine).runs(), anyio.run(RunStore(mine).open), main(["runs", "--store", mine])
    os.setgid(65534)
    os.setuid(65534)
for where in sys.argv[1:]:
    for use in (lambda: RunStore(where).runs(), lambda: anyio.run(RunStore(where).open)):
        try:
            print(len(use() or ()))
        except StoreError as exc:
            print(exc)
print(main(["runs", "--store", sys.argv[-1]]))
"""
"""What reading and then writing each store named in ``argv`` say, each a line, and
``honeycomb runs`` of the last, as a user who is not root (root's own processes: as the
user ``nobody``)."""


def one_run(db: Path, folder: Path) -> Path:
    """A store at ``db`` holding one finished run, closed (no -wal, no -shm)."""
    executor = Setup(folder / "e", folder / "c").executor(db)
    anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="r1"))
    executor.store.close()  # type: ignore[union-attr]
    return db


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_store_this_user_cannot_write_or_reach_says_so(tmp_path: Path) -> None:
    # A store in a folder this user cannot write (SQLite keeps its -wal and -shm
    # there) was refused as "not a Honeycomb run store ... give the run store a file of
    # its own"; a new store there failed with "unable to open database file"; one in a
    # folder this user cannot enter raised PermissionError, no StoreError, to read and
    # to write. A read-only file in a folder this user may write was opened to write (SQLite
    # opens it to read), and a run kept there failed at its first write, after it had
    # said where it was kept and how to resume it.
    base = Path(tempfile.mkdtemp(prefix="honeycomb-permissions-"))  # reached by any user
    shut, loose, closed = base / "shut", base / "loose", base / "closed"
    stores = [
        one_run(shut / "runs.db", tmp_path),
        shut / "new.db",
        one_run(loose / "runs.db", tmp_path),
        one_run(closed / "runs.db", tmp_path),
    ]
    try:
        base.chmod(0o755)
        if os.geteuid() == 0:
            os.chown(stores[0], 65534, 65534)  # the user's own file, in a folder not its own
            os.chown(loose, 65534, 65534)  # the user's own folder, and a file not its own
        stores[2].chmod(0o444)
        shut.chmod(0o555)
        closed.chmod(0o700 if os.geteuid() == 0 else 0o000)
        said = subprocess.run(
            [sys.executable, "-c", AS_ANOTHER_USER, *map(str, stores)],
            capture_output=True, text=True, check=True, cwd=ROOT, timeout=60,
        )  # fmt: skip
        beside = sorted(path.name for path in loose.iterdir())
    finally:
        for folder in (shut, closed):
            folder.chmod(0o755)
        shutil.rmtree(base)
    cannot = (
        f"(this user cannot write in the folder {shut}, where SQLite keeps the store's -wal "
        "and -shm beside its file)"
    )
    lines = said.stdout.splitlines()
    read, wrote, read_new, made, read_loose, wrote_loose, read_closed, wrote_closed = lines[:-1]
    assert read == "1"  # read as it is
    assert wrote.startswith(f"{stores[0]}: cannot open the run store: ")
    assert wrote.endswith(cannot)
    assert read_new == "0"
    assert made.startswith(f"{stores[1]}: cannot open the run store: ")
    assert made.endswith(cannot)
    assert read_loose == "1"
    assert (
        wrote_loose
        == f"{stores[2]}: cannot open the run store: the file is read-only for this user"
    )
    assert beside == ["runs.db"]  # no -wal, no -shm made there
    denied = f"{stores[3]}: cannot be looked at: Permission denied"
    assert read_closed == wrote_closed == denied
    assert (lines[-1], said.stderr) == ("2", denied + "\n")  # honeycomb runs: no traceback


def test_a_store_url_honeycomb_does_not_know_is_refused_as_a_hive_refuses_it() -> None:
    with pytest.raises(ConfigError) as caught:
        RunStore("mysql://app@127.0.0.1:9/db")
    assert caught.value.message == store_problem("mysql://app@127.0.0.1:9/db")
    assert caught.value.message.startswith("the run store mysql:// is not one Honeycomb knows")
    assert store_problem("postgresql://app@h/db") is None
    assert store_problem("runs.db") is None


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    db.touch()
    assert RunStore(db).runs() == []  # read as a store with no runs, and left empty
    assert db.stat().st_size == 0
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    result = anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="r1"))
    assert result.status == "ok"
    assert [r.run_id for r in RunStore(db).runs()] == ["r1"]


def test_a_store_of_the_first_schema_without_an_application_id_is_accepted(
    tmp_path: Path,
) -> None:
    db, today = tmp_path / "runs.db", tmp_path / "today.db"
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(today)
    anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="old"))
    executor.store.close()  # type: ignore[union-attr]
    write_old_store(db, 1, today)  # as Honeycomb wrote it before leases existed
    with sqlite3.connect(db) as raw:
        raw.execute(
            "INSERT INTO runs (run_id, task, status, started_at) VALUES ('gone', 't', 'running', 0)"
        )
    raw.close()
    assert {(r.run_id, r.status) for r in RunStore(db).runs()} == {
        ("old", "ok"), ("gone", "interrupted"),
    }  # fmt: skip
    again = Setup(tmp_path / "e", tmp_path / "c").executor(db)
    anyio.run(lambda: again.run(TASK, subtasks=plan(1), run_id="new"))
    assert {r.run_id for r in RunStore(db).runs()} == {"old", "gone", "new"}


async def test_a_copy_of_the_db_file_alone_holds_the_runs_that_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    store = RunStore(db)  # left open, as a service keeps it
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(store)
    await executor.run(TASK, subtasks=plan(3), run_id="r1")
    copy = tmp_path / "copy.db"
    shutil.copyfile(db, copy)  # what people do: the -wal file stays behind
    [summary] = RunStore(copy).runs()
    assert (summary.run_id, summary.status, summary.workers) == ("r1", "ok", 3)
    stored = await RunStore(copy).load("r1")
    assert stored is not None
    assert len(stored.workers) == 3
    assert main(["runs", "--store", str(copy)]) == 0
    assert "r1" in capsys.readouterr().out
    store.close()
    assert not (tmp_path / "runs.db-wal").exists() or (tmp_path / "runs.db-wal").stat().st_size == 0


def files_of(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` by name, with a digest of its bytes."""
    return {p.name: digest(p) for p in sorted(folder.iterdir())}


WAL_APPLICATION = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("CREATE TABLE users (name TEXT)")
db.execute("INSERT INTO users VALUES ('alice')")
db.commit()
os._exit(0)  # ended without closing: its committed rows are still in its -wal
"""


def test_another_applications_wal_file_with_rows_in_its_wal_is_left_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    db = folder / "app.db"
    subprocess.run([sys.executable, "-c", WAL_APPLICATION, str(db)], check=True)
    before = files_of(folder)
    assert set(before) == {"app.db", "app.db-wal", "app.db-shm"}
    with pytest.raises(StoreError, match="is not a Honeycomb run store"):
        anyio.run(RunStore(db).open)
    with pytest.raises(StoreError, match="is not a Honeycomb run store"):
        RunStore(db).runs()
    assert main(["runs", "--store", str(db)]) == 2
    assert "is not a Honeycomb run store" in capsys.readouterr().err
    assert files_of(folder) == before
    with sqlite3.connect(db) as raw:  # and it still holds what its application wrote
        assert raw.execute("SELECT name FROM users").fetchall() == [("alice",)]
    raw.close()


STORE_KILLED = """
import os, sys
import anyio
from honeycomb.store import Connection, RunStore
store = RunStore(sys.argv[1])
row = "INSERT INTO runs (run_id, task, status, started_at) VALUES ('r1', 't', 'ok', 0)"
anyio.run(store.commit, (row, ()))
os._exit(0)  # killed before any checkpoint: all of the store is in its -wal
"""


def test_a_store_killed_before_its_first_checkpoint_is_still_known_as_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    subprocess.run([sys.executable, "-c", STORE_KILLED, str(db)], check=True, cwd=ROOT)
    assert (tmp_path / "runs.db-wal").stat().st_size > 0
    assert [r.run_id for r in RunStore(db).runs()] == ["r1"]
    store = RunStore(db)
    anyio.run(store.open)  # a store, to write to
    store.close()


def test_reading_a_store_no_run_has_open_creates_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = tmp_path / "made"
    made.mkdir()
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(made / "runs.db")
    anyio.run(lambda: executor.run(TASK, subtasks=plan(2), run_id="r1"))
    executor.store.close()  # type: ignore[union-attr]
    folder = tmp_path / "copied"
    folder.mkdir()
    copy = folder / "copy.db"
    shutil.copyfile(made / "runs.db", copy)  # the .db alone, as people copy it
    before = files_of(folder)
    store = RunStore(copy)
    assert [r.run_id for r in store.runs()] == ["r1"]
    assert store.find("r1") is not None
    assert store.spans("r1") != []
    loaded = anyio.run(store.load, "r1")
    assert loaded is not None
    assert len(loaded.workers) == 2
    assert main(["runs", "--store", str(copy)]) == 0
    assert main(["trace", "r1", "--store", str(copy)]) == 0
    assert "r1" in capsys.readouterr().out
    assert files_of(folder) == before  # no -wal, no -shm, the .db as it was


@pytest.mark.parametrize("torn", [False, True], ids=["read whole", "torn rows"])
def test_a_store_a_run_opens_while_it_is_read_is_read_again(tmp_path: Path, torn: bool) -> None:
    # Read as an immutable file as a run of another process opened it and wrote: with
    # ``torn``, a page torn between two writes holds rows SQLite returns and the read
    # cannot make sense of (a value that does not decode): only SQLite's own errors were
    # read again, and a page of honeycomb serve failed with 500 while runs went on.
    db = tmp_path / "runs.db"
    store = RunStore(db)
    anyio.run(store.open)
    store.close()  # a store no run has open

    def read_while_a_run_writes(connection: Connection) -> list[str]:
        found = [row[0] for row in connection.execute("SELECT run_id FROM runs")]
        if not found:  # a run of another process writes (and keeps the file open)
            writer.execute(
                "INSERT INTO runs (run_id, task, status, started_at) "
                "VALUES ('r1', 't', 'running', 0)"
            )
            if torn:  # as the rows read are made sense of
                raise ValueError("a row torn as it was read")
        return found

    writer = sqlite3.connect(db, isolation_level=None)
    none: list[str] = []
    try:
        assert store._reading(read_while_a_run_writes, none) == ["r1"]
    finally:
        writer.close()


PEEK = "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM runs').fetchone()[0])"  # noqa: E501


def test_reading_in_the_process_that_writes_keeps_its_connection_to_the_file_sound(
    tmp_path: Path,
) -> None:
    # In POSIX, closing any descriptor of a file drops the process's locks on it: a
    # read that opened the .db itself would take the writer's locks away, and another
    # process would no longer see what it commits.
    db = tmp_path / "runs.db"
    store = RunStore(db)
    anyio.run(store.open)  # a new store: all of it in its -wal
    insert = "INSERT INTO runs (run_id, task, status, started_at) VALUES (?, 't', 'ok', 0)"
    for number in range(1, 4):
        anyio.run(store.commit, (insert, (f"r{number}",)))
        assert anyio.run(store.summary, f"r{number}") is not None
        seen = subprocess.run(
            [sys.executable, "-c", PEEK, str(db)], capture_output=True, text=True, check=True
        )
        assert int(seen.stdout) == number
    store.close()


def test_a_new_store_made_by_many_at_once_is_never_seen_half_made(tmp_path: Path) -> None:
    """Processes (here threads, each with its own connections) that open one new store
    at once each find a whole store: none sees another's half-made file, whose tables
    are there before its application id, and takes it for another application's."""
    from honeycomb.store.schema import SCHEMA_VERSION, schema_of

    for round_ in range(12):
        path = tmp_path / f"round{round_}" / "runs.db"
        assert _opened_at_once(path, 6) == []
        db = sqlite3.connect(path)
        assert schema_of(db) == SCHEMA_VERSION
        db.close()


def _opened_at_once(path: Path, openers: int) -> list[BaseException]:
    """What ``openers`` threads opening the store in ``path`` at once raised."""
    import threading

    from honeycomb.store.schema import connect

    errors: list[BaseException] = []
    start = threading.Barrier(openers)

    def open_it() -> None:
        start.wait()
        try:
            db = connect(path, write=True)
            assert db is not None
            db.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_a_store_in_use_that_reads_as_malformed_as_an_immutable_file_is_read_as_shared(
    tmp_path: Path,
) -> None:
    """Read as an immutable file while a run checkpoints into it, a store in use looks
    malformed (its ``.db`` half copied from its ``-wal``): it was refused as another
    application's, and a page of ``honeycomb serve`` failed with a 500 on a busy
    machine. A store in use is read as SQLite shares it, through its ``-wal``: here its
    page 1 is garbage in the ``.db`` and whole in the ``-wal``."""
    path = tmp_path / "runs.db"
    executor = Setup(tmp_path / "e", tmp_path / "c").executor(path)
    anyio.run(lambda: executor.run(TASK, subtasks=plan(1), run_id="r1"))
    writer = sqlite3.connect(path, isolation_level=None)  # a run's, holding it open
    writer.execute("PRAGMA wal_autocheckpoint=0")
    version = writer.execute("PRAGMA user_version").fetchone()[0]
    writer.execute(f"PRAGMA user_version = {version}")  # page 1 is in the -wal now
    with path.open("r+b") as main_file:  # page 1 torn, as a checkpoint can leave it
        main_file.seek(68)  # the header's application id
        main_file.write(bytes(4) + b"\xff" * 400)  # and the table of tables after it
    try:
        store = RunStore(path)
        stored = anyio.run(store.load, "r1")
        assert stored is not None
        assert stored.status == "ok"
        assert [run.run_id for run in store.runs()] == ["r1"]
    finally:
        writer.close()
