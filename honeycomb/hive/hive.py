"""The hive file: models, roles, planner, aggregator, policies and memory in one YAML file.

Every mistake is reported at once, each with file, line, column and field path, and
a "did you mean" for misspelt names. Import paths (tools, output schemas) resolve in
the hive's folder first, so tools next to it import as ``module:function``; the folder
leads ``sys.path`` only while they are imported (:mod:`honeycomb.hive.imports`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from honeycomb.hive.backend import BackendSpec
from honeycomb.hive.budgets import budget_warnings
from honeycomb.hive.checks import check_across_fields, not_roles, role_error
from honeycomb.hive.imports import imports_from
from honeycomb.hive.judges import judges_warned
from honeycomb.hive.mcp import approvals_problems, check_servers, in_folder, with_secrets
from honeycomb.hive.meant import another_file, hive_files_in, hive_tool_meant
from honeycomb.hive.paths import beside, not_a_folder
from honeycomb.hive.specs import (
    DEFAULT_MEMORY,
    HiveSpec,
    MemorySpec,
    ModelSpec,
    salvaged,
)
from honeycomb.hive.usage import (
    check_called_prices,
    check_models_used,
    models_built,
    models_used,
)
from honeycomb.run.planner import RolePlanner, nobody_to_plan_for
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
from runtime.config.imports import path_meant
from runtime.config.stores import password_problem
from runtime.config.yaml_config import YamlPath, YamlPlace
from runtime.errors import kind_of
from runtime.memory import SQLiteMemory
from runtime.secrets import CREDENTIAL_PARAMETERS, add_env, add_header, add_secret
from workers import Role, read_roles
from workers.nesting import hive_ref, nested_tool_name
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
        places: Mapping[str, YamlPlace] | None = None,
    ) -> None:
        self.file = file
        self.hives = hives or {}
        """The hives its roles call as tools, by their reference (``hive:PATH``)."""
        self.spec = spec
        self.roles = roles
        self.registry = registry
        self.folder = file.resolve().parent
        self._doc = doc or YamlDocument(data={}, file=str(file))
        self._places = places or {}  # where each role is written, for the later checks

    @property
    def mcp_servers(self) -> list[McpServer]:
        """The MCP servers the hive declares (``mcp_servers:``)."""
        return [
            in_folder(with_secrets(server, self._doc), self.folder)
            for server in self.spec.mcp_servers.values()
        ]

    async def check_servers(self) -> dict[str, int]:
        """Start every MCP server, list its tools, check that each tool the roles name
        is there and that ``approvals:`` names none that is not, and stop them
        (``honeycomb validate`` does this); the same for the hives its roles call as
        tools, each file once, as each starts its own servers when it runs.

        Returns:
            The number of tools of each of its own servers.

        Raises:
            ConfigErrors: a server that does not start, a tool it does not have (in
                whichever file says so).
        """
        counts: dict[str, int] = {}
        errors = await self._server_problems(counts, set())
        if errors:
            raise ConfigErrors(
                sorted(errors, key=lambda e: (e.file or "", e.line or 0, e.column or 0))
            )
        return counts

    async def _server_problems(self, counts: dict[str, int], seen: set[Path]) -> list[ConfigError]:
        """What :meth:`check_servers` finds in this hive and those it calls that are
        not in ``seen``; ``counts`` gets the number of tools of each of its servers."""
        seen.add(self.folder / self.file.name)
        errors: list[ConfigError] = []
        if self.spec.mcp_servers:
            places = self._places
            listed, errors = await check_servers(self.mcp_servers, self.roles, self._doc, places)
            with self.imports():
                servers = list(self.spec.mcp_servers)
                errors += approvals_problems(
                    servers, listed, self.roles, self.registry, self._doc, places
                )
            counts.update({server: len(tools) for server, tools in listed.items()})
        for called in self.hives.values():
            if called.folder / called.file.name not in seen:
                errors += await called._server_problems({}, seen)
        return errors

    def imports(self) -> AbstractContextManager[None]:
        """A block in which import paths resolve as the hive's do: in its folder first,
        to the modules its loading imported (``Executor.from_hive`` builds in one)."""
        return imports_from(self.folder)

    def tool_error(self, role: str, index: int, message: str) -> ConfigError:
        """An error at the line of the role's ``index``-th tool, in the file that
        writes the role."""
        return role_error(self._doc, self._places, role, ("tools", index), message)

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
        return declared.url if declared.is_url else beside(self.file.parent, declared.url)

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
        return beside(self.file.parent, declared.path) if declared.path else DEFAULT_MEMORY

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
                price=e.price,
            )
        return SQLiteMemory(path, embeddings=embeddings, max_chars=declared.max_chars)

    def models(self, replace: Mapping[str, Model] | None = None) -> dict[str, Model]:
        """The models its Executor holds (:func:`~honeycomb.hive.usage.models_built`: the
        default and those a run calls, not one declared that none of its roles uses) by
        name, built as declared, except those ``replace`` gives (by the hive's names
        for them).

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
            name: given[name]
            if name in given
            else self.spec.models[name].build(self.folder, self._key_env(name))
            for name in models_built(self.spec, self.roles)
        }

    def models_used(self) -> list[str]:
        """The names of the models a run of the hive calls, in their declared order
        (:func:`~honeycomb.hive.usage.models_used`)."""
        return models_used(self.spec, self.roles)

    def _key_env(self, model: str) -> str | None:
        """The environment variable the ``api_key`` of ``model`` was read from, when it
        is one whole (``api_key: ${NAME}``): the model reads it there, so that on Ray
        each actor reads it from its own environment, and the key is never sent."""
        return self._doc.variables.get(("models", model, "api_key"))

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
        """The models a run of it may call (and those of the hives its roles call) whose
        calls need an API key that is neither given nor set, each at its declaration:
        ``honeycomb validate`` warns of them, and a run does not start without."""
        found: list[ConfigError] = []
        for name in self.models_used():
            missing = self.spec.models[name].missing_key()
            if missing is not None:
                found.append(self._doc.error(("models", name), missing.message))
        for sub in self.hives.values():
            found += sub.missing_keys()
        return found

    def small_budgets(self) -> list[ConfigError]:
        """A warning for each compacting role (its own, and those of the hives they
        call as tools) whose system prompt and tools take most of its
        ``compaction.budget_tokens``, at that line (see :mod:`honeycomb.hive.budgets`):
        ``honeycomb validate`` gives them."""
        with self.imports():
            found = budget_warnings(self.spec, self.roles, self.registry, self._doc, self._places)
        for sub in self.hives.values():
            found += sub.small_budgets()
        return found

    def judge_warnings(self) -> list[ConfigError]:
        """A warning of each role that only judges and has tools, which it never calls,
        or names itself as its judge, which makes it one (its own, and those of the
        hives its roles call as tools: :mod:`honeycomb.hive.judges`); ``honeycomb
        validate`` gives them."""
        found = judges_warned(self.spec, self.roles, self._doc, self._places)
        for sub in self.hives.values():
            found += sub.judge_warnings()
        return found

    def missing_password(self) -> ConfigError | None:
        """The error of the hive's PostgreSQL store when its ``password_env`` names a
        variable that is not set, at that line (None: nothing is missing). Like an API
        key, it is the environment's, not the file's: ``honeycomb validate`` warns of
        it, and a command does not open the hive's store without it."""
        declared = self.spec.store
        if declared is None or not declared.is_url:
            return None
        problem = password_problem(declared.password_env)
        return None if problem is None else self._doc.error(("store", "password_env"), problem)

    def check_runnable(self) -> None:
        """Raise if ``honeycomb run`` cannot run the hive: it plans every task, so the
        hive needs a planner (from Python, ``run(task, subtasks=...)`` needs none).

        Raises:
            ConfigErrors: naming what to add.
        """
        missing = self._planner_missing(
            "honeycomb run plans every task", "(from Python, run(task, subtasks=[...]) needs none)"
        )
        if missing is None:
            missing = self._planner_idle()
        if missing is not None:
            raise ConfigErrors([missing])

    def _planner_idle(self) -> ConfigError | None:
        """The error of a hive whose planner has no role to give subtasks to, its
        other roles all judges (the aggregator aside), as its runs' plans would fail;
        None when it has one, or its ``planner:`` names them."""
        spec = self.spec.planner
        if spec is not None and spec.roles is not None:
            return None
        planner = spec.role if spec is not None else "planner"
        merger = self.spec.aggregator or "aggregator"  # a role's name, "concat" or a path
        others = [name for name in self.roles if name not in (planner, "aggregator", merger)]
        judges = set(self.spec.guards.judges() if self.spec.guards is not None else ())
        for role in self.roles.values():
            judges.update(role.guards.judges() if role.guards is not None else ())
        if not others or any(name not in judges for name in others):
            return None
        at = ("planner",) if spec is not None else ("roles",)
        merges = merger if merger in self.roles else None
        return self.error_at(at, nobody_to_plan_for(planner, others, merges))

    def _planner_missing(self, why: str, besides: str = "") -> ConfigError | None:
        """The error of a hive that has no planner and needs one (``why``: what plans
        its tasks), at its ``roles:``, where one is added; None when it has one."""
        if self.spec.planner is not None or "planner" in self.roles:
            return None
        fix = "define a role named 'planner', or name one with planner:"
        return self.error_at(
            ("roles",), f"the hive has no planner, and {why}: {fix} {besides}".rstrip()
        )

    def error_at(self, field: YamlPath, message: str) -> ConfigError:
        """An error at ``field`` of the hive file, with its line and column, for a
        check made once the hive is loaded (``honeycomb validate`` and ``run`` check
        its store so)."""
        return self._doc.error(field, message)

    @property
    def planner(self) -> str | RolePlanner | None:
        """The hive's planner: a role's name, or a planner role that plans in rounds or
        gives subtasks to the roles it names."""
        spec = self.spec.planner
        if spec is None or (spec.rounds == 1 and spec.roles is None):
            return spec.role if spec is not None else None
        return RolePlanner(spec.role, rounds=spec.rounds, roles=spec.roles)

    @property
    def backend(self) -> BackendSpec:
        """Where the hive's subtask workers run (``backend:``); ``build`` makes it."""
        return self.spec.backend

    @property
    def default_model(self) -> str | None:
        """The model of roles that name none: the declared default, else the first."""
        return self.spec.default_model or next(iter(self.spec.models), None)


