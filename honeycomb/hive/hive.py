"""The hive file: models, roles, planner, aggregator, policies and memory in one YAML file.

Every mistake is reported at once, each with file, line, column and field path, and
a "did you mean" for misspelt names. Import paths (tools, output schemas) resolve in
the hive's folder first, so tools next to it import as ``module:function``; the folder
leads ``sys.path`` only while they are imported (:mod:`honeycomb.hive.imports`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any, Literal, Self, get_args

import pydantic
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    model_validator,
)

from honeycomb.hive.backend import RAY_MISSING, BackendSpec, backend_shorthand, ray_missing
from honeycomb.hive.imports import imports_from
from honeycomb.hive.mcp import McpServerSpec, check_servers
from honeycomb.offline import OfflineModel
from honeycomb.run.planner import RolePlanner
from honeycomb.run.policy import FailurePolicy, Policy, quorum_problem
from runtime import (
    ConfigError,
    ConfigErrors,
    McpServer,
    Memory,
    Model,
    Price,
    PricedModel,
    TextToolModel,
    ToolRegistry,
    YamlDocument,
    did_you_mean,
    load_yaml,
)
from workers import Approvals, Role, load_roles, read_roles
from workers.guards import Guards
from workers.nesting import hive_ref, nesting_problems
from workers.role import approval_problems, guard_problems

__all__ = ["DEFAULT_MEMORY", "Hive", "MemorySpec", "ModelSpec", "load_hive"]

DEFAULT_MEMORY = Path(".honeycomb") / "memory.db"
"""The memory file of a hive whose ``memory:`` names none: under the current folder,
beside the command line's run store."""


