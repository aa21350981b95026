"""Runs on a real model: SmolLM2-135M-Instruct on llama.cpp in the test process
(tests/support/llama.py), judged on what Honeycomb promises, not on the model's wit.

One planned run (streamed) is made once for the module and checked three ways: it
ends ``ok`` or ``partial`` with a plan that validated, its streamed pieces join to
its answers, and its usage is what the server counted. Outputs are short (limits in
the models' settings), the seed is fixed, the server is the session's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import pytest

from honeycomb import Executor, Policy, Role, RunResult
from honeycomb.run.events import PlanReady
from honeycomb.run.plan import plan_problems
from honeycomb.run.policy import Budgets
from runtime import Event, HoneycombError, ModelCallFinished, TextDelta
from runtime.models.llama import LlamaModel
from runtime.models.llama_server import LlamaServer
from tests.support import weather_tools
from tests.support.llama import REAL_MODEL, SentBodies, metrics, record_bodies, slots, wait_until

pytestmark = REAL_MODEL

ROLES = [
    Role(name="planner", description="Splits the task.", model="planning"),
    Role(name="poet", description="Writes one short line about a topic.", model="short"),
    Role(name="aggregator", description="Merges the lines.", model="short"),
]
TASK = "Write one line about cats and one line about dogs."


@dataclass
class Planned:
    result: RunResult
    events: list[Event]
    counted: dict[str, float]  # what the server counted during the run
    sent: SentBodies


def models(server: LlamaServer) -> dict[str, LlamaModel]:
    """The planner's model, and a model of short answers, both on ``server``. The
    planner's model sets no limit of its own: the bodies its calls send show the
    library's."""
    return {
        "planning": LlamaModel(server=server, settings={"temperature": 0.2}),
        "short": LlamaModel(server=server, settings={"max_tokens": 24, "temperature": 0.2}),
    }


@pytest.fixture(scope="module")
def planned(llama_server: LlamaServer, sent_to_models: SentBodies) -> Planned:
    executor = Executor(
        ROLES,
        models(llama_server),
        policy=Policy(max_subtasks=3, budgets=Budgets(wall_time_s=120)),
    )
    events: list[Event] = []
    sent = SentBodies()
    before = metrics(llama_server)
    with record_bodies(sent), record_bodies(sent_to_models):
        result = asyncio.run(executor.run(TASK, on_event=[events.append], text_deltas=True))
    after = metrics(llama_server)
    counted = {key: after[key] - before.get(key, 0.0) for key in after}
    return Planned(result, events, counted, sent)


def test_a_planned_run_ends_ok_or_partial_with_a_plan_that_validated(planned: Planned) -> None:
    result = planned.result
    assert result.status in ("ok", "partial"), result
    ready = [e for e in planned.events if isinstance(e, PlanReady)]
    assert len(ready) == 1
    assert ready[0].plan == result.plan
    assert plan_problems(result.plan, ["poet", "aggregator"], max_subtasks=3) == []
    assert set(result.subtasks) == {s.id for s in result.plan.subtasks}


def test_streamed_pieces_join_to_each_answer(planned: Planned) -> None:
    texts: dict[tuple[str | None, int], str] = defaultdict(str)
    pieces = 0
    for event in planned.events:
        if isinstance(event, TextDelta):
            texts[event.worker, event.turn] += event.text
            pieces += 1
    result = planned.result
    assert texts["aggregator", 1] == result.answer_text != ""
    for subtask_id, outcome in result.subtasks.items():
        if outcome.ok:
            assert texts[subtask_id, 1] == outcome.output
    assert pieces > len(texts)  # streamed in pieces, not whole


def test_usage_is_what_the_server_counted(planned: Planned) -> None:
    usage, counted = planned.result.usage, planned.counted
    assert usage.model_calls == len(planned.sent.bodies)
    assert usage.output_tokens == counted["tokens_predicted_total"] > 0
    processed = counted["prompt_tokens_total"] + counted["prompt_tokens_cached_total"]
    assert usage.input_tokens == processed > 0
    assert usage.cached_input_tokens == counted["prompt_tokens_cached_total"]
    finished = [e for e in planned.events if isinstance(e, ModelCallFinished)]
    assert sum(e.output_tokens for e in finished) == usage.output_tokens


