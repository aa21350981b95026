"""Building a chat-completions request: the messages as the wire wants them, the
model's settings split between the SDK's parameters and ``extra_body`` (for the
Responses API too: ``api="responses"``), and the instruction that asks for structured
output where ``response_format`` cannot.

Nothing here imports ``openai`` until it must (the SDK's parameters are read from the
installed SDK once, on first use), so a hive's settings are checked without it.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from runtime.config.endpoints import header_name_problem, header_value_problem, unsendable
from runtime.errors import ConfigError, ConfigErrors, kind_of
from runtime.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from runtime.model import OutputSchema
from runtime.text import valid_text

__all__ = [
    "NO_KEY",
    "RESERVED_RESPONSES_SETTINGS",
    "RESERVED_SETTINGS",
    "Api",
    "check_settings",
    "given_problem",
    "key_missing",
    "key_source",
    "key_unsendable",
    "messages_out",
    "output_instruction",
    "reads_key_variable",
    "sdk_parameters",
    "settings_problems",
    "split_settings",
    "wire_arguments",
    "without_query",
]

RESERVED_SETTINGS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "functions",
        "function_call",
        "response_format",
        "stream",
        "stream_options",
        "timeout",
    }
)
"""Request fields Honeycomb sets itself, which a model's settings cannot."""

RESERVED_RESPONSES_SETTINGS = frozenset(
    {
        "model",
        "input",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "timeout",
        "previous_response_id",
        "conversation",
        "background",
    }
)
"""The same for the Responses API: Honeycomb sends the whole conversation every call
(``previous_response_id`` and ``conversation`` would send it twice), and waits for the
answer (``background``)."""

Api = Literal["chat", "responses"]
"""Which OpenAI API a model speaks: chat completions, or the Responses API."""

_RESERVED: dict[Api, frozenset[str]] = {
    "chat": RESERVED_SETTINGS,
    "responses": RESERVED_RESPONSES_SETTINGS,
}


SettingsPath = tuple[Any, ...]
"""Where in a model's settings a problem is: keys (and list indexes), from the top."""

_SCALARS = (str, int, float, bool)


def settings_problems(
    settings: Mapping[str, Any], api: Api = "chat"
) -> list[tuple[SettingsPath, str]]:
    """Every problem of a model's settings for ``api``, each where it is: a field Honeycomb sets
    itself, or a setting of the SDK whose type Honeycomb knows (``extra_headers``,
    ``extra_query``, ``extra_body``) of another shape, or a header no HTTP client can
    send (its name or its value), which would fail every call. A message never shows
    a header's value, nor its name past the character that keeps it from being sent
    (:func:`~runtime.config.endpoints.header_name_problem`): headers hold secrets."""
    reserved = _RESERVED[api]
    problems: list[tuple[SettingsPath, str]] = [
        (
            (key,),
            f"{key!r} cannot be a setting: Honeycomb sets it on every request "
            f"(settings cannot set any of {', '.join(sorted(reserved))})",
        )
        for key in settings
        if key in reserved
    ]
    extra = settings.get("extra_body", {})
    if not isinstance(extra, Mapping):
        problems.append(
            (
                ("extra_body",),
                f"extra_body must be a mapping of fields to send (got {kind_of(extra)})",
            )
        )
    headers = settings.get("extra_headers", {})
    if not isinstance(headers, Mapping):
        problems.append(
            (
                ("extra_headers",),
                "extra_headers must be a mapping of header names to text, numbers or booleans "
                f"(got {kind_of(headers)})",
            )
        )
    else:
        for name, value in headers.items():
            if not isinstance(name, str):
                problems.append((("extra_headers", name), "the name of a header must be text"))
            elif (problem := header_name_problem(name)) is not None:
                problems.append((("extra_headers", name), problem))
            elif not isinstance(value, _SCALARS):
                problems.append(
                    (
                        ("extra_headers", name),
                        "the value of a header must be text, a number or a boolean "
                        f"(got {kind_of(value)})",
                    )
                )
            elif (problem := header_value_problem(_header_text(value))) is not None:
                problems.append((("extra_headers", name), problem))
    query = settings.get("extra_query", {})
    if not isinstance(query, Mapping):
        problems.append(
            (
                ("extra_query",),
                "extra_query must be a mapping of parameter names to text, numbers, booleans "
                f"or lists of them (got {kind_of(query)})",
            )
        )
    else:
        for name, value in query.items():
            if not isinstance(name, str):
                problems.append(
                    (("extra_query", name), "the name of a query parameter must be text")
                )
            elif not (
                isinstance(value, _SCALARS)
                or (isinstance(value, list | tuple) and all(isinstance(v, _SCALARS) for v in value))
            ):
                problems.append(
                    (
                        ("extra_query", name),
                        "the value of a query parameter must be text, a number, a boolean or a "
                        f"list of them (got {kind_of(value)})",
                    )
                )
    return problems


