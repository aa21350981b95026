"""What is the PostgreSQL store's own: its schema (made once, however many open it at
once; versions brought up to date; another application's tables refused and left as
they were) and its password (never shown, never written)."""

from __future__ import annotations

import logging
import shlex
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb.cli.main import main
from honeycomb.errors import ConfigError, RunBusy, StoreError
from honeycomb.store import Connection, RunStore, readers, schema, writer
from honeycomb.store.postgres import (
    PostgresConnection,
    PostgresDatabase,
    in_postgres,
    split_url,
    url_passwords,
)
from honeycomb.store.schema import SCHEMA_VERSION, upgrade_statements
from runtime.secrets import masked
from tests.support.durable import TASK, Setup, plan
from tests.support.postgres import PostgresServer, away, back, role_in, role_of
from tests.support.stores import ON_POSTGRES, change, query

pytestmark = ON_POSTGRES


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    return postgres.url()


def schema_of(url: str) -> str:
    return url.rsplit("schema=", 1)[1]


async def test_a_schema_holding_other_tables_is_refused_and_left_as_it_was(url: str) -> None:
    schema = schema_of(url)
    change(
        url.replace(f"schema={schema}", "schema=public"),
        (f'CREATE SCHEMA "{schema}"', ()),
        (f'CREATE TABLE "{schema}".runs (id TEXT)', ()),
        (f"INSERT INTO \"{schema}\".runs VALUES ('theirs')", ()),
    )
    store = RunStore(url)
    with pytest.raises(StoreError, match=f"the schema '{schema}' holds tables that are not"):
        await store.open()
    with pytest.raises(StoreError, match="not a Honeycomb run store"):
        store.runs()  # reading refuses it too
    assert query(url, "SELECT * FROM runs") == [("theirs",)]


async def test_a_store_of_an_earlier_version_is_read_as_it_is_and_brought_up_to_date(
    url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A store as schema 4 made it: no approvals, no lives, no decided_by.
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 4)
    four = [in_postgres(s) for s in upgrade_statements(0) if not s.startswith("PRAGMA")]
    monkeypatch.undo()
    name = schema_of(url)
    change(
        url,
        (f'CREATE SCHEMA "{name}"', ()),
        ("CREATE TABLE store_schema (application TEXT NOT NULL, version BIGINT NOT NULL)", ()),
        ("INSERT INTO store_schema VALUES ('honeycomb run store', 4)", ()),
        *((statement, ()) for statement in four),
    )
    lives = "SELECT count(*) FROM pg_tables WHERE tablename = 'lives' AND schemaname = ?"
    assert query(url, lives, (name,)) == [(0,)]
    assert RunStore(url).runs() == []  # read as it is, and left so
    assert query(url, "SELECT version FROM store_schema") == [(4,)]
    setup = Setup(tmp_path / "effects.txt", tmp_path / "calls.txt")
    result = await setup.executor(url).run(TASK, subtasks=plan(1), run_id="r1")
    assert result.status == "ok"
    assert query(url, "SELECT version FROM store_schema") == [(SCHEMA_VERSION,)]
    assert query(url, "SELECT life FROM lives") == [(1,)]  # the tables version 5 adds

    change(url, ("UPDATE store_schema SET version = ?", (SCHEMA_VERSION + 1,)))
    with pytest.raises(StoreError, match="written by a newer Honeycomb"):
        await RunStore(url).open()


