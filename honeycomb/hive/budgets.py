"""The warning ``honeycomb validate`` gives of a compacting role whose budget its own
prompt and tools already take most of (:func:`budget_warnings`).

A compacting worker's every request holds its system prompt and its tools' schemas,
whatever it folds; the rest of ``compaction.budget_tokens`` must hold the task, the
summary of older turns and the newest turn's calls and results. When the prompt and
the tools take more than :data:`MOST` of the budget, a worker of the role soon cannot
fit a turn, and fails with ``ContextBudgetTooSmall`` (before its first model call, when
they take all of it). The task and the calls are known only at run time, and an MCP
server's tools once it starts: the estimate counts what the hive file says alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from honeycomb.hive.checks import role_error
from honeycomb.hive.specs import HiveSpec
from honeycomb.offline import OfflineModel
from honeycomb.run.agents import agent_tools
from runtime import (
    ConfigError,
    HoneycombError,
    JsonToolModel,
    ModelRequest,
    SystemMessage,
    TextToolModel,
    ToolRegistry,
    ToolSchema,
    YamlDocument,
)
from runtime.config.yaml_config import YamlPlace
from runtime.tools.mcp import mcp_ref
from workers import Role
from workers.context import estimate_tokens, token_counter
from workers.memory import memory_schemas

__all__ = ["MOST", "budget_warnings", "fixed_tokens"]

MOST = 0.5
"""The share of a role's compaction budget past which its prompt and tools are too
large: the other half holds the task, the summary and the newest turn."""


def budget_warnings(
    spec: HiveSpec,
    roles: Mapping[str, Role],
    registry: ToolRegistry,
    doc: YamlDocument,
    places: Mapping[str, YamlPlace],
) -> list[ConfigError]:
    """A warning for each compacting role whose system prompt and tools' schemas take
    more than :data:`MOST` of its ``compaction.budget_tokens``, at that line."""
    servers = list(spec.mcp_servers)
    default = spec.default_model or next(iter(spec.models), None)
    found: list[ConfigError] = []
    for name, role in roles.items():
        if role.compaction is None:
            continue
        model = spec.models.get(role.model or default or "")
        protocol = model.tool_protocol if model is not None else "native"
        try:
            fixed = fixed_tokens(role, roles, registry, servers, protocol)
        except HoneycombError:
            continue  # a tool or counter that does not import: its own error says so
        message = _too_large(role, role.compaction.budget_tokens, fixed, servers)
        if message is not None:
            where = ("compaction", "budget_tokens")
            found.append(role_error(doc, places, name, where, message))
    return found


def fixed_tokens(
    role: Role,
    roles: Mapping[str, Role],
    registry: ToolRegistry,
    servers: Sequence[str],
    protocol: str = "native",
) -> int:
    """The tokens every request of ``role``'s workers takes whatever is folded: its
    system prompt and its tools' schemas (its Python tools, agent tools and memory
    tools; not its MCP servers' tools, unknown until they start), as its model is sent
    them (a tool protocol writes the tools into the prompt), by the role's token
    counter or the estimate.

    Raises:
        HoneycombError: for a tool or token counter that does not import.
    """
    tools: list[ToolSchema] = [t.schema for t in role.resolve_tools(registry, servers=servers)]
    tools += [t.schema for t in agent_tools(role, roles)]
    tools += memory_schemas(role.memory, role.name)  # recall and remember
    request = ModelRequest(
        messages=(SystemMessage(content=role.system_prompt),), tools=tuple(tools)
    )
    write = _writer(protocol)
    if write is not None and tools:
        request = write(request)
    count = token_counter(role.compaction) if role.compaction is not None else None
    return estimate_tokens(request.messages, request.tools, count)


def _writer(protocol: str) -> Callable[[ModelRequest], ModelRequest] | None:
    """How a model of the tool ``protocol`` writes a request out (None: as it is)."""
    if protocol == "text":
        return TextToolModel(OfflineModel(latency=0)).written
    if protocol == "json":
        return JsonToolModel(OfflineModel(latency=0)).written
    return None


def _too_large(role: Role, budget: int, fixed: int, servers: Sequence[str]) -> str | None:
    """The warning for ``role``, whose prompt and tools take ``fixed`` tokens of its
    ``budget`` (None: they leave enough)."""
    if fixed <= budget * MOST:
        return None
    mcp = sorted({found[0] for ref in role.tools if (found := mcp_ref(ref, servers))})
    unknown = (
        f" (not counting the tools of MCP server{'s' * (len(mcp) > 1)} {', '.join(mcp)}, "
        "known once they start, which take more)"
        if mcp
        else ""
    )
    taken = f"its system prompt and tools' schemas take about {fixed:,} tokens{unknown}"
    fix = f"raise budget_tokens to {2 * fixed:,} or more, or give the role fewer tools"
    if fixed >= budget:
        return (
            f"{taken}, as much as its whole compaction budget of {budget:,} or more: every "
            f"worker of the role fails with ContextBudgetTooSmall before its first model "
            f"call; {fix}"
        )
    return (
        f"{taken}, over half its compaction budget of {budget:,}: the rest must hold the "
        "task, the summary of older turns and the newest turn's calls and results, and a "
        f"worker that cannot fit them fails with ContextBudgetTooSmall; {fix}"
    )
