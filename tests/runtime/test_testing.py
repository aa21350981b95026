"""The shipped test models: one script per conversation, and a malformed answer is the
loop's ModelResponseError, never a crash inside the model."""

from __future__ import annotations

import pytest

from runtime import (
    AssistantMessage,
    Dispatcher,
    ModelRequest,
    ModelResponseError,
    ScriptExhausted,
    ToolCall,
    ToolRegistry,
    UserMessage,
    tool,
)
from runtime.testing import FunctionModel, ScriptedModel
from workers import AgentLoop, Failed, Final


def request(conversation: str | None) -> ModelRequest:
    return ModelRequest(messages=(UserMessage(content="hi"),), conversation=conversation)


async def test_a_plain_script_is_one_copy_per_conversation() -> None:
    model = ScriptedModel(["first", "second"])
    assert (await model.complete(request("run/a"))).message.content == "first"
    assert (await model.complete(request("run/b"))).message.content == "first"
    assert (await model.complete(request("run/a"))).message.content == "second"
    with pytest.raises(ScriptExhausted) as caught:
        await model.complete(request("run/a"))
    assert caught.value.key == "run/a"
    assert (await model.complete(request("run/b"))).message.content == "second"


async def test_requests_naming_no_conversation_share_one_position() -> None:
    model = ScriptedModel(["first", "second"])
    assert (await model.complete(request(None))).message.content == "first"
    assert (await model.complete(request(None))).message.content == "second"
    assert (await model.complete(request("run/a"))).message.content == "first"


async def test_a_plain_script_serves_every_worker_of_an_executor() -> None:
    from honeycomb import Executor, Role

    model = ScriptedModel(["the answer"])
    executor = Executor([Role(name="researcher")], model, aggregator="concat")
    result = await executor.run("t", subtasks=[("researcher", "a"), ("researcher", "b")])
    assert result.status == "ok"
    assert [s.text for s in result.subtasks.values()] == ["the answer", "the answer"]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def loop(model: ScriptedModel | FunctionModel) -> AgentLoop:
    return AgentLoop(model, Dispatcher(ToolRegistry([lookup])), worker="w")


BAD_MESSAGES = [
    (AssistantMessage(content=5), "message.content is an int (5), not a string"),  # type: ignore[arg-type]
    (
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="lookup", arguments=None),)),  # type: ignore[arg-type]
        "message.tool_calls[0].arguments is missing (or null), not a string",
    ),
    (
        AssistantMessage(tool_calls=(ToolCall(id="c1", name=7, arguments="{}"),)),  # type: ignore[arg-type]
        "message.tool_calls[0].name is an int (7), not a string",
    ),
    (AssistantMessage(tool_calls="lookup"), "message.tool_calls is a str"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("message", "problem"), BAD_MESSAGES)
async def test_a_scripted_malformed_message_is_a_model_response_error(
    message: AssistantMessage, problem: str
) -> None:
    result = await loop(ScriptedModel([message], name="script")).run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, ModelResponseError)
    assert "ScriptedModel(name='script'" in str(result.error)
    assert problem in str(result.error)


@pytest.mark.parametrize(("message", "problem"), BAD_MESSAGES)
async def test_a_function_models_malformed_message_is_a_model_response_error(
    message: AssistantMessage, problem: str
) -> None:
    def answer(request: ModelRequest) -> AssistantMessage:
        return message

    result = await loop(FunctionModel(answer)).run("t")
    assert isinstance(result, Failed)
    assert isinstance(result.error, ModelResponseError)
    assert "FunctionModel('answer')" in str(result.error)
    assert problem in str(result.error)


async def test_a_function_model_is_shown_by_the_name_it_was_given() -> None:
    def answer(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content=5)  # type: ignore[arg-type]

    model = FunctionModel(answer, name="mymodel")
    assert repr(model) == "FunctionModel('mymodel')"
    result = await loop(model).run("t")
    assert isinstance(result, Failed)
    assert "model FunctionModel('mymodel') returned" in str(result.error)
    assert repr(FunctionModel(answer)) == "FunctionModel('answer')"  # unnamed: its function's


async def test_a_function_model_answering_with_a_wrong_type_is_a_model_response_error() -> None:
    result = await loop(FunctionModel(lambda request: 5)).run("t")  # type: ignore[arg-type, return-value]
    assert isinstance(result, Failed)
    assert isinstance(result.error, ModelResponseError)
    assert "returned an int (5)" in str(result.error)


async def test_a_well_formed_message_still_answers() -> None:
    model = ScriptedModel([AssistantMessage(content="fine")])
    result = await loop(model).run("t")
    assert isinstance(result, Final)
    assert result.text == "fine"
