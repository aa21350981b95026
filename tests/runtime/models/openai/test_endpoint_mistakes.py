"""The mistakes one makes pointing a model at an endpoint, and the errors that say what
to fix: a ``base_url`` without ``/v1`` or with the API's path in it (the server
answers 404), one without ``http://``, an endpoint that cannot be reached, and a key
given as a query parameter. Both adapters, through the real ``openai`` client over
real HTTP, against the local test server."""

from __future__ import annotations

import socket

import openai
import pytest

from runtime import (
    ConfigError,
    ModelConnectionError,
    ModelHTTPError,
    ModelRequest,
    OpenAIModel,
    RetryPolicy,
    UserMessage,
)
from runtime.models.openai.endpoint import OpenAIEndpoint
from runtime.models.openai.responses import OpenAIResponsesModel
from tests.support.openai_server import OpenAIServer, Raw, RecordedRequest, text

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))
ONCE = RetryPolicy(attempts=1)
ADAPTERS = {"chat": OpenAIModel, "responses": OpenAIResponsesModel}
PATHS = {"chat": "/chat/completions", "responses": "/responses"}


async def failed(model: OpenAIEndpoint) -> BaseException:
    with pytest.raises((ModelHTTPError, ModelConnectionError)) as caught:
        await model.complete(REQUEST)
    await model.client.close()
    return caught.value


@pytest.mark.parametrize("api", ADAPTERS)
async def test_a_base_url_without_v1_is_told_to_add_it(
    openai_server: OpenAIServer, api: str
) -> None:
    root = openai_server.base_url.removesuffix("/v1")
    error = await failed(ADAPTERS[api]("gpt-test", base_url=f"{root}/", retry=ONCE))

    assert isinstance(error, ModelHTTPError)
    assert error.status == 404
    assert f"the endpoint serves no POST {root}{PATHS[api]}" in str(error)
    assert f"try '{root}/v1'" in str(error)
    assert error.hint is not None
    assert error.hint in str(error)
    assert not error.retryable


async def test_the_base_url_of_a_client_given_is_told_to_add_it_too(
    openai_server: OpenAIServer,
) -> None:
    root = openai_server.base_url.removesuffix("/v1")
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=root, max_retries=0)
    async with client:
        with pytest.raises(ModelHTTPError) as caught:
            await OpenAIModel("gpt-test", client=client, retry=ONCE).complete(REQUEST)
    assert f"try '{root}/v1'" in str(caught.value)


async def test_a_base_url_with_the_apis_path_is_told_to_drop_it(
    openai_server: OpenAIServer,
) -> None:
    base_url = f"{openai_server.base_url}/chat/completions"
    error = await failed(OpenAIModel("gpt-test", base_url=base_url, retry=ONCE))

    assert isinstance(error, ModelHTTPError)
    assert "base_url ends with the API's path" in str(error)
    assert f"try '{openai_server.base_url}'" in str(error)


@pytest.mark.parametrize("mistake", ["no /v1", "the API's path"])
async def test_the_base_url_to_try_keeps_its_query_after_its_path(
    openai_server: OpenAIServer, mistake: str
) -> None:
    """A key taken in the query (``?key=``) was kept before the path the hint added
    ('try 'http://host/?key=K/v1''), and the API's path written before a query was
    not seen as such."""
    key = "AIzaSyHintKey0123456789"
    root = openai_server.base_url.removesuffix("/v1")
    written = f"{root}/" if mistake == "no /v1" else f"{openai_server.base_url}/chat/completions"
    error = await failed(OpenAIModel("gpt-test", base_url=f"{written}?key={key}", retry=ONCE))

    assert isinstance(error, ModelHTTPError)
    assert f"try '{root}/v1?key=[password hidden]')" in str(error)
    assert key not in str(error)


async def test_a_404_about_the_model_names_the_endpoint_asked(
    openai_server: OpenAIServer,
) -> None:
    """OpenAI (and vLLM, Ollama) answer 404 for a model they do not have: the URL is
    right, the endpoint's own words say what to fix, and the error says which endpoint
    said them (a run may use several)."""
    openai_server.default = Raw(404, "The model `gpt-nope` does not exist")
    error = await failed(OpenAIModel("gpt-nope", base_url=openai_server.base_url, retry=ONCE))

    assert isinstance(error, ModelHTTPError)
    assert error.hint == f"asked at {openai_server.base_url}"
    assert "The model `gpt-nope` does not exist" in str(error)
    assert str(error).endswith(f"(asked at {openai_server.base_url})")


