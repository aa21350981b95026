"""The warnings ``honeycomb validate`` gives of a role that only judges (no planner
may give it a subtask, no role calls it as an ``agent:`` tool, it neither plans nor
merges): one that has tools, which a judge's call, one
model call without tools, never calls; and one that names itself as its judge, which
made it a judge given no work. From Python, ``run(task, subtasks=...)`` may still give
it a subtask: warnings, not errors."""

from __future__ import annotations

from collections.abc import Mapping

from honeycomb.hive.checks import role_error
from honeycomb.hive.specs import HiveSpec
from runtime import ConfigError, YamlDocument
from runtime.config.yaml_config import YamlPlace
from workers import Role

__all__ = ["judges_warned"]


def judges_warned(
    spec: HiveSpec, roles: Mapping[str, Role], doc: YamlDocument, places: Mapping[str, YamlPlace]
) -> list[ConfigError]:
    """A warning at the ``tools`` of each role that only judges and has tools, and at
    the guard of each role that only judges because it names itself as its judge."""
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
    for name, role in roles.items():
        if role.guards is None or name in working:
            continue
        for field, ref in role.guards.refs():
            if ref == name:  # a role that judges its own answers is a judge, given no work
                found.append(role_error(doc, places, name, _path(field), _SELF.format(name)))
    return found


_SELF = (
    "the role {0!r} names itself as its judge, which makes it a role that only judges: no "
    "planner gives it a subtask; for it to work too, name it among the planner's roles "
    "(planner: {{role: ..., roles: [...]}}), or give its guard another judge role"
)


def _path(field: str) -> tuple[str | int, ...]:
    """``guards.output[0]`` as a path in the role: ``("guards", "output", 0)``."""
    head, index = field.rstrip("]").split("[")
    return (*head.split("."), int(index))


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
