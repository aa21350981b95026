"""``TextToolModel``: what the inner model is sent (no tools; the catalogue, the action
format and the conversation as text), and what its replies become (tool calls the
loop runs with the semantics of function calling), on the scripted and function
models."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from runtime import (
    AssistantMessage,
    Dispatcher,
    MaxTurnsExceeded,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    SystemMessage,
    TextToolModel,
    Tool,
    ToolCall,
    ToolMessage,
    ToolRegistry,
    ToolSchema,
    UserMessage,
    WrapperModel,
    tool,
)
from runtime.limits.retry import RetryingModel, limiter_of
from runtime.models.protocols.actions import read_reply
from runtime.models.protocols.text_wire import TOOLS_HEADING, native_request
from runtime.testing import FunctionModel, ScriptedModel
from tests.support.concurrency import Overlap, Rendezvous
from tests.support.cpu_time import LINEAR_BOUND, cpu_growth
from workers import AgentLoop, Failed, Final, LoopSettings

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CALL = ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}')


def block(name: str, **arguments: Any) -> str:
    return f"```json\n{json.dumps({'tool': name, 'arguments': arguments})}\n```"


def answered(text: str) -> FunctionModel:
    return FunctionModel(lambda request: text, name="tool-less")


async def sent(request: ModelRequest, reply: str = "done") -> ModelRequest:
    """What the inner model receives for ``request``."""
    inner = answered(reply)
    await TextToolModel(inner).complete(request)
    return inner.requests[0]


# --- the way in -------------------------------------------------------------------------


async def test_the_inner_request_has_no_tools_and_the_catalogue_in_its_instructions() -> None:
    request = ModelRequest(
        messages=(SystemMessage(content="Be brief."), UserMessage(content="Weather in Paris?")),
        tools=(WEATHER,),
        tool_choice="required",
        parallel_tool_calls=False,
        timeout=3.0,
        conversation="run/w1",
    )
    inner = await sent(request)
    assert (inner.tools, inner.tool_choice, inner.output) == ((), "auto", None)
    assert (inner.timeout, inner.conversation) == (3.0, "run/w1")
    system = inner.messages[0]
    assert isinstance(system, SystemMessage)
    assert system.content.startswith(f"Be brief.\n\n{TOOLS_HEADING}\n")
    listed = json.loads(next(line for line in system.content.splitlines() if "get_weather" in line))
    assert listed == {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": WEATHER.parameters,
    }
    assert '{"tool": "<tool name>", "arguments": ' in system.content
    assert "Write one action per reply" in system.content
    assert "at least one" not in system.content
    rule = UserMessage(content="Weather in Paris?\n\nUse at least one tool in this reply.")
    assert inner.messages[1:] == (rule,)  # what this turn may do: after the conversation


async def test_a_request_without_a_system_message_gets_one_with_the_catalogue() -> None:
    inner = await sent(ModelRequest(messages=(UserMessage(content="hi"),), tools=(WEATHER,)))
    assert isinstance(inner.messages[0], SystemMessage)
    assert inner.messages[0].content.startswith(TOOLS_HEADING)
    assert inner.messages[1] == UserMessage(content="hi")


async def test_earlier_calls_become_action_blocks_and_a_turns_observations_one_message() -> None:
    second = ToolCall(id="call_b", name="get_weather", arguments="not json")
    request = ModelRequest(
        messages=(
            SystemMessage(content="s"),
            UserMessage(content="Weather in Paris and Rome?"),
            AssistantMessage(content="Looking.", tool_calls=(CALL, second), reasoning="hm"),
            ToolMessage(tool_call_id="call_a", name="get_weather", content="sunny"),
            ToolMessage(tool_call_id="call_b", name="get_weather", status="error", content="bad"),
            UserMessage(content="Go on."),
        ),
        tools=(WEATHER,),
    )
    inner = await sent(request)
    assert [m.role for m in inner.messages] == ["system", "user", "assistant", "user", "user"]
    assistant = inner.messages[2]
    assert assistant == AssistantMessage(
        content=f"Looking.\n\n{block('get_weather', city='Paris')}\n\n```json\nnot json\n```",
        reasoning="hm",
    )
    assert inner.messages[3] == UserMessage(
        content="Observation for call_a (get_weather): sunny\n\n"
        "Observation for call_b (get_weather, error): bad"
    )
    assert inner.messages[4] == UserMessage(content="Go on.")


async def test_a_tool_less_call_of_a_tool_less_conversation_goes_through_as_it_is() -> None:
    schema = OutputSchema(name="Plan", json_schema={"type": "object"})
    request = ModelRequest(messages=(UserMessage(content="plan"),), output=schema)
    inner = answered('{"tool": "x"}')  # an answer, not an action: no tool was ever offered
    response = await TextToolModel(inner).complete(request)
    assert inner.requests[0] == request
    assert response.message == AssistantMessage(content='{"tool": "x"}')


class Verdict(BaseModel):
    city: str
    warm: bool


async def test_with_tools_offered_the_output_schema_is_asked_for_in_the_instructions() -> None:
    schema = OutputSchema.for_model(Verdict)
    request = ModelRequest(messages=(UserMessage(content="hi"),), tools=(WEATHER,), output=schema)
    inner = await sent(request)
    assert inner.output is None  # a response format would forbid the actions
    system = inner.messages[0]
    assert isinstance(system, SystemMessage)
    assert "Your final answer is a reply without any action." in system.content
    assert json.dumps(schema.json_schema, separators=(",", ":")) in system.content


@pytest.mark.parametrize(
    ("choice", "rule"),
    [
        ("none", "Use no tool in this reply: give your final answer."),
        ("required", "Use at least one tool in this reply."),
        ("get_weather", "Use the tool get_weather in this reply."),
    ],
)
async def test_tool_choice_is_said_after_the_conversation_and_the_instructions_stay(
    choice: str, rule: str
) -> None:
    """The instructions are the same whatever the turn may do, so each request starts
    with the one before it (a prompt cache keeps the prefix; the wrap-up asks with
    ``none``): the narrowing is the last line of the last message, and it reads back."""
    ask = (SystemMessage(content="Be brief."), UserMessage(content="hi"))
    auto = await sent(ModelRequest(messages=ask, tools=(WEATHER,)))
    narrowed = ModelRequest(messages=ask, tools=(WEATHER,), tool_choice=choice)
    inner = await sent(narrowed)
    assert inner.messages[0] == auto.messages[0]
    assert inner.messages[1:] == (UserMessage(content=f"hi\n\n{rule}"),)
    assert native_request(inner) == narrowed


async def test_a_wrap_up_with_an_output_schema_asks_for_it_as_the_response_format() -> None:
    """With no tool allowed, nothing forbids a response format: the answer is held to
    the schema by the server as well as by the words of the instructions."""
    output = OutputSchema(name="Weather", json_schema={"type": "object"})
    ask = (UserMessage(content="hi"),)
    inner = await sent(
        ModelRequest(messages=ask, tools=(WEATHER,), tool_choice="none", output=output)
    )
    assert inner.output == output
    auto = await sent(ModelRequest(messages=ask, tools=(WEATHER,), output=output))
    assert auto.output is None
    assert inner.messages[0] == auto.messages[0]


# --- the way out ------------------------------------------------------------------------


async def test_actions_become_calls_with_ids_no_earlier_call_has() -> None:
    reply = (
        f"Both at once.\n{block('get_weather', city='Rome')}\n{block('get_weather', city='Oslo')}"
    )
    request = ModelRequest(
        messages=(
            UserMessage(content="hi"),
            AssistantMessage(tool_calls=(ToolCall(id="call_2", name="get_weather"),)),
            ToolMessage(tool_call_id="call_2", name="get_weather", content="x"),
        ),
        tools=(WEATHER,),
    )
    response = await TextToolModel(answered(reply)).complete(request)
    message = response.message
    assert message.content == "Both at once."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("call_3", "get_weather", {"city": "Rome"}),
        ("call_4", "get_weather", {"city": "Oslo"}),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.model == "tool-less"


async def test_a_reply_without_an_action_is_the_final_answer_as_it_came() -> None:
    inner = ScriptedModel(["It is sunny in Paris."])
    request = ModelRequest(messages=(UserMessage(content="hi"),), tools=(WEATHER,))
    response = await TextToolModel(inner).complete(request)
    assert response.message == AssistantMessage(content="It is sunny in Paris.")
    assert response.finish_reason == "stop"


async def test_a_leading_think_block_is_reasoning_not_actions() -> None:
    reply = f"<think>maybe {block('get_weather', city='X')}</think>\n\nSunny."
    request = ModelRequest(messages=(UserMessage(content="hi"),), tools=(WEATHER,))
    message = (await TextToolModel(answered(reply)).complete(request)).message
    assert (message.content, message.tool_calls) == ("Sunny.", ())
    assert message.reasoning is not None
    assert "get_weather" in message.reasoning


async def test_a_malformed_inner_answer_is_a_model_response_error() -> None:
    from runtime import ModelResponseError

    inner = FunctionModel(lambda r: ModelResponse(message=AssistantMessage(content=5)))  # type: ignore[arg-type]
    with pytest.raises(ModelResponseError, match="content is an int"):
        await TextToolModel(inner).complete(ModelRequest(messages=(), tools=(WEATHER,)))


def test_it_is_a_wrapper_retries_and_limits_see_through() -> None:
    inner = ScriptedModel([])
    wrapped = RetryingModel(TextToolModel(inner))
    assert isinstance(wrapped.inner, WrapperModel)
    assert wrapped.inner.inner is inner
    assert limiter_of(wrapped) is None
    assert repr(TextToolModel(inner)).startswith("TextToolModel(ScriptedModel(")


# --- the reader: lenient where models are sloppy, strict where it matters ----------------

READ_ALIKE = [
    pytest.param('```json\n{"tool": "fetch", "arguments": {"key": "a"}}\n```', id="fence"),
    pytest.param(
        '```\n{"tool": "fetch", "arguments": {"key": "a"}}\n```\nI will wait.',
        id="bare-fence-prose-after",
    ),
    pytest.param(
        'Let me look. {"tool": "fetch", "arguments": {"key": "a"}} Then I answer.', id="no-fence"
    ),
    pytest.param("```json\n{'tool': 'fetch', 'arguments': {'key': 'a'}}\n```", id="single-quotes"),
    pytest.param(
        '```json\n{tool: "fetch", arguments: {key: "a",},}\n```', id="bare-keys-trailing-commas"
    ),
    pytest.param('`{"name": "fetch", "parameters": {"key": "a"}}`', id="inline-name-parameters"),
    pytest.param(
        'A stray { brace, then {"arguments": {"key": "a"}, "tool": "fetch"}',
        id="after-a-stray-brace",
    ),
    pytest.param(
        '{ (see {"actions": [{"tool": "fetch", "arguments": {"key": "a"}}]}', id="wrapped"
    ),
    pytest.param(
        '{"function": {"name": "fetch", "arguments": "{\\"key\\": \\"a\\"}"}}', id="openai-shape"
    ),
    # A small model's shape: its arguments were dropped, and the tool told it that the
    # key it had given was missing.
    pytest.param('```json\n{"tool": "fetch", "key": "a"}\n```', id="arguments-beside-the-tool"),
]


@pytest.mark.parametrize("text", READ_ALIKE)
def test_sloppy_actions_read_as_the_well_written_one(text: str) -> None:
    (action,) = read_reply(text).actions
    assert (action.name, json.loads(action.arguments)) == ("fetch", {"key": "a"})


def test_the_classic_react_format_is_read_too() -> None:
    text = (
        "Thought: I need both forecasts.\n"
        'Action: fetch\nAction Input: {"key": "a"}\n'
        "action: `record`\naction input: {'note': 'n1'}\n"
        "Action: fetch\nAction Input: not json\n"
        "Observation: a made-up answer\nAction: fetch\nAction Input: {}"
    )
    reply = read_reply(text)
    assert [(a.name, a.arguments) for a in reply.actions] == [
        ("fetch", '{"key": "a"}'),
        ("record", '{"note": "n1"}'),
        ("fetch", "not json"),
    ]
    assert reply.content == "Thought: I need both forecasts."


def test_json_actions_win_over_react_lines_and_prose_mentioning_actions_is_not_one() -> None:
    text = f"Action: fetch\nAction Input: {{}}\n{block('record', note='n1')}"
    assert [a.name for a in read_reply(text).actions] == ["record"]
    prose = "The Action: column lists what was done.\nAction Input: is the next one."
    assert read_reply(prose).actions == ()


def test_a_python_literal_with_escapes_python_writes_reads_as_the_string_it_means() -> None:
    # repr() writes control characters as \x.. escapes, which JSON does not have
    text = (
        "```json\n" + repr({"tool": "fetch", "arguments": {"key": "a\x1fb", "q": "it's"}}) + "\n```"
    )
    (action,) = read_reply(text).actions
    assert json.loads(action.arguments) == {"key": "a\x1fb", "q": "it's"}


def test_a_fence_inside_an_arguments_string_does_not_close_the_actions_fence() -> None:
    body = "Use:\n```python\nprint(1)\n```\nDone."
    text = f"Sending.\n{block('record', note=body)}\nThat is all."
    reply = read_reply(text)
    assert [(a.name, json.loads(a.arguments)) for a in reply.actions] == [
        ("record", {"note": body})
    ]
    assert reply.content == "Sending.\n\nThat is all."


@pytest.mark.parametrize(
    "nested", ["[" * 3000 + "]" * 3000, '{"a": ' * 3000 + "1" + "}" * 3000], ids=["list", "dict"]
)
def test_json_nested_past_the_recursion_limit_is_prose_not_an_error(nested: str) -> None:
    for text in (nested, f"```json\n{nested}\n```", f"{nested}\n{block('fetch', key='a')}"):
        reply = read_reply(text)
        assert [a.name for a in reply.actions] == (["fetch"] if "fetch" in text else [])


@pytest.mark.parametrize("unit", ["{", "{ a ", "don't {", '{"a": ', '{"arguments": '], ids=repr)
def test_reading_degenerate_output_takes_time_in_proportion_to_its_length(unit: str) -> None:
    """A model stuck repeating a bracket: reading 16 times the text takes about 16
    times the processor time (linear), far from the 256 times of a bracket-by-bracket
    rescan (see cpu_growth)."""

    def reading(repeats: int) -> Callable[[], object]:
        text = unit * repeats + "1" + "}" * repeats * unit.count(":") + block("fetch", key="a")
        assert [a.name for a in read_reply(text).actions] == ["fetch"]
        return lambda: read_reply(text)

    assert cpu_growth(reading, 1000) < LINEAR_BOUND


def test_unknown_tools_and_blocks_that_are_not_json_stay_actions() -> None:
    text = (
        '```json\n{"tool": "teleport", "arguments": {}}\n```\n'
        '```json\n{"tool": "fetch", "arguments": {"key": "a" "b"}}\n```'
    )
    unknown, broken = read_reply(text).actions
    assert (unknown.name, unknown.arguments) == ("teleport", "{}")
    assert broken.name == "fetch"
    with pytest.raises(json.JSONDecodeError, match="Expecting"):
        json.loads(broken.arguments)


# --- in the loop: the semantics of function calling hold ---------------------------------


@tool
async def fetch(key: str) -> str:
    """Fetch a key (parallel-safe)."""
    return f"value-of-{key}"


@tool(side_effects=True)
async def record(note: str) -> str:
    """Record a note (side effects: one at a time, in order)."""
    return f"recorded {note}"


def loop_on(model: Any, *tools: Tool[Any, Any], **settings: Any) -> AgentLoop:
    return AgentLoop(
        TextToolModel(model),
        Dispatcher(ToolRegistry(tools or (fetch, record))),
        instructions="You are a test worker.",
        settings=LoopSettings(**settings),
        worker="w1",
    )


async def test_parallel_actions_overlap_and_side_effects_run_one_at_a_time_in_order() -> None:
    fetching, meet = Overlap(), Rendezvous(2)  # one after the other, they never meet
    recording = Overlap()
    notes: list[str] = []

    @tool(name="fetch")
    async def meeting_fetch(key: str) -> str:
        """Fetch a key (parallel-safe)."""
        async with fetching:
            await meet.meet()
        return f"value-of-{key}"

    @tool(name="record", side_effects=True)
    async def counted_record(note: str) -> str:
        """Record a note (side effects: one at a time, in order)."""
        async with recording:
            notes.append(note)
            await anyio.sleep(0.01)  # a note beside it would start meanwhile
        return f"recorded {note}"

    reply = "\n".join(
        [
            block("record", note="n1"),
            block("fetch", key="a"),
            block("fetch", key="b"),
            block("record", note="n2"),
        ]
    )
    model = ScriptedModel([reply, "all done"])
    result = await loop_on(model, meeting_fetch, counted_record).run("do it all")
    assert isinstance(result, Final), result
    assert result.output == "all done"
    assert fetching.peak == 2  # the two fetches were in at once
    # the side-effecting notes: one at a time, in the order written
    assert recording.peak == 1
    assert notes == ["n1", "n2"]
    observations = model.requests[1].messages[-1]
    assert isinstance(observations, UserMessage)
    lines = observations.content.split("\n\n")
    assert [line.split(": ", 1)[1] for line in lines] == [
        "recorded n1",
        "value-of-a",
        "value-of-b",
        "recorded n2",
    ]


async def test_unknown_tools_bad_arguments_and_bad_json_are_error_observations_in_order() -> None:
    reply = "\n".join(
        [
            block("teleport", to="Mars"),
            '```json\n{"tool": "fetch", "arguments": ["a"]}\n```',
            '```json\n{"tool": "fetch", "arguments": {"key": "a"\n```',
            block("fetch", key="ok"),
        ]
    )
    model = ScriptedModel([reply, "done"])
    result = await loop_on(model).run("t")
    assert isinstance(result, Final)
    observations = [m for m in result.state.messages if isinstance(m, ToolMessage)]
    assert [(o.name, o.status) for o in observations] == [
        ("teleport", "error"),
        ("fetch", "error"),
        ("fetch", "error"),
        ("fetch", "ok"),
    ]
    assert "unknown tool 'teleport'" in observations[0].content
    assert "failed validation" in observations[1].content
    assert "not valid JSON" in observations[2].content
    assert observations[3].content == "value-of-ok"


async def test_arguments_nested_too_deeply_are_an_error_observation_the_next_turn_reads() -> None:
    deep = '{"tool": "fetch", "arguments": ' + "[" * 3000 + "]" * 3000 + "}"
    model = ScriptedModel([deep, "gave up"])
    result = await loop_on(model).run("t")
    assert isinstance(result, Final), result
    (observation,) = [m for m in result.state.messages if isinstance(m, ToolMessage)]
    assert (observation.name, observation.status) == ("fetch", "error")
    assert "not valid JSON" in observation.content
    assert "Observation for call_1 (fetch, error)" in model.requests[1].messages[-1].content  # type: ignore[union-attr]


async def test_structured_output_with_tools_validates_the_final_answer() -> None:
    model = ScriptedModel(
        [block("fetch", key="paris"), '```json\n{"city": "Paris", "warm": true}\n```']
    )
    result = await loop_on(model, output_type=Verdict).run("Is Paris warm?")
    assert isinstance(result, Final), result
    assert result.output == Verdict(city="Paris", warm=True)


class Pick(BaseModel):
    tool: str
    why: str


async def test_a_wrap_up_answer_in_the_response_format_is_the_answer_not_a_call() -> None:
    """The wrap-up's answer, held to the output schema by the server, has a ``tool``
    field: it was read as an action (a call to ``hammer``), which the wrap-up drops,
    and the worker failed with MaxTurnsExceeded (SmolLM2 did so on llama.cpp)."""
    model = ScriptedModel([block("fetch", key="a"), '{"tool": "hammer", "why": "nails"}'])
    result = await loop_on(model, max_turns=1, output_type=Pick).run("Which tool drives nails?")
    assert isinstance(result, Final), result
    assert result.output == Pick(tool="hammer", why="nails")
    assert model.requests[1].output is not None  # the response format was sent


async def test_the_prose_of_a_wrap_up_that_still_writes_an_action_is_streamed() -> None:
    """A wrap-up answer of prose and an action: the action is dropped and the prose is
    the answer, whose text never reached a listener (only a reply without actions
    was shown), so a streamed run's deltas did not join to its answer."""
    from honeycomb import Executor, Role
    from runtime import TextDelta

    prose = "Paris is warm."
    model = ScriptedModel([block("fetch", key="a"), f"{prose}\n{block('fetch', key='b')}"])
    executor = Executor(
        [Role(name="w", tools=("fetch",), max_turns=1)],
        TextToolModel(model),
        tools=[fetch],
        aggregator="concat",
    )
    async with executor.stream("t", subtasks=[("w", "Is Paris warm?")]) as events:
        shown = [(e.turn, e.text) async for e in events if isinstance(e, TextDelta)]
    assert events.result.subtasks["s1"].text == prose
    assert shown == [(2, prose)]


