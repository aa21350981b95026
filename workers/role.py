"""``Role``: what a worker is for, which model and tools it uses, and its limits.

Roles are plain values, built in Python or declared in YAML. One file may hold one
role (a mapping with ``name:``) or many (a mapping of name to role, optionally under
``roles:``); a folder holds many such files.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime import (
    ConfigError,
    ConfigErrors,
    HoneycombError,
    Tool,
    ToolRegistry,
    did_you_mean,
)
from runtime.config.imports import import_object, path_meant
from runtime.tools.approvals import ApprovalRule
from runtime.tools.mcp import mcp_ref, pick_tools
from runtime.value import SettingsModel
from workers.context import Compaction, token_counter_problem
from workers.guards import Guards, guard_problem
from workers.memory import RoleMemory
from workers.nesting import agent_ref, hive_ref, is_nested_ref, nested_tool_name

if TYPE_CHECKING:
    from runtime.config.yaml_config import YamlDocument, YamlPath, YamlPlace

__all__ = [
    "Approvals",
    "Role",
    "approval_problems",
    "check_role",
    "collect_roles",
    "guard_problems",
    "load_roles",
    "read_roles",
    "role_entries",
    "role_files",
    "unused_approval",
]


class Approvals(SettingsModel):
    """Which of a role's tool calls wait for a person's approval (tools marked
    ``approval=True`` always do).

    Attributes:
        tools: Tool names whose every call needs approval.
        default: ``ask``: every side-effecting tool needs approval too; ``allow``:
            only the tools named (and those marked).
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    tools: tuple[str, ...] = ()
    default: Literal["allow", "ask"] = "allow"

    def rule(self, owner: str) -> ApprovalRule:
        return ApprovalRule(
            tools=frozenset(self.tools), side_effects=self.default == "ask", owner=owner
        )


