"""A memory on a cassette: a recorded run keeps what each search of its memory found,
and its replay recalls that, whatever the memory holds by then."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from honeycomb import Executor, Role, RoleMemory, SQLiteMemory
from honeycomb.models import cassette, cassette_memory
from honeycomb.testing import FunctionModel
from runtime import ConfigError, MemoryStoreError, ModelRequest
from runtime.memory import MemoryHit
from runtime.memory.tape import TapedMemory
from runtime.models.cassettes import Cassette, CassetteWriter
from runtime.models.layers.cassette_embeddings import RecordingSearches, ReplaySearches

TASK = "Lisbon weather"


def answer(request: ModelRequest) -> str:
    """Says the last line of each message past the task: what a recall brought."""
    return " | ".join(m.content.splitlines()[-1] for m in request.messages[2:]) or "nothing"


class Hashed:
    """Embeddings made of a hash of the text: the same text, the same vector."""

    name = "hashed"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[b / 255 for b in hashlib.sha256(t.encode()).digest()[:4]] for t in texts]


def guide() -> Role:
    return Role(name="guide", memory=RoleMemory(namespace="trip", remember=False))


async def run_on(tape: Path, memory: SQLiteMemory, *, replay: bool) -> str:
    """A run of the guide on ``memory``, recorded in ``tape`` or replayed from it (the
    Executor puts the memory on the cassette, whether it embeds or not)."""
    models = cassette(FunctionModel(answer), **{"replay" if replay else "record": tape})
    subtasks = [{"role": "guide", "instruction": TASK}]
    result = await Executor([guide()], models, memory=memory).run(TASK, subtasks=subtasks)
    return result.answer_text


@pytest.mark.parametrize("embeddings", [None, Hashed()], ids=["words", "meaning"])
async def test_a_replay_recalls_what_the_recording_recalled_whatever_the_memory_holds_now(
    tmp_path: Path, embeddings: Hashed | None
) -> None:
    memory = SQLiteMemory(tmp_path / "memory.db", embeddings=embeddings)
    sunny = await memory.add("Lisbon is sunny in May", namespace="trip")
    recorded = await run_on(tmp_path / "run.jsonl", memory, replay=False)
    assert "Lisbon is sunny in May" in recorded
    # Since then, another run forgot it and kept otherwise.
    await memory.delete(sunny.id)
    await memory.add("Lisbon weather: rainy in May", namespace="trip")
    replayed = await run_on(tmp_path / "run.jsonl", memory, replay=True)
    assert replayed == recorded  # the recall recorded, not a CassetteMismatch
    [search] = Cassette(tmp_path / "run.jsonl").searches
    assert (search.namespace, search.query, search.k, search.worker) == ("trip", TASK, 3, "s1")


async def test_a_memory_the_recorded_run_kept_names_the_replaying_run(tmp_path: Path) -> None:
    writer = Role(name="writer", memory=RoleMemory(namespace="trip", store_result=True, recall=0))
    reader = Role(name="reader", memory=RoleMemory(namespace="trip", remember=False))
    memory = SQLiteMemory(tmp_path / "memory.db")
    subtasks = [  # s1 answers "nothing", kept with its run's id; s2 recalls it
        {"id": "s1", "role": "writer", "instruction": TASK},
        {"id": "s2", "role": "reader", "instruction": "nothing", "depends_on": ["s1"]},
    ]
    runs = []
    for way in ("record", "replay"):
        models = cassette(FunctionModel(answer), **{way: tmp_path / "run.jsonl"})
        executor = Executor([writer, reader], models, memory=cassette_memory(memory, models))
        runs.append(await executor.run(TASK, subtasks=subtasks))
    recorded, replayed = runs
    assert replayed.status == "ok", replayed.subtasks["s2"].error
    assert replayed.answer_text == recorded.answer_text
    [search] = Cassette(tmp_path / "run.jsonl").searches
    assert search.worker == "s2"
    assert search.hits[0]["record"]["run_id"] == "<run>"
    again = Cassette(tmp_path / "run.jsonl").search(
        "trip", "nothing", 3, worker="s2", case=None, run="9c1e4b7a2f30"
    )
    assert again is not None
    assert again.hits[0]["record"]["run_id"] == "9c1e4b7a2f30"  # the replaying run's own


class Unreachable:
    """A memory whose searches fail as a vector database out of reach does."""

    async def search(self, query: str, *, namespace: str = "default", k: int = 5) -> tuple[()]:
        raise ConnectionError("vectors.example:6333 refused the connection")


async def test_a_search_that_failed_when_recorded_fails_alike_replayed(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    recording = TapedMemory(Unreachable(), RecordingSearches(CassetteWriter(path)))  # type: ignore[arg-type]
    with pytest.raises(ConnectionError) as recorded:
        await recording.search("Lisbon", namespace="trip")
    store = SQLiteMemory(tmp_path / "memory.db")
    failing = MemoryStoreError("the memory file stayed locked", path=str(store.path))
    cassette_file = CassetteWriter(tmp_path / "d.jsonl")

    class Locked:
        async def search(
            self, query: str, *, namespace: str = "default", k: int = 5
        ) -> tuple[MemoryHit, ...]:
            raise failing

    with pytest.raises(MemoryStoreError):
        await TapedMemory(Locked(), RecordingSearches(cassette_file)).search("Porto")  # type: ignore[arg-type]
    # Replayed on a memory that answers: each fails as it did, told alike.
    replaying = TapedMemory(store, ReplaySearches(Cassette(path)))
    with pytest.raises(ConnectionError) as replayed:
        await replaying.search("Lisbon", namespace="trip")
    assert str(replayed.value) == str(recorded.value)
    again = TapedMemory(store, ReplaySearches(Cassette(tmp_path / "d.jsonl")))
    with pytest.raises(MemoryStoreError) as locked:
        await again.search("Porto")
    assert (str(locked.value), locked.value.path) == (str(failing), failing.path)


async def test_a_search_the_cassette_did_not_record_searches_the_memory(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "memory.db")
    await memory.add("Porto trains leave from Campanha", namespace="trip")
    CassetteWriter(tmp_path / "old.jsonl")  # a cassette that kept no search
    replaying = TapedMemory(memory, ReplaySearches(Cassette(tmp_path / "old.jsonl")))
    [hit] = await replaying.search("Porto trains", namespace="trip")
    assert hit.record.text == "Porto trains leave from Campanha"


def test_a_memory_recorded_on_the_run_stores_file_is_refused_as_it_is_unrecorded(
    tmp_path: Path,
) -> None:
    # On a cassette the memory is wrapped to keep its searches, and the wrapper had no
    # file: the refusal was skipped, and every recall of the run failed on the store.
    recorded = cassette(FunctionModel(answer), record=tmp_path / "calls.jsonl")
    memory = SQLiteMemory(tmp_path / "runs.db")
    with pytest.raises(ConfigError, match="is the run store's"):
        Executor([guide()], recorded, memory=memory, store=tmp_path / "runs.db")
