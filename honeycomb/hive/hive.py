"""A loaded hive: its models, roles, planner, aggregator, policies, store and memory,
and the checks ``honeycomb validate`` and ``run`` make of it beyond its file
(:mod:`honeycomb.hive.load` reads and checks the file)."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from honeycomb.hive.backend import BackendSpec
from honeycomb.hive.budgets import budget_warnings
from honeycomb.hive.checks import role_error
from honeycomb.hive.imports import imports_from
from honeycomb.hive.judges import judges_warned
from honeycomb.hive.mcp import approvals_problems, check_servers, in_folder, with_secrets
from honeycomb.hive.paths import beside, folder_of
from honeycomb.hive.specs import (
    DEFAULT_MEMORY,
    EmbeddingsSpec,
    HiveSpec,
    MemorySpec,
    ModelSpec,
    key_given,
)
from honeycomb.hive.usage import (
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
)
from runtime.config.stores import password_problem
from runtime.config.yaml_config import YamlPath, YamlPlace
from runtime.memory import SQLiteMemory
from workers import Role

__all__ = ["DEFAULT_MEMORY", "Hive", "MemorySpec", "ModelSpec"]

_EMBEDDINGS_KEY: YamlPath = ("memory", "embeddings", "api_key")


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
        return declared.url if declared.is_url else beside(folder_of(self.file), declared.url)

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
        return beside(folder_of(self.file), declared.path) if declared.path else DEFAULT_MEMORY

    def memory(self) -> Memory | None:
        """The memory the hive declares, made anew (its file opens on first use)."""
        declared, path = self.spec.memory, self.memory_path
        if declared is None or path is None:
            return None
        embeddings = None
        if declared.embeddings is not None:
            from runtime.models.openai.embeddings import OpenAIEmbeddings  # loads openai

            e = declared.embeddings
            key_env = self._doc.variables.get(_EMBEDDINGS_KEY)  # read as each call is made
            embeddings = OpenAIEmbeddings(
                e.model,
                base_url=e.base_url or None,
                api_key=key_given(e.api_key, key_env),
                api_key_env=key_env,
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

    def missing_keys(self, *, models: bool = True) -> list[ConfigError]:
        """The models a run of it may call (and those of the hives its roles call), and
        its memory's embeddings when a role uses the memory, whose calls need an API key
        that is neither given nor set, each at its declaration: ``honeycomb validate``
        warns of them, and a run does not start without. Without ``models``, the
        embeddings' alone (another model thinks for every role: ``--model``)."""
        found: list[ConfigError] = []
        for name in self.models_used() if models else ():
            found += self._key_missing(("models", name), self.spec.models[name])
        declared = self.spec.memory
        used = any(role.memory is not None for role in self.roles.values())
        if declared is not None and declared.embeddings is not None and used:
            found += self._key_missing(("memory", "embeddings"), declared.embeddings)
        for sub in self.hives.values():
            found += sub.missing_keys(models=models)
        return found

    def _key_missing(self, at: YamlPath, spec: ModelSpec | EmbeddingsSpec) -> list[ConfigError]:
        """The error of the model or embeddings declared at ``at`` whose calls need an
        API key they lack: at its ``api_key: ${NAME}`` line when it names a variable
        not set, else at its declaration."""
        key_env = self._doc.variables.get((*at, "api_key"))
        missing = spec.missing_key(key_env)
        if missing is None:
            return []
        return [self._doc.error((*at, "api_key") if key_env is not None else at, missing)]

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
        """The error of a hive whose planner has no role to give subtasks to (its
        other roles, the aggregator aside, all judges, or none), as its runs' plans
        would fail; None when it has one, or its ``planner:`` names them."""
        spec = self.spec.planner
        if spec is not None and spec.roles is not None:
            return None
        planner = spec.role if spec is not None else "planner"
        merger = self.spec.aggregator or "aggregator"  # a role's name, "concat" or a path
        others = [name for name in self.roles if name not in (planner, "aggregator", merger)]
        judges = set(self.spec.guards.judges() if self.spec.guards is not None else ())
        for role in self.roles.values():
            judges.update(role.guards.judges() if role.guards is not None else ())
        if any(name not in judges for name in others):
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
