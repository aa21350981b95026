"""OpenAIEmbeddings through the real ``openai`` client against the local server's
``/v1/embeddings``, and SQLiteMemory's hybrid search (BM25 and sqlite-vec vectors
merged) on real files."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb.cli.main import main
from runtime import (
    MemoryRecord,
    MemoryStoreError,
    ModelHTTPError,
    ModelResponseError,
    OpenAIEmbeddings,
    SQLiteMemory,
)
from runtime.limits.retry import RetryPolicy
from runtime.memory import db
from tests.support.openai_server import OpenAIServer, embedding, error


def embeddings_of(server: OpenAIServer, **options: Any) -> OpenAIEmbeddings:
    return OpenAIEmbeddings("embed-small", base_url=server.base_url, api_key="sk-test", **options)


async def test_vectors_come_back_in_the_order_of_the_texts(openai_server: OpenAIServer) -> None:
    vectors = await embeddings_of(openai_server).embed(["a car", "a cat", "a car"])
    assert vectors[0] == pytest.approx(embedding("a car"))
    assert vectors[1] == pytest.approx(embedding("a cat"))
    assert vectors[0] == pytest.approx(vectors[2])
    [request] = openai_server.requests
    assert request.path == "/v1/embeddings"
    assert request.body["model"] == "embed-small"
    assert request.body["input"] == ["a car", "a cat", "a car"]
    assert request.headers["authorization"] == "Bearer sk-test"


async def test_dimensions_are_asked_for_and_named(openai_server: OpenAIServer) -> None:
    model = embeddings_of(openai_server, dimensions=16)
    [vector] = await model.embed(["lisbon"])
    assert len(vector) == 16
    assert openai_server.requests[0].body["dimensions"] == 16
    assert model.name == "embed-small:16"
    assert await model.embed([]) == []
    assert len(openai_server.requests) == 1  # nothing to embed, nothing sent


async def test_server_errors_are_retried_and_others_are_not(openai_server: OpenAIServer) -> None:
    model = embeddings_of(
        openai_server, retry=RetryPolicy(attempts=3, initial_wait_s=0.01, jitter_s=0)
    )
    openai_server.enqueue(error(500), error(503))
    assert len(await model.embed(["x"])) == 1
    assert len(openai_server.requests) == 3
    openai_server.enqueue(error(400, "bad model"))
    with pytest.raises(ModelHTTPError) as caught:
        await model.embed(["x"])
    assert caught.value.status == 400
    assert len(openai_server.requests) == 4


@pytest.fixture
def semantic(tmp_path: Path, openai_server: OpenAIServer) -> SQLiteMemory:
    pytest.importorskip("sqlite_vec")  # the dev extra brings it (the memory extra)
    return SQLiteMemory(tmp_path / "semantic.db", embeddings=embeddings_of(openai_server))


async def test_meaning_finds_what_no_word_matches(semantic: SQLiteMemory) -> None:
    car = await semantic.add("a red automobile is parked by the station")
    await semantic.add("kittens sleep all afternoon")
    # No word of the query is in the memory: only its vector finds it.
    [hit] = await semantic.search("vehicle", k=1)
    assert hit.record == car
    words_only = SQLiteMemory(semantic.path)  # the same file, searched by words only
    assert await words_only.search("vehicle") == ()


async def test_a_memory_found_both_ways_comes_first(semantic: SQLiteMemory) -> None:
    await semantic.add("cars are fast")  # the same meaning, no word in common
    both = await semantic.add("trains to Porto and cars to Lisbon")  # words and meaning
    await semantic.add("Porto has a famous bridge")  # words only
    await semantic.add("the opera house is closed")
    hits = await semantic.search("vehicle porto", k=3)
    assert hits[0].record == both
    assert {h.record.text for h in hits[1:]} == {"cars are fast", "Porto has a famous bridge"}
    assert hits[0].score > hits[1].score


async def test_a_text_is_embedded_once_and_namespaces_stay_apart(
    semantic: SQLiteMemory, openai_server: OpenAIServer
) -> None:
    await semantic.add("a car for rent", namespace="a")
    await semantic.add("a car  for rent", namespace="a")  # the same memory
    assert len(openai_server.requests) == 1
    await semantic.add("a car for rent", namespace="b")
    assert [h.record.namespace for h in await semantic.search("automobile", namespace="b")] == ["b"]


async def test_a_forgotten_memory_is_not_found_by_meaning(semantic: SQLiteMemory) -> None:
    car = await semantic.add("an automobile")
    assert await semantic.delete(car.id)
    assert await semantic.search("vehicle") == ()
    await semantic.add("a kitten")
    assert await semantic.forget_namespace("default") == 1
    assert await semantic.search("cat") == ()


async def test_vectors_of_another_model_are_refused(
    semantic: SQLiteMemory, openai_server: OpenAIServer
) -> None:
    await semantic.add("an automobile")
    other = SQLiteMemory(semantic.path, embeddings=embeddings_of(openai_server, dimensions=16))
    with pytest.raises(MemoryStoreError, match="vectors of two models do not compare") as caught:
        await other.search("vehicle")
    assert "'embed-small' (64 dimensions)" in str(caught.value)
    assert "'embed-small:16' (16 dimensions)" in str(caught.value)


async def test_an_endpoint_that_fails_is_a_model_error_and_keeps_nothing(
    semantic: SQLiteMemory, openai_server: OpenAIServer
) -> None:
    openai_server.enqueue(error(401, "bad key"))
    with pytest.raises(ModelHTTPError):
        await semantic.add("an automobile")
    assert await semantic.list() == ()


async def test_vectors_left_by_a_forget_without_embeddings_are_swept(
    semantic: SQLiteMemory, openai_server: OpenAIServer
) -> None:
    """``honeycomb memory forget --file`` forgets with no embeddings (and no sqlite-vec
    loaded): the vectors stay behind, match no memory, and would take the places of
    real ones among a search's nearest. A memory with embeddings sweeps them as it opens
    the file."""
    import sqlite_vec

    for text in ("an automobile", "a kitten", "a bridge"):
        await semantic.add(text)
    [car] = [r for r in await semantic.list() if r.text == "an automobile"]
    assert await SQLiteMemory(semantic.path).delete(car.id)  # words only

    def vectors() -> int:
        raw = semantic._driver.connect(str(semantic.path))  # type: ignore[union-attr]
        raw.enable_load_extension(True)
        sqlite_vec.load(raw)
        try:
            return int(raw.execute("SELECT count(*) FROM memory_vectors").fetchone()[0])
        finally:
            raw.close()

    assert vectors() == 3
    again = SQLiteMemory(semantic.path, embeddings=embeddings_of(openai_server))
    assert [h.record.text for h in await again.search("vehicle kitten")] == ["a kitten"]
    assert vectors() == 2


async def test_a_forget_by_the_command_is_seen_by_a_memory_that_has_the_file_open(
    semantic: SQLiteMemory,
) -> None:
    """``honeycomb memory forget --file`` forgets without sqlite-vec loaded while a
    memory with embeddings has the file open: the vectors it leaves behind were the
    nearest to the query, and took every place among a search's nearest, so the memory
    that is left was missed until the file was opened anew. The search looks further,
    and writes nothing (sweeping them there made a later reader fail, 'disk I/O
    error')."""
    car = await semantic.add("an automobile parked by the station")
    nearer = [await semantic.add(f"vehicle {n}") for n in range(5)]
    [hit] = await semantic.search("vehicle", k=1)
    assert hit.record in nearer
    ids = [r.id for r in nearer]
    forget = ["memory", "forget", "--file", str(semantic.path), *ids]
    assert await anyio.to_thread.run_sync(main, forget) == 0
    [hit] = await semantic.search("vehicle", k=1)
    assert hit.record == car
    assert [h.record for h in await semantic.search("vehicle", k=3)] == [car]


class _Counting:
    """Embeddings of one's own that take a while, and keep the texts they are sent."""

    name = "counting-embeddings"

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.started = asyncio.Event()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += texts
        self.started.set()
        await asyncio.sleep(0.05)
        return [embedding(text) for text in texts]


async def test_adds_of_one_text_at_once_embed_it_once(tmp_path: Path) -> None:
    pytest.importorskip("sqlite_vec")
    counting = _Counting()
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=counting)
    texts = ["Lisbon is sunny in May"] * 4 + ["Lisbon  is sunny in May\n", "Porto is rainy"]
    kept: list[MemoryRecord] = []

    async def add(text: str) -> None:
        kept.append(await memory.add(text))

    async with anyio.create_task_group() as group:
        for text in texts:
            group.start_soon(add, text)
    assert sorted(counting.texts) == ["Lisbon is sunny in May", "Porto is rainy"]
    assert len(set(kept)) == 2  # the same memory for the five adds of one text
    assert set(await memory.list()) == set(kept)


