"""``OpenAIEmbeddings``: vectors for semantic memory search from any OpenAI-compatible
``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM), through
the official ``openai`` client.

Calls are retried, limited and keyed as a chat model's are: it holds an
:class:`~runtime.models.openai.chat.OpenAIModel` for the endpoint and uses its client (one
per event loop), retry policy and limiter, and retries each call as every adapter that
holds a limiter does (:func:`~runtime.limits.retry.endpoint_call`: a retry waits
out the limiter's cool-down, and gives up at once when its wait would end past the
policy's deadline). Each attempt is bounded, its errors translated and masked, as a
chat call's are, and its body is read and checked here: an answer that is not JSON is
retried, a malformed one is a :class:`~runtime.errors.ModelResponseError` naming the
field.

What a call spends counts in the run of the worker that makes it, as a model call's
does (:mod:`runtime.limits.spending`): a run whose budget is spent sends no attempt of
it (a retry neither), and each attempt is charged its tokens and their cost at
``price``: the endpoint's ``usage.prompt_tokens``, or the token estimate of its texts
when it reports none, and for an attempt its timeout cut off (the endpoint had them).
"""

from __future__ import annotations

import array
import base64
import json
import time
from collections.abc import Sequence
from typing import Any

from runtime.errors import ConfigError, ModelResponseError, ModelTimeout, kind_of
from runtime.limits.retry import endpoint_call
from runtime.limits.retry_policy import RetryPolicy
from runtime.limits.spending import Payer, payer
from runtime.messages import Usage
from runtime.models.checks import shown
from runtime.models.openai._completion import answered_error, error_in
from runtime.models.openai.chat import OpenAIModel
from runtime.models.openai.stream import read_body
from runtime.models.pricing import Price
from runtime.models.tokens import estimated_tokens
from runtime.secrets import masked
from runtime.text import valid_text

__all__ = ["OpenAIEmbeddings"]


class OpenAIEmbeddings:
    """An embeddings model behind an OpenAI-compatible endpoint.

    Args:
        model: The model name (``text-embedding-3-small``, ``nomic-embed-text`` ...).
        base_url: The endpoint; default ``OPENAI_BASE_URL`` or OpenAI's.
        api_key: Default ``OPENAI_API_KEY``. Not needed for a local ``base_url``.
        api_key_env: The environment variable to read the key from instead, as each
            call is made (a hive's ``api_key: ${NAME}``): a call while it is not set
            fails with a ``ConfigError`` naming it.
        dimensions: Ask for vectors of this size (models that can shorten theirs).
        timeout: Seconds per HTTP request.
        retry: The retry policy; ``RetryPolicy(attempts=1)`` disables retries.
        max_concurrency: Requests in flight at most (None: no limit).
        price: What its tokens cost (``input_per_mtok``; None: nothing).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        dimensions: int | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_concurrency: int | None = 8,
        price: Price | None = None,
    ) -> None:
        if dimensions is not None and dimensions < 1:
            raise ConfigError(
                f"the embeddings model {model!r}: dimensions must be a positive number, "
                f"got {dimensions}"
            )
        self.model = model
        self.dimensions = dimensions
        self.price = price
        self.endpoint = OpenAIModel(
            model,
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            timeout=timeout,
            retry=retry,
            max_concurrency=max_concurrency,
        )

    def missing_key(self) -> ConfigError | None:
        """The error its calls would fail with for want of an API key, if they would
        (an Executor asks before a run whose roles use its memory starts)."""
        return self.endpoint.missing_key(f"the memory's embeddings model {self.model!r}")

    @property
    def name(self) -> str:
        """The model and its size, as a memory file records them."""
        return self.model if self.dimensions is None else f"{self.model}:{self.dimensions}"

    def __repr__(self) -> str:
        url = self.endpoint.base_url
        at = f", base_url={masked(url)!r}" if url else ""  # as the endpoint's: no password
        return f"OpenAIEmbeddings({self.model!r}{at})"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; paid for by whoever pays for the current
        task's calls (:func:`~runtime.limits.spending.payer`), if anyone does.

        Raises:
            BudgetExceeded: when the payer's budget is spent before an attempt (that
                attempt is not sent).
            ModelHTTPError, ModelConnectionError, ModelTimeout, ModelResponseError: when
                the call fails and retrying did not help (or is not allowed).
        """
        if not texts:
            return []
        endpoint = self.endpoint
        sent = [valid_text(t) for t in texts]  # as a chat model's: a lone surrogate, U+FFFD
        who = payer()
        return await endpoint_call(
            endpoint.retry, endpoint.limiter, lambda: self._embed_once(sent, who)
        )

    async def _embed_once(self, texts: list[str], who: Payer | None) -> list[list[float]]:
        """One attempt at the vectors of ``texts``, paid by ``who``: not made once its
        budget is spent (a retry neither), and charged the tokens the endpoint counted
        (the estimate when it counts none), or, cut off by its timeout, the estimate
        (the endpoint had the texts, and bills them whether or not anyone waits)."""
        if who is not None:
            who.check()
        endpoint = self.endpoint
        params: dict[str, Any] = {"model": self.model, "input": texts, "timeout": endpoint.timeout}
        if self.dimensions is not None:
            params["dimensions"] = self.dimensions
        # As a chat call: bounded as a whole, errors translated and masked, the raw
        # body read and checked here (the SDK's lenient parsing lets a malformed answer
        # through as objects with missing attributes).
        client = endpoint.client  # made before the clock starts, as a chat call's
        started = time.perf_counter()
        try:
            with endpoint._bounded(endpoint.timeout, "its timeout"), endpoint._translated(params):
                raw = await client.embeddings.with_raw_response.create(**params)
                body = await read_body(raw.http_response)
        except ModelTimeout as exc:
            if who is not None:
                self._charge(who, estimated_tokens(texts), started, error=f"ModelTimeout: {exc}")
            raise
        vectors, tokens = parse_answer(body, len(texts), self.model)
        endpoint._observe(raw.headers)
        if who is not None:
            self._charge(who, estimated_tokens(texts) if tokens is None else tokens, started)
        return vectors

    def _charge(self, who: Payer, tokens: int, started: float, error: str | None = None) -> None:
        """Tell ``who`` an attempt begun at ``started`` spent ``tokens``, at the price."""
        cost = self.price.of(tokens, 0) if self.price is not None else 0.0
        usage = Usage(input_tokens=tokens, cost=cost)
        who.spent(self.name, usage, time.perf_counter() - started, error)


