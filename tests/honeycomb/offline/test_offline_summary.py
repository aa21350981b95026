"""The offline model's summaries (the facts found so far, by rule) and the demo that
shows compaction with them: ``honeycomb demo --compact``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honeycomb import AssistantMessage, ToolCall, ToolMessage, UserMessage
from honeycomb.cli.main import main
from honeycomb.offline.summary import FACTS_HEADER, summarize
from runtime import MemoryHit, MemoryRecord
from workers.compaction import summary_request
from workers.memory import recall_text


def result(call_id: str, content: str, status: str = "ok") -> ToolMessage:
    return ToolMessage(tool_call_id=call_id, name="read", content=content, status=status)


def asked(call_id: str, page: int) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=(ToolCall(id=call_id, name="read", arguments=json.dumps({"page": page})),)
    )


def test_a_summary_keeps_the_facts_before_it_and_adds_each_results_key_lines() -> None:
    first = summarize(
        summary_request(
            "",
            (
                asked("a", 1),
                result("a", "The weather was fine and we walked.\nReading: 412 m at North Col"),
                asked("b", 2),
                result("b", "no such page", status="error"),
                UserMessage(content="go on"),
            ),
        )
    )
    assert first.splitlines() == [FACTS_HEADER, "- read(page=1): Reading: 412 m at North Col"]
    page = {"page": 3, "next_page": 4, "text": "Temperature 4 C\n" + "Prose only. " * 20}
    second = summarize(summary_request(first, (asked("c", 3), result("c", json.dumps(page)))))
    assert second.splitlines() == [
        FACTS_HEADER,
        "- read(page=1): Reading: 412 m at North Col",  # kept, in the order found
        "- read(page=3): Temperature 4 C (page: 3; next_page: 4)",
    ]


def test_a_summary_of_prose_alone_says_there_are_no_facts_yet() -> None:
    text = summarize(summary_request("", (asked("a", 1), result("a", "Only words here."))))
    assert text == f"{FACTS_HEADER}\n(none yet)"


def test_the_compact_demo_shows_each_compaction_and_keeps_every_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--compact", "--plain", "--latency", "0", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert out.count(": compacted ") >= 3
    answer = out.split("\nAnswer:\n", 1)[1]
    for page in range(1, 25):
        assert f"Reading {page}:" in answer  # the early ones from the summary


def test_a_summary_keeps_what_the_worker_recalled_at_its_start() -> None:
    # Folded with the turns after it, the recall was a user's prose: left out, and the
    # worker went on without what its memory held.
    hits = [
        MemoryHit(
            record=MemoryRecord(
                id="3f2a9c1e0b7d4a55", namespace="trip", text=text, created_at=0.0, role=role
            ),
            score=1.0,
        )
        for text, role in [("Lisbon is sunny in May;\ntrams climb", "guide"), ("Porto", None)]
    ]
    recalled = UserMessage(content=recall_text(hits))
    text = summarize(summary_request("", (recalled, asked("a", 1), result("a", "no facts"))))
    assert text.splitlines() == [
        FACTS_HEADER,
        "- memory 3f2a9c1e0b7d4a55 · guide: Lisbon is sunny in May;",
        "- memory 3f2a9c1e0b7d4a55: Porto",
    ]
