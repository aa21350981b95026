"""The warning ``honeycomb validate`` gives of a role that only judges and has tools
(:func:`idle_tool_warnings`): a judge's call is one model call without tools, so a
role that is given no work (no planner may give it a subtask, no role calls it as an
``agent:`` tool, it neither plans nor merges) never calls its tools. From Python,
``run(task, subtasks=...)`` may still give it a subtask: a warning, not an error."""

from __future__ import annotations

from collections.abc import Mapping

from honeycomb.hive.checks import role_error
from honeycomb.hive.specs import HiveSpec
from runtime import ConfigError, YamlDocument
from runtime.config.yaml_config import YamlPlace
from workers import Role

__all__ = ["idle_tool_warnings"]


def idle_tool_warnings(
    spec: HiveSpec, roles: Mapping[str, Role], doc: YamlDocument, places: Mapping[str, YamlPlace]
) -> list[ConfigError]:
    """A warning at the ``tools`` of each role that only judges and has tools."""
    named = list(spec.guards.judges()) if spec.guards is not None else []
    for role in roles.values():
        named += role.guards.judges() if role.guards is not None else []
    working = _working(spec, roles)
    found = []
    for name in dict.fromkeys(named):
        judge = roles.get(name)
        if judge is None or not judge.tools or name in working:
            continue
        message = (
            f"the role {name!r} only judges (a guard names it as its judge, and it is given "
            "no work): a judge's call is one model call without tools, so its tools are "
            "never called; give them to the role whose work it judges, or, for it to work "
            "too, name it among the planner's roles (planner: {role: ..., roles: [...]})"
        )
        found.append(role_error(doc, places, name, ("tools",), message))
    return found


def _working(spec: HiveSpec, roles: Mapping[str, Role]) -> set[str]:
    """The roles that work: the planner, the aggregator, those the planner names, and
    those a role calls as an ``agent:`` tool."""
    planner = spec.planner
    working = {planner.role if planner is not None else "planner"}
    working.add(spec.aggregator or "aggregator")
    working.update(planner.roles or () if planner is not None else ())
    for role in roles.values():
        working.update(t.removeprefix("agent:") for t in role.tools if t.startswith("agent:"))
    return working