def check_settings(settings: Mapping[str, Any], api: Api = "chat", what: str | None = None) -> None:
    """Raise if a model's settings have any of the :func:`settings_problems`; each
    error says whose they are, ``what`` (``model 'gpt-4o'``), when given.

    Raises:
        ConfigError: naming the setting (only up to ``extra_headers``: headers hold
            secrets), or ConfigErrors (a ConfigError) for several.
    """
    whose = f"{what}: " if what else ""
    errors = [
        ConfigError(whose + message, field=_field(where))
        for where, message in settings_problems(settings, api)
    ]
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


def _field(where: SettingsPath) -> str:
    shown = where[:1] if where[0] == "extra_headers" else where
    return "settings." + ".".join(str(part) for part in shown)


def _header_text(value: str | int | float | bool) -> str:
    """A header's value as HTTP sends it: numbers and booleans (as YAML writes them)
    as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


@functools.cache
def sdk_parameters(api: Api = "chat") -> frozenset[str]:
    """The keyword parameters of the installed SDK's ``chat.completions.create`` (or
    ``responses.create``): read from its signature, so they are right for whichever
    ``openai`` is installed."""
    if api == "responses":
        from openai.resources.responses import AsyncResponses

        create: Any = AsyncResponses.create
    else:
        from openai.resources.chat.completions import AsyncCompletions

        create = AsyncCompletions.create
    parameters = inspect.signature(create).parameters
    return frozenset(name for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY)


def split_settings(
    settings: Mapping[str, Any], api: Api = "chat", what: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``settings`` as ``(SDK parameters, extra_body)``: keys the SDK does not name
    (``top_k``, ``min_p``, ``repetition_penalty`` for vLLM, llama.cpp, Ollama) go in the
    request body through ``extra_body``, merged with the settings' own ``extra_body``.

    Raises:
        ConfigError: see :func:`check_settings` (``what``: whose settings they are).
    """
    check_settings(settings, api, what)
    known = sdk_parameters(api)
    sdk = {k: v for k, v in settings.items() if k in known and k != "extra_body"}
    if "extra_headers" in sdk:
        sdk["extra_headers"] = {k: _header_text(v) for k, v in sdk["extra_headers"].items()}
    extra = {k: v for k, v in settings.items() if k not in known}
    extra.update(settings.get("extra_body", {}))  # the settings' own extra_body wins
    return sdk, extra


def without_query(base_url: str) -> tuple[str, dict[str, str]]:
    """``base_url`` without its query, and the query's parameters: the SDK would add
    each path after the whole URL (``/v1?key=K`` and ``chat/completions`` make
    ``/v1/?key=Kchat/completions``), so a key an endpoint takes in its query
    (``?key=``) is sent as a query of every request instead."""
    parts = urlsplit(base_url)
    if not parts.query:
        return base_url, {}
    return parts._replace(query="").geturl(), dict(parse_qsl(parts.query, keep_blank_values=True))


def output_instruction(output: OutputSchema) -> str:
    """What tells the model to answer with JSON of ``output``'s schema, for endpoints
    that take no ``json_schema`` response format."""
    schema = json.dumps(output.json_schema, separators=(",", ":"))
    return (
        "Answer with one JSON object and nothing else (no prose, no code fence). It must "
        f"follow this JSON schema, named {output.name}:\n{schema}"
    )