class Role(SettingsModel):
    """A worker role.

    Attributes:
        name: Unique name; subtasks refer to it.
        description: One line on what it is good at (planners read it).
        instructions: The system prompt.
        model: Name of a model in the hive (``offline``, ``gpt``...); None: the default.
        tools: Registry names, import paths (``package.module:function``), or tools
            of a declared MCP server (``server:tool``, ``server:*`` for all of them),
            other roles (``agent:ROLE``) or hives (``hive:PATH``) as tools.
        max_turns: Model turns that may call tools before the wrap-up call.
        max_repeats: Turns in a row made only of repeats of the turn before's calls
            (which are not run again) before the worker is a runaway: its next call
            is the wrap-up, which says so.
        tool_timeout: Seconds per tool call when the tool sets none.
        concurrency: Parallel-safe tool calls in flight at once.
        output_schema: Import path of a pydantic model the final answer must match.
        output_retries: Times an answer failing ``output_schema`` or an output guard
            is sent back.
        max_context_chars: Transcript characters the model sees each turn (None: all).
        model_timeout: Seconds per model call (None: the model's own timeout).
        max_output_tokens: The most tokens one answer of its model may take (None:
            the run's default, the policy's ``max_output_tokens``; outside a run,
            :data:`~workers.state.DEFAULT_OUTPUT_TOKENS`). A reasoning model counts
            its thinking in it.
        compaction: Keep the context within a budget of tokens by rolling summaries of
            the oldest turns (None: the whole transcript, or ``max_context_chars``).
        memory: How its workers use the long-term memory (see :mod:`workers.memory`);
            None: they do not.
        approvals: Which tool calls wait for a person's approval (None: only those
            of tools marked ``approval=True``; a hive's ``approvals:`` is the default).
        guards: Checks on its subtask's instruction, its answer and its tool calls'
            arguments (see :mod:`workers.guards`).
        session: What its workers see of a session's conversation, when a run answers
            a message of one: ``full`` (the summary, earlier messages, answers and
            what their subtasks found), ``summary`` (without what the subtasks found)
            or ``none``; None: ``full`` for the planner and the aggregator, ``none``
            for the other roles (the planner writes their instructions to stand
            alone).
    """

    model_config = ConfigDict(
        defer_build=True, frozen=True, extra="forbid", protected_namespaces=()
    )  # fields named model_*: pydantic before 2.10 warns of each unless this is ()

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    instructions: str = ""
    model: str | None = None
    tools: tuple[str, ...] = ()
    max_turns: int = Field(default=10, ge=1, le=1000)
    max_repeats: int = Field(default=3, ge=1, le=1000)
    tool_timeout: float | None = Field(default=60.0, gt=0)
    concurrency: int = Field(default=8, ge=1, le=1024)
    output_schema: str | None = None
    output_retries: int = Field(default=2, ge=0, le=20)
    max_context_chars: int | None = Field(default=None, ge=1000)
    model_timeout: float | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, ge=1)
    compaction: Compaction | None = None
    memory: RoleMemory | None = None
    approvals: Approvals | None = None
    guards: Guards | None = None
    session: Literal["full", "summary", "none"] | None = None

    @property
    def system_prompt(self) -> str:
        parts = [f"You are the {self.name} worker."]
        if self.description:
            parts.append(self.description)
        if self.instructions:
            parts.append(self.instructions)
        return "\n\n".join(parts)

    def resolve_tools(
        self, registry: ToolRegistry | None = None, *, servers: Collection[str] = ()
    ) -> ToolRegistry:
        """The role's tools, looked up in ``registry`` or imported by path; those of the
        MCP ``servers`` are not among them (their servers list them), nor agent and
        hive tools (``agent:ROLE``, ``hive:PATH``: the Executor makes them).

        Raises:
            UnknownToolError: for a name that is neither registered nor an import path.
            ConfigError: for an import path that cannot be imported (saying where its
                first part is no server, as a misspelt one would be), or a server
                named without a tool (``server:``).
        """
        source = registry if registry is not None else ToolRegistry()
        tools: list[Tool[..., Any]] = []
        for ref in self.tools:
            served = mcp_ref(ref, servers)
            if served is not None and not served[1]:
                raise ConfigError(_no_tool(ref, served[0]))
            if served is None and not is_nested_ref(ref):
                tools.append(_resolved(source, ref, servers))
        return ToolRegistry(tools)

    def tool_names(
        self,
        registry: ToolRegistry | None = None,
        *,
        servers: Collection[str] = (),
        listed: Mapping[str, Mapping[str, Tool[..., Any]]] | None = None,
    ) -> tuple[str, ...] | None:
        """The names its model calls its tools by (an agent or hive tool's, and memory's
        ``recall`` and ``remember`` when the role keeps notes); None when an MCP server
        lists some of them and ``listed`` (each server's tools as it listed them, by
        their MCP names) does not hold that server's, so they are not known yet.

        Raises:
            UnknownToolError: for a name that is neither registered nor an import path.
            ConfigError: for an import path that cannot be imported, or a tool its MCP
                server did not list.
        """
        mcp = [found for ref in self.tools if (found := mcp_ref(ref, servers)) is not None]
        known = listed or {}
        if any(server not in known for server, _ in mcp):
            return None
        names = [tool.name for tool in self.resolve_tools(registry, servers=servers)]
        for server, wanted in mcp:
            names += [tool.name for tool in pick_tools(server, known[server], wanted)]
        names += [nested_tool_name(ref) for ref in self.tools if is_nested_ref(ref)]
        if self.memory is not None and self.memory.remember:
            names += ["recall", "remember"]
        return tuple(names)

    def resolve_output(self) -> type[BaseModel] | None:
        """The pydantic model named by ``output_schema``.

        Raises:
            ConfigError: when it cannot be imported or is not a pydantic model.
        """
        return None if self.output_schema is None else import_output_schema(self.output_schema)


def import_output_schema(path: str) -> type[BaseModel]:
    """The pydantic model at import path ``path``.

    Raises:
        ConfigError: when it cannot be imported or is not a pydantic model.
    """
    found = import_object(path)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise ConfigError(
            f"output_schema {path!r} is not a pydantic model (it is {type(found).__name__})"
        )
    return found


