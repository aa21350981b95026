"""Long-term memory where it meets other features, on real SQLite files: awkward text
(lone surrogates, NUL), embeddings from the OpenAI adapter over the local server,
secrets, and a file this process may only read."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from runtime import MemoryStoreError, OpenAIEmbeddings, SQLiteMemory
from runtime.memory import db, memory_id
from runtime.secrets import add_secret
from tests.support.openai_server import OpenAIServer

SURROGATE = "\udcff"  # what Python makes of a byte of a file name that is not UTF-8


async def test_a_lone_surrogate_is_kept_searched_and_found_as_u_fffd(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "memory.db")
    text = f"the report lisbon{SURROGATE}.pdf is in the shared folder"
    kept = await memory.add(text, namespace="trip", run_id=f"run{SURROGATE}", role="guide")
    assert kept.text == "the report lisbon\ufffd.pdf is in the shared folder"
    assert kept.run_id == "run\ufffd"
    assert kept.id == memory_id("trip", text) == memory_id("trip", kept.text)
    assert await memory.get(kept.id) == kept
    assert await memory.add(text, namespace="trip") == kept  # the same memory, once
    [hit] = await memory.search(f"report {SURROGATE}", namespace="trip")
    assert hit.record == kept
    assert await memory.get(f"{kept.id}{SURROGATE}") is None
    assert not await memory.delete(f"x{SURROGATE}")
    kept_nul = await memory.add("a NUL\x00 in the middle", namespace="trip")
    assert (await memory.get(kept_nul.id)) == kept_nul
    assert kept_nul.text == "a NUL\x00 in the middle"


async def test_a_lone_surrogate_reaches_the_embeddings_endpoint_as_u_fffd(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    pytest.importorskip("sqlite_vec")
    embeddings = OpenAIEmbeddings("embed-small", base_url=openai_server.base_url, api_key="k")
    memory = SQLiteMemory(tmp_path / "semantic.db", embeddings=embeddings)
    kept = await memory.add(f"lisbon{SURROGATE} trams climb", namespace="trip")
    [hit] = await memory.search(f"{SURROGATE}tram", namespace="trip")
    assert hit.record == kept
    sent = [r.body["input"] for r in openai_server.requests]
    assert sent == [["lisbon\ufffd trams climb"], ["\ufffdtram"]]
    assert await embeddings.embed([SURROGATE]) == await embeddings.embed(["\ufffd"])


def read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory files opened from now on may only be read, as a file without write
    permission or on a read-only disk is: every write SQLite tries is refused with
    SQLITE_READONLY (the permissions alone would not do, for root)."""
    chosen = db.driver

    def driver(path: Path, *, vectors: bool) -> types.ModuleType:
        module = chosen(path, vectors=vectors)
        reader = types.ModuleType(f"{module.__name__}_read_only")
        reader.__dict__.update(module.__dict__)

        def connect(*args: Any, **kwargs: Any) -> Any:
            connection = module.connect(*args, **kwargs)
            connection.execute("PRAGMA query_only = ON")
            return connection

        reader.connect = connect  # type: ignore[attr-defined]
        return reader

    monkeypatch.setattr(db, "driver", driver)


async def test_a_file_that_may_only_be_read_is_listed_and_searched_with_embeddings(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory with embeddings sweeps, as it opens a file, the vectors a forget without
    embeddings left: a file it may only read is still read (a search looks past them),
    and a write to it says the file is read-only."""
    pytest.importorskip("sqlite_vec")
    embeddings = OpenAIEmbeddings("embed-small", base_url=openai_server.base_url, api_key="k")
    file = tmp_path / "semantic.db"
    writer = SQLiteMemory(file, embeddings=embeddings)
    for text in ("an automobile", "a kitten", "a bridge"):
        await writer.add(text, namespace="things")
    writer.close()
    car = memory_id("things", "an automobile")
    assert await SQLiteMemory(file).delete(car)  # words only: its vector stays behind
    file.chmod(0o444)
    read_only(monkeypatch)
    reader = SQLiteMemory(file, embeddings=embeddings)
    assert len(await reader.list()) == 2
    hits = await reader.search("vehicle kitten", namespace="things")
    assert [h.record.text for h in hits] == ["a kitten"]
    for write in (reader.add("a ferry", namespace="things"), reader.forget_namespace("things")):
        with pytest.raises(MemoryStoreError, match="may only be read") as refused:
            await write
        assert refused.value.path == str(file)
    reader.close()


async def test_a_secret_never_reaches_the_file_or_the_embeddings_endpoint(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """Whoever adds to the memory (a role's tools mask first; an application's own code
    calls ``add`` itself), the file and the endpoint get the mask, never the secret."""
    pytest.importorskip("sqlite_vec")
    secret = "hunter2-database-password-7f3a"
    add_secret(secret, "database password")
    embeddings = OpenAIEmbeddings("embed-small", base_url=openai_server.base_url, api_key="k")
    file = tmp_path / "semantic.db"
    memory = SQLiteMemory(file, embeddings=embeddings)
    kept = await memory.add(f"the orders database takes {secret} as its password", role=secret)
    assert secret not in kept.text
    assert "[database password hidden]" in kept.text
    assert kept.role == "[database password hidden]"
    [hit] = await memory.search(f"orders {secret}")
    assert hit.record == kept
    memory.close()
    assert all(secret not in str(r.body) for r in openai_server.requests)
    assert not holding(tmp_path, secret)


def holding(folder: Path, text: str) -> list[str]:
    """The files of ``folder`` (the memory file, its WAL) whose bytes hold ``text``."""
    return [f.name for f in folder.iterdir() if text.encode() in f.read_bytes()]


async def test_a_memory_kept_before_its_secret_was_known_is_given_back_masked(
    tmp_path: Path,
) -> None:
    """Kept by a process that did not know the secret (another one, an earlier
    Honeycomb, an add before the key was configured), a memory is masked as it is
    read: a worker's recall would put it in its model's context, ``honeycomb memory``
    on a screen."""
    secret = "pw-deploy-0123456789abcdef"
    memory = SQLiteMemory(tmp_path / "memory.db")
    kept = await memory.add(f"the deploy key is {secret}", namespace="ops", role=secret)
    assert secret in kept.text  # not a secret yet
    add_secret(secret, "deploy key")
    [hit] = await memory.search("deploy key", namespace="ops")
    [listed] = await memory.list("ops")
    found = await memory.get(kept.id)
    for record in (hit.record, listed, found):
        assert record is not None
        assert record.text == "the deploy key is [deploy key hidden]"
        assert record.role == "[deploy key hidden]"
        assert record.id == kept.id


def removed(path: Path) -> None:
    """The memory file at ``path`` and its -wal and -shm, deleted."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def test_a_file_deleted_or_replaced_while_open_is_the_one_used_next(
    tmp_path: Path,
) -> None:
    # Deleted (to start afresh, while a service had it open), its connections went on
    # writing into the deleted file: notes kept there were in no file anyone could read,
    # and a new connection found an empty file without tables ('no such table').
    path = tmp_path / "memory.db"
    memory = SQLiteMemory(path)
    await memory.add("a note before", namespace="trip")
    removed(path)
    await memory.add("a note after", namespace="trip")
    assert [r.text for r in await SQLiteMemory(path).list()] == ["a note after"]
    other = SQLiteMemory(tmp_path / "other.db")
    await other.add("another file's note", namespace="trip")
    other.close()
    removed(path)
    (tmp_path / "other.db").rename(path)  # replaced, as a backup is put back
    assert [r.text for r in await memory.list()] == ["another file's note"]