async def test_a_404_for_a_deployment_azure_does_not_have_is_about_the_model(
    openai_server: OpenAIServer,
) -> None:
    """Azure's model is the name of a deployment, which its 404 does not repeat: the
    base_url is right, the model is not."""
    gone = "The API deployment for this resource does not exist."
    body = {"error": {"code": "DeploymentNotFound", "message": gone}}
    openai_server.default = Raw(404, body=body)
    error = await failed(OpenAIModel("gpt-4o-east", base_url=openai_server.base_url, retry=ONCE))

    assert isinstance(error, ModelHTTPError)
    assert error.hint == f"asked at {openai_server.base_url}"
    assert "check the model's base_url" not in str(error)


PAST_CONTEXT = {
    "openai": {"error": {"message": "Reduce the length", "code": "context_length_exceeded"}},
    "vllm": {"object": "error", "message": "This model's maximum context length is 4096 "
             "tokens. However, you requested 5000 tokens.", "code": 400},
    "llama.cpp": {"error": {"code": 400, "type": "exceed_context_size_error",
                            "message": "the request exceeds the available context size"}},
}  # fmt: skip


@pytest.mark.parametrize("server", PAST_CONTEXT)
@pytest.mark.parametrize("context", [None, 8192])
async def test_a_prompt_past_the_context_is_told_to_say_the_context(
    openai_server: OpenAIServer, server: str, context: int | None
) -> None:
    openai_server.default = Raw(400, body=PAST_CONTEXT[server])
    model = OpenAIModel(
        "gpt-test", base_url=openai_server.base_url, retry=ONCE, context_tokens=context
    )
    error = await failed(model)

    assert isinstance(error, ModelHTTPError)
    if context is None:
        assert error.hint is not None
        said = "say the model's context as its server serves it (the model's context_tokens="
        assert said in error.hint
    else:
        assert error.hint == "the model's context_tokens (8192) may be more than the server serves"
    assert error.hint in str(error)


async def test_another_400_has_no_hint(openai_server: OpenAIServer) -> None:
    openai_server.default = Raw(400, "Invalid schema for function 'lookup'")
    error = await failed(OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=ONCE))

    assert isinstance(error, ModelHTTPError)
    assert error.hint is None


async def test_a_quota_spent_is_not_retried_and_says_so(openai_server: OpenAIServer) -> None:
    """OpenAI answers 429 for an account whose quota (its plan, its billing) is spent,
    as for a rate: no wait mends it, so the call fails at once saying what to check."""
    spent = {"message": "You exceeded your current quota, please check your plan and billing "
             "details.", "type": "insufficient_quota", "code": "insufficient_quota"}  # fmt: skip
    openai_server.default = Raw(429, body={"error": spent})
    retrying = RetryPolicy(attempts=3, initial_wait_s=0, jitter_s=0)
    error = await failed(OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=retrying))

    assert isinstance(error, ModelHTTPError)
    assert error.status == 429
    assert not error.retryable
    assert "the account's quota is spent, which no retry mends" in str(error)
    assert len(openai_server.requests) == 1


KEY = "sk-refused-0123456789"
KEY_SOURCES = {
    "api_key": ({"api_key": KEY}, "the API key given as the model's api_key"),
    "api_key_env": ({"api_key_env": "MY_KEY"}, "the API key read from MY_KEY"),
    "environment": ({}, "the API key read from OPENAI_API_KEY"),
    "none": ({}, "wants an API key and none was given: set OPENAI_API_KEY"),
    "empty": ({"api_key": ""}, "wants an API key and none was given: set OPENAI_API_KEY"),
}