async def test_an_add_cancelled_while_embedding_leaves_its_text_to_the_others(
    tmp_path: Path,
) -> None:
    pytest.importorskip("sqlite_vec")
    counting = _Counting()
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=counting)
    kept: list[MemoryRecord] = []
    cancelled = anyio.CancelScope()

    async def add() -> None:
        kept.append(await memory.add("Lisbon is sunny in May"))

    async def add_cancelled() -> None:
        with cancelled:
            await add()

    async with anyio.create_task_group() as group:
        group.start_soon(add_cancelled)
        await counting.started.wait()
        group.start_soon(add)
        await anyio.sleep(0.01)  # the second add waits for the first's vector
        cancelled.cancel()
    assert [r.text for r in kept] == ["Lisbon is sunny in May"]
    assert [r.text for r in await memory.list()] == ["Lisbon is sunny in May"]
    assert len(counting.texts) == 2  # the cancelled add's call, and the second add's


class _Empty:
    """Embeddings of one's own that answer with no vector at all."""

    name = "empty-embeddings"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return []


async def test_embeddings_that_give_no_vector_are_named_not_unpacked(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=_Empty())
    for trying in (memory.add("Lisbon is sunny"), memory.search("sunny Lisbon")):
        with pytest.raises(ModelResponseError, match="'empty-embeddings' gave 0 vectors for 1"):
            await trying