def messages_out(
    messages: Sequence[Message],
    instruction: str | None,
    *,
    alternating: bool = False,
    reasoning: bool = True,
) -> list[dict[str, Any]]:
    """``messages`` as the wire wants them, with ``instruction`` added to the leading
    system message (some chat templates take only one system message, and only first);
    ``alternating``: consecutive user messages as one (some templates want user and
    assistant in turn); ``reasoning``: assistant messages with their reasoning."""
    out: list[dict[str, Any]] = []
    for message in messages:
        sent = _message_out(message)
        if not reasoning:
            sent.pop("reasoning_content", None)
        last = out[-1] if out else None
        if alternating and last is not None and last["role"] == sent["role"] == "user":
            out[-1] = {"role": "user", "content": f"{last['content']}\n\n{sent['content']}"}
        else:
            out.append(sent)
    if instruction is not None:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{instruction}"}
        else:
            out.insert(0, {"role": "system", "content": instruction})
    return out


# The text of every message goes out valid (``valid_text``): the body is UTF-8, and
# a lone surrogate (a byte of argv or a file name that is not UTF-8) would fail the
# call before it is sent.


def _message_out(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": valid_text(message.content)}
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "tool_call_id": valid_text(message.tool_call_id),
            "content": valid_text(message.content),
        }
    return _assistant_out(message)


def _assistant_out(message: AssistantMessage) -> dict[str, Any]:
    content = message.content
    out: dict[str, Any] = {
        "role": "assistant",
        "content": valid_text(content) if content is not None else None,
    }
    if message.tool_calls:
        out["tool_calls"] = [_call_out(c) for c in message.tool_calls]
    if message.reasoning is not None:
        out["reasoning_content"] = valid_text(message.reasoning)
    return out


def _call_out(call: ToolCall) -> dict[str, Any]:
    """A call as the wire wants it, with what its endpoint sent with it to have back
    (its ``extra_content``: Gemini's thought signature, which it refuses the next turn
    without)."""
    out: dict[str, Any] = {
        "id": valid_text(call.id),
        "type": "function",
        "function": {
            "name": valid_text(call.name),
            "arguments": valid_text(wire_arguments(call.arguments)),
        },
    }
    if call.extra_content is not None:
        out["extra_content"] = json.loads(call.extra_content)
    return out


def wire_arguments(arguments: str) -> str:
    """The arguments as sent back: as the model wrote them when they are a JSON object,
    else ``{}``. Servers parse them (llama.cpp's answers every later turn with a 500
    when they do not parse); the transcript keeps what the model wrote, and the
    observation has already told the model what was wrong."""
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):  # nested too deeply to parse is not JSON either
        return "{}"
    return arguments if isinstance(parsed, dict) else "{}"


KEY_VARIABLE = "OPENAI_API_KEY"
"""Where an OpenAI-compatible model finds its API key when it is given none."""

NO_KEY = "unused"
"""The key sent where there is none: a placeholder, which a local server that takes
any key takes (one that wants a key refuses it, told as wanting one)."""


def reads_key_variable(api_key: str | None, base_url: str | None) -> bool:
    """Whether a model given ``api_key`` (None: none; ``""``: one written empty, as a
    hive's ``${NAME:-}`` of a variable not set) and ``base_url`` (as given, not
    ``OPENAI_BASE_URL``) sends :data:`KEY_VARIABLE`'s key: when it is given none, or
    one empty for OpenAI's endpoint. An empty key for an endpoint of its own is no
    key: the key of another endpoint never goes there in its place."""
    return not api_key and (api_key is None or not base_url)


def key_missing(
    what: str,
    *,
    api_key: str | None = None,
    api_key_env: str | None = None,
    base_url: str | None = None,
) -> str | None:
    """Why the calls of ``what`` (``model 'gpt-4o'``, ``the memory's embeddings
    model 'e'``) would fail for want of an API key, or None when they have what they
    need (read now: the environment may change). Given ``api_key_env``, the variable
    named must be set. Else OpenAI's own endpoint (no ``base_url``, nor
    ``OPENAI_BASE_URL``, or one that names it, as ``https://api.openai.com/v1``) needs
    a key, from ``api_key`` or :data:`KEY_VARIABLE` (:func:`reads_key_variable`); a
    local server takes any. The one check of a hive's models and embeddings and of an
    endpoint's."""
    if api_key_env is not None:
        if os.environ.get(api_key_env):
            return None
        return (
            f"{what} reads its API key from the environment variable {api_key_env}, "
            "which is not set"
        )
    endpoint = base_url or os.environ.get("OPENAI_BASE_URL")
    from_variable = reads_key_variable(api_key, base_url) and os.environ.get(KEY_VARIABLE)
    if api_key or from_variable or not _openais(endpoint):
        return None
    return (
        f"{what} needs an API key: set {KEY_VARIABLE} (or give the model an api_key, or "
        "the base_url of a local endpoint)"
    )


