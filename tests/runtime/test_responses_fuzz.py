"""Malformed Responses API bodies, over real HTTP through the real ``openai`` client:
whatever the endpoint sends, ``OpenAIResponsesModel.complete`` answers or raises a
``ModelResponseError`` naming the field that is wrong."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import (
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelResponseError,
    OpenAIResponsesModel,
    RetryPolicy,
    UserMessage,
    YamlPath,
    format_path,
)
from runtime.models.checks import check_response as checked
from tests.support.data_paths import paths_in
from tests.support.openai_server import OpenAIServer, Raw, Reply, _response

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

GOOD = _response(
    Reply(
        content="hello",
        reasoning="think",
        reasoning_encrypted="opaque",
        tool_calls=(("call_1", "lookup", '{"q": "x"}'), ("call_2", "f", "{}")),
        cached_tokens=3,
        reasoning_tokens=2,
    ),
    "gpt-test",
    1,
)


class Client:
    """One model and one event loop for the whole module (a client costs ~0.1s)."""

    def __init__(self, server: OpenAIServer) -> None:
        self.server = server
        self.runner = asyncio.Runner()
        self.model = OpenAIResponsesModel(
            "gpt-test", base_url=server.base_url, retry=RetryPolicy(attempts=1)
        )

    def outcome(self, behaviour: Raw) -> ModelResponse | ModelError:
        self.server.enqueue(behaviour)
        return self.runner.run(self._complete())

    async def _complete(self) -> ModelResponse | ModelError:
        try:
            return await self.model.complete(ModelRequest(messages=(UserMessage(content="hi"),)))
        except ModelError as exc:
            return exc

    def close(self) -> None:
        self.runner.run(self.model.client.close())
        self.runner.close()


@pytest.fixture(scope="module")
def client(_running_openai_server: OpenAIServer) -> Iterator[Client]:
    made = Client(_running_openai_server)
    yield made
    made.close()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def mutated_responses(draw: st.DrawFn) -> tuple[dict[str, Any], YamlPath]:
    """The good response with one field deleted or replaced by a random JSON value."""
    data = copy.deepcopy(GOOD)
    path = draw(st.sampled_from(paths_in(data)))
    parent: Any = data
    for part in path[:-1]:
        parent = parent[part]
    if draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(json_values)
    return data, path


@FUZZ
@given(mutated=mutated_responses())
def test_a_mutated_response_answers_or_says_which_field_is_wrong(
    client: Client, mutated: tuple[dict[str, Any], YamlPath]
) -> None:
    data, path = mutated
    result = client.outcome(Raw(200, body=data))
    if isinstance(result, ModelResponse):
        assert checked(result, "gpt-test") is result  # what the agent loop accepts as is
        assert all(c.id and c.name for c in result.message.tool_calls)
        return
    assert isinstance(result, ModelResponseError), repr(result)
    message = str(result)
    assert message.startswith("model 'gpt-test' "), message
    if path[0] == "error":  # an error put where the body had none
        assert "answered with an error" in message
        return
    detail = message.partition("malformed response: ")[2]
    prefixes = [format_path(path[:n]) for n in range(1, len(path) + 1)]
    assert any(detail.startswith(p) for p in prefixes), (path, message)


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(json.dumps(GOOD)) - 1))
def test_a_truncated_body_is_a_retryable_model_response_error(client: Client, cut: int) -> None:
    result = client.outcome(Raw(200, content=json.dumps(GOOD).encode()[:cut]))
    assert isinstance(result, ModelResponseError), repr(result)
    assert "not JSON" in str(result)
    assert result.retryable


def test_the_good_response_is_read_whole(client: Client) -> None:
    result = client.outcome(Raw(200, body=GOOD))
    assert isinstance(result, ModelResponse)
    message = result.message
    assert (message.content, message.reasoning) == ("hello", "think")
    assert [c.id for c in message.tool_calls] == ["call_1", "call_2"]
    assert message.reasoning_items[0].encrypted_content == "opaque"
    assert (result.usage.reasoning_tokens, result.finish_reason) == (2, "tool_calls")
