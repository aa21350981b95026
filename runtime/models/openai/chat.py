"""``OpenAIModel``: any OpenAI-compatible chat-completions endpoint through the
official ``openai.AsyncOpenAI`` client (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp).

The client, retries, rate limits, key masking and error translation are
:class:`~runtime.models.openai.endpoint.OpenAIEndpoint`'s, shared with the Responses adapter.

Structured output asks for ``response_format: json_schema``. An endpoint that refuses
it (DeepSeek: "This response_format type is unavailable now") is asked again, and
from then on, with ``json_object`` and the schema in the instructions, then with the
instructions alone; the agent loop's validation of the answer stays the judge.

:meth:`OpenAIModel.stream` asks for the answer as server-sent events (``stream: true``,
usage in the last chunk through ``stream_options``) and shows its text as it comes;
tool calls are assembled from their pieces (see :mod:`runtime.models.openai.stream`). A server
that ignores ``stream: true`` and answers with one JSON body is read as a one-shot
call is, its text shown in one piece. It is retried like a one-shot call until some
text was shown; a stream cut after that is a :class:`~runtime.errors.StreamInterrupted`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from runtime.model import ModelRequest, ModelResponse
from runtime.models.openai._completion import parse_completion
from runtime.models.openai.endpoint import OpenAIEndpoint, OutputMode
from runtime.models.openai.request import messages_out, output_instruction
from runtime.models.openai.stream import CompletionStream

__all__ = ["OpenAIModel"]


class OpenAIModel(OpenAIEndpoint):
    """A chat model behind an OpenAI-compatible endpoint.

    Args:
        model: The model name (``gpt-4o-mini``, ``deepseek-chat``, ``llama3.1`` ...).
        base_url: The endpoint; default ``OPENAI_BASE_URL`` or OpenAI's.
        api_key: Default ``OPENAI_API_KEY``. Not needed for a local ``base_url``.
        api_key_env: The environment variable to read the key from instead, as the
            client is made (on Ray, each actor reads it from its own environment).
        timeout: Seconds per HTTP request when the request sets none.
        retry: The retry policy; ``RetryPolicy(attempts=1)`` disables retries.
        settings: Extra parameters sent with every call (``temperature``, ``seed`` ...);
            those the SDK does not name (``top_k``, ``min_p`` ...) are sent in the
            request body (``extra_body``).
        client: A ready ``openai.AsyncOpenAI`` to use instead (its retries are
            disabled). It is yours, and serves only the event loop it first runs on;
            without one, the model makes a client for each event loop it is used in.
        max_concurrency: Attempts in flight at most; the limit halves on a 429 and
            grows back (see :class:`~runtime.limits.ratelimit.AdaptiveLimiter`). None: no limit.
        limiter: A limiter to share with other models of the same endpoint; replaces
            the one ``max_concurrency`` would make.
        context_tokens: The tokens one call holds, prompt and answer together, as the
            server serves the model (an Ollama or vLLM server's context setting, the
            model's window); None: not said. Said, what a run hands the model is fitted
            to it, as to a local model's.

    Raises:
        ConfigError: for a setting Honeycomb sets itself (``model``, ``tools`` ...),
            or ``extra_headers``, ``extra_query`` or ``extra_body`` of another shape
            (ConfigErrors, one for each, when there are several).
    """

    api = "chat"

    @property
    def _limit_key(self) -> str:
        """The name of the output limit: the one the settings use; else OpenAI's own
        API's (``max_completion_tokens``, which its reasoning models require), or the
        one every compatible server takes (``max_tokens``) until the endpoint refuses
        it (:attr:`limit_name`)."""
        if self.limit_name is not None:
            return self.limit_name
        for key in ("max_completion_tokens", "max_tokens"):
            if key in self.settings:
                return key
        url = self._url()
        openai_own = url is None or "api.openai.com" in url
        return "max_completion_tokens" if openai_own else "max_tokens"

    async def _send(self, params: dict[str, Any]) -> Any:
        return await self.client.chat.completions.with_raw_response.create(**params)

    def _parse(self, body: bytes) -> ModelResponse:
        return parse_completion(body, self.model)

    def _streamed(self, params: dict[str, Any]) -> contextlib.AbstractAsyncContextManager[Any]:
        if self.stream_usage:
            params = {**params, "stream_options": {"include_usage": True}}
        return self.client.chat.completions.with_streaming_response.create(**params)

    def _answer_stream(self) -> CompletionStream:
        return CompletionStream(self.model)

    def _params(self, request: ModelRequest, mode: OutputMode) -> dict[str, Any]:
        output = request.output
        instruction = None
        if output is not None and mode != "json_schema":
            instruction = output_instruction(output)
        params = self._base_params(request)
        params["messages"] = messages_out(
            request.messages,
            instruction,
            alternating=self.alternating,
            reasoning=self.sends_reasoning,
        )
        self._limit_output(params, self._limit_key, request)
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
