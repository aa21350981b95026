"""What an Executor checks and resolves once, as it is made: each role's setup (its
tools, output schema and guards imported), the runs' own guards, and the store and
memory it is given by path. Every mistake is reported at once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from honeycomb.run.agents import agent_tools
from honeycomb.run.mcp import McpTools
from honeycomb.run.planner import RolePlanner
from runtime import (
    ConfigError,
    ConfigErrors,
    DuplicateToolError,
    HoneycombError,
    Memory,
    Model,
    Tool,
    ToolRegistry,
    did_you_mean,
)
from workers import Role, WorkerSetup
from workers.compaction import compaction_models, context_problem
from workers.guards import Guards, ResolvedGuards, judge_problems, resolve_guards
from workers.nesting import (
    MAX_DEPTH,
    agent_ref,
    hive_ref,
    is_nested_ref,
    nested_tool_name,
    nesting_problems,
)
from workers.role import unused_approval

if TYPE_CHECKING:
    from honeycomb.store import RunStore

__all__ = ["open_memory", "open_store", "resolve_setups"]


def resolve_setups(
    roles: list[Role],
    models: Mapping[str, Model],
    default_model: str,
    registry: ToolRegistry,
    planner: object,
    aggregator: object,
    memory: Memory | None,
    mcp: McpTools,
    guards: Guards | None = None,
    max_nesting: int = MAX_DEPTH,
    session_summarizer: str | None = None,
) -> tuple[dict[str, WorkerSetup], ResolvedGuards]:
    """Every role's setup, its tools, output schema and guards resolved (imported)
    once, here, and the runs' own guards; or every mistake at once. MCP tools join the
    setups when their servers list them (:meth:`Shared.prepare
    <honeycomb.run.shared.Shared.prepare>`).

    ``session_summarizer``: the model the policy's sessions summarize with, if named.

    Raises:
        ConfigErrors: naming every unknown model, role, tool or guard, and every cycle
            or too deep chain of agent tools (``agent:ROLE``).
    """
    errors: list[ConfigError] = []
    setups: dict[str, WorkerSetup] = {}
    names = [r.name for r in roles]
    by_name = {r.name: r for r in roles}
    nested = {r.name: r.tools for r in roles if any(agent_ref(t) is not None for t in r.tools)}
    if nested:
        errors += [
            ConfigError(f"role {p.role!r}: tools[{p.index}]: {p.message}")
            for p in nesting_problems({r.name: r.tools for r in roles}, max_nesting)
        ]
    run_guards = ResolvedGuards()
    try:
        run_guards = resolve_guards(guards, names)
    except ConfigError as exc:
        errors.append(ConfigError(f"the run's {exc.message}"))
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        errors.append(ConfigError(f"roles defined twice: {', '.join(twice)}"))
    if default_model not in models:
        errors.append(ConfigError(f"default model {default_model!r} is not defined"))
    if session_summarizer is not None and session_summarizer not in models:
        errors.append(
            ConfigError(
                f"policy sessions.context.model {session_summarizer!r} is not defined"
                f"{did_you_mean(session_summarizer, models)}; models: {', '.join(models)}"
            )
        )
    for role in roles:
        summarizer = role.compaction.model if role.compaction is not None else None
        for ref, use in ((role.model, "uses"), (summarizer, "summarizes with")):
            if ref is not None and ref not in models:
                errors.append(
                    ConfigError(
                        f"role {role.name!r} {use} model {ref!r}, which is not defined"
                        f"{did_you_mean(ref, models)}; models: {', '.join(models)}"
                    )
                )
        errors += _compaction_problems(role, models, default_model)
        try:
            own = role.resolve_tools(registry, servers=mcp.servers)
            more = [*agent_tools(role, by_name), *_hive_tools(role, registry)]
            setups[role.name] = WorkerSetup.resolved(
                role,
                ToolRegistry([*own, *more]) if more else own,
                role.resolve_output(),
                memory,
            )
        except DuplicateToolError as exc:
            errors.append(ConfigError(f"role {role.name!r}: {_named_twice(role, exc, registry)}"))
        except HoneycombError as exc:
            errors.append(ConfigError(f"role {role.name!r}: {exc}"))
        else:
            if not mcp.refs(role):  # MCP tools are known once their servers list them
                errors += _approval_problems(role, setups[role.name])
        errors += [
            ConfigError(f"role {role.name!r}: {problem}")
            for problem in judge_problems(role.guards, names)
        ]
    if isinstance(planner, RolePlanner):
        planner = planner.role  # a role, checked like one named
    for what, spec in (("planner", planner), ("aggregator", aggregator)):
        if isinstance(spec, str) and spec != "concat" and spec not in names:
            errors.append(
                ConfigError(f"the {what} role {spec!r} is not defined{did_you_mean(spec, names)}")
            )
    if errors:
        raise ConfigErrors(errors)
    return setups, run_guards


def _compaction_problems(
    role: Role, models: Mapping[str, Model], default_model: str
) -> list[ConfigError]:
    """A compaction budget that fills the context of the model the role thinks with,
    or of the one that writes its summaries (a local model's)."""
    compaction = role.compaction
    if compaction is None:
        return []
    problems = []
    for name, use in compaction_models(compaction, role.model or default_model).items():
        model = models.get(name) if name is not None else None
        problem = context_problem(compaction, model) if model is not None else None
        if problem is not None:
            problems.append(
                ConfigError(
                    # As it is too: a model given in its place (--model local) is not
                    # the one the hive declares by that name.
                    f"role {role.name!r} {use} model {name!r} ({model!r}): {problem}",
                    field=f"roles.{role.name}.compaction.budget_tokens",
                )
            )
    return problems


def _named_twice(role: Role, exc: DuplicateToolError, registry: ToolRegistry) -> str:
    """What is wrong when two of ``role``'s tools have one name: which they are (an
    ``agent:`` tool is named after its role, a ``hive:`` tool after its file)."""
    places, functions = [], False
    for index, ref in enumerate(role.tools):
        try:
            name = nested_tool_name(ref) if is_nested_ref(ref) else registry.resolve(ref).name
        except HoneycombError:
            continue  # an MCP server's, or one that is reported of itself
        if name == exc.tool_name:
            places.append(f"tools[{index}] ({ref!r})")
            functions = functions or not is_nested_ref(ref)
    if len(places) < 2:
        return str(exc)  # one of them is not the role's to name (its memory's recall ...)
    how = "give the function another: Tool(fn, name=...)" if functions else "rename a hive file"
    return (
        f"{' and '.join(places)} are each a tool named {exc.tool_name!r}: the tools of a "
        f"role need a name each ({how})"
    )


def _hive_tools(role: Role, registry: ToolRegistry) -> list[Tool[Any, Any]]:
    """The hive tools ``role`` names (``hive:PATH``), as a hive made them (each a
    sub-Executor's :meth:`~honeycomb.executor.Executor.as_tool`, in the registry by its name).

    Raises:
        ConfigError: for one that no hive made.
    """
    found: list[Tool[Any, Any]] = []
    for ref in role.tools:
        if hive_ref(ref) is None:
            continue
        made = registry.get(nested_tool_name(ref))
        if made is None:
            raise ConfigError(
                f"{ref!r} is a hive tool, which a hive file makes (Executor.from_yaml): "
                "from Python, give the Executor tools=[other.as_tool('name')] and name it"
            )
        found.append(made)
    return found


def open_memory(memory: Memory | str | Path | None) -> Memory | None:
    """The memory ``memory`` names: a :class:`~runtime.memory.Memory`, or the path of
    an SQLite memory file (opened on first use)."""
    if isinstance(memory, str | os.PathLike):
        from runtime.memory import SQLiteMemory  # SQLite loads with the first memory file

        return SQLiteMemory(memory)
    return memory


def _approval_problems(role: Role, setup: WorkerSetup) -> list[ConfigError]:
    """Tools a role's ``approvals`` names that it does not use (they would never ask)."""
    names = setup.tools.names
    listed = role.approvals.tools if role.approvals is not None else ()
    return [
        ConfigError(f"role {role.name!r}: {unused_approval(name, names)}")
        for name in listed
        if name not in names
    ]


def open_store(store: RunStore | str | Path | None, **options: Any) -> RunStore | None:
    """The run store ``store`` names: a :class:`RunStore`, the path of its file or a
    PostgreSQL URL (``options``: how to connect to it, see :class:`RunStore`)."""
    if isinstance(store, str | os.PathLike):
        # The run store's module (and sqlite3) load with the first Executor that keeps one.
        from honeycomb.store import RunStore

        return RunStore(store, **options)
    return store