def given_problem(
    timeout: float,
    max_concurrency: int | None,
    context_tokens: int | None,
    api_key_env: str | None,
) -> str | None:
    """What is wrong with what an endpoint's model is given, in words that name the
    argument (a hive's fields are checked as it loads): a ``timeout`` that is not a
    positive number of seconds (each call would time out at once, NaN fail), a
    ``max_concurrency`` or ``context_tokens`` under 1, an ``api_key_env`` that names no
    variable; None when nothing is."""
    if not timeout > 0:  # NaN too
        return f"timeout must be a positive number of seconds (one attempt's), got {timeout}"
    if max_concurrency is not None and max_concurrency < 1:
        return f"max_concurrency must be at least 1 (None: no limit), got {max_concurrency}"
    if context_tokens is not None and context_tokens < 1:
        return f"context_tokens must be a positive number of tokens, got {context_tokens}"
    if api_key_env is not None and not api_key_env.strip():
        return f"api_key_env must name an environment variable, got {api_key_env!r}"
    if api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
        # Not shown: it is most often the key itself, given where its variable's name goes.
        return (
            "api_key_env must name an environment variable (letters, digits and '_'), and "
            "what it was given is none (a key? give it as api_key): not shown"
        )
    return None


def key_unsendable(what: str, key: str, source: str | None) -> str | None:
    """Why ``key`` (from ``source``, in :func:`key_source`'s words) cannot be sent: it
    begins or ends with a space or a line break (a line of a Windows .env read whole),
    or holds what no HTTP header holds (:func:`~runtime.config.endpoints.unsendable`);
    None when it can."""
    why = unsendable(key)
    return None if why is None else f"{what}: the API key {source or 'sent'} {why}: remove it"


def key_source(
    api_key_env: str | None,
    api_key: str | None,
    base_url: str | None,
    *,
    given: bool,
    sent_to: str | None = None,
    headers: Mapping[str, object] | None = None,
) -> str | None:
    """Where the key a model's calls send comes from, in words, by what the model was
    given (a client of its own, the variable to read, a key, its ``base_url``); None:
    nothing gave one, and :data:`NO_KEY` went (a local server takes any). The userinfo
    of the URL its calls are ``sent_to`` (``http://user:PASSWORD@proxy/v1``) is what
    goes, whatever else was given: the HTTP client sends it as the request's
    credentials (``Basic``), in the key's place; else an ``Authorization`` of the
    settings' extra ``headers``, which the SDK sends in its place too."""
    if sent_to is not None and _has_userinfo(sent_to):
        return "of the base_url's userinfo (sent as Basic credentials, in place of any api_key)"
    if any(str(name).lower() == "authorization" for name in headers or {}):
        return (
            "of the Authorization header of settings.extra_headers (sent in place of any api_key)"
        )
    if given:
        return "of the client given"
    if api_key_env is not None:
        return f"read from {api_key_env}"
    if api_key:
        return "given as the model's api_key"
    sent = reads_key_variable(api_key, base_url) and os.environ.get(KEY_VARIABLE)
    return f"read from {KEY_VARIABLE}" if sent else None


def _has_userinfo(url: str) -> bool:
    """Whether ``url`` holds a userinfo (``user:password@``, or ``token@``)."""
    return "@" in urlsplit(url.strip()).netloc


def _openais(url: str | None) -> bool:
    """Whether ``url`` is OpenAI's own endpoint (none: the SDK's default is)."""
    if not url:
        return True
    try:
        return urlsplit(url.strip()).hostname == "api.openai.com"
    except ValueError:  # no URL at all: its own error says so
        return False
