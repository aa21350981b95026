"""Secrets in the standard library's log records: those of the HTTP and OpenAI clients
a model calls its endpoint with, masked once a secret is known, and any logger's
through :class:`~runtime.secrets.SecretsFilter` on a handler."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from runtime import ModelRequest, OpenAIModel, UserMessage, add_secret
from runtime.errors import ModelHTTPError
from runtime.secrets import SecretsFilter, isolated
from tests.support.openai_server import OpenAIServer, error, text

KEY = "sk-in-the-query-7Hq2Lm9Zx4"
BEARER = "sk-bearer-3Vd8Kp1Ws6"
HEADER = "proxy-token-5Tg9Rj2Qa"
SECRETS = (KEY, BEARER, HEADER)


@pytest.fixture(autouse=True)
def _own_secrets() -> Iterator[None]:
    with isolated():
        yield


class Url:
    """An object that shows a URL (as an HTTP client's URL type does)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


class Refused(Exception):
    """An error whose text it makes of what it holds."""

    def __str__(self) -> str:
        return f"refused {self.args[0]}"


def shown(record: logging.LogRecord) -> str:
    """All a handler could write of ``record``: its text as formatted, and its fields."""
    return logging.Formatter().format(record) + repr(vars(record))


@pytest.mark.parametrize("given_in", ["base_url", "extra_query"])
async def test_a_models_requests_logged_at_debug_show_no_secret(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture, given_in: str
) -> None:
    """httpx logs each request's URL, with the key an endpoint takes in its query, at
    INFO; openai and httpcore their steps at DEBUG. The application's own handler,
    without a filter of its own, gets them masked."""
    caplog.set_level(logging.DEBUG)
    settings: dict[str, Any] = {"extra_headers": {"X-Proxy": f"Bearer {HEADER}"}}
    base_url = openai_server.base_url
    if given_in == "base_url":
        base_url += f"?key={KEY}"
    else:
        settings["extra_query"] = {"key": KEY}
    model = OpenAIModel("gpt-test", base_url=base_url, api_key=BEARER, settings=settings)
    openai_server.enqueue(error(500), text("hello"), error(400))
    request = ModelRequest(messages=(UserMessage(content="hi"),))
    assert (await model.complete(request)).message.content == "hello"
    with pytest.raises(ModelHTTPError):
        await model.complete(request)
    await model.client.close()

    sent = [r.getMessage() for r in caplog.records if r.name.startswith("httpx")]
    assert len(sent) == 3
    assert all("/v1/chat/completions?key=[" in line for line in sent)  # as sent
    assert {r.name.partition(".")[0] for r in caplog.records} >= {"httpx2", "openai"}
    for record in caplog.records:
        assert not any(secret in shown(record) for secret in SECRETS), shown(record)
    assert not logging.getLogger().filters  # the root logger is the application's


def test_the_filter_on_a_handler_masks_any_loggers_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An application's own logger is left as it is; the filter on its handler masks
    the message's arguments, the traceback (its cause's too), the stack and extra
    fields."""
    add_secret(KEY, "api key")
    logger = logging.getLogger("tests.app")
    assert not logger.filters
    caplog.handler.addFilter(SecretsFilter())
    try:
        raise Refused(Url(f"/v1?key={KEY}")) from OSError(f"at ?key={KEY}")
    except Refused:
        logger.error("calling %s", f"http://h/v1?key={KEY}", exc_info=True, stack_info=True,
                     extra={"url": f"http://h/v1?key={KEY}"})  # fmt: skip
    written = caplog.text + "".join(repr(vars(record)) for record in caplog.records)
    assert KEY not in written
    assert "calling http://h/v1?key=[api key hidden]" in written
    assert "Refused: refused /v1?key=[api key hidden]" in caplog.text
    assert "OSError: at ?key=[api key hidden]" in caplog.text
    assert "test_secret_logs.py" in caplog.records[0].stack_info  # type: ignore[operator]
    assert caplog.records[0].url == "http://h/v1?key=[api key hidden]"


def test_a_record_whose_arguments_do_not_fit_its_message_is_masked_as_given() -> None:
    """logging reports such a record on standard error with its message and arguments
    as they are."""
    add_secret(KEY, "api key")
    record = logging.LogRecord("tests.app", logging.WARNING, __file__, 1, "two %s %s", (KEY,), None)
    assert SecretsFilter().filter(record)
    assert (record.msg, record.args) == ("two %s %s", ("[api key hidden]",))