@pytest.mark.parametrize("source", KEY_SOURCES)
@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_told_by_the_endpoint_and_where_the_key_came_from(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, source: str, status: int
) -> None:
    """A local server started with a key (vLLM's --api-key, LM Studio's) refuses the
    placeholder sent without one; any endpoint refuses a wrong key. The error names
    the endpoint and what gave the key, never the key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_KEY", KEY)
    if source == "environment":
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    sent = "unused" if source in ("none", "empty") else KEY  # the placeholder, if no key
    openai_server.default = Raw(status, f"Incorrect API key provided: {sent}")
    given, said = KEY_SOURCES[source]
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=ONCE, **given)
    error = await failed(model)

    assert isinstance(error, ModelHTTPError)
    assert error.hint is not None
    assert error.hint.startswith(f"{openai_server.base_url} ")
    assert said in error.hint
    if source not in ("none", "empty"):
        check = "check that key" if status == 401 else "check what it may use"
        assert error.hint.endswith(check)
    assert KEY not in str(error)


IN_THE_KEYS_PLACE = {
    "userinfo": "of the base_url's userinfo (sent as Basic credentials, in place of any api_key)",
    "header": "of the Authorization header of settings.extra_headers (sent in place of any "
    "api_key)",
}


@pytest.mark.parametrize("sent", IN_THE_KEYS_PLACE)
@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_sent_in_the_api_keys_place_is_told_as_that(
    openai_server: OpenAIServer, status: int, sent: str
) -> None:
    """The HTTP client sends a base_url's userinfo as the request's credentials (Basic),
    and the SDK an Authorization of the extra headers, in place of the API key: the
    error told of the api_key given, which never went."""
    openai_server.default = Raw(status, "Unauthorized")
    base_url, settings = openai_server.base_url, {}
    if sent == "userinfo":
        base_url = base_url.replace("http://", "http://bees:hive-password-123@")
    else:
        settings = {"extra_headers": {"authorization": "Bearer hive-password-123"}}
    model = OpenAIModel("gpt-test", base_url=base_url, api_key=KEY, retry=ONCE, settings=settings)
    error = await failed(model)

    assert isinstance(error, ModelHTTPError)
    assert error.hint is not None
    assert IN_THE_KEYS_PLACE[sent] in error.hint
    assert "hive-password-123" not in str(error)
    assert KEY not in openai_server.requests[0].headers["authorization"]


async def test_a_server_without_the_responses_api_is_told_to_try_the_chat_api(
    openai_server: OpenAIServer,
) -> None:
    """The base_url is right (``/v1``), but the server serves chat completions only,
    and answers a Responses API call as any path it does not know."""
    openai_server.default = Raw(404, body={"detail": "Not Found"})
    model = OpenAIResponsesModel("gpt-test", base_url=openai_server.base_url, retry=ONCE)
    error = await failed(model)

    assert isinstance(error, ModelHTTPError)
    assert f"the endpoint serves no POST {openai_server.base_url}/responses" in str(error)
    assert "does not serve OpenAI's Responses API" in str(error)
    assert "try its chat API (api: chat, OpenAIModel)" in str(error)


async def test_a_client_given_is_the_endpoint_named_whatever_openai_base_url_says(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its calls go to the client's URL: the errors, the repr and the output limit's
    name (a compatible server's ``max_tokens``) follow it, not the variable's."""
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    served = openai.AsyncOpenAI(api_key="sk-test", base_url=openai_server.base_url)
    refused = openai.AsyncOpenAI(api_key="sk-test", base_url=closed)
    async with served, refused:
        model = OpenAIModel("gpt-test", client=served, retry=ONCE)
        limited = ModelRequest(messages=REQUEST.messages, max_output_tokens=50)
        await model.complete(limited)
        with pytest.raises(ModelConnectionError) as caught:
            await OpenAIModel("gpt-test", client=refused, retry=ONCE).complete(REQUEST)

    assert repr(model) == f"OpenAIModel('gpt-test', base_url='{openai_server.base_url}')"
    assert openai_server.requests[0].body["max_tokens"] == 50
    assert caught.value.base_url == closed


def test_a_base_url_without_a_scheme_is_refused_when_the_model_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAIModel("llama3.1", base_url="localhost:11434/v1")
    assert "base_url 'localhost:11434/v1' has no http:// or https://" in str(caught.value)
    assert "write 'http://localhost:11434/v1'" in str(caught.value)

    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://127.0.0.1/v1")
    with pytest.raises(ConfigError) as caught:
        OpenAIResponsesModel("gpt-test")
    assert "is not an http:// or https:// URL (ftp://) (from OPENAI_BASE_URL)" in str(caught.value)
    # A client given has a URL of its own, which the calls go to.
    client = openai.AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    assert OpenAIResponsesModel("gpt-test", client=client).base_url == "ftp://127.0.0.1/v1"


