"""``OpenAIModel``: any OpenAI-compatible chat-completions endpoint through the
official ``openai.AsyncOpenAI`` client (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp).

The SDK's own retries are turned off; :class:`~runtime.retry.RetryPolicy` is the one
retry policy. Every attempt, retries included, passes through the model's
:class:`~runtime.ratelimit.AdaptiveLimiter`, which all workers using the model share,
and tells it what the endpoint's ``x-ratelimit-*`` headers say is left of its quota.
``openai`` errors are translated into :mod:`runtime.errors` here.

Structured output asks for ``response_format: json_schema``. An endpoint that refuses
it (DeepSeek: "This response_format type is unavailable now") is asked again, and
from then on, with ``json_object`` and the schema in the instructions, then with the
instructions alone; the agent loop's validation of the answer stays the judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import os
import re
import time
from collections.abc import Mapping
from typing import Any, Literal

import openai

from runtime import _logging
from runtime._completion import parse_completion
from runtime._request import messages_out, output_instruction, split_settings
from runtime.errors import (
    ConfigError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
)
from runtime.events import report_retry
from runtime.model import ModelRequest, ModelResponse
from runtime.ratelimit import AdaptiveLimiter, quota_from_headers
from runtime.retry import RetryPolicy

__all__ = ["OpenAIModel"]

OutputMode = Literal["json_schema", "json_object", "instructions"]
_FALLBACK: dict[OutputMode, OutputMode] = {
    "json_schema": "json_object",
    "json_object": "instructions",
}


class OpenAIModel:
    """A chat model behind an OpenAI-compatible endpoint.

    Args:
        model: The model name (``gpt-4o-mini``, ``deepseek-chat``, ``llama3.1`` ...).
        base_url: The endpoint; default ``OPENAI_BASE_URL`` or OpenAI's.
        api_key: Default ``OPENAI_API_KEY``. Not needed for a local ``base_url``.
        timeout: Seconds per HTTP request when the request sets none.
        retry: The retry policy; ``RetryPolicy(attempts=1)`` disables retries.
        settings: Extra parameters sent with every call (``temperature``, ``seed`` ...);
            those the SDK does not name (``top_k``, ``min_p`` ...) are sent in the
            request body (``extra_body``).
        client: A ready ``openai.AsyncOpenAI`` to use instead (its retries are
            disabled). It is yours, and serves only the event loop it first runs on;
            without one, the model makes a client for each event loop it is used in.
        max_concurrency: Attempts in flight at most; the limit halves on a 429 and
            grows back (see :class:`~runtime.ratelimit.AdaptiveLimiter`). None: no limit.
        limiter: A limiter to share with other models of the same endpoint; replaces
            the one ``max_concurrency`` would make.

    Raises:
        ConfigError: for a setting Honeycomb sets itself (``model``, ``tools`` ...),
            or ``extra_headers``, ``extra_query`` or ``extra_body`` of another shape
            (ConfigErrors, one for each, when there are several).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        settings: Mapping[str, Any] | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_concurrency: int | None = 32,
        limiter: AdaptiveLimiter | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._api_key = api_key
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.settings = dict(settings or {})
        self._sdk_settings, self._extra_body = split_settings(self.settings)
        self._given = client.with_options(max_retries=0) if client is not None else None
        # An httpx client serves the event loop it first ran on: one client per loop,
        # dropped once its loop is closed.
        self._clients: dict[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = {}
        self._unbound: openai.AsyncOpenAI | None = None  # made outside any loop
        self._key: str | None = None
        if limiter is None and max_concurrency is not None:
            limiter = AdaptiveLimiter(max_concurrency)
        self.limiter = limiter
        self.output_mode: OutputMode = "json_schema"
        """How structured output is asked for; an endpoint's refusal moves it on."""

    def __repr__(self) -> str:
        at = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"OpenAIModel({self.model!r}{at})"

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client for the running event loop, made on first use in it (so
        configs validate without a key), or the one given.

        Raises:
            ConfigError: when no API key is given or set and the endpoint is OpenAI's.
        """
        if self._given is not None:
            return self._given
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        found = self._clients.get(loop) if loop is not None else self._unbound
        if found is None:
            found = self._new_client()
            if loop is None:
                self._unbound = found
            else:
                # A weak mapping would not do: a client's connections refer to its loop.
                self._clients = {k: v for k, v in self._clients.items() if not k.is_closed()}
                self._clients[loop] = found
        return found

    def _new_client(self) -> openai.AsyncOpenAI:
        key = self._api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.base_url is None:
                raise ConfigError(
                    f"model {self.model!r} needs an API key: pass api_key=, set "
                    "OPENAI_API_KEY, or point base_url at a local endpoint"
                )
            key = "unused"  # local servers (Ollama, vLLM, llama.cpp) ignore the key
        self._key = key
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout,
            # Not the SDK's default client, whose __del__ closes it on whatever loop is
            # running then: one of a loop that has ended fails on the next loop.
            http_client=openai.DefaultAsyncHttpxClient(),
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One chat completion, retried under :attr:`retry`, each attempt through
        :attr:`limiter`.

        Raises:
            ModelHTTPError, ModelConnectionError, ModelTimeout, ModelResponseError:
                when the call fails and retrying did not help (or is not allowed).
        """
        while True:
            mode = self.output_mode
            try:
                return await self._retried(request, mode)
            except ModelHTTPError as exc:
                if request.output is None or mode not in _FALLBACK or not _refuses_format(exc):
                    raise
                self._fall_back(mode, exc)

    async def _retried(self, request: ModelRequest, mode: OutputMode) -> ModelResponse:
        async for attempt in self.retry.retrying(self.limiter):
            with attempt:
                async with self.limiter.attempt() if self.limiter else _NO_LIMIT:
                    return await self._complete_once(request, mode)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover

    def _fall_back(self, mode: OutputMode, exc: ModelHTTPError) -> None:
        """The endpoint refused structured output asked for as ``mode``: ask the next
        way, in this call and every later one (workers that asked at the same time
        move it on once)."""
        if self.output_mode == mode:
            self.output_mode = _FALLBACK[mode]
            if _logging.configured():
                fields = {"model": self.model, "refused": mode, "now": self.output_mode}
                _logging.log("model_call.output_fallback", fields | {"error": str(exc)})
        report_retry(str(exc.status), f"{type(exc).__name__}: {exc}", 0.0)

    async def _complete_once(self, request: ModelRequest, mode: OutputMode) -> ModelResponse:
        try:
            return await self._complete_raw(request, mode)
        except ModelError as exc:
            # Some proxies and debugging servers echo the request's headers in their
            # error bodies: mask the key, and drop the SDK's error that holds it too.
            key = self._given.api_key if self._given is not None else self._key
            found = _occurrences(key)
            if found is None or found.search(_all_text(exc)) is None:
                raise
            exc.args = _mask(exc.args, found)
            if isinstance(exc, ModelHTTPError):
                exc.body = _mask(exc.body, found)
            raise exc from None

    async def _complete_raw(self, request: ModelRequest, mode: OutputMode) -> ModelResponse:
        params = self._params(request, mode)
        try:
            # The raw body, parsed here: the SDK's lenient parsing lets malformed
            # completions through as objects with missing or wrong-typed attributes.
            raw = await self.client.chat.completions.with_raw_response.create(**params)
            body = await _read(raw.http_response)
        except openai.APITimeoutError as exc:
            raise ModelTimeout(params["timeout"]) from exc
        except openai.APIConnectionError as exc:
            raise ModelConnectionError(str(exc), base_url=self.base_url) from exc
        except openai.APIStatusError as exc:
            if self.limiter is not None:
                self.limiter.observe(quota_from_headers(exc.response.headers))
            raise ModelHTTPError(
                exc.status_code,
                exc.body if exc.body is not None else exc.message,
                retry_after=_retry_after(exc.response.headers),
                model=self.model,
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelResponseError(f"{type(exc).__name__}: {exc}") from exc
        response = parse_completion(body, self.model)
        if self.limiter is not None:  # what is left of the endpoint's quota, if it says
            usage = response.usage
            tokens = usage.input_tokens + usage.output_tokens
            self.limiter.observe(quota_from_headers(raw.headers), tokens=tokens)
        return response

    def _params(self, request: ModelRequest, mode: OutputMode) -> dict[str, Any]:
        output = request.output
        instruction = None
        if output is not None and mode != "json_schema":
            instruction = output_instruction(output)
        params: dict[str, Any] = {
            **self._sdk_settings,
            "model": self.model,
            "messages": messages_out(request.messages, instruction),
            "timeout": request.timeout if request.timeout is not None else self.timeout,
        }
        if self._extra_body:
            params["extra_body"] = self._extra_body
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            # The API's defaults are left out: LiteLLM (without drop_params) refuses
            # either for several providers (ollama_chat, cerebras, cohere_chat ...).
            if not request.parallel_tool_calls:
                params["parallel_tool_calls"] = False
            choice = request.tool_choice
            if choice != "auto":
                params["tool_choice"] = (
                    choice
                    if choice in ("none", "required")
                    else {"type": "function", "function": {"name": choice}}
                )
        if output is not None and mode == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": output.name,
                    "schema": output.json_schema,
                    "strict": output.strict,
                },
            }
        elif output is not None and mode == "json_object":
            params["response_format"] = {"type": "json_object"}
        return params


