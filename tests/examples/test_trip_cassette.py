"""The trip example's cassette, recorded on the real local model (SmolLM2-135M on
llama.cpp, ``--model local --tool-protocol json``: tests/support/trip_cassette.py
records it again), replays with no model and no network: every recorded call is
asked for, in a run that ends as the recorded one did."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor
from honeycomb.events import ModelCallFinished
from honeycomb.hive import load_hive
from honeycomb.models import Cassette, cassette
from runtime import Event
from tests.support.trip_cassette import CASSETTE, HIVE


async def test_the_trip_recorded_on_the_local_model_replays_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the outbox the courier writes to (<cwd> when recorded)
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    hive = load_hive(HIVE)
    recorded = Cassette(CASSETTE)
    # By name, as --replay does: none of the hive's models is built (no llama.cpp here).
    models = cassette(hive.spec.models, replay=CASSETTE)
    events: list[Event] = []
    executor = Executor.from_hive(hive, models=models, store=None)
    result = await executor.run(hive.spec.example_task or "", on_event=[events.append])

    assert result.status == "ok"
    calls = [e for e in events if isinstance(e, ModelCallFinished)]
    assert [c.error for c in calls if c.error] == []
    assert len(calls) == len(recorded.calls) == result.usage.model_calls
    answered = {call.response.message.content for call in recorded.calls}
    assert result.answer_text in answered  # the aggregator's, as recorded
    assert result.usage.output_tokens == sum(
        call.response.usage.output_tokens for call in recorded.calls
    )