_QUERY_KEYS = tuple(
    ("models", "*", "settings", "extra_query", name) for name in sorted(CREDENTIAL_PARAMETERS)
)
"""Where a model's settings hold the key an endpoint takes in its URL's query
(Gemini's ``key``, Azure's ``api-key``): masked as its API key is."""

_SECRETS = (
    ("models", "*", "api_key"),
    *_QUERY_KEYS,
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


def _load(file: Path, chain: tuple[Path, ...], limits: tuple[int, ...] = ()) -> Hive:
    """A hive file, called as a tool through the hive files of ``chain`` (outermost
    first), whose ``max_nesting`` are ``limits``."""
    try:
        doc = load_yaml(file, interpolate=True, secrets=_SECRETS)
    except ConfigError as exc:
        raise ConfigErrors([hive_files_in(file, exc)]) from exc
    errors: list[ConfigError] = []
    if not isinstance(doc.data, Mapping):
        what = (
            "it is empty (or only comments)" if doc.data is None else f"it is {kind_of(doc.data)}"
        )
        raise ConfigErrors(
            [
                doc.error(
                    (),
                    f"a hive file must be a mapping (models:, roles: ...), and {what}: "
                    "honeycomb init DIR writes one to start from",
                )
            ]
        )
    other = another_file(doc, file)  # evals.yaml, or a file of roles, beside hive.yaml
    if other is not None:
        raise ConfigErrors([other])
    spec, problems = doc.validate(HiveSpec, doc.data)
    errors.extend(problems)
    if spec is None:
        spec = HiveSpec.model_validate(salvaged(doc.data))
    models = _model_names(doc, spec)
    with imports_from(file.resolve().parent):  # tools and schemas next to the hive
        registry = _registry(doc, spec, errors)
        read = _roles(doc, spec, registry, models, file, errors)
        # What the files of roles_dir read from the environment, an error about the
        # hive (which may quote their roles) hides too.
        doc = doc.hiding([place.doc for place, _ in read.values()])
        roles = {name: role for name, (_, role) in read.items()}
        roles = _with_approvals(doc, spec, roles, registry, errors)
        places = {name: place for name, (place, _) in read.items()}  # where each is written
        check_across_fields(doc, spec, roles, places, models, errors)  # its guards' imports
        check_models_used(doc, spec, roles, errors)
    outer = ((*chain, file.resolve()), (*limits, spec.policy.max_nesting))
    hives = _sub_hives(doc, spec, roles, places, file, outer, errors)
    check_called_prices(doc, spec, roles, places, hives, errors)  # their calls spend its budget
    if errors:
        raise ConfigErrors(sorted(errors, key=lambda e: (e.file or "", e.line or 0, e.column or 0)))
    hive = Hive(file, spec, roles, registry, doc, hives, places)
    _mask_declared(hive, doc.data)
    return hive


def _mask_declared(hive: Hive, data: Mapping[str, Any]) -> None:
    """Mask the secrets the hive declares (:data:`_SECRETS`) while it lives, whether or
    not what uses them is made: a model another stands in for (``--model``), an MCP
    server not started yet. Else a key pasted into a task or a chat message is kept and
    shown as it is. An OpenAI-compatible model or embeddings with no ``api_key`` of their
    own use ``OPENAI_API_KEY``: that too. (An Executor made from it keeps it.)"""
    for pattern in _SECRETS:
        for value in _values_at(data, pattern):
            if isinstance(value, Mapping) and pattern[-1].endswith("headers"):
                for each in value.values():
                    if isinstance(each, str):
                        add_header(each, owner=hive)
            elif isinstance(value, Mapping):  # an environment's variables
                add_env({str(k): v for k, v in value.items() if isinstance(v, str)}, owner=hive)
            elif isinstance(value, str):
                key = pattern[-1] == "api_key" or pattern in _QUERY_KEYS
                add_secret(value, "api key" if key else "secret", owner=hive)
    keyless = any(m.provider == "openai" and m.api_key is None for m in hive.spec.models.values())
    memory = hive.spec.memory
    embeddings = memory.embeddings if memory is not None else None
    if keyless or (embeddings is not None and embeddings.api_key is None):
        add_secret(os.environ.get("OPENAI_API_KEY"), "api key", owner=hive)


def _values_at(data: Any, pattern: tuple[str, ...]) -> Iterator[Any]:
    """The values of ``data`` at ``pattern``'s path (``"*"``: any key)."""
    if not pattern:
        yield data
    elif isinstance(data, Mapping):
        head, rest = pattern[0], pattern[1:]
        for key, value in data.items():
            if head in ("*", key):
                yield from _values_at(value, rest)


def _registry(doc: YamlDocument, spec: HiveSpec, errors: list[ConfigError]) -> ToolRegistry:
    registry = ToolRegistry()
    for name, ref in spec.tools.items():
        if ":" not in ref:  # a name here names nothing: what tools: names is a path
            meant = path_meant(ref)
            close = f" (did you mean {meant!r}?)" if meant is not None else ""
            message = f"{ref!r} is not an import path: write 'package.module:function'{close}"
            errors.append(doc.error(("tools", name), message))
            continue
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
) -> dict[str, tuple[YamlPlace, Role]]:
    """The valid roles of the hive, of its ``roles_dir`` and its ``roles:``, each with
    where it is written (the hive file, or a file of the folder), for the checks that
    span the hive to point there."""
    read: dict[str, tuple[YamlPlace, Role]] = {}
    if spec.roles_dir is not None:
        folder = beside(file.parent, spec.roles_dir)
        problem = not_a_folder(folder)
        if problem is not None:
            errors.append(doc.error(("roles_dir",), problem))
        else:
            servers = _server_names(doc, spec)
            read.update(
                collect_roles(
                    folder,
                    errors,
                    registry,
                    models=models,
                    servers=servers,
                    declared=spec.tools,
                    skip=file,
                    other=not_roles,
                )
            )
    if "roles" in doc.data and isinstance(doc.data["roles"], Mapping):
        servers = _server_names(doc, spec)
        for path, role in read_roles(
            doc, errors, registry, ("roles",), models=models, servers=servers, declared=spec.tools
        ):
            if role.name in read:
                first = read[role.name][0].error((), "")  # in a file of the folder
                where = f"{first.file}:{first.line}"
                errors.append(doc.error(path, f"role {role.name!r} is also defined in {where}"))
            read[role.name] = (YamlPlace(doc=doc, path=path), role)
    if not read and not errors:
        errors.append(doc.error(("roles",), "the hive defines no roles"))
    return read


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
    places: Mapping[str, YamlPlace],
    file: Path,
    outer: tuple[tuple[Path, ...], tuple[int, ...]],
    errors: list[ConfigError],
) -> dict[str, Hive]:
    """The hives the roles call as tools, each file loaded once (its own errors are
    told as its, in its file), ``file`` being called through the chain of hive files
    ``outer`` holds (itself last) with their ``max_nesting``. Told at the tool that
    names it: a hive file it cannot load (see :func:`_unreachable`), and a tool name
    taken (see :func:`_name_taken`)."""
    chain, limits = outer
    found: dict[str, Hive] = {}
    loaded: dict[Path, Hive | None] = {}  # None: it has errors, told once
    named: dict[str, tuple[Path, str]] = {}  # a hive tool's name: its file, its first ref
    for name, role in roles.items():
        for index, ref in enumerate(role.tools):
            target = hive_ref(ref)
            if target is None or ref in found:
                continue
            given = beside(file.parent, target)  # named as the hive is: relative stays so
            path = given.resolve()  # one file, however it is named
            unreachable = _unreachable(ref, given, chain, limits)
            for problem in (_name_taken(ref, given, spec, named), unreachable):
                if problem is not None:
                    errors.append(role_error(doc, places, name, ("tools", index), problem))
            if unreachable is None:
                if path not in loaded:
                    caller = f"{ref!r} of {file.name}"
                    loaded[path] = _called(given, outer, caller, errors)
                called = loaded[path]
                if called is not None:
                    found[ref] = called
    return found