class RetrySpec(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    attempts: int = Field(default=4, ge=1, le=20)
    deadline_s: float = Field(default=90.0, gt=0)
    initial_wait_s: float = Field(default=0.5, ge=0)
    max_wait_s: float = Field(default=30.0, gt=0)


class PriceSpec(BaseModel):
    """Dollars per million tokens (``price: {input_per_mtok: 0.15, output_per_mtok: 0.6}``;
    ``cached_input_per_mtok`` for input tokens read from the provider's cache)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)


class ModelSpec(BaseModel):
    """One model of the hive: an OpenAI-compatible endpoint, or the offline model.

    ``max_concurrency`` bounds an endpoint's calls in flight across every worker and
    run using the model; the bound halves on a 429 and grows back (``null``: none).
    ``settings`` are sent with every call: those the ``openai`` SDK names as its
    parameters, and the rest (``top_k``, ``min_p`` ...) in the request body.
    ``api: responses`` speaks OpenAI's Responses API instead of chat completions;
    ``tool_protocol: text`` gives tools to a model without function calling, as text
    (:class:`~runtime.text_tools.TextToolModel`).
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    provider: Literal["openai", "offline"] = "openai"
    api: Literal["chat", "responses"] = "chat"
    tool_protocol: Literal["native", "text"] = "native"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None  # masked in reprs, dumps and errors
    timeout: float = Field(default=120.0, gt=0)
    settings: dict[str, Any] = Field(default_factory=dict)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    latency: float = Field(default=0.15, ge=0)
    jitter: float = Field(default=0.0, ge=0)
    price: PriceSpec | None = None
    max_concurrency: int | None = Field(default=32, ge=1)

    def settings_sent(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The settings as an OpenAI-compatible endpoint gets them: ``(SDK parameters,
        extra_body fields)``, as the installed ``openai`` names its parameters."""
        from runtime._request import split_settings

        return split_settings(self.settings, self.api)

    @model_validator(mode="after")
    def _openai_needs_a_model_name(self) -> Self:
        if self.provider == "openai" and not self.model:
            raise ValueError("an openai model needs 'model: <name>' (gpt-4o-mini, llama3.1, ...)")
        if self.provider == "offline" and self.api != "chat":
            raise ValueError("'api: responses' is for an openai model, not the offline one")
        return self

    def build(self) -> Model:
        model = self._build()
        if self.tool_protocol == "text":
            model = TextToolModel(model)
        if self.price is None:
            return model
        price = self.price
        return PricedModel(
            model,
            Price(
                input_per_mtok=price.input_per_mtok,
                output_per_mtok=price.output_per_mtok,
                cached_input_per_mtok=price.cached_input_per_mtok,
            ),
        )

    def _build(self) -> Model:
        if self.provider == "offline":
            return OfflineModel(latency=self.latency, jitter=self.jitter)
        # The adapter (and ``openai``, about a second to import) loads with the first
        # hive that uses it, not with every command.
        from runtime.openai_model import OpenAIModel
        from runtime.openai_responses import OpenAIResponsesModel
        from runtime.retry import RetryPolicy

        r = self.retry
        key = self.api_key.get_secret_value() if self.api_key is not None else None
        adapter = OpenAIResponsesModel if self.api == "responses" else OpenAIModel
        return adapter(
            self.model or "",
            base_url=self.base_url or None,
            api_key=key or None,
            timeout=self.timeout,
            settings=self.settings,
            retry=RetryPolicy(
                attempts=r.attempts,
                deadline_s=r.deadline_s,
                initial_wait_s=r.initial_wait_s,
                max_wait_s=r.max_wait_s,
            ),
            max_concurrency=self.max_concurrency,
        )


class EmbeddingsSpec(BaseModel):
    """An OpenAI-compatible embeddings endpoint, for semantic memory search."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key: SecretStr | None = None  # masked in reprs, dumps and errors
    dimensions: int | None = Field(default=None, ge=1, le=16384)
    timeout: float = Field(default=60.0, gt=0)
    max_concurrency: int | None = Field(default=8, ge=1)


class MemorySpec(BaseModel):
    """The hive's long-term memory (``memory:``): an SQLite file, searched by BM25 and,
    with ``embeddings``, by meaning too. ``path`` is relative to the hive file; without
    one, :data:`DEFAULT_MEMORY`."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    path: str | None = None
    embeddings: EmbeddingsSpec | None = None
    max_chars: int = Field(default=4000, ge=100, le=1_000_000)


class PlannerSpec(BaseModel):
    """``planner: {role: lead, rounds: 4}``: a lead that plans in rounds, reading each
    round's results before it adds more subtasks (``planner: NAME`` plans once)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    role: str = Field(min_length=1)
    rounds: int = Field(default=1, ge=1, le=100)


def _planner_shorthand(value: Any) -> Any:
    """``planner: NAME`` is short for ``planner: {role: NAME}`` (it plans once)."""
    return {"role": value} if isinstance(value, str) else value


def _shorthand(value: Any) -> Any:
    """``default: offline`` is short for ``default: {provider: offline}``."""
    return {"provider": "offline"} if value == "offline" else value


class _HiveSpec(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    name: str = "hive"
    description: str = ""
    example_task: str | None = None
    models: dict[str, Annotated[ModelSpec, BeforeValidator(_shorthand)]] = Field(
        default_factory=dict
    )
    default_model: str | None = None
    tools: dict[str, str] = Field(default_factory=dict)
    mcp_servers: dict[str, McpServerSpec] = Field(default_factory=dict)
    roles: dict[str, Any] = Field(default_factory=dict)
    roles_dir: str | None = None
    planner: Annotated[PlannerSpec | None, BeforeValidator(_planner_shorthand)] = None
    aggregator: str | None = None
    policy: Policy = Field(default_factory=Policy)
    store: str | None = None
    memory: MemorySpec | None = None
    approvals: Approvals | None = None
    guards: Guards | None = None
    backend: Annotated[BackendSpec, BeforeValidator(backend_shorthand)] = Field(
        default_factory=BackendSpec
    )


class Hive:
    """A loaded, checked hive file; ``Executor.from_hive`` builds its Executor."""

    def __init__(
        self,
        file: Path,
        spec: _HiveSpec,
        roles: dict[str, Role],
        registry: ToolRegistry,
        doc: YamlDocument | None = None,
        hives: dict[str, Hive] | None = None,
    ) -> None:
        self.file = file
        self.hives = hives or {}
        """The hives its roles call as tools, by their reference (``hive:PATH``)."""
        self.spec = spec
        self.roles = roles
        self.registry = registry
        self.folder = file.resolve().parent
        self._doc = doc or YamlDocument(data={}, file=str(file))

    @property
    def mcp_servers(self) -> list[McpServer]:
        """The MCP servers the hive declares (``mcp_servers:``)."""
        return [spec.build(name, self.folder) for name, spec in self.spec.mcp_servers.items()]

    async def check_servers(self) -> dict[str, int]:
        """Start every MCP server, list its tools, check that each tool the roles name
        is there, and stop them (``honeycomb validate`` does this).

        Returns:
            The number of tools of each server.

        Raises:
            ConfigErrors: a server that does not start, a tool it does not have.
        """
        raw = self._doc.data.get("roles") if isinstance(self._doc.data, Mapping) else None
        inline = [str(k) for k in raw] if isinstance(raw, Mapping) else []
        counts, errors = await check_servers(self.mcp_servers, self.roles, self._doc, inline)
        if errors:
            raise ConfigErrors(sorted(errors, key=lambda e: (e.line or 0, e.column or 0)))
        return counts

    def imports(self) -> AbstractContextManager[None]:
        """A block in which import paths resolve as the hive's do: in its folder first,
        to the modules its loading imported (``Executor.from_hive`` builds in one)."""
        return imports_from(self.folder)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def policy(self) -> Policy:
        return self.spec.policy

    @property
    def store(self) -> Path | None:
        """The run store the hive declares (``store:``, relative to the hive file)."""
        declared = self.spec.store
        return self.file.parent / declared if declared is not None else None

    @property
    def memory_path(self) -> Path | None:
        """The memory file the hive declares (``memory: path:``, relative to the hive
        file; :data:`DEFAULT_MEMORY` when it names none); None without ``memory:``."""
        declared = self.spec.memory
        if declared is None:
            return None
        return self.file.parent / declared.path if declared.path else DEFAULT_MEMORY

    def memory(self) -> Memory | None:
        """The memory the hive declares, made anew (its file opens on first use)."""
        declared, path = self.spec.memory, self.memory_path
        if declared is None or path is None:
            return None
        from runtime.memory import SQLiteMemory

        embeddings = None
        if declared.embeddings is not None:
            from runtime.embeddings import OpenAIEmbeddings  # loads openai

            e = declared.embeddings
            key = e.api_key.get_secret_value() if e.api_key is not None else None
            embeddings = OpenAIEmbeddings(
                e.model, base_url=e.base_url or None, api_key=key or None,
                dimensions=e.dimensions, timeout=e.timeout, max_concurrency=e.max_concurrency,
            )  # fmt: skip
        return SQLiteMemory(path, embeddings=embeddings, max_chars=declared.max_chars)

    def models(self, replace: Mapping[str, Model] | None = None) -> dict[str, Model]:
        """The hive's models by name, built as declared, except those ``replace`` gives
        (by the hive's names for them).

        Raises:
            ConfigErrors: for a name in ``replace`` that the hive does not declare.
        """
        given = dict(replace or {})
        declared = list(self.spec.models)
        unknown = [name for name in given if name not in declared]
        if unknown:
            raise ConfigErrors(
                [
                    ConfigError(
                        f"models={{{name!r}: ...}}: the hive has no model {name!r}"
                        f"{did_you_mean(name, declared)}; its models: {', '.join(declared)}",
                        file=str(self.file),
                    )
                    for name in unknown
                ]
            )
        return {
            name: given[name] if name in given else spec.build()
            for name, spec in self.spec.models.items()
        }

    def check_runnable(self) -> None:
        """Raise if ``honeycomb run`` cannot run the hive: it plans every task, so the
        hive needs a planner (from Python, ``run(task, subtasks=...)`` needs none).

        Raises:
            ConfigErrors: naming what to add.
        """
        if self.spec.planner is None and "planner" not in self.roles:
            raise ConfigErrors(
                [
                    ConfigError(
                        "the hive has no planner, and honeycomb run plans every task: define "
                        "a role named 'planner', or name one with planner: (from Python, "
                        "run(task, subtasks=[...]) needs none)",
                        file=str(self.file),
                        field="planner",
                    )
                ]
            )

    @property
    def planner(self) -> str | RolePlanner | None:
        """The hive's planner: a role's name, or a lead that plans in rounds."""
        spec = self.spec.planner
        if spec is None or spec.rounds == 1:
            return spec.role if spec is not None else None
        return RolePlanner(spec.role, rounds=spec.rounds)

    @property
    def backend(self) -> BackendSpec:
        """Where the hive's subtask workers run (``backend:``); ``build`` makes it."""
        return self.spec.backend

    @property
    def default_model(self) -> str | None:
        """The model of roles that name none: the declared default, else the first."""
        return self.spec.default_model or next(iter(self.spec.models), None)


_SECRETS = (
    ("models", "*", "api_key"),
    ("models", "*", "settings", "extra_headers"),
    ("memory", "embeddings", "api_key"),
    ("mcp_servers", "*", "env"),
    ("mcp_servers", "*", "headers"),
    ("backend", "ray", "runtime_env", "env_vars"),
)
"""Where a hive holds secrets: no error shows what is there, only the field and the
value's type."""


def load_hive(path: str | Path) -> Hive:
    """Read and check a hive file, and the hives its roles call as tools (``hive:PATH``,
    relative to the file).

    Raises:
        ConfigErrors: every problem, each with file, line, column and field path.
    """
    return _load(Path(path), ())


def _load(file: Path, chain: tuple[Path, ...]) -> Hive:
    """A hive file, called as a tool through the hive files of ``chain`` (outermost
    first)."""
    try:
        doc = load_yaml(file, interpolate=True, secrets=_SECRETS)
    except ConfigError as exc:
        raise ConfigErrors([exc]) from exc
    errors: list[ConfigError] = []
    if not isinstance(doc.data, Mapping):
        raise ConfigErrors([doc.error((), "a hive file must be a mapping (models:, roles: ...)")])
    spec, problems = doc.validate(_HiveSpec, doc.data)
    errors.extend(problems)
    if spec is None:
        spec = _HiveSpec.model_validate(_salvage(doc.data))
    models = _model_names(doc, spec)
    with imports_from(file.resolve().parent):  # tools and schemas next to the hive
        registry = _registry(doc, spec, errors)
        roles = _roles(doc, spec, registry, models, file, errors)
        roles = _with_approvals(doc, spec, roles, registry, errors)
    _check_references(doc, spec, roles, models, errors)
    _check_nesting(doc, spec, roles, errors)
    hives = _sub_hives(doc, spec, roles, file, (*chain, file.resolve()), errors)
    _check_settings(doc, errors)
    _check_memory(doc, spec, roles, errors)
    _check_policy_rules(doc, errors)
    if spec.backend.ray is not None and ray_missing():
        errors.append(doc.error(("backend",), RAY_MISSING))
    if errors:
        raise ConfigErrors(sorted(errors, key=lambda e: (e.file or "", e.line or 0, e.column or 0)))
    return Hive(file, spec, roles, registry, doc, hives)


def _salvage(data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a broken hive that are valid on their own, so that references
    (roles, models, tools) are still checked and every mistake is reported at once."""
    keep: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _HiveSpec.model_fields:
            continue
        if isinstance(value, Mapping) and key in ("models", "tools", "mcp_servers", "roles"):
            value = {k: v for k, v in value.items() if _valid({key: {k: v}})}
        if _valid({key: value}):
            keep[key] = value
    return keep


def _valid(fields: dict[str, Any]) -> bool:
    try:
        _HiveSpec.model_validate(fields)
    except ValueError:
        return False
    return True


def _registry(doc: YamlDocument, spec: _HiveSpec, errors: list[ConfigError]) -> ToolRegistry:
    registry = ToolRegistry()
    for name, ref in spec.tools.items():
        try:
            found = ToolRegistry().resolve(ref)
            registry.add(found if found.name == name else found.renamed(name))
        except Exception as exc:  # every import problem is one located error
            message = exc.message if isinstance(exc, ConfigError) else str(exc)
            errors.append(doc.error(("tools", name), message))
    return registry


def _server_names(doc: YamlDocument, spec: _HiveSpec) -> list[str]:
    """The MCP servers a role may name: those declared, valid or not (as models)."""
    raw = doc.data.get("mcp_servers")
    return [str(k) for k in raw] if isinstance(raw, Mapping) else list(spec.mcp_servers)


def _model_names(doc: YamlDocument, spec: _HiveSpec) -> list[str]:
    """The models a role may name: those declared, valid or not (an invalid one has
    its own error; a role naming it has none)."""
    raw = doc.data.get("models")
    return [str(k) for k in raw] if isinstance(raw, Mapping) else list(spec.models)


def _roles(
    doc: YamlDocument,
    spec: _HiveSpec,
    registry: ToolRegistry,
    models: list[str],
    file: Path,
    errors: list[ConfigError],
) -> dict[str, Role]:
    roles: dict[str, Role] = {}
    if spec.roles_dir is not None:
        folder = file.parent / spec.roles_dir
        if not folder.is_dir():
            errors.append(doc.error(("roles_dir",), f"no such folder: {folder}"))
        else:
            try:
                servers = _server_names(doc, spec)
                roles.update(load_roles(folder, registry=registry, models=models, servers=servers))
            except ConfigErrors as exc:
                errors.extend(exc.errors)
    if "roles" in doc.data and isinstance(doc.data["roles"], Mapping):
        servers = _server_names(doc, spec)
        for path, role in read_roles(
            doc, errors, registry, ("roles",), models=models, servers=servers
        ):
            if role.name in roles:
                errors.append(doc.error(path, f"role {role.name!r} is also defined in roles_dir"))
            roles[role.name] = role
    if not roles and not errors:
        errors.append(doc.error(("roles",), "the hive defines no roles"))
    return roles


def _with_approvals(
    doc: YamlDocument,
    spec: _HiveSpec,
    roles: dict[str, Role],
    registry: ToolRegistry,
    errors: list[ConfigError],
) -> dict[str, Role]:
    """The roles, those without ``approvals:`` of their own given the hive's (each
    with the tools it names that the role uses)."""
    hive = spec.approvals
    if hive is None:
        return roles
    used: dict[str, tuple[str, ...]] = {}
    for name, role in roles.items():
        try:
            used[name] = role.resolve_tools(registry).names
        except Exception:  # its own error is reported with the role
            return roles
    every = sorted({tool for names in used.values() for tool in names})
    unused = "which no role of the hive uses"
    errors.extend(approval_problems(doc.data.get("approvals"), every, doc, (), unused))
    given: dict[str, Role] = {}
    for name, role in roles.items():
        if role.approvals is None:
            tools = tuple(t for t in hive.tools if t in used[name])
            role = role.model_copy(update={"approvals": hive.model_copy(update={"tools": tools})})
        given[name] = role
    return given


def _check_references(
    doc: YamlDocument,
    spec: _HiveSpec,
    roles: Mapping[str, Role],
    models: list[str],
    errors: list[ConfigError],
) -> None:
    # The roles' own model references are checked with their fields (check_role).
    if not models:
        errors.append(doc.error(("models",), "the hive defines no models (add 'default: offline')"))
    if spec.default_model is not None and spec.default_model not in models:
        errors.append(
            doc.error(
                ("default_model",),
                f"unknown model {spec.default_model!r}{did_you_mean(spec.default_model, models)}",
            )
        )
    # Roles declared but invalid count too: their own errors are reported.
    raw_roles = doc.data.get("roles")
    declared = list(roles) + [
        str(k) for k in (raw_roles if isinstance(raw_roles, Mapping) else {}) if k not in roles
    ]
    # Guards: import paths (the roles' are checked with their fields), then judges.
    errors.extend(guard_problems(doc.data.get("guards"), doc, ()))
    errors.extend(guard_problems(doc.data.get("guards"), doc, (), declared))
    for name, body in (raw_roles if isinstance(raw_roles, Mapping) else {}).items():
        if isinstance(body, Mapping):
            errors.extend(guard_problems(body.get("guards"), doc, ("roles", name), declared))
    for key in ("planner", "aggregator"):
        ref = getattr(spec, key)
        at: tuple[str, ...] = (key,)
        if isinstance(ref, PlannerSpec):
            ref = ref.role
            if isinstance(doc.data.get(key), Mapping):  # as written: {role: ..., rounds: ...}
                at = (key, "role")
        if ref is None or (key == "aggregator" and ref == "concat") or ref in declared:
            continue
        errors.append(
            doc.error(
                at,
                f"unknown role {ref!r}{did_you_mean(ref, declared)}; roles: {', '.join(declared)}",
            )
        )


def _check_nesting(
    doc: YamlDocument, spec: _HiveSpec, roles: Mapping[str, Role], errors: list[ConfigError]
) -> None:
    """Agent tools (``agent:ROLE``) that name no role, make a cycle, or nest past
    ``policy: max_nesting``: each at the tool that starts it (a role of ``roles_dir``
    at that field)."""
    raw = doc.data.get("roles")
    inline = raw if isinstance(raw, Mapping) else {}
    tools = {name: role.tools for name, role in roles.items()}
    for problem in nesting_problems(tools, spec.policy.max_nesting):
        where: tuple[str | int, ...] = (
            ("roles", problem.role, "tools", problem.index)
            if problem.role in inline
            else ("roles_dir",)
        )
        message = (
            problem.message if where[0] == "roles" else f"role {problem.role!r}: {problem.message}"
        )
        errors.append(doc.error(where, message))


def _sub_hives(
    doc: YamlDocument,
    spec: _HiveSpec,
    roles: Mapping[str, Role],
    file: Path,
    chain: tuple[Path, ...],
    errors: list[ConfigError],
) -> dict[str, Hive]:
    """The hives the roles call as tools, loaded (their own errors are told as
    theirs); a cycle of hive files, or a chain of them past ``max_nesting``, is told
    at the tool that starts it."""
    raw = doc.data.get("roles")
    inline = raw if isinstance(raw, Mapping) else {}
    found: dict[str, Hive] = {}
    for name, role in roles.items():
        for index, ref in enumerate(role.tools):
            target = hive_ref(ref)
            if target is None or ref in found:
                continue
            where = ("roles", name, "tools", index) if name in inline else ("roles_dir",)
            path = (file.parent / target).resolve()
            shown = " → ".join(p.name for p in (*chain, path))
            if path in chain:
                errors.append(doc.error(where, f"hive tools make a cycle: {shown}"))
            elif len(chain) > spec.policy.max_nesting:
                errors.append(
                    doc.error(
                        where,
                        f"hive tools nest {len(chain)} deep, past the limit of "
                        f"{spec.policy.max_nesting}: {shown}",
                    )
                )
            elif not path.is_file():
                errors.append(doc.error(where, f"{ref!r}: no hive file {path}"))
            else:
                try:
                    found[ref] = _load(path, chain)
                except ConfigErrors as exc:
                    errors.extend(exc.errors)
    return found


def _check_settings(doc: YamlDocument, errors: list[ConfigError]) -> None:
    """Every problem of every model's settings, each at its own key (the settings are
    kept as written: pydantic would say one thing of the whole mapping)."""
    from runtime._request import Api, settings_problems  # does not import openai

    models = doc.data.get("models")
    for name, spec in (models if isinstance(models, Mapping) else {}).items():
        settings = spec.get("settings") if isinstance(spec, Mapping) else None
        if isinstance(settings, Mapping):
            api: Api = "responses" if spec.get("api") == "responses" else "chat"
            for where, message in settings_problems(settings, api):
                errors.append(doc.error(("models", name, "settings", *where), message))


def _check_memory(
    doc: YamlDocument, spec: _HiveSpec, roles: Mapping[str, Role], errors: list[ConfigError]
) -> None:
    """Roles that use a memory the hive does not declare; embeddings without sqlite-vec."""
    if "memory" in doc.data:
        embeddings = spec.memory.embeddings if spec.memory is not None else None
        if embeddings is not None and importlib.util.find_spec("sqlite_vec") is None:
            errors.append(
                doc.error(
                    ("memory", "embeddings"),
                    "semantic search needs sqlite-vec, which is not installed: pip install "
                    "'honeycomb-agents[memory]' (or remove embeddings: to search by words)",
                )
            )
        return
    raw = doc.data.get("roles")
    inline = raw if isinstance(raw, Mapping) else {}
    for name, role in roles.items():
        if role.memory is not None:
            where = ("roles", name, "memory") if name in inline else ("roles",)
            message = (
                f"role {name!r} has memory: but the hive declares no memory: add a "
                "top-level 'memory: {path: memory.db}'"
            )
            errors.append(doc.error(where, message))


def _check_policy_rules(doc: YamlDocument, errors: list[ConfigError]) -> None:
    """The policy's rule across fields (quorum), on the values as written, when other
    fields of the policy are invalid: pydantic runs such a rule only on a policy whose
    fields are all valid, and every mistake is reported at once."""
    raw = doc.data.get("policy")
    if not isinstance(raw, Mapping):
        return
    try:
        Policy.model_validate(raw)
    except pydantic.ValidationError as exc:
        if all(not e["loc"] for e in exc.errors()):
            return  # the fields are valid: the rule ran, and its error is reported
    else:
        return
    failure = raw.get("failure", "best_effort")
    if failure not in get_args(FailurePolicy):
        return  # its own error says what to write
    problem = quorum_problem(failure, raw.get("quorum"))
    if problem is not None:
        errors.append(doc.error(("policy",), problem))
