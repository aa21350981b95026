"""A run on the real model (SmolLM2-135M on llama.cpp in the test process: a worker
calling tools under the JSON protocol, one writing on the native protocol, which
streams), recorded, replays from its cassette with the same answers, the same
streamed text and the same usage, and sends no request."""

from __future__ import annotations

from pathlib import Path

from honeycomb import Executor, Policy, Role, RunResult, Subtask, tool
from honeycomb.events import TextDelta
from honeycomb.models import JsonToolModel, LlamaModel, LlamaServer, Model, cassette
from runtime import Event
from tests.support.llama import REAL_MODEL, SentBodies, record_bodies

pytestmark = REAL_MODEL


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


ROLES = [
    Role(
        name="reader",
        description="Says the weather in a city.",
        tools=["lookup"],
        model="tools",
        max_turns=2,
        max_output_tokens=32,
    ),
    Role(name="writer", description="Writes one line.", model="plain", max_output_tokens=24),
]
PLAN = [
    Subtask(id="s1", role="reader", instruction="The weather in Lisbon?"),
    Subtask(id="s2", role="writer", instruction="Write one line about cats."),
]


async def run(models: dict[str, Model]) -> tuple[RunResult, dict[str, list[str]]]:
    """The run's result, and the pieces of text each worker streamed, in order."""
    streamed: dict[str, list[str]] = {}

    def shown(event: Event) -> None:
        if isinstance(event, TextDelta):
            streamed.setdefault(str(event.worker), []).append(event.text)

    executor = Executor(
        ROLES, models, tools=[lookup], aggregator="concat", policy=Policy(max_workers=2)
    )
    result = await executor.run("weather", subtasks=PLAN, on_event=[shown], text_deltas=True)
    return result, streamed


async def test_a_streamed_run_on_the_real_model_replays_alike(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    plain = LlamaModel(server=llama_server, settings={"temperature": 0.2})
    models: dict[str, Model] = {"tools": JsonToolModel(plain), "plain": plain}
    tape = tmp_path / "real.cassette.jsonl"
    recorded, recorded_text = await run(cassette(models, record=tape))
    sent = SentBodies()
    with record_bodies(sent):
        replayed, replayed_text = await run(cassette(models, replay=tape))

    assert sent.bodies == []
    assert replayed.status == recorded.status
    assert replayed.answer_text == recorded.answer_text
    assert replayed_text == recorded_text
    assert len(recorded_text["s2"]) > 1  # the writer's answer, piece by piece
    assert replayed.usage == recorded.usage
    assert recorded.usage.model_calls >= 2
    # The reader called its tool (else no call of a tool was recorded nor replayed).
    assert recorded.usage.tool_calls >= 1
    assert replayed.usage.tool_calls == recorded.usage.tool_calls