async def _read(response: Any) -> bytes:
    """The whole body; a connection that breaks while it is read is a connection error.

    ``response`` is the SDK's HTTP response (from ``httpx`` or ``httpx2``, depending on
    the ``openai`` version), so its errors are caught by what they are, not by class.
    """
    try:
        body: bytes = await response.aread()
    except Exception as exc:  # the HTTP library's transport errors; cancellation passes
        raise ModelConnectionError(f"the answer broke off: {exc}") from exc
    return body


_MASKED = "[api key hidden]"
_NO_LIMIT = contextlib.nullcontext()


def _all_text(exc: BaseException) -> str:
    """Everything an error and the errors behind it would show."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None:
        parts += [str(current), repr(current.args), repr(getattr(current, "body", None))]
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


_SECRET_LENGTH = 8
"""Keys shorter than this are placeholders, not secrets: local servers take any key,
and their docs use ``ollama``, ``EMPTY``, ``none`` (words an error may well say)."""


@functools.cache
def _occurrences(key: str | None) -> re.Pattern[str] | None:
    """What finds ``key`` where it stands whole (not inside a longer word), or None
    for a key that is no secret."""
    if key is None or len(key) < _SECRET_LENGTH:
        return None
    return re.compile(rf"(?<![\w-]){re.escape(key)}(?![\w-])")


def _mask(value: Any, key: re.Pattern[str]) -> Any:
    """``value`` with every whole occurrence of the key in its strings masked."""
    if isinstance(value, str):
        return key.sub(_MASKED, value)
    if isinstance(value, dict):
        return {_mask(k, key): _mask(v, key) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask(v, key) for v in value)
    return value


_REFUSED_FORMAT = re.compile(r"response_format|json_schema|json_object|structured.?output", re.I)


def _refuses_format(exc: ModelHTTPError) -> bool:
    """Whether an error is the endpoint refusing the response format (a 400 or 422
    that names it); any other 400 is the request's own fault."""
    return exc.status in (400, 422) and _REFUSED_FORMAT.search(str(exc.body)) is not None


# The endpoint's own headers first, then those a proxy forwards from the provider
# behind it (LiteLLM's llm_provider-*); of each, milliseconds first.
_RETRY_AFTER_HEADERS = (
    "retry-after-ms",
    "retry-after",
    "llm_provider-retry-after-ms",
    "llm_provider-retry-after",
)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from the first of :data:`_RETRY_AFTER_HEADERS` that makes sense
    (milliseconds, or seconds or an HTTP date)."""
    for name in _RETRY_AFTER_HEADERS:
        value = headers.get(name)
        if value is None:
            continue
        seconds = _seconds(value, millis=name.endswith("-ms"))
        if seconds is not None:
            return seconds
    return None


def _seconds(value: str, *, millis: bool) -> float | None:
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        return max(number / 1000.0 if millis else number, 0.0)
    if millis:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