async def test_cancelling_a_run_mid_answer_stops_the_servers_generation(
    llama_server: LlamaServer,
) -> None:
    # A one-shot call (no deltas asked for) that would write 400 tokens (it may not
    # stop before), cancelled after its first few: llama.cpp keeps writing an answer
    # nobody reads unless the call was a stream whose reader went away.
    model = LlamaModel(server=llama_server, settings={"max_tokens": 400, "ignore_eos": True})
    executor = Executor([Role(name="storyteller", description="Tells long stories.")], model)
    before = metrics(llama_server)["tokens_predicted_total"]

    def writing() -> bool:
        decoded = [s["next_token"][0]["n_decoded"] for s in slots(llama_server)
                   if s["is_processing"]]  # fmt: skip
        return any(n >= 3 for n in decoded)

    def idle() -> bool:
        return not any(s["is_processing"] for s in slots(llama_server))

    run = asyncio.ensure_future(
        executor.run("Tell a long story about a dragon.", subtasks=[("storyteller", "Go.")])
    )
    try:
        await anyio.to_thread.run_sync(
            lambda: wait_until(writing, timeout_s=60, what="the answer being written")
        )
    finally:
        run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await anyio.to_thread.run_sync(
        lambda: wait_until(idle, timeout_s=10, what="the server stopping its generation")
    )
    written = metrics(llama_server)["tokens_predicted_total"] - before
    assert 3 <= written < 400


async def weather_run(folder: Path, server: LlamaServer, protocol: str) -> RunResult:
    """A run of one meteorologist on the real model, given tools by ``protocol``."""
    hive = folder / "hive.yaml"
    hive.write_text(f"""
models:
  local:
    model: smollm2
    base_url: {server.base_url}
    api_key: {server.api_key}
    tool_protocol: {protocol}
    settings: {{max_tokens: 64, temperature: 0.2}}
roles:
  meteorologist:
    description: Reports the weather.
    instructions: Look up the weather for the city with get_weather, then answer.
    tools: [tests.support.weather_tools:get_weather]
    max_turns: 2
""")
    executor = Executor.from_yaml(hive, store=None)
    return await executor.run(
        "The weather in Oslo", subtasks=[("meteorologist", "What is the weather in Oslo?")]
    )


# The JSON protocol meets the real model in the demo too (test_real_model_demo.py,
# --model local's own), all three here, each on one worker: a demo costs a minute.
async def test_tool_calls_through_the_json_protocol_reach_the_tool_with_valid_arguments(
    llama_server: LlamaServer, tmp_path: Path, weather_calls: list[dict[str, object]]
) -> None:
    result = await weather_run(tmp_path, llama_server, "json")
    assert result.status == "ok", result
    assert weather_calls, "the tool was never called"
    assert all(isinstance(c["city"], str) and c["city"] for c in weather_calls)


@pytest.mark.parametrize("protocol", ["text", "native"])
async def test_a_run_through_a_protocol_the_model_seldom_follows_ends_in_an_answer(
    llama_server: LlamaServer,
    tmp_path: Path,
    weather_calls: list[dict[str, object]],
    protocol: str,
) -> None:
    # A model this small seldom writes an action (it answers at once, or names a tool
    # that is not there), and natively it answers prose: whatever it writes is read
    # into an answer, and whatever reaches the tool is valid.
    result = await weather_run(tmp_path, llama_server, protocol)
    assert result.status == "ok", result
    assert result.subtasks["s1"].text.strip()
    assert all(isinstance(c["city"], str) and c["city"] for c in weather_calls)


@pytest.mark.after_real_model
async def test_no_model_call_goes_out_without_an_output_limit(
    llama_server: LlamaServer, sent_to_models: SentBodies
) -> None:
    # A run of its own whose models set no limit: the library's must be there. Then
    # every body the real-model tests of this process sent: it runs after them.
    model = LlamaModel(server=llama_server, settings={"temperature": 0.2})
    executor = Executor(
        [*(r.model_copy(update={"model": None}) for r in ROLES)],
        model,
        policy=Policy(max_subtasks=2, budgets=Budgets(wall_time_s=40)),
    )
    own = SentBodies()
    with record_bodies(own), contextlib.suppress(HoneycombError):  # how it ends is not judged
        await executor.run(TASK)
    assert own.bodies
    assert own.without_limit() == []
    assert sent_to_models.without_limit() == []


@pytest.fixture
def weather_calls() -> Iterator[list[dict[str, object]]]:
    weather_tools.CALLS.clear()
    yield weather_tools.CALLS
    weather_tools.CALLS.clear()
