"""The hive file: models, roles, planner, aggregator, policies and memory in one YAML file.

Every mistake is reported at once, each with file, line, column and field path, and
a "did you mean" for misspelt names. Import paths (tools, output schemas) resolve in
the hive's folder first, so tools next to it import as ``module:function``; the folder
leads ``sys.path`` only while they are imported (:mod:`honeycomb.hive.imports`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from honeycomb.hive.backend import BackendSpec
from honeycomb.hive.checks import check_across_fields
from honeycomb.hive.imports import imports_from
from honeycomb.hive.mcp import approvals_problems, check_servers, in_folder
from honeycomb.hive.specs import DEFAULT_MEMORY, HiveSpec, MemorySpec, ModelSpec, salvaged
from honeycomb.run.planner import RolePlanner
from honeycomb.run.policy import Policy
from runtime import (
    ConfigError,
    ConfigErrors,
    McpServer,
    Memory,
    Model,
    ToolRegistry,
    YamlDocument,
    did_you_mean,
    load_yaml,
)
from runtime.memory import SQLiteMemory
from workers import Role, read_roles
from workers.nesting import hive_ref
from workers.role import approval_problems, collect_roles

__all__ = ["DEFAULT_MEMORY", "Hive", "MemorySpec", "ModelSpec", "load_hive"]


class Hive:
    """A loaded, checked hive file; ``Executor.from_hive`` builds its Executor."""

    def __init__(
        self,
        file: Path,
        spec: HiveSpec,
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
        return [in_folder(server, self.folder) for server in self.spec.mcp_servers.values()]

    async def check_servers(self) -> dict[str, int]:
        """Start every MCP server, list its tools, check that each tool the roles name
        is there and that ``approvals:`` names none that is not, and stop them
        (``honeycomb validate`` does this).

        Returns:
            The number of tools of each server.

        Raises:
            ConfigErrors: a server that does not start, a tool it does not have.
        """
        raw = self._doc.data.get("roles") if isinstance(self._doc.data, Mapping) else None
        inline = [str(k) for k in raw] if isinstance(raw, Mapping) else []
        listed, errors = await check_servers(self.mcp_servers, self.roles, self._doc, inline)
        with self.imports():
            servers, rule = list(self.spec.mcp_servers), self.spec.approvals
            errors += approvals_problems(
                servers, listed, self.roles, self.registry, rule, self._doc, inline
            )
        if errors:
            raise ConfigErrors(sorted(errors, key=lambda e: (e.line or 0, e.column or 0)))
        return {server: len(tools) for server, tools in listed.items()}

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
    def store(self) -> Path | str | None:
        """The run store the hive declares (``store:``): its file, relative to the
        hive file, or its PostgreSQL URL."""
        declared = self.spec.store
        if declared is None:
            return None
        return declared.url if declared.is_url else self.file.parent / declared.url

    @property
    def store_options(self) -> dict[str, Any]:
        """How to connect to the hive's PostgreSQL store (``RunStore``'s keywords)."""
        declared = self.spec.store
        if declared is None or not declared.is_url:
            return {}
        return {"password_env": declared.password_env, "pool_size": declared.pool_size}

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
        embeddings = None
        if declared.embeddings is not None:
            from runtime.models.openai.embeddings import OpenAIEmbeddings  # loads openai

            e = declared.embeddings
            key = e.api_key.get_secret_value() if e.api_key is not None else None
            embeddings = OpenAIEmbeddings(
                e.model,
                base_url=e.base_url or None,
                api_key=key or None,
                dimensions=e.dimensions,
                timeout=e.timeout,
                max_concurrency=e.max_concurrency,
            )
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
            name: given[name] if name in given else spec.build(self.folder)
            for name, spec in self.spec.models.items()
        }

    def tool_names(self, role: str | None = None) -> tuple[str, ...] | None:
        """The names the models of its roles (or of ``role`` alone) call tools by;
        None when an MCP server lists some of them (they are known once it runs)."""
        names: dict[str, None] = {}  # in order, once each
        servers = list(self.spec.mcp_servers)
        with self.imports():
            for each in self.roles.values() if role is None else [self.roles[role]]:
                own = each.tool_names(self.registry, servers=servers)
                if own is None:
                    return None
                names.update(dict.fromkeys(own))
        return tuple(names)

    def missing_keys(self) -> list[ConfigError]:
        """The models its roles use (and those of the hives they call as tools) whose
        calls need an API key that is neither given nor set, each at its declaration:
        ``honeycomb validate`` warns of them, and a run does not start without."""
        roles = self.roles.values()
        used = {role.model or self.default_model for role in roles}
        used |= {r.compaction.model for r in roles if r.compaction is not None}
        found: list[ConfigError] = []
        for name, spec in self.spec.models.items():
            missing = spec.missing_key() if name in used else None
            if missing is not None:
                found.append(self._doc.error(("models", name), missing.message))
        for sub in self.hives.values():
            found += sub.missing_keys()
        return found

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
    spec, problems = doc.validate(HiveSpec, doc.data)
    errors.extend(problems)
    if spec is None:
        spec = HiveSpec.model_validate(salvaged(doc.data))
    models = _model_names(doc, spec)
    with imports_from(file.resolve().parent):  # tools and schemas next to the hive
        registry = _registry(doc, spec, errors)
        roles = _roles(doc, spec, registry, models, file, errors)
        roles = _with_approvals(doc, spec, roles, registry, errors)
    check_across_fields(doc, spec, roles, models, errors)
    hives = _sub_hives(doc, spec, roles, file, (*chain, file.resolve()), errors)
    if errors:
        raise ConfigErrors(sorted(errors, key=lambda e: (e.file or "", e.line or 0, e.column or 0)))
    return Hive(file, spec, roles, registry, doc, hives)


def _registry(doc: YamlDocument, spec: HiveSpec, errors: list[ConfigError]) -> ToolRegistry:
    registry = ToolRegistry()
    for name, ref in spec.tools.items():
        try:
            found = ToolRegistry().resolve(ref)
            registry.add(found if found.name == name else found.renamed(name))
        except Exception as exc:  # every import problem is one located error
            message = exc.message if isinstance(exc, ConfigError) else str(exc)
            errors.append(doc.error(("tools", name), message))
    return registry


def _server_names(doc: YamlDocument, spec: HiveSpec) -> list[str]:
    """The MCP servers a role may name: those declared, valid or not (as models)."""
    raw = doc.data.get("mcp_servers")
    return [str(k) for k in raw] if isinstance(raw, Mapping) else list(spec.mcp_servers)


def _model_names(doc: YamlDocument, spec: HiveSpec) -> list[str]:
    """The models a role may name: those declared, valid or not (an invalid one has
    its own error; a role naming it has none)."""
    raw = doc.data.get("models")
    return [str(k) for k in raw] if isinstance(raw, Mapping) else list(spec.models)


def _roles(
    doc: YamlDocument,
    spec: HiveSpec,
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
            servers = _server_names(doc, spec)
            roles.update(collect_roles(folder, errors, registry, models=models, servers=servers))
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
    spec: HiveSpec,
    roles: dict[str, Role],
    registry: ToolRegistry,
    errors: list[ConfigError],
) -> dict[str, Role]:
    """The roles, those without ``approvals:`` of their own given the hive's (each
    with the tools it names that the role uses; all of them for a role that uses an MCP
    server's tools, which are known once it lists them)."""
    hive = spec.approvals
    if hive is None:
        return roles
    servers = list(spec.mcp_servers)
    used: dict[str, tuple[str, ...] | None] = {}
    for name, role in roles.items():
        try:
            used[name] = role.tool_names(registry, servers=servers)
        except Exception:  # its own error is reported with the role (the hive fails)
            return roles
    if None not in used.values():  # every tool is known: a name none uses is misspelt
        every = sorted({tool for names in used.values() if names for tool in names})
        unused = "which no role of the hive uses"
        errors.extend(approval_problems(doc.data.get("approvals"), every, doc, (), unused))
    given: dict[str, Role] = {}
    for name, role in roles.items():
        if role.approvals is None:
            names = used[name]
            tools = tuple(t for t in hive.tools if names is None or t in names)
            role = role.model_copy(update={"approvals": hive.model_copy(update={"tools": tools})})
        given[name] = role
    return given


def _sub_hives(
    doc: YamlDocument,
    spec: HiveSpec,
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
