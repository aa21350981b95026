"""What an endpoint's errors say: what a refusal asks to change (structured output
asked another way, turns that alternate, no ``stream_options``, ``max_completion_tokens``
for ``max_tokens``), how long a rate limit asks to wait, where a 404 points, which key
a 401 or 403 refused, a quota spent, and everything an error and those behind it show
(which a secret must not be in).
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping

from runtime.errors import ModelHTTPError
from runtime.models.openai.request import KEY_VARIABLE

__all__ = [
    "MAX_TOKENS",
    "QUOTA_SPENT",
    "REASONING_CONTENT",
    "STREAM_OPTIONS",
    "about_model",
    "all_text",
    "key_refused",
    "not_served",
    "quota_spent",
    "refuses",
    "refuses_format",
    "retry_after",
    "wants_alternation",
    "with_cause",
]


def with_cause(exc: BaseException) -> str:
    """What ``exc`` says, then what the deepest error behind it says: the SDK's
    "Connection error." names nothing to fix, the error it wraps does (a refused
    connection, a host name not known, a URL the HTTP client cannot send to)."""
    deepest, seen = exc, {id(exc)}
    while (behind := deepest.__cause__ or deepest.__context__) is not None:
        if id(behind) in seen:
            break
        seen.add(id(behind))
        if str(behind):
            deepest = behind
    said = str(exc).rstrip(".")
    return said if deepest is exc or str(deepest) in said else f"{said}: {deepest}"


_API_PATHS = ("/chat/completions", "/completions", "/responses", "/embeddings")


def not_served(url: str, base_url: str | None) -> str:
    """What a 404 for ``url`` (a path the server does not serve) asks to change: the
    ``base_url`` to try keeps its query (``?key=``, which goes with every request) after
    its path."""
    hint = f"the endpoint serves no POST {url}"
    if base_url is None:
        return hint
    whole, mark, query = base_url.partition("#")[0].partition("?")
    root, query = whole.rstrip("/"), mark + query
    for path in _API_PATHS:
        if root.endswith(path):
            tried = root.removesuffix(path) + query
            return f"{hint}: base_url ends with the API's path; try {tried!r}"
    if not re.search(r"/v\d", root.partition("://")[2]):
        tried = root + "/v1" + query
        return f"{hint}: most OpenAI-compatible servers answer under /v1; try {tried!r}"
    if url.endswith("/responses"):
        return (
            f"{hint}: a server that does not serve OpenAI's Responses API answers so; try "
            "its chat API (api: chat, OpenAIModel), or check the model's base_url"
        )
    return f"{hint}: check the model's base_url"


_ABOUT_MODEL = re.compile(r"model|deployment", re.I)


def about_model(body: object, model: str) -> bool:
    """Whether a 404's ``body`` is about the model asked, which the server does not have
    (it names it, or a model or a deployment, as Azure's ``DeploymentNotFound`` does),
    rather than about the path (one the server does not serve says neither)."""
    said = str(body)
    return model in said or _ABOUT_MODEL.search(said) is not None


QUOTA_SPENT = "the account's quota is spent, which no retry mends: check its plan and billing"
"""What a 429 for a quota spent asks to change."""


def quota_spent(body: object) -> bool:
    """Whether a 429's ``body`` says the account's quota is spent (OpenAI's
    ``insufficient_quota``: "You exceeded your current quota, please check your plan and
    billing details"), not its rate."""
    return "insufficient_quota" in str(body)


def key_refused(status: int, key_from: str | None, endpoint: str) -> str:
    """What a 401 (the key not taken) or a 403 (the key not allowed) from ``endpoint``
    asks to change, the key sent ``key_from`` where (None: no key was given)."""
    if key_from is None:
        return (
            f"{endpoint} wants an API key and none was given: set {KEY_VARIABLE}, or give "
            "the model an api_key or api_key_env"
        )
    if status == 401:
        return f"{endpoint} did not accept the API key {key_from}: check that key"
    return f"{endpoint} refused this request to the API key {key_from}: check what it may use"


def all_text(exc: BaseException) -> str:
    """Everything an error and the errors behind it would show: their text, and the
    fields an error tracker shows (the SDK's errors keep the request they sent, whose
    URL holds a key an endpoint takes as ``?key=``)."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None:
        parts += [str(current), repr(current.args), repr(vars(current))]
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


_REFUSED_FORMAT = re.compile(
    r"response_format|text\.format|json_schema|json_object|structured.?output", re.I
)


def refuses_format(exc: ModelHTTPError) -> bool:
    """Whether an error is the endpoint refusing the response format (a 400 or 422
    that names it); any other 400 is the request's own fault."""
    return refuses(exc, _REFUSED_FORMAT)


_ALTERNATION = re.compile(r"roles must alternate", re.I)


def wants_alternation(exc: ModelHTTPError) -> bool:
    """Whether an error is a chat template refusing turns that do not alternate (a
    400 or 422 that says so: vLLM and llama.cpp pass the template's own message on)."""
    return refuses(exc, _ALTERNATION)


STREAM_OPTIONS = re.compile(r"stream_options")
"""What a refusal of ``stream_options`` names: gateways and older APIs that do not know
it ("Unknown parameter: 'stream_options'", Azure's "Unrecognized request argument
supplied: stream_options")."""


REASONING_CONTENT = re.compile(
    r"reasoning_content.{0,200}(extra|not permitted|unrecognized|unknown|unexpected)"
    r"|(extra|not permitted|unrecognized|unknown|unexpected).{0,200}reasoning_content",
    re.I | re.S,
)
"""What a refusal of ``reasoning_content`` in an assistant message says (Mistral's
422: ``extra_forbidden``, "Extra inputs are not permitted", at
``["body", "messages", 3, "assistant", "reasoning_content"]``); not DeepSeek's
"Missing reasoning_content field", which wants it."""


MAX_TOKENS = re.compile(r"max_tokens\b.*\bmax_completion_tokens", re.S)
"""What a refusal of ``max_tokens`` says: "Unsupported parameter: 'max_tokens' is not
supported with this model. Use 'max_completion_tokens' instead." (OpenAI's reasoning
models, on Azure or behind a proxy)."""


def refuses(exc: ModelHTTPError, what: re.Pattern[str]) -> bool:
    """Whether an error is the endpoint refusing the request for ``what`` (a 400 or
    422 that says it)."""
    return exc.status in (400, 422) and what.search(str(exc.body)) is not None


# The endpoint's own headers first, then those a proxy forwards from the provider
# behind it (LiteLLM's llm_provider-*); of each, milliseconds first.
_RETRY_AFTER_HEADERS = (
    "retry-after-ms",
    "retry-after",
    "llm_provider-retry-after-ms",
    "llm_provider-retry-after",
)


def retry_after(headers: Mapping[str, str]) -> float | None:
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
