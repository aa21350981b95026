"""Long-term memory where it meets other features, on real SQLite files: awkward text
(lone surrogates, NUL), embeddings from the OpenAI adapter over the local server, and
the command line that shows a memory file."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import OpenAIEmbeddings, SQLiteMemory
from runtime.memory import memory_id
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