def test_a_role_that_may_not_bring_an_earlier_store_up_to_date_is_told_why(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A role that reads and writes a store's rows, not its tables, said "cannot open the
    # run store: permission denied for schema ...", with the statement and a caret under
    # it, not that the store was of an earlier version, to be brought up to date.
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 4)
    four = [in_postgres(s) for s in upgrade_statements(0) if not s.startswith("PRAGMA")]
    monkeypatch.undo()
    name, role = schema_of(url), f"app_{uuid.uuid4().hex[:8]}"
    change(
        url,
        (f'CREATE SCHEMA "{name}"', ()),
        ("CREATE TABLE store_schema (application TEXT NOT NULL, version BIGINT NOT NULL)", ()),
        ("INSERT INTO store_schema VALUES ('honeycomb run store', 4)", ()),
        *((statement, ()) for statement in four),
        (f'CREATE ROLE "{role}" LOGIN', ()),  # the test server trusts any role
        (f'GRANT USAGE ON SCHEMA "{name}" TO "{role}"', ()),
        (f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{name}" TO "{role}"', ()),
    )
    try:
        theirs = url.replace("postgres@", f"{role}@")
        assert RunStore(theirs).runs() == []  # read as it is
        with pytest.raises(StoreError) as caught:
            anyio.run(RunStore(theirs).open)
        assert str(caught.value) == (
            f"{theirs}: cannot bring the run store up to date from schema 4 to "
            f"{SCHEMA_VERSION} (permission denied for schema {name}): the first process of "
            "this Honeycomb to write to it changes its tables, as a role that may (their "
            "owner); it is read as it is until then"
        )
        assert query(url, "SELECT version FROM store_schema") == [(4,)]  # as it was
    finally:
        change(url, (f'DROP OWNED BY "{role}"', ()), (f'DROP ROLE "{role}"', ()))


async def test_processes_opening_a_new_store_at_once_make_it_once(url: str) -> None:
    stores = [RunStore(url) for _ in range(6)]
    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(store.open)  # each from a thread of its own, at once
    for store in stores:
        store.close()
    assert query(url, "SELECT version FROM store_schema") == [(SCHEMA_VERSION,)]


def test_the_password_is_never_shown_nor_kept(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres.url()
    with_password = url.replace("postgres@", "postgres:an-inline-secret@")
    store = RunStore(with_password)
    assert "an-inline-secret" not in store.where
    assert "an-inline-secret" not in repr(store)
    assert masked("it was an-inline-secret") == "it was [database password hidden]"

    with pytest.raises(ConfigError, match="password_env names HONEYCOMB_TEST_PW, which is not"):
        RunStore(url, password_env="HONEYCOMB_TEST_PW")
    monkeypatch.setenv("HONEYCOMB_TEST_PW", "from-the-environment")
    kept = RunStore(url, password_env="HONEYCOMB_TEST_PW")
    assert masked("from-the-environment") == "[database password hidden]"
    assert kept.runs() == []  # it connects (the test server takes any password)


@pytest.mark.parametrize("where", ["userinfo", "query"])
def test_the_command_line_never_prints_the_password(
    postgres: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    # The run's "kept in" line, the runs and sessions listings and a URL's own error
    # printed the URL as it was given, the password with it; one given as libpq's
    # ?password= was neither removed from the URL shown nor masked.
    if where == "userinfo":
        with_password = postgres.url().replace("postgres@", "postgres:a-cli-secret@")
    else:
        with_password = postgres.url().replace("?", "?password=a-cli-secret&")
    hive = tmp_path / "hive.yaml"
    hive.write_text(
        "models: {default: offline}\nroles:\n  planner: {description: Plans.}\n"
        "  helper: {description: Answers questions.}\n"
    )
    made = RunStore(with_password)
    anyio.run(made.open)  # the store's schema made, no run kept yet
    made.close()
    assert main(["runs", "--store", with_password]) == 0
    assert main(["run", str(hive), "a task", "--plain", "--store", with_password]) == 0
    assert main(["runs", "--store", with_password]) == 0
    assert main(["sessions", "--store", with_password]) == 0
    bad_schema = with_password.rsplit("schema=", 1)[0] + "schema=bad-name"
    assert main(["runs", "--store", bad_schema]) == 2
    shown = capsys.readouterr()
    assert "kept in" in shown.err
    assert "newest first" in shown.out
    assert "bad-name" in shown.err
    assert "a-cli-secret" not in shown.out + shown.err
    # The runs and sessions listings name the store as it is shown too, not with a mask
    # in its place.
    where = split_url(with_password)[2]
    listed = [line for line in shown.out.splitlines() if " in postgresql://" in line]
    assert listed == [
        f"no runs in {where}",
        f"1 run in {where}, newest first",
        f"no sessions in {where}",
    ]
    # The command that resumes the run names the store as it is shown: no password, no
    # mask in its place, a command that runs as it is printed.
    resume = next(line for line in shown.err.splitlines() if "kept in" in line)
    kept_in = resume.split("kept in ", 1)[1].split(" (", 1)[0]
    assert kept_in.startswith("postgresql://postgres@")
    assert f"--store {shlex.quote(kept_in)})" in resume
    assert "hidden" not in resume


def test_a_url_without_a_host_before_its_path_connects_and_is_shown_as_given(
    postgres: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # libpq's way to a Unix socket, postgresql:///DB?host=/socket/folder, lost its "//"
    # on the way to libpq ("invalid connection option"), and in every URL shown (the
    # "kept in" line, the resume command): such a store could not be used at all.
    name = f"socket_{uuid.uuid4().hex[:8]}"
    url = (
        f"postgresql:///postgres?host={postgres.folder}&port={postgres.port}&user=postgres"
        f"&schema={name}"
    )
    assert split_url(url) == (url.rsplit("&", 1)[0], name, url)
    store = RunStore(url)
    assert (store.where, store.name) == (url, f"postgres?schema={name}")
    hive = tmp_path / "hive.yaml"
    hive.write_text(
        "models: {default: offline}\nroles:\n  planner: {description: Plans.}\n"
        "  helper: {description: Answers questions.}\n"
    )
    assert main(["run", str(hive), "a task", "--plain", "--store", url, "--run-id", "r1"]) == 0
    assert main(["runs", "--store", url]) == 0
    shown = capsys.readouterr()
    assert f"run r1 · kept in {url} (honeycomb resume r1 --store {shlex.quote(url)}" in shown.err
    assert f"1 run in {url}, newest first" in shown.out
    assert [run.run_id for run in store.runs()] == ["r1"]


def test_a_role_that_may_not_use_the_stores_schema_is_told_so(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its tables, in a search path the role may not use, read as missing: "cannot read
    # the run store: relation "store_schema" does not exist", of a store that is there.
    setup = Setup(tmp_path / "effects.txt", tmp_path / "calls.txt")
    made = setup.executor(url)
    anyio.run(lambda: made.run(TASK, subtasks=plan(1), run_id="r1"))
    role = f"reader_{uuid.uuid4().hex[:8]}"
    change(url, (f'CREATE ROLE "{role}" LOGIN', ()))  # the test server trusts any role
    try:
        theirs = url.replace("postgres@", f"{role}@")
        said = (
            f"{theirs}: the role '{role}' may not use the schema '{schema_of(url)}' that holds "
            f'the store: have it granted (GRANT USAGE ON SCHEMA "{schema_of(url)}" TO '
            f'"{role}", and the rights on its tables), or connect as a role that has it'
        )
        with pytest.raises(StoreError) as reading:
            RunStore(theirs).runs()
        with pytest.raises(StoreError) as writing:
            anyio.run(RunStore(theirs).open)
        assert str(reading.value) == str(writing.value) == said
        assert main(["runs", "--store", theirs]) == 2
        assert capsys.readouterr().err == said + "\n"
    finally:
        change(url, (f'DROP ROLE "{role}"', ()))


def test_a_password_in_the_urls_query_is_a_secret_and_never_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # libpq takes a password from the query too: it was kept in the URL shown (every
    # error, the "kept in" line) and never masked.
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    base = f"postgresql://app@127.0.0.1:{port}/db"
    url = f"{base}?schema=x&password=query-secret-1&sslmode=disable&sslpassword=key%2Dsecret-2"
    conninfo, schema, shown = split_url(url)
    assert schema == "x"
    assert shown == f"{base}?schema=x&sslmode=disable"
    assert conninfo == f"{base}?sslmode=disable"  # the passwords are given apart
    assert url_passwords(url) == {"password": "query-secret-1", "sslpassword": "key-secret-2"}
    store = RunStore(url)
    assert store.where == shown
    assert masked("query-secret-1 key-secret-2 key%2Dsecret-2") == " ".join(
        ["[database password hidden]"] * 3
    )
    with pytest.raises(StoreError) as caught:
        store.runs()
    assert "query-secret-1" not in str(caught.value)
    bad_schema = url.replace("schema=x", "schema=bad-name")
    assert main(["runs", "--store", url]) == 2
    assert main(["runs", "--store", bad_schema]) == 2
    shown_err = capsys.readouterr().err
    assert "cannot connect" in shown_err
    assert "bad-name" in shown_err
    assert "secret-" not in shown_err


@pytest.mark.parametrize(
    ("password", "decoded"),
    [
        ("a secret with spaces", "a secret with spaces"),
        ("pw 1", "pw 1"),
        ("pass%ZZword", "pass%ZZword"),
        ("pw%1", "pw%1"),
        ("p%20w+x%2B", "p w+x+"),
    ],
)
def test_a_password_libpq_cannot_read_in_a_url_is_never_quoted(
    password: str, decoded: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # libpq's error on a URL it could not read quoted the part it stopped at: a password
    # with a space ('unexpected spaces found in "..."'), or with a "%" that begins no
    # escape ('invalid percent-encoded token'), was printed whole, in the clear (one
    # with a space is no URL's password to url_secrets, and one under 8 characters is
    # no secret to mask). The passwords are given to libpq apart from the URL.
    import psycopg

    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    for url in [
        f"postgresql://app:{password}@127.0.0.1:{port}/db",
        f"postgresql://app@127.0.0.1:{port}/db?password={password}",
    ]:
        assert main(["runs", "--store", url]) == 2
        err = capsys.readouterr().err
        assert "Connection refused" in err
        assert password not in err
        assert decoded not in err
        conninfo, _, shown = split_url(url)
        assert password not in conninfo + shown
        given = psycopg.conninfo.make_conninfo(conninfo, **url_passwords(url))
        assert psycopg.conninfo.conninfo_to_dict(given)["password"] == decoded


def test_a_schema_no_run_was_kept_in_is_refused_as_a_missing_file_is(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A misspelt ?schema= read as a store with no runs, exit status 0.
    misspelt = url.rsplit("schema=", 1)[0] + "schema=honeycomb_prdo"
    assert main(["runs", "--store", misspelt]) == 2
    assert main(["sessions", "--store", misspelt]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{misspelt}: no run store: no run was kept in this schema (--store "
                   "URL?schema=NAME names another)"] * 2  # fmt: skip


def test_a_url_of_another_database_is_refused() -> None:
    with pytest.raises(ConfigError, match="the run store mysql:// is not one Honeycomb knows"):
        RunStore("mysql://app@db/prod")


LOCK = "SELECT pg_advisory_xact_lock(hashtext(current_schema()), hashtext(?))"


async def test_a_write_the_server_rolls_back_to_break_a_deadlock_is_made_again(
    url: str,
) -> None:
    """Another process's transaction holds run a and asks for run b, which this one's
    writer holds while it asks for a: the server rolls the writer's back; it is made
    again, and its waiter never hears of it.

    The server rolls back the transaction whose wait it checks once the cycle is
    closed. So the writer closes it, last: it holds b and waits at a gate (c) while the
    other asks for b, whose wait the server checks only after an hour; the gate then
    opens, and the writer's wait for a is the one checked (``deadlock_timeout``).
    Closed the other way round, which side lost depended on how soon after the
    writer's wait the other's began."""
    import psycopg

    store = RunStore(url)
    await store.open()
    conninfo, schema, _ = split_url(url)

    def session() -> psycopg.Connection[Any]:
        conn = psycopg.connect(conninfo, autocommit=True)
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("BEGIN")
        return conn

    def waiting(count: int) -> bool:
        return len(query(url, "SELECT 1 FROM pg_locks WHERE NOT granted")) == count

    other, gate = await anyio.to_thread.run_sync(session), await anyio.to_thread.run_sync(session)
    other.execute("SET LOCAL deadlock_timeout = '1h'")
    other.execute(LOCK.replace("?", "%s"), ("a",))
    gate.execute(LOCK.replace("?", "%s"), ("c",))
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.commit, (LOCK, ("b",)), (LOCK, ("c",)), (LOCK, ("a",)))
        with anyio.fail_after(10):
            while not waiting(1):  # noqa: ASYNC110 (until the writer waits at the gate)
                await anyio.sleep(0.01)
        async with anyio.create_task_group() as asking:
            asking.start_soon(
                anyio.to_thread.run_sync, other.execute, LOCK.replace("?", "%s"), ("b",)
            )
            with anyio.fail_after(10):
                while not waiting(2):  # noqa: ASYNC110 (until the other waits for b)
                    await anyio.sleep(0.01)
            gate.execute("COMMIT")  # the writer asks for a: the cycle is closed
        other.execute("COMMIT")  # it was not the one rolled back: its b was granted
    other.close()
    gate.close()
    store.close()


async def test_a_run_whose_owner_stopped_in_a_transaction_is_taken_over_as_its_lease_expires(
    url: str,
) -> None:
    """The owner's writer stops half way through a transaction that holds its lease's
    row (its process stopped, or hung): once its lease's time to live has passed, the
    server ends that session, and the run is taken over; the owner writes nothing."""
    owner, thief = RunStore(url, lease_ttl_s=1.0), RunStore(url)
    await owner.take_lease("r1")
    holding, go_on = threading.Event(), threading.Event()

    def stopped(db: Connection) -> None:
        db.execute("SELECT owner FROM leases WHERE run_id = ?" + db.row_lock, ("r1",))
        holding.set()
        go_on.wait(30)  # as a stopped process: no heartbeat, the transaction open

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(owner.act, stopped)
            await anyio.to_thread.run_sync(holding.wait, 10)
            with anyio.fail_after(10):
                while True:
                    try:
                        lease = await thief.take_lease("r1", steal=True)
                        break
                    except RunBusy:  # live until its TTL has passed
                        await anyio.sleep(0.1)
            go_on.set()
            tg.cancel_scope.cancel()
        assert query(url, "SELECT owner FROM leases") == [(lease.owner,)]
    finally:
        go_on.set()
        owner.close()
        thief.close()


def test_a_server_that_cannot_be_reached_is_told_at_once_with_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    store = RunStore(f"postgresql://app:a-secret@127.0.0.1:{port}/db")
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreError) as caught:
        store.runs()
    assert "cannot connect to the run store" in str(caught.value)
    assert "Connection refused" in str(caught.value)
    assert "a-secret" not in str(caught.value)
    # The reading pool was never opened: it would have tried again for ten seconds,
    # each failure a warning on standard error where no logging is configured.
    assert not [r for r in caplog.records if r.name.startswith("psycopg")]


async def test_a_server_that_stays_away_is_waited_for_once_not_at_each_write(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer waits out a lost server once (RECONNECT_S): the writes after the one
    it gave up on try once each and fail at once, so a run whose workers, end and
    lease each still write is told in one wait, not in one per write; once the server
    lets it in again, writes go on."""
    monkeypatch.setattr(writer, "RECONNECT_S", 0.3)
    attempts: list[str] = []
    connect = PostgresDatabase.connect

    def counted(self: PostgresDatabase) -> PostgresConnection:
        attempts.append(self.schema)
        return connect(self)

    monkeypatch.setattr(PostgresDatabase, "connect", counted)
    mine = role_of(url, "away")
    store = RunStore(mine)
    await store.commit(("CREATE TABLE t (n BIGINT)", ()))
    away(url, role_in(mine))  # the server lets it in no more
    attempts.clear()
    with pytest.raises(StoreError, match="cannot connect to the run store"):
        await store.commit(("INSERT INTO t VALUES (1)", ()))
    assert len(attempts) > 1  # tried again, for RECONNECT_S
    for n in (2, 3):
        attempts.clear()
        with pytest.raises(StoreError, match="cannot connect to the run store"):
            await store.commit(("INSERT INTO t VALUES (?)", (n,)))
        assert len(attempts) == 1
    back(url, role_in(mine))
    await store.commit(("INSERT INTO t VALUES (4)", ()))
    store.close()
    assert query(url, "SELECT n FROM t") == [(4,)]


async def test_a_read_once_the_server_went_away_says_why_and_the_next_is_told_at_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads take their connections from a pool: once the server went away, a read
    waited the pool's time and said only that no connection came, as did every read
    after it, the pool trying again behind them. Now it says libpq's reason, and the
    next read is told it at once, by a pool opened anew, as the first read of a store
    is; once the server lets it in again, reads go on."""
    monkeypatch.setattr("honeycomb.store.postgres._CONNECT_TIMEOUT_S", 0.5)  # the pool's time
    monkeypatch.setattr(readers, "BUSY_S", 0.05)  # (a read waits for the pool this long first)
    mine = role_of(url, "gone")
    store = RunStore(mine)
    await store.open()
    assert store.runs() == []  # the pool is open
    away(url, role_in(mine))  # the server lets it in no more
    for _ in range(2):
        with pytest.raises(StoreError, match="cannot connect to the run store") as caught:
            store.runs()
        assert "is not permitted to log in" in str(caught.value)
    back(url, role_in(mine))
    assert store.runs() == []
    store.close()


@pytest.mark.parametrize("command", [["runs"], ["trace", "r1"], ["resume", "r1"], ["sessions"]])
def test_a_store_url_that_cannot_be_used_is_refused_without_its_password(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # A store refused before it was made had registered no secret: the commands printed
    # the URL as given, password and all; and a host's "[" never closed was a
    # traceback (urlsplit's ValueError), where RunStore says ConfigError.
    secret = f"pw-{uuid.uuid4().hex}"  # never registered: only the command can hide it
    spaced = f"pw {uuid.uuid4().hex}"  # no URL's password to url_secrets, which ends at a space
    for url, why in [
        (f"postgresql://app:{secret}@127.0.0.1:1/db?schema=bad-name", "not a plain name"),
        (f"postgresql://app:{secret}@[::1/db", "the run store's URL cannot be read"),
        (f"postgresql://app:{spaced}@127.0.0.1:1/db?schema=bad-name", "not a plain name"),
    ]:
        assert main([*command, "--store", url]) == 2
        shown = capsys.readouterr()
        assert why in shown.err
        assert "postgresql://app:[database password hidden]@" in shown.err
        assert secret not in shown.out + shown.err
        assert spaced not in shown.out + shown.err
    with pytest.raises(ConfigError, match="the run store's URL cannot be read") as caught:
        RunStore(f"postgresql://app:{secret}@[::1/db")
    assert caught.value.field == "store"
