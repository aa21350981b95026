"""What ``OpenAIEmbeddings`` makes of an endpoint's answers, as a chat call does: an
answer that is not JSON is retried, a malformed one is a ``ModelResponseError`` naming
the field, an error in a 200's body is the HTTP error it stands for, and a key the
endpoint echoes is masked. Through the real ``openai`` client, over real HTTP,
against the local test server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from runtime import (
    ConfigError,
    ModelHTTPError,
    ModelResponseError,
    OpenAIEmbeddings,
    RetryPolicy,
)
from tests.support.openai_server import OpenAIServer, Raw, RecordedRequest, embedding

FAST = RetryPolicy(attempts=2, initial_wait_s=0, jitter_s=0)
KEY = "sk-embeddings-key-0123456789"

Make = Callable[..., OpenAIEmbeddings]


@pytest.fixture
async def make(openai_server: OpenAIServer) -> AsyncIterator[Make]:
    made: list[OpenAIEmbeddings] = []

    def embeddings(retry: RetryPolicy = FAST) -> OpenAIEmbeddings:
        made.append(
            OpenAIEmbeddings(
                "embed-small", base_url=openai_server.base_url, api_key=KEY, retry=retry
            )
        )
        return made[-1]

    yield embeddings
    for each in made:
        await each.endpoint.client.close()


@pytest.mark.parametrize(
    "answer",
    [
        Raw(200, content=b"<html>502 Bad Gateway</html>", media_type="text/html"),
        Raw(200, content=b'{"object": "list", "data": [{"embedd', media_type="application/json"),
        Raw(200, body={"error": {"type": "server_error", "message": "try again"}}),
    ],
    ids=["html", "cut-off", "error-in-200"],
)
async def test_an_answer_worth_a_retry_is_retried(
    openai_server: OpenAIServer, make: Make, answer: Raw
) -> None:
    openai_server.enqueue(answer)
    vectors = await make().embed(["a car"])
    assert vectors == [pytest.approx(embedding("a car"))]
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"object": "list"}, "data is null, not a list"),
        ({"detail": "Model is loading"}, "not a list, in {'detail': 'Model is loading'}"),
        ({"data": [{"index": 0, "embedding": ["x"]}]}, "data[0].embedding is a list"),
        ({"data": ["x"]}, "data[0] is not an embedding with an index"),
        ({"data": []}, "answered 0 vectors of sizes [] for 1 texts"),
    ],
)
async def test_a_malformed_answer_names_what_is_wrong(
    openai_server: OpenAIServer, make: Make, body: object, named: str
) -> None:
    openai_server.default = Raw(200, body=body)
    with pytest.raises(ModelResponseError) as caught:
        await make().embed(["a car"])
    assert named in str(caught.value)
    assert "embed-small" in str(caught.value)


async def test_vectors_sent_as_numbers_are_read_in_the_order_of_their_index(
    openai_server: OpenAIServer, make: Make
) -> None:
    """A server that ignores the client's ``encoding_format: base64`` sends numbers."""
    data = [{"index": 1, "embedding": [0, 1.5]}, {"index": 0, "embedding": [2.5, 0]}]
    openai_server.default = Raw(200, body={"object": "list", "data": data})
    assert await make().embed(["a", "b"]) == [[2.5, 0.0], [0.0, 1.5]]


async def test_a_key_the_endpoint_echoes_in_its_error_is_masked(
    openai_server: OpenAIServer, make: Make
) -> None:
    def echo(request: RecordedRequest) -> Raw:
        return Raw(401, f"bad credentials: {request.headers['authorization']}")

    openai_server.default = echo
    with pytest.raises(ModelHTTPError) as caught:
        await make().embed(["a car"])
    assert "Bearer [api key hidden]" in str(caught.value)
    assert KEY not in repr(caught.value.body)
    assert caught.value.__cause__ is None  # the SDK's error, which holds the key, is dropped


@pytest.mark.parametrize(
    ("given", "told"),
    [
        (
            {"dimensions": 0},
            "the embeddings model 'e': dimensions must be a positive number, got 0",
        ),
        ({"timeout": 0}, "model 'e': timeout must be a positive number of seconds"),
        ({"max_concurrency": 0}, "model 'e': max_concurrency must be at least 1"),
    ],
)
def test_a_number_no_call_can_use_is_refused_naming_the_embeddings(
    given: dict[str, Any], told: str
) -> None:
    """dimensions=0 was a bare ValueError naming neither the model nor a ConfigError."""
    with pytest.raises(ConfigError) as caught:
        OpenAIEmbeddings("e", base_url="http://127.0.0.1:9/v1", **given)
    assert str(caught.value).startswith(told)