def parse_answer(body: bytes, count: int, model: str) -> tuple[list[list[float]], int | None]:
    """The vectors in an embeddings answer's body, in the order of the ``count`` texts
    (each a list of numbers, or their float32s in base64: what the ``openai`` client
    asks for, and a server may ignore), and the tokens its ``usage.prompt_tokens``
    counts (None: it counts none).

    Raises:
        ModelResponseError: naming the model and what is wrong with the body (one that
            is not JSON is worth a retry, as a chat answer's is).
        ModelHTTPError: for an error in the body that stands for one (a server error,
            a rate limit), retried as that.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ModelResponseError(
            f"the embeddings of model {model!r} came in a body that is not JSON ({exc}): "
            f"{shown(body)}",
            retryable=True,
        ) from exc
    error = error_in(data, "data")
    if error is not None:
        raise answered_error(error, model, "answered with an error")
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ModelResponseError(  # with what came instead: {"detail": ...}
            f"the embeddings of model {model!r}: data is {kind_of(items)}, not a list, in "
            f"{masked(shown(data))}"
        )
    found: list[tuple[int, list[float]]] = []
    for at, item in enumerate(items):
        index = item.get("index", at) if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool):
            raise ModelResponseError(
                f"the embeddings of model {model!r}: data[{at}] is not an embedding with an index"
            )
        found.append((index, _vector(item.get("embedding"), f"data[{at}].embedding", model)))
    vectors = [vector for _, vector in sorted(found, key=lambda pair: pair[0])]
    sizes = {len(v) for v in vectors}
    if len(vectors) != count or 0 in sizes or len(sizes) > 1:
        raise ModelResponseError(
            f"the embeddings endpoint answered {len(vectors)} vectors of sizes "
            f"{sorted(sizes)} for {count} texts (model {model!r})"
        )
    return vectors, _prompt_tokens(data)


def _prompt_tokens(data: dict[str, Any]) -> int | None:
    """The tokens an answer's ``usage`` counts, if it counts them as a whole number."""
    usage = data.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
        return tokens
    return None


def _vector(value: Any, where: str, model: str) -> list[float]:
    """One embedding: a list of numbers, or base64 of float32s."""
    if isinstance(value, str):
        try:
            packed = base64.b64decode(value, validate=True)
        except ValueError:
            packed = b"?"  # not base64: refused below
        if len(packed) % 4 == 0:  # float32s, in this machine's order (as the SDK reads them)
            return list(array.array("f", packed))
    elif isinstance(value, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in value
    ):
        return [float(x) for x in value]
    raise ModelResponseError(
        f"the embeddings of model {model!r}: {where} is {kind_of(value)}, not numbers"
    )
