"""Model output fuzzed with hypothesis through the real loop and Worker: random text
and random JSON as arguments, unknown and near-miss tool names, empty answers, many
calls in one turn, duplicated call ids. The worker always ends with a result (ok, or
failed with a HoneycombError), and every call gets exactly one observation, in order.
"""

from __future__ import annotations

import asyncio
import json

import anyio.lowlevel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import (
    AssistantMessage,
    HoneycombError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolMessage,
    Usage,
    tool,
)
from runtime.testing import FunctionModel
from workers import Role, Worker, WorkerResult

EXAMPLES = 200

sent: list[tuple[str, str]] = []  # what the side-effecting tool did, in order


@tool
async def lookup(key: str, limit: int = 3) -> str:
    """Look a key up (parallel-safe)."""
    await anyio.lowlevel.checkpoint()
    return f"{key}:{limit}"


@tool(side_effects=True)
def send(to: str, body: str = "") -> str:
    """Send a message (side-effecting: one at a time, in order)."""
    sent.append((to, body))
    return f"sent to {to}"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)

arguments = st.one_of(
    st.text(max_size=30),  # anything, mostly not JSON
    json_values.map(lambda v: json.dumps(v, allow_nan=True)),  # JSON, mostly not an object
    st.fixed_dictionaries({"key": st.text(max_size=5)}).map(json.dumps),
    st.fixed_dictionaries({"key": json_values, "limit": json_values}).map(json.dumps),
    st.fixed_dictionaries({"to": st.text(max_size=5), "body": st.text(max_size=5)}).map(json.dumps),
    st.just("{" * 500 + "}" * 500),
    st.just(""),
)

names = st.one_of(
    st.sampled_from(["lookup", "send"]),
    st.sampled_from(["Lookup", "SEND", " lookup", "send ", "look_up", "", "final_answer"]),
    st.text(max_size=12),
)

calls = st.builds(
    ToolCall,
    id=st.sampled_from(["call_1", "call_2", "", " "]) | st.text(max_size=6),  # ids repeat
    name=names,
    arguments=arguments,
)

turns = st.one_of(
    st.builds(AssistantMessage, content=st.none() | st.text(max_size=20), tool_calls=st.just(())),
    st.builds(
        AssistantMessage,
        content=st.none() | st.text(max_size=20),
        tool_calls=st.lists(calls, min_size=1, max_size=12).map(tuple),
    ),
)

responses = st.builds(
    ModelResponse,
    message=turns,
    usage=st.builds(Usage, input_tokens=st.integers(0, 100), output_tokens=st.integers(0, 100)),
    finish_reason=st.sampled_from(["stop", "tool_calls", "length", "content_filter", ""]),
    model=st.text(max_size=5),
)


def run_worker(script: list[ModelResponse], max_turns: int) -> WorkerResult:
    answers = iter(script)

    def answer(request: ModelRequest) -> ModelResponse | str:
        return next(answers, "done")

    role = Role(name="fuzzed", max_turns=max_turns, tool_timeout=5)
    worker = Worker(role, FunctionModel(answer), tools=[lookup, send])
    return asyncio.run(worker.run("do the task"))


def check_observations(result: WorkerResult) -> None:
    """Each assistant turn with calls is followed by one observation per call, in order."""
    messages = result.transcript.messages
    for index, message in enumerate(messages):
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        following = messages[index + 1 : index + 1 + len(message.tool_calls)]
        assert all(isinstance(m, ToolMessage) for m in following), following
        observed = [(m.tool_call_id, m.name) for m in following if isinstance(m, ToolMessage)]
        assert observed == [(c.id, c.name) for c in message.tool_calls]
        after = messages[index + 1 + len(message.tool_calls) :]
        assert not after or not isinstance(after[0], ToolMessage), "an extra observation"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(script=st.lists(responses, max_size=6), max_turns=st.integers(1, 5))
def test_any_model_output_ends_in_a_result_with_one_observation_per_call(
    script: list[ModelResponse], max_turns: int
) -> None:
    sent.clear()
    result = run_worker(script, max_turns)
    if result.status == "failed":
        assert isinstance(result.exception, HoneycombError), repr(result.exception)
        assert result.error is not None
    else:
        assert result.status == "ok"
        assert isinstance(result.text, str)
    check_observations(result)
    # the side-effecting tool ran exactly for its "ok" observations, in call order
    done = [
        m.tool_call_id
        for m in result.transcript.messages
        if isinstance(m, ToolMessage) and m.name == "send" and m.status == "ok"
    ]
    assert len(done) == len(sent)
    assert result.turns <= max_turns + 1  # the tool turns, then one wrap-up call


def test_a_turn_of_bad_calls_gets_an_error_observation_for_each() -> None:
    bad = (
        ToolCall(id="a", name="Lookup", arguments='{"key": "x"}'),
        ToolCall(id="a", name="lookup", arguments="[1, 2]"),
        ToolCall(id="a", name="lookup", arguments="{not json"),
        ToolCall(id="b", name="lookup", arguments='{"key": {"deep": [1]}}'),
        ToolCall(id="c", name=" send", arguments='{"to": "x"}'),
        ToolCall(id="d", name="send", arguments="null"),
        ToolCall(id="e", name="lookup", arguments='{"key": "ok"}'),
    )
    script = [ModelResponse(message=AssistantMessage(tool_calls=bad))]
    result = run_worker(script, max_turns=3)
    assert result.ok
    check_observations(result)
    observations = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert [o.status for o in observations] == ["error"] * 6 + ["ok"]
    assert "unknown tool 'Lookup'" in observations[0].content
    assert "unknown tool ' send'" in observations[4].content
    assert observations[-1].content == "ok:3"


def test_two_empty_answers_fail_with_a_honeycomb_error() -> None:
    empty = ModelResponse(message=AssistantMessage(content="  "))
    result = run_worker([empty, empty], max_turns=3)
    assert result.status == "failed"
    assert isinstance(result.exception, HoneycombError)


def test_a_repeat_is_spotted_even_when_the_previous_turn_repeated_call_ids() -> None:
    first = (
        ToolCall(id="x", name="lookup", arguments='{"key": "a"}'),
        ToolCall(id="x", name="lookup", arguments='{"key": "b"}'),
    )
    again = (ToolCall(id="y", name="lookup", arguments='{"key": "a"}'),)
    script = [ModelResponse(message=AssistantMessage(tool_calls=c)) for c in (first, again)]
    result = run_worker(script, max_turns=3)
    check_observations(result)
    statuses = [m.status for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert statuses == ["ok", "ok", "skipped"]
