"""A run whose roles recall and keep memories through an embeddings endpoint (the
local OpenAI-compatible server), recorded, then replayed with the endpoint asked
nothing: the same answer, usage and recall; texts the cassette did not record fail the
worker naming them; a cassette recorded without the embeddings is refused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest

from honeycomb import Executor, Policy, Role, RoleMemory, RunResult, SQLiteMemory
from honeycomb.errors import CassetteError, RunFailed
from honeycomb.events import MemoryEmbedded, MemoryRecalled
from honeycomb.models import Cassette, Model, OpenAIEmbeddings, Price, cassette
from honeycomb.testing import FunctionModel, ScriptedModel, call
from runtime import Event, ModelRequest
from runtime.errors import ModelHTTPError
from tests.support.openai_server import OpenAIServer

pytestmark = [pytest.mark.timeout(60)]

GUIDE = Role(name="guide", memory=RoleMemory(recall=2, remember=False, store_result=True))
PRICE = Price(input_per_mtok=1000.0, output_per_mtok=0.0)
NOTES = ("Lisbon trams climb to Alfama", "Porto trains leave from Campanha", "Madrid is far")


def answer(request: ModelRequest) -> str:
    """Says what its context holds past the task: the memories it recalled."""
    lines = [line for m in request.messages[2:] for line in m.content.splitlines()[1:]]
    return " | ".join(line for line in lines if line and not line.startswith("[")) or "nothing"


def embeddings_at(base_url: str) -> OpenAIEmbeddings:
    return OpenAIEmbeddings("embed-small", base_url=base_url, api_key="sk-t", price=PRICE)


NOBODY = "http://127.0.0.1:9/v1"
"""An endpoint nobody serves."""


async def seeded(folder: Path, server: OpenAIServer) -> SQLiteMemory:
    """A memory holding the notes (embedded by the server, outside any run)."""
    memory = SQLiteMemory(folder / "memory.db", embeddings=embeddings_at(server.base_url))
    for note in NOTES:
        await memory.add(note)
    return memory


async def run(models: object, memory: SQLiteMemory, task: str) -> tuple[RunResult, list[Event]]:
    events: list[Event] = []
    executor = Executor(
        [GUIDE], models, memory=memory, aggregator="concat", policy=Policy(max_workers=1),
        on_event=[events.append],
    )  # fmt: skip
    subtasks = [("guide", "Lisbon trams"), ("guide", "Porto trains")]
    result = await executor.run(task, subtasks=subtasks)
    return result, events


def recalled(events: list[Event]) -> list[tuple[str | None, tuple[str, ...]]]:
    found = [(e.worker, e.memory_ids) for e in events if isinstance(e, MemoryRecalled)]
    return sorted(found, key=lambda pair: pair[0] or "")


async def test_a_replayed_run_embeds_as_recorded_with_no_endpoint(tmp_path: Path) -> None:
    tape = tmp_path / "trip.jsonl"
    with OpenAIServer() as server:
        recording = await seeded(tmp_path / "recorded", server)
        replaying = await seeded(tmp_path / "replayed", server)  # as the recording started
        model = FunctionModel(answer, name="guide")
        recorded, recorded_events = await run(
            cassette({"default": model}, record=tape), recording, "trip"
        )
        asked = len(server.requests)
        replaying = replaying.with_embeddings(embeddings_at(NOBODY))  # and nothing asks it
        replayed, replayed_events = await run(
            cassette({"default": model}, replay=tape), replaying, "trip"
        )
        assert len(server.requests) == asked
    assert replayed.status == "ok"
    assert "Alfama" in recorded.answer_text
    assert "Campanha" in recorded.answer_text
    assert replayed.answer_text == recorded.answer_text
    assert recalled(replayed_events) == recalled(recorded_events)
    assert all(ids for _, ids in recalled(recorded_events))
    assert replayed.usage == recorded.usage
    assert recorded.usage.cost > 0  # the embeddings' tokens, at their price
    embedded = [e for e in recorded_events if isinstance(e, MemoryEmbedded)]
    # Each worker's recall and its answer kept; s2 recalls s1's, which names its run.
    assert len(embedded) == len(Cassette(tape).embedded) == 4
    assert [e for e in replayed_events if isinstance(e, MemoryEmbedded)] == [
        msgspec.structs.replace(e, run_id=replayed.run_id) for e in embedded
    ]


async def recorded_on(tmp_path: Path, server: OpenAIServer) -> Path:
    """A cassette of a run of the trip, its memory embedding through ``server``."""
    tape = tmp_path / "trip.jsonl"
    memory = await seeded(tmp_path / "recorded", server)
    model = FunctionModel(answer, name="guide")
    await run(cassette({"default": model}, record=tape), memory, "trip")
    return tape


async def test_a_recall_the_cassette_did_not_record_fails_its_worker_naming_the_text(
    tmp_path: Path,
) -> None:
    with OpenAIServer() as server:
        tape = await recorded_on(tmp_path, server)
        memory = await seeded(tmp_path / "replayed", server)
    executor = Executor(
        [GUIDE], cassette({"default": None}, replay=tape),
        memory=memory.with_embeddings(embeddings_at(NOBODY)), aggregator="concat",
    )  # fmt: skip
    with pytest.raises(RunFailed) as failed:
        await executor.run("trip", subtasks=[("guide", "Lisbon trains")])
    assert str(failed.value).endswith(
        f"(s1: CassetteMismatch: {tape}: a call of embeddings 'embed-small' that the "
        "cassette did not record: text 1: at character 11: recorded 'Lisbon trams', asked "
        "'Lisbon trains'; record it again if the change is meant)"
    )


async def test_a_cassette_recorded_without_the_memorys_embeddings_is_refused(
    tmp_path: Path,
) -> None:
    with OpenAIServer() as server:
        tape = await recorded_on(tmp_path, server)
    old = tmp_path / "old.jsonl"  # as a cassette recorded before embeddings were
    lines = tape.read_text().splitlines(keepends=True)
    old.write_text("".join(line for line in lines if '"kind":"embed' not in line))
    memory = SQLiteMemory(tmp_path / "memory.db", embeddings=embeddings_at(NOBODY))
    with pytest.raises(CassetteError) as refused:
        Executor([GUIDE], cassette({"default": None}, replay=old), memory=memory)
    assert str(refused.value) == (
        f"{old}: the run's memory embeds with 'embed-small', whose calls the cassette did "
        "not record (its embeddings: none): record it again"
    )


class FailingOnPorto:
    """Embeddings whose endpoint is down for any text of Porto."""

    name = "embed-small"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if any("Porto" in text for text in texts):
            raise ModelHTTPError(503, "overloaded", model=self.name)
        return [[1.0, float(len(text))] for text in texts]


async def test_a_note_its_embeddings_failed_to_keep_fails_alike_replayed(tmp_path: Path) -> None:
    tape = tmp_path / "trip.jsonl"
    keeper = Role(name="keeper", memory=RoleMemory(recall=0, remember=True))

    async def one(models: dict[str, Model], folder: str) -> RunResult:
        memory = SQLiteMemory(tmp_path / folder / "memory.db", embeddings=FailingOnPorto())
        executor = Executor([keeper], models, memory=memory, aggregator="concat")
        return await executor.run("trip", subtasks=[("keeper", "Porto")])

    script = [call("remember", {"text": "Porto trains leave from Campanha"}), "noted"]
    await one(cassette({"default": ScriptedModel(script)}, record=tape), "recorded")
    told = next(c.request.messages[-1].content for c in Cassette(tape).calls[1:])
    assert told == (
        "Error: tool 'remember' raised ModelHTTPError: HTTP 503 from model 'embed-small': "
        "overloaded"
    )
    # The model is told of the failure as when recorded: its next call is answered.
    replayed = await one(cassette({"default": None}, replay=tape), "replayed")
    assert replayed.status == "ok"
    assert replayed.answer_text.endswith("noted")