class _Sized:
    """Embeddings of one's own whose model behind their name changes: vectors of
    ``size`` numbers."""

    name = "local-embeddings"

    def __init__(self, size: int) -> None:
        self.size = size

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [embedding(text, self.size) for text in texts]


async def test_vectors_of_another_size_by_the_same_name_say_the_model_changed(
    tmp_path: Path,
) -> None:
    # 'this memory's embeddings are 'local-embeddings'' (the same name as the file's)
    # and 'use the same embeddings' named nothing to change.
    pytest.importorskip("sqlite_vec")
    await SQLiteMemory(tmp_path / "m.db", embeddings=_Sized(64)).add("an automobile")
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=_Sized(32))
    for trying in (memory.add("a bicycle"), memory.search("vehicle")):
        with pytest.raises(MemoryStoreError) as caught:
            await trying
        assert str(caught.value) == (
            f"{tmp_path / 'm.db'}: the memory file's vectors were made by 'local-embeddings' "
            "with 64 dimensions, and 'local-embeddings' now gives vectors of 32: another "
            "model answers by that name, and vectors of two models do not compare; serve "
            "the model that made them, or use another file"
        )
    assert [r.text for r in await memory.list()] == ["an automobile"]


class _Giving:
    """Embeddings of one's own that give ``vector`` for every text."""

    name = "giving-embeddings"

    def __init__(self, vector: list[Any]) -> None:
        self.vector = vector

    async def embed(self, texts: Sequence[str]) -> list[list[Any]]:
        return [self.vector for _ in texts]


@pytest.mark.parametrize(
    ("vector", "said"),
    [
        ([], "an empty vector"),
        ([0.0] * 8, "a vector of zeros"),
        ([0.5, float("nan")], "a vector holding nan (not a finite number)"),
        ([0.5, "0.5"], "a vector holding '0.5' (not a finite number)"),
    ],
)
async def test_a_vector_nothing_can_be_found_by_is_refused_as_it_comes(
    tmp_path: Path, vector: list[Any], said: str
) -> None:
    # A vector of zeros (its cosine undefined) was kept, and every search that met it
    # raised TypeError; the others raised sqlite-vec's or struct's errors.
    pytest.importorskip("sqlite_vec")
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=_Giving(vector))
    for trying in (memory.add("a bicycle"), memory.search("vehicle")):
        with pytest.raises(ModelResponseError) as caught:
            await trying
        assert str(caught.value).startswith(f"the embeddings 'giving-embeddings' gave {said}")
    assert await memory.list() == ()


async def test_a_vector_of_zeros_kept_before_is_no_match(tmp_path: Path) -> None:
    sqlite_vec = pytest.importorskip("sqlite_vec")
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=_Sized(8))
    await memory.add("a bicycle")
    car = await memory.add("an automobile")
    raw = db.driver(memory.path, vectors=True).connect(memory.path)
    raw.enable_load_extension(True)
    sqlite_vec.load(raw)
    with raw:  # the bicycle's vector, as a file kept it before such vectors were refused
        (seq,) = raw.execute("SELECT seq FROM memories WHERE text = 'a bicycle'").fetchone()
        raw.execute("DELETE FROM memory_vectors WHERE rowid = ?", (seq,))
        zeros = sqlite_vec.serialize_float32([0.0] * 8)
        raw.execute("INSERT INTO memory_vectors VALUES (?, 'default', ?)", (seq, zeros))
    raw.close()
    hits = await memory.search("an automobile", k=2)
    assert [hit.record for hit in hits] == [car]
