"""``OpenAIEmbeddings``: vectors for semantic memory search from any OpenAI-compatible
``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM), through
the official ``openai`` client.

Calls are retried, limited and keyed as a chat model's are: it holds an
:class:`~runtime.models.openai.chat.OpenAIModel` for the endpoint and uses its client (one
per event loop), retry policy and limiter, and retries each call as every adapter that
holds a limiter does (:func:`~runtime.limits.retry.endpoint_call`: a retry waits
out the limiter's cool-down, and gives up at once when its wait would end past the
policy's deadline). ``openai`` errors become :mod:`runtime.errors` here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from runtime.errors import (
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
)
from runtime.limits.retry import endpoint_call
from runtime.limits.retry_policy import RetryPolicy
from runtime.models.openai.chat import OpenAIModel
from runtime.models.openai.endpoint import _retry_after
from runtime.secrets import masked
from runtime.text import valid_text

__all__ = ["OpenAIEmbeddings"]


class OpenAIEmbeddings:
    """An embeddings model behind an OpenAI-compatible endpoint.

    Args:
        model: The model name (``text-embedding-3-small``, ``nomic-embed-text`` ...).
        base_url: The endpoint; default ``OPENAI_BASE_URL`` or OpenAI's.
        api_key: Default ``OPENAI_API_KEY``. Not needed for a local ``base_url``.
        dimensions: Ask for vectors of this size (models that can shorten theirs).
        timeout: Seconds per HTTP request.
        retry: The retry policy; ``RetryPolicy(attempts=1)`` disables retries.
        max_concurrency: Requests in flight at most (None: no limit).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_concurrency: int | None = 8,
    ) -> None:
        if dimensions is not None and dimensions < 1:
            raise ValueError(f"dimensions must be positive, got {dimensions}")
        self.model = model
        self.dimensions = dimensions
        self.endpoint = OpenAIModel(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            max_concurrency=max_concurrency,
        )

    @property
    def name(self) -> str:
        """The model and its size, as a memory file records them."""
        return self.model if self.dimensions is None else f"{self.model}:{self.dimensions}"

    def __repr__(self) -> str:
        url = self.endpoint.base_url
        at = f", base_url={masked(url)!r}" if url else ""  # as the endpoint's: no password
        return f"OpenAIEmbeddings({self.model!r}{at})"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            ModelHTTPError, ModelConnectionError, ModelTimeout, ModelResponseError: when
                the call fails and retrying did not help (or is not allowed).
        """
        if not texts:
            return []
        endpoint = self.endpoint
        sent = [valid_text(t) for t in texts]  # as a chat model's: a lone surrogate, U+FFFD
        return await endpoint_call(endpoint.retry, endpoint.limiter, lambda: self._embed_once(sent))

    async def _embed_once(self, texts: list[str]) -> list[list[float]]:
        params: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions is not None:
            params["dimensions"] = self.dimensions
        try:
            answer = await self.endpoint.client.embeddings.create(**params)
        except openai.APITimeoutError as exc:
            timeout = self.endpoint.timeout
            raise ModelTimeout(timeout, model=self.model, limit="its timeout") from exc
        except openai.APIConnectionError as exc:
            at = self.endpoint.base_url
            raise ModelConnectionError(str(exc), base_url=at, model=self.model) from exc
        except openai.APIStatusError as exc:
            raise ModelHTTPError(
                exc.status_code,
                exc.body if exc.body is not None else exc.message,
                retry_after=_retry_after(exc.response.headers),
                model=self.model,
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelResponseError(f"{type(exc).__name__}: {exc}") from exc
        return _vectors(answer, len(texts), self.model)


def _vectors(answer: Any, count: int, model: str) -> list[list[float]]:
    """The vectors of an answer, in the order of the texts, checked."""
    items = sorted(getattr(answer, "data", None) or [], key=lambda item: item.index)
    vectors = [list(getattr(item, "embedding", None) or []) for item in items]
    sizes = {len(v) for v in vectors}
    if len(vectors) != count or 0 in sizes or len(sizes) > 1:
        raise ModelResponseError(
            f"the embeddings endpoint answered {len(vectors)} vectors of sizes "
            f"{sorted(sizes)} for {count} texts (model {model!r})"
        )
    if not all(isinstance(x, int | float) for x in vectors[0]):
        raise ModelResponseError(f"the embeddings of model {model!r} are not numbers")
    return vectors