@pytest.mark.parametrize("api", ADAPTERS)
@pytest.mark.parametrize("spaced", ["before", "after"])
async def test_a_base_url_with_a_space_at_an_end_is_sent_as_it_was_checked(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, api: str, spaced: str
) -> None:
    """Its check read it stripped, and it was sent as written: a space before it failed
    every call as 'Request URL is missing an 'http://' or 'https://' protocol', one
    after it as a 404 for a path ending in '%20'. It is sent stripped, from
    OPENAI_BASE_URL too."""
    written = f" {openai_server.base_url}" if spaced == "before" else f"{openai_server.base_url} "
    openai_server.default = text("fine")
    given = ADAPTERS[api]("gpt-test", base_url=written, retry=ONCE)
    monkeypatch.setenv("OPENAI_BASE_URL", written)
    read = ADAPTERS[api]("gpt-test", api_key="sk-test", retry=ONCE)
    for model in (given, read):
        answer = await model.complete(REQUEST)
        await model.client.close()
        assert answer.message.content == "fine"
        assert model.base_url == openai_server.base_url
    assert [r.path for r in openai_server.requests] == [f"/v1{PATHS[api]}"] * 2


async def test_a_refused_connection_says_why() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = await failed(
        OpenAIModel("gpt-test", base_url=f"http://127.0.0.1:{port}/v1", retry=ONCE)
    )

    assert isinstance(error, ModelConnectionError)
    # The SDK's "Connection error." alone names nothing; the socket's error does.
    assert error.reason.startswith("Connection error: ")
    assert str(port) in error.reason


@pytest.mark.parametrize("refusal", ["a status", "no connection"])
async def test_no_error_behind_a_models_error_keeps_a_key_in_its_url(
    openai_server: OpenAIServer, refusal: str
) -> None:
    """The SDK's error behind a model's error keeps the request it sent, whose URL
    holds a key given as ``?key=`` (an error tracker that shows an error's fields
    shows it): such an error is not chained, whatever its text says."""
    key = "AIzaSyChainedKey0123456789"
    base_url = openai_server.base_url
    if refusal == "no connection":
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            base_url = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    else:
        openai_server.enqueue(Raw(400, "bad request"))
    error = await failed(OpenAIModel("gpt-test", base_url=f"{base_url}?key={key}", retry=ONCE))

    behind: BaseException | None = error
    while behind is not None:
        assert key not in f"{behind!s} {behind.args!r} {vars(behind)!r}"
        behind = behind.__cause__ or behind.__context__


async def test_a_token_written_as_a_base_urls_user_is_a_secret(
    openai_server: OpenAIServer,
) -> None:
    """``https://TOKEN@host/v1``: the HTTP client sends the token as the request's
    credentials (``Basic``, the base64 of ``TOKEN:``), as it sends a password; the
    model's repr and errors showed it, and an endpoint echoing the header its base64."""
    token = "tok-written-as-user-0123456789"
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"http://{token}@127.0.0.1:{unused.getsockname()[1]}/v1"
    openai_server.default = lambda request: Raw(400, f"sent {request.headers['authorization']}")
    base_url = openai_server.base_url.replace("http://", f"http://{token}@")
    echoed = await failed(OpenAIModel("gpt-test", base_url=base_url, retry=ONCE))
    refused = await failed(OpenAIModel("gpt-test", base_url=closed, retry=ONCE))

    assert "sent Basic [password hidden]" in str(echoed)
    assert "(http://[password hidden]@127.0.0.1:" in str(refused)
    assert "[password hidden]@" in repr(OpenAIModel("gpt-test", base_url=base_url))
    assert token not in f"{echoed} {refused}"


@pytest.mark.parametrize("api", ADAPTERS)
async def test_a_key_given_as_a_query_parameter_is_a_secret(
    openai_server: OpenAIServer, api: str
) -> None:
    """Gemini takes its key as ``?key=``, Azure as ``?api-key=``: an endpoint that
    echoes the URL it was asked shows it."""
    key = "AIzaSyQueryKey0123456789"

    def echo(request: RecordedRequest) -> Raw:
        return Raw(400, f"cannot serve {request.path}?key={key}")

    openai_server.default = echo
    settings = {"extra_query": {"key": key, "alt": "json"}}
    model = ADAPTERS[api](
        "gpt-test", base_url=openai_server.base_url, retry=ONCE, settings=settings
    )
    error = await failed(model)

    assert isinstance(error, ModelHTTPError)
    assert "?key=[api key hidden]" in str(error)
    assert key not in repr(error.body)