def check_role(
    body: Mapping[str, Any],
    doc: YamlDocument,
    path: YamlPath,
    registry: ToolRegistry | None,
    models: Sequence[str] | None = None,
    servers: Collection[str] = (),
    declared: Collection[str] = (),
) -> list[ConfigError]:
    """Problems with a role's references (tools, output schema, and its model when
    ``models`` names the ones there are), located in ``doc``. A name of ``declared`` (those
    a hive declares, made or not) is no problem of the role's: one that could not be
    made is told where it is declared. Tools of the MCP
    ``servers`` are checked when the servers list them (``honeycomb validate``).

    Works on the raw mapping, so references are checked even when other fields of
    the role are invalid, and every mistake is reported at once.
    """
    errors: list[ConfigError] = []
    compaction = body.get("compaction")
    summarizer = compaction.get("model") if isinstance(compaction, Mapping) else None
    for where, model in (
        ((*path, "model"), body.get("model")),
        ((*path, "compaction", "model"), summarizer),
    ):
        if models and isinstance(model, str) and model not in models:
            errors.append(
                doc.error(
                    where,
                    f"unknown model {model!r}{did_you_mean(model, models)}; "
                    f"models: {', '.join(models)}",
                )
            )
    source = registry if registry is not None else ToolRegistry()
    tools = body.get("tools")
    refs: Sequence[Any] = tools if isinstance(tools, list | tuple) else ()
    named: dict[int, str] = {}  # the names of its tools, by their place, where known
    names: list[str] | None = []  # the role's tool names (None: not all are known)
    for index, ref in enumerate(refs):
        if not isinstance(ref, str):
            names = None
            continue  # field validation reports the wrong type
        if is_nested_ref(ref):  # an agent or hive tool: checked with every role (nesting)
            named[index] = nested_tool_name(ref)
            if names is not None:
                names.append(named[index])
            continue
        served = mcp_ref(ref, servers)
        if served is not None:
            if not served[1]:
                errors.append(doc.error((*path, "tools", index), _no_tool(ref, served[0])))
            names = None  # its server lists its tools
            continue
        try:
            found = source.resolve(ref)
            named[index] = found.name
            if names is not None:
                names.append(found.name)
        except HoneycombError as exc:
            names = None
            if ref in declared:  # not made: its error is at its declaration
                continue
            message = exc.message if isinstance(exc, ConfigError) else str(exc)
            if ":" not in ref:
                meant = path_meant(ref)
                close = f" (did you mean {meant!r}?)" if meant is not None else ""
                message = (
                    f"unknown tool {ref!r}{did_you_mean(ref, source.names) or close}; "
                    f"available: {', '.join(source.names) or 'none'} "
                    "(or write an import path 'package.module:function')"
                )
            else:
                message += _read_as_path(ref, servers)
            errors.append(doc.error((*path, "tools", index), message))
    errors.extend(_names_taken(refs, named, body.get("memory"), doc, path))
    if names is not None:
        names += _memory_tool_names(body.get("memory"))
        errors.extend(approval_problems(body.get("approvals"), names, doc, path))
    errors.extend(guard_problems(body.get("guards"), doc, path))
    counter = compaction.get("token_counter") if isinstance(compaction, Mapping) else None
    problem = token_counter_problem(counter) if isinstance(counter, str) else None
    if problem is not None:
        errors.append(doc.error((*path, "compaction", "token_counter"), problem))
    schema = body.get("output_schema")
    if isinstance(schema, str):
        try:
            import_output_schema(schema)
        except ConfigError as exc:
            errors.append(doc.error((*path, "output_schema"), exc.message))
    return errors


def _no_tool(ref: str, server: str) -> str:
    """What is wrong with ``ref``, ``server:`` alone, and what to write."""
    return (
        f"{ref!r} names the MCP server {server!r} but no tool: write '{server}:TOOL', or "
        f"'{server}:*' for all of its tools"
    )


def _read_as_path(ref: str, servers: Collection[str]) -> str:
    """What to add to why ``ref``, ``name:tool``, cannot be imported, where MCP servers
    are declared (or it names every tool, ``name:*``): 'name:tool' is an MCP tool only
    when 'name' is a declared server, so it was read as an import path."""
    prefix, _, tool = ref.partition(":")
    if not servers and tool != "*":
        return ""
    return (
        f"; {prefix!r} is not a declared MCP server{did_you_mean(prefix, servers)}, so "
        f"{ref!r} is read as an import path (MCP servers: {', '.join(servers) or 'none'})"
    )


def _resolved(source: ToolRegistry, ref: str, servers: Collection[str]) -> Tool[..., Any]:
    """The tool ``ref`` names in ``source``, or by its import path.

    Raises:
        UnknownToolError: for a name that is neither registered nor an import path.
        ConfigError: for an import path that cannot be imported, saying where its first
            part is no MCP server (see :func:`_read_as_path`).
    """
    try:
        return source.resolve(ref)
    except ConfigError as exc:
        told = _read_as_path(ref, servers) if ":" in ref else ""
        if not told:
            raise
        raise ConfigError(exc.message + told, field=exc.field) from exc