async def test_the_wrap_up_call_reads_the_conversation_as_text_and_refuses_actions() -> None:
    model = ScriptedModel([block("fetch", key="a"), block("fetch", key="b")])
    result = await loop_on(model, max_turns=1).run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, MaxTurnsExceeded)
    wrap_up = model.requests[1]
    assert wrap_up.tools == ()
    assert not any(isinstance(m, ToolMessage) for m in wrap_up.messages)
    assert "Observation for call_1 (fetch): value-of-a" in wrap_up.messages[3].content  # type: ignore[union-attr]


async def test_the_fence_of_an_action_cut_off_as_it_opened_is_not_shown_as_prose() -> None:
    """SmolLM2 wrote an action, then its output limit cut the next one off right after
    its opening fence: the live view showed 'Checking.' and a stray fence, which the
    turn's text kept."""
    from honeycomb import Executor, Role
    from runtime import TextDelta

    cut = ModelResponse(
        message=AssistantMessage(content=f"Checking.\n\n{block('fetch', key='a')}\n```json"),
        finish_reason="length",
    )
    model = FunctionModel(lambda request: cut if len(request.messages) == 2 else "a is known.")
    executor = Executor(
        [Role(name="w", tools=("fetch",))], TextToolModel(model), tools=[fetch], aggregator="concat"
    )
    async with executor.stream("t", subtasks=[("w", "What is a?")]) as events:
        shown = [e.text async for e in events if isinstance(e, TextDelta)]
    assert shown == ["Checking.", "a is known."]
    turn = events.result.subtasks["s1"].worker.transcript.messages[2]  # type: ignore[union-attr]
    assert isinstance(turn, AssistantMessage)
    assert (turn.content, [c.name for c in turn.tool_calls]) == ("Checking.", ["fetch"])
    assert read_reply("Code:\n```python\nprint(1)\n```\n" + block("fetch")).content == (
        "Code:\n```python\nprint(1)\n```"  # a closed fence is prose
    )
