"""``OpenAIModel``: any OpenAI-compatible chat-completions endpoint through the
official ``openai.AsyncOpenAI`` client (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp).

The SDK's own retries are turned off; :class:`~runtime.retry.RetryPolicy` is the one
retry policy. Every attempt, retries included, passes through the model's
:class:`~runtime.ratelimit.AdaptiveLimiter`, which all workers using the model share.
``openai`` errors are translated into :mod:`runtime.errors` here.
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import time
from collections.abc import Mapping
from typing import Any

import openai

from runtime._completion import parse_completion
from runtime.errors import (
    ConfigError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
)
from runtime.messages import (
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from runtime.model import ModelRequest, ModelResponse
from runtime.ratelimit import AdaptiveLimiter
from runtime.retry import RetryPolicy

__all__ = ["OpenAIModel"]


class OpenAIModel:
    """A chat model behind an OpenAI-compatible endpoint.

    Args:
        model: The model name (``gpt-4o-mini``, ``deepseek-chat``, ``llama3.1`` ...).
        base_url: The endpoint; default ``OPENAI_BASE_URL`` or OpenAI's.
        api_key: Default ``OPENAI_API_KEY``. Not needed for a local ``base_url``.
        timeout: Seconds per HTTP request when the request sets none.
        retry: The retry policy; ``RetryPolicy(attempts=1)`` disables retries.
        settings: Extra parameters sent with every call (``temperature``, ``seed`` ...).
        client: A ready ``openai.AsyncOpenAI`` to use instead (its retries are disabled).
        max_concurrency: Attempts in flight at most; the limit halves on a 429 and
            grows back (see :class:`~runtime.ratelimit.AdaptiveLimiter`). None: no limit.
        limiter: A limiter to share with other models of the same endpoint; replaces
            the one ``max_concurrency`` would make.
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
        self._client = client.with_options(max_retries=0) if client is not None else None
        if limiter is None and max_concurrency is not None:
            limiter = AdaptiveLimiter(max_concurrency)
        self.limiter = limiter

    def __repr__(self) -> str:
        at = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"OpenAIModel({self.model!r}{at})"

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client, made on first use (so configs validate without a key).

        Raises:
            ConfigError: when no API key is given or set and the endpoint is OpenAI's.
        """
        if self._client is None:
            key = self._api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                if self.base_url is None:
                    raise ConfigError(
                        f"model {self.model!r} needs an API key: pass api_key=, set "
                        "OPENAI_API_KEY, or point base_url at a local endpoint"
                    )
                key = "unused"  # local servers (Ollama, vLLM, llama.cpp) ignore the key
            self._client = openai.AsyncOpenAI(
                api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout
            )
        return self._client

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One chat completion, retried under :attr:`retry`, each attempt through
        :attr:`limiter`.

        Raises:
            ModelHTTPError, ModelConnectionError, ModelTimeout, ModelResponseError:
                when the call fails and retrying did not help (or is not allowed).
        """
        async for attempt in self.retry.retrying():
            with attempt:
                async with self.limiter.attempt() if self.limiter else _NO_LIMIT:
                    return await self._complete_once(request)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover

    async def _complete_once(self, request: ModelRequest) -> ModelResponse:
        try:
            return await self._complete_raw(request)
        except ModelError as exc:
            # Some proxies and debugging servers echo the request's headers in their
            # error bodies: mask the key, and drop the SDK's error that holds it too.
            key = self._client.api_key if self._client is not None else ""
            if not key or key == "unused" or key not in _all_text(exc):
                raise
            exc.args = _mask(exc.args, key)
            if isinstance(exc, ModelHTTPError):
                exc.body = _mask(exc.body, key)
            raise exc from None

    async def _complete_raw(self, request: ModelRequest) -> ModelResponse:
        params = self._params(request)
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
            raise ModelHTTPError(
                exc.status_code,
                exc.body if exc.body is not None else exc.message,
                retry_after=_retry_after(exc.response.headers),
                model=self.model,
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelResponseError(f"{type(exc).__name__}: {exc}") from exc
        return parse_completion(body, self.model)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            **self.settings,
            "model": self.model,
            "messages": [_message_out(m) for m in request.messages],
            "timeout": request.timeout if request.timeout is not None else self.timeout,
        }
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
            params["parallel_tool_calls"] = request.parallel_tool_calls
            choice = request.tool_choice
            params["tool_choice"] = (
                choice
                if choice in ("auto", "none", "required")
                else {"type": "function", "function": {"name": choice}}
            )
        if request.output is not None:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.output.name,
                    "schema": request.output.json_schema,
                    "strict": request.output.strict,
                },
            }
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


def _mask(value: Any, key: str) -> Any:
    """``value`` with every occurrence of ``key`` in its strings masked."""
    if isinstance(value, str):
        return value.replace(key, _MASKED)
    if isinstance(value, dict):
        return {_mask(k, key): _mask(v, key) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask(v, key) for v in value)
    return value


def _message_out(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": message.content}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return out


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms``, or ``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