def _names_taken(
    refs: Sequence[Any],
    named: Mapping[int, str],
    memory: Any,
    doc: YamlDocument,
    path: YamlPath,
) -> list[ConfigError]:
    """The tools of a role (``refs``, their names by place ``named``) whose name an
    earlier one has, or its memory's tools (``recall``, ``remember``): a model calls a
    tool by its name, so the tools of a role need a name each."""
    # Each name's first tool, by its place (None: the memory's).
    first_of: dict[str, int | None] = dict.fromkeys(_memory_tool_names(memory))
    errors: list[ConfigError] = []
    for index, name in named.items():
        if name not in first_of:
            first_of[name] = index
            continue
        ref, first = refs[index], first_of[name]
        if first is not None and refs[first] == ref:
            message = f"{ref!r} is listed twice (tools[{first}] too): remove one"
        else:
            other = "its memory's tool" if first is None else f"tools[{first}] ({refs[first]!r})"
            message = (
                f"{ref!r} is a tool named {name!r}, as {other} is: the tools of a role need "
                f"a name each; {_renaming(ref)}"
            )
        errors.append(doc.error((*path, "tools", index), message))
    return errors


def _memory_tool_names(memory: Any) -> tuple[str, ...]:
    """The tools a role's ``memory:`` (its raw mapping) gives it: ``recall`` and
    ``remember`` unless it says ``remember: false``."""
    remembers = isinstance(memory, Mapping) and memory.get("remember", True) is not False
    return ("recall", "remember") if remembers else ()


def _renaming(ref: str) -> str:
    """How to give the tool ``ref`` names another name."""
    if agent_ref(ref) is not None:
        return "rename its role (an agent tool is named after its role)"
    if hive_ref(ref) is not None:
        return "rename its file (a hive tool is named after its file)"
    return f"name it in the hive's tools: (tools: {{NAME: {ref!r}}}) and list NAME here"


def guard_problems(guards: Any, doc: YamlDocument, path: YamlPath) -> list[ConfigError]:
    """Guards in ``guards: {input: [...], ...}`` (at ``path``) whose import path does
    not import a callable (a judge role's name is checked against the hive's roles
    where they are all known: ``honeycomb.hive.checks``)."""
    errors: list[ConfigError] = []
    if not isinstance(guards, Mapping):
        return errors  # field validation reports the wrong type
    for kind in ("input", "output", "arguments"):
        refs = guards.get(kind)
        for index, ref in enumerate(refs if isinstance(refs, list | tuple) else ()):
            if not isinstance(ref, str):
                continue  # field validation reports the wrong type
            problem = guard_problem(ref)
            if problem is not None:
                errors.append(doc.error((*path, "guards", kind, index), problem))
    return errors


def approval_problems(
    approvals: Any,
    names: Sequence[str],
    doc: YamlDocument,
    path: YamlPath,
    unused: str = "which the role does not use",
) -> list[ConfigError]:
    """Names in ``approvals: {tools: [...]}`` (at ``path``) that are none of ``names``:
    a misspelt one would never ask."""
    listed = approvals.get("tools") if isinstance(approvals, Mapping) else None
    errors: list[ConfigError] = []
    for index, name in enumerate(listed if isinstance(listed, list | tuple) else ()):
        if isinstance(name, str) and name not in names:
            errors.append(
                doc.error(
                    (*path, "approvals", "tools", index), unused_approval(name, names, unused)
                )
            )
    return errors


def unused_approval(
    name: str, names: Sequence[str], unused: str = "which the role does not use"
) -> str:
    """What is wrong with ``approvals`` naming tool ``name``, none of ``names``."""
    return (
        f"approvals names tool {name!r}{did_you_mean(name, names)}, {unused}; "
        f"its tools: {', '.join(names) or 'none'}"
    )


def load_roles(
    source: str | Path,
    *,
    registry: ToolRegistry | Sequence[Tool[Any, Any]] | None = None,
    models: Sequence[str] | None = None,
    servers: Collection[str] = (),
) -> dict[str, Role]:
    """Roles from a YAML file or from every ``*.yaml``/``*.yml`` file in a folder,
    read as a hive file is (``${NAME}`` replaced from the environment).

    Args:
        source: The file or folder.
        registry: Where the roles' tool names are looked up.
        models: The model names a role may use, to check its ``model:`` (None: not
            checked).
        servers: The MCP servers a role's ``server:tool`` may name.

    Raises:
        ConfigErrors: every problem found, each with file, line, column and field.
    """
    reg = registry if isinstance(registry, ToolRegistry | None) else ToolRegistry(registry)
    errors: list[ConfigError] = []
    roles = collect_roles(source, errors, reg, models=models, servers=servers)
    if errors:
        raise ConfigErrors(errors)
    return {name: role for name, (_, role) in roles.items()}