def _unreachable(
    ref: str, path: Path, chain: tuple[Path, ...], limits: tuple[int, ...]
) -> str | None:
    """Why the hive file ``path`` of the tool ``ref``, called through the hive files
    of ``chain``, cannot be loaded: a cycle of hive files, a chain of them past the
    ``max_nesting`` of one of them (``limits``: each bounds the chain from it, as a hive
    called as a tool is bounded by its callers' limits), no such file; None when it
    can."""
    shown = " → ".join(p.name for p in (*chain, path))
    if path.resolve() in chain:
        return f"hive tools make a cycle: {shown}"
    for start, limit in enumerate(limits):
        deep = len(chain) - start
        if deep > limit:
            shown = " → ".join(p.name for p in (*chain[start:], path))
            return (
                f"hive tools nest {deep} deep, past the limit of {limit} (the policy "
                f"max_nesting of {chain[start].name}): {shown}"
            )
    if not path.is_file():
        return f"{ref!r}: no hive file {path}{hive_tool_meant(ref, path)}"
    return None


def _name_taken(
    ref: str, path: Path, spec: HiveSpec, named: dict[str, tuple[Path, str]]
) -> str | None:
    """Why the tool ``ref`` (of the hive file ``path``) cannot have its name: a model
    calls a hive tool by its file's stem, and the hive's tools (those of ``tools:``,
    and the hive tools ``named`` so far, each with its file and first reference) have a
    name each. None when it is its own (this file's)."""
    tool = nested_tool_name(ref)
    file, first = named.setdefault(tool, (path, ref))
    if tool in spec.tools:
        return (
            f"{ref!r} is a tool named {tool!r}, as the hive's tools: {tool} is: a hive's "
            "tools need a name each (a hive tool is named after its file): rename the "
            "file, or that tool"
        )
    if file.resolve() != path.resolve():
        return (
            f"{ref!r} ({path}) is a tool named {tool!r}, as {first!r} ({file}) is: a "
            "hive's tools need a name each (a hive tool is named after its file): rename "
            "one of the files"
        )
    return None


def _called(
    path: Path,
    outer: tuple[tuple[Path, ...], tuple[int, ...]],
    caller: str,
    errors: list[ConfigError],
) -> Hive | None:
    """The hive file ``path``, which ``caller`` calls as a tool, loaded and able to
    answer a call: a call plans its task, so the hive needs a planner. None: it cannot,
    and why is added to ``errors`` (in its own file)."""
    try:
        called = _load(path, *outer)
    except ConfigErrors as exc:
        errors.extend(exc.errors)
        return None
    missing = called._planner_missing(f"{caller} calls it as a tool, which plans each call's task")
    if missing is not None:
        errors.append(missing)
        return None
    return called
