"""An answer an endpoint's content filter withheld (Azure's ``finish_reason:
content_filter``, the Responses API's ``incomplete`` for ``content_filter``) fails its
worker saying so, not as a bare empty answer. Both adapters, through the real
``openai`` client over real HTTP, against the local test server."""

from __future__ import annotations

import pytest

from runtime import AnswerWithheld, EmptyResponse, OpenAIModel, RetryPolicy, ToolRegistry
from runtime.models.openai.endpoint import OpenAIEndpoint
from runtime.models.openai.responses import OpenAIResponsesModel
from runtime.tools import Dispatcher
from tests.support.openai_server import OpenAIServer, Raw, Reply, _response
from workers import AgentLoop, Failed


async def _filtered(openai_server: OpenAIServer, api: str, content: str | None) -> Failed:
    """How a worker's loop ends whose endpoint's filter stopped the answer after
    ``content`` (None: at once)."""
    if api == "chat":
        openai_server.default = Reply(content=content, finish_reason="content_filter")
        model: OpenAIEndpoint = OpenAIModel("m", base_url=openai_server.base_url)
    else:
        body = _response(Reply(content=content), "m", 1)
        body |= {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}
        openai_server.default = Raw(200, body=body)
        model = OpenAIResponsesModel("m", base_url=openai_server.base_url)
    model.retry = RetryPolicy(attempts=1)
    try:
        result = await AgentLoop(model, Dispatcher(ToolRegistry([]))).run("Write it.")
    finally:
        await model.client.close()
    assert isinstance(result, Failed)
    return result


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_filtered_answer_says_the_filter_withheld_it(
    openai_server: OpenAIServer, api: str
) -> None:
    result = await _filtered(openai_server, api, None)
    assert isinstance(result.error, EmptyResponse)
    assert result.error.finish_reason == "content_filter"
    assert "the endpoint's content filter withheld it" in str(result.error)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_answer_the_filter_stopped_part_way_is_no_answer(
    openai_server: OpenAIServer, api: str
) -> None:
    """The text that came before the filter stopped the answer was taken for the whole
    answer, and merged into the run's as if it were."""
    part = "The first half of the answer, and"
    result = await _filtered(openai_server, api, part)
    assert isinstance(result.error, AnswerWithheld)
    assert result.error.shown_chars == len(part)
    assert "content filter withheld the answer at turn 1 after 33 characters" in str(result.error)
    assert result.state.messages[-1].content == part  # kept, not taken for the answer