def collect_roles(
    source: str | Path,
    errors: list[ConfigError],
    registry: ToolRegistry | None,
    *,
    models: Sequence[str] | None = None,
    servers: Collection[str] = (),
    declared: Collection[str] = (),
    skip: Path | None = None,
    other: Callable[[Any], bool] | None = None,
) -> dict[str, tuple[YamlPlace, Role]]:
    """The valid roles of a YAML file or of every ``*.yaml``/``*.yml`` file in a folder
    but ``skip`` (a hive's own file, in its ``roles_dir``) and those whose content
    ``other`` tells is no role file (a hive's other files), as :func:`load_roles` reads
    them, each with where it is written, so that a check of it made with a hive's other
    roles points into its file. Each problem is added to ``errors``: a hive knows the
    roles of a folder with mistakes too, to report one its ``roles:`` defines again
    beside them (every mistake at once).

    A role file is read as a hive file is: ``${NAME}`` replaced from the environment
    (an unset one, or one half written, an error at its line), and no error shows a
    value read from there.
    """
    from runtime.config.yaml_config import YamlPlace, load_yaml  # loads the YAML reader

    base = Path(source)
    files = role_files(base) if base.is_dir() else [base]
    skipped = skip.resolve() if skip is not None else None
    roles: dict[str, tuple[YamlPlace, Role]] = {}
    for file in files:
        if file.resolve() == skipped:
            continue
        try:
            doc = load_yaml(file, interpolate=True)
        except ConfigError as exc:
            errors.append(exc)
            continue
        if other is not None and other(doc.data):
            continue
        found = read_roles(doc, errors, registry, models=models, servers=servers, declared=declared)
        for path, role in found:
            place = YamlPlace(doc=doc, path=path)
            if role.name in roles:
                first = roles[role.name][0].error((), "")
                message = (
                    f"role {role.name!r} is defined twice (first in {first.file}:{first.line})"
                )
                errors.append(place.error((), message))
                continue
            roles[role.name] = (place, role)
    return roles


def role_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that may hold roles, in order: its ``*.yaml`` and
    ``*.yml`` files but hidden ones (``.pre-commit-config.yaml``, ``.gitlab-ci.yml``:
    a tool's settings, in a project's folder)."""
    found = (p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    return sorted(p for p in found if not p.name.startswith("."))


def read_roles(
    doc: YamlDocument,
    errors: list[ConfigError],
    registry: ToolRegistry | None,
    path: YamlPath = (),
    *,
    models: Sequence[str] | None = None,
    servers: Collection[str] = (),
    declared: Collection[str] = (),
) -> list[tuple[YamlPath, Role]]:
    """Every valid role in ``doc`` (at ``path``), with where it is; each problem found,
    in a role's fields or its references (``models``: the model names it may use;
    ``servers``: the MCP servers it may name; ``declared``: the tool names a hive
    declares), is added to ``errors``."""
    found: list[tuple[YamlPath, Role]] = []
    for here, body in role_entries(doc, errors, path):
        role, problems = doc.validate(Role, body, here)
        errors.extend(problems)
        errors.extend(check_role(body, doc, here, registry, models, servers, declared))
        if role is not None:
            found.append((here, role))
    return found


def role_entries(
    doc: YamlDocument, errors: list[ConfigError], path: YamlPath = ()
) -> list[tuple[YamlPath, Any]]:
    """The role bodies in a document (at ``path``), each with its path; names come
    from keys. A whole file may be one role, named by its ``name:`` text; a mapping of
    roles (a hive's ``roles:``, a file's) may hold a role named ``name``."""
    data = doc.data
    for part in path:
        data = data[part]
    if isinstance(data, Mapping) and set(data) == {"roles"}:
        return role_entries(doc, errors, (*path, "roles"))
    one_role = not path and isinstance(data, Mapping) and "name" in data
    if one_role and not isinstance(data["name"], Mapping):  # else the role named "name"
        return [(path, data)]
    if not isinstance(data, Mapping):
        what = "empty" if data is None else f"a {type(data).__name__}"
        errors.append(doc.error(path, f"expected a mapping of role name to role, got {what}"))
        return []
    entries: list[tuple[YamlPath, Any]] = []
    for name, body in data.items():
        here = (*path, name)
        if not isinstance(body, Mapping):
            errors.append(doc.error(here, f"role {name!r} must be a mapping of fields"))
            continue
        if "name" in body and body["name"] != name:
            errors.append(
                doc.error((*here, "name"), f"name {body['name']!r} differs from key {name!r}")
            )
            continue
        entries.append((here, {"name": name, **body}))
    return entries
