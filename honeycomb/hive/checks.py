"""The checks of a hive that span its fields: references between them (models,
roles, planner, aggregator, judges), agent tools that nest, model settings, memory and
the policy's rule across fields. Each problem is a located error added to ``errors``,
so that every mistake of a hive is reported at once.

The checks about roles go over every role of the hive, however it was read: written
in the hive file, or read from a file of ``roles_dir``; :func:`role_error` points into
the file that writes the role."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import pydantic

import runtime.models.llama_server as llama_server
from honeycomb.hive.backend import backend_problems
from honeycomb.hive.mcp import names_not_keys
from honeycomb.hive.paths import beside, folder_of
from honeycomb.hive.specs import HiveSpec, PlannerSpec
from honeycomb.run.policy import FailurePolicy, Policy, quorum_problem
from runtime import ConfigError, YamlDocument, did_you_mean, load_yaml
from runtime.config.yaml_config import YamlPath, YamlPlace
from runtime.errors import MemoryFeatureMissing
from runtime.models.openai.request import Api, settings_problems
from workers import Role
from workers.compaction import compaction_models, context_problem
from workers.guards import guard_problem
from workers.nesting import nesting_problems
from workers.role import guard_problems, role_entries, role_files

__all__ = ["check_across_fields", "role_error"]


def check_across_fields(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: Mapping[str, Role],
    places: Mapping[str, YamlPlace],
    models: list[str],
    errors: list[ConfigError],
) -> None:
    """Add to ``errors`` each problem of the hive ``doc`` that no one field shows
    (``places``: where each of its ``roles`` is written)."""
    declared = _declared(doc, spec, roles)
    _check_references(doc, spec, roles, places, models, declared, errors)
    _check_nesting(doc, spec, roles, places, declared, errors)
    _check_settings(doc, errors)
    _check_memory(doc, spec, roles, places, errors)
    _check_policy_rules(doc, errors)
    _check_local_models(doc, spec, errors)
    _check_compaction_contexts(doc, spec, roles, places, errors)
    errors.extend(backend_problems(doc, spec.backend))
    errors.extend(names_not_keys(doc))


def _check_references(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: Mapping[str, Role],
    places: Mapping[str, YamlPlace],
    models: list[str],
    declared: list[str],
    errors: list[ConfigError],
) -> None:
    # The roles' own model references are checked with their fields (check_role).
    # (A models: written as no mapping has its own error, which says what to write.)
    if not models and isinstance(doc.data.get("models", {}), Mapping):
        errors.append(doc.error(("models",), "the hive defines no models (add 'default: offline')"))
    if spec.default_model is not None and spec.default_model not in models:
        errors.append(
            doc.error(
                ("default_model",),
                f"unknown model {spec.default_model!r}{did_you_mean(spec.default_model, models)}"
                f"; models: {', '.join(models)}",
            )
        )
    summarizer = spec.policy.sessions.context.model  # what summarizes sessions' turns
    if summarizer is not None and summarizer not in models:
        errors.append(
            doc.error(
                ("policy", "sessions", "context", "model"),
                f"unknown model {summarizer!r}{did_you_mean(summarizer, models)}; "
                f"models: {', '.join(models)}",
            )
        )
    # Guards: import paths (the roles' are checked with their fields), then judges.
    errors.extend(guard_problems(doc.data.get("guards"), doc, ()))
    for field, problem in _unknown_judges(doc.data.get("guards"), declared):
        errors.append(doc.error(field, problem))
    for name, body in _roles_as_written(doc, places).items():
        for field, problem in _unknown_judges(body.get("guards"), declared):
            errors.append(role_error(doc, places, name, field, problem))
    for key in ("planner", "aggregator"):
        ref = getattr(spec, key)
        at: tuple[str, ...] = (key,)
        if isinstance(ref, PlannerSpec):
            ref = ref.role
            if isinstance(doc.data.get(key), Mapping):  # as written: {role: ..., rounds: ...}
                at = (key, "role")
        if ref is None or (key == "aggregator" and ref == "concat") or ref in declared:
            continue
        # The aggregator may also be concat: the results joined, with no model call.
        choices = [*declared, "concat"] if key == "aggregator" else declared
        concat = " (or concat: the results joined)" if key == "aggregator" else ""
        errors.append(
            doc.error(
                at,
                f"unknown role {ref!r}{did_you_mean(ref, choices)}; roles: "
                f"{', '.join(declared) or 'none'}{concat}",
            )
        )
    if spec.planner is not None:
        for index, given in enumerate(spec.planner.roles or ()):
            wrong = _not_plannable(given, spec.planner.role, declared)
            if wrong is not None:
                errors.append(doc.error(("planner", "roles", index), wrong))


def _not_plannable(name: str, planner: str, roles: Sequence[str]) -> str | None:
    """Why ``planner: {roles: [...]}`` cannot name ``name``: no such role, or the
    planner itself (None: it can)."""
    if name == planner:
        return f"{name!r} is the planner: it plans, and gives no subtask to itself"
    if name not in roles:
        return (
            f"unknown role {name!r}{did_you_mean(name, roles)}; roles: {', '.join(roles) or 'none'}"
        )
    return None


def role_error(
    doc: YamlDocument,
    places: Mapping[str, YamlPlace],
    role: str,
    field: YamlPath,
    message: str,
) -> ConfigError:
    """An error in ``field`` (such as ``("tools", 0)``) of the hive ``doc``'s role
    ``role``, in the file that writes it (``places``: where each valid role is written,
    in the hive file or a file of ``roles_dir``; a role not valid is the hive file's)."""
    place = places.get(role)
    if place is None or place.doc.file == doc.file:  # ``doc`` hides what roles_dir's hide
        return doc.error(("roles", role, *field), message)
    return place.error(field, message)


def _declared(doc: YamlDocument, spec: HiveSpec, roles: Mapping[str, Role]) -> list[str]:
    """The names of the hive's roles, its valid ``roles`` and those that the hive file
    and the files of its ``roles_dir`` write but are not valid: a reference to one is
    no mistake of its own (the role's errors are reported)."""
    written = [str(k) for k in _written_roles(doc)]
    if spec.roles_dir is not None:
        hive_file = Path(doc.file)
        written += _written_in(beside(folder_of(hive_file), spec.roles_dir), hive_file)
    return list(roles) + [name for name in dict.fromkeys(written) if name not in roles]


def _written_in(folder: Path, hive_file: Path) -> list[str]:
    """The names of the roles the YAML files of ``folder`` (a ``roles_dir``) write,
    valid or not; a file that cannot be read writes none (its error is reported)."""
    if not folder.is_dir():
        return []
    names: list[str] = []
    for file in role_files(folder):
        if file.resolve() == hive_file.resolve():
            continue
        try:
            doc = load_yaml(file)
        except ConfigError:
            continue
        if not not_roles(doc.data):
            names += [str(body["name"]) for _, body in role_entries(doc, [])]
    return names


def not_roles(data: Any) -> bool:
    """Whether a YAML file of a ``roles_dir`` is one of a hive's other files, which the
    folder's roles pass over (``roles_dir: .`` reads the hive's own folder): a hive file
    (``models:`` beside ``roles:`` or ``roles_dir:``, as every hive has: the hive itself,
    one its roles call as a tool), or an eval's cases (``cases:`` or ``cases_from:``,
    not a role's mapping of fields: the ``evals.yaml`` that ``honeycomb init`` writes)."""
    if not isinstance(data, Mapping):
        return False
    hive = "models" in data and ("roles" in data or "roles_dir" in data)
    cases = any(key in data and not isinstance(data[key], Mapping) for key in _CASES)
    return hive or cases


_CASES = ("cases", "cases_from")
"""The fields of an eval's cases file that no role file has (as a role's name, a
role file of many holds a mapping there)."""


def _written_roles(doc: YamlDocument) -> Mapping[Any, Any]:
    """The roles the hive file writes under ``roles:``, as written (invalid ones too)."""
    raw = doc.data.get("roles")
    return raw if isinstance(raw, Mapping) else {}


def _roles_as_written(
    doc: YamlDocument, places: Mapping[str, YamlPlace]
) -> dict[str, Mapping[str, Any]]:
    """Every role of the hive as its file writes it, however it was read (in the hive
    file or a file of ``roles_dir``); those of the hive file that are not valid too:
    their references are checked beside their fields' errors."""
    written = {
        str(name): body for name, body in _written_roles(doc).items() if isinstance(body, Mapping)
    }
    for name, place in places.items():
        body = place.written
        if isinstance(body, Mapping):
            written[name] = body
    return written


def _unknown_judges(guards: Any, roles: Sequence[str]) -> Iterator[tuple[YamlPath, str]]:
    """The guards of ``guards: {input: [...], ...}`` that name a judge none of
    ``roles`` is, each with its field (a guard that is no role's name nor an import
    path is its own field's mistake, told with it)."""
    if not isinstance(guards, Mapping):
        return  # field validation reports the wrong type
    for kind in ("input", "output", "arguments"):
        refs = guards.get(kind)
        for index, ref in enumerate(refs if isinstance(refs, list | tuple) else ()):
            if not isinstance(ref, str) or ":" in ref or guard_problem(ref) is not None:
                continue  # a callable, an import path, or no role's name at all
            problem = guard_problem(ref, roles)
            if problem is not None:
                yield ("guards", kind, index), problem


def _check_nesting(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: Mapping[str, Role],
    places: Mapping[str, YamlPlace],
    declared: list[str],
    errors: list[ConfigError],
) -> None:
    """Agent tools (``agent:ROLE``) that name no role, make a cycle, or nest past
    ``policy: max_nesting``: each at the tool that starts it."""
    # A role written but not valid has no tools to follow: a reference to it is known.
    tools = {name: roles[name].tools if name in roles else () for name in declared}
    for problem in nesting_problems(tools, spec.policy.max_nesting):
        where = ("tools", problem.index)
        errors.append(role_error(doc, places, problem.role, where, problem.message))


def _check_settings(doc: YamlDocument, errors: list[ConfigError]) -> None:
    """Every problem of every model's settings, each at its own key (the settings are
    kept as written: pydantic would say one thing of the whole mapping)."""
    models = doc.data.get("models")
    for name, spec in (models if isinstance(models, Mapping) else {}).items():
        settings = spec.get("settings") if isinstance(spec, Mapping) else None
        if isinstance(settings, Mapping):
            api: Api = "responses" if spec.get("api") == "responses" else "chat"
            for where, message in settings_problems(settings, api):
                errors.append(doc.error(("models", name, "settings", *where), message))


def _check_memory(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: Mapping[str, Role],
    places: Mapping[str, YamlPlace],
    errors: list[ConfigError],
) -> None:
    """Roles that use a memory the hive does not declare; a memory this Python's SQLite
    cannot keep: embeddings without sqlite-vec, or one it cannot load; no FTS5."""
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
        elif spec.memory is not None:
            lacking = _sqlite_lacks(vectors=embeddings is not None)
            if lacking is not None:
                field = ("memory", "embeddings") if lacking.feature == "sqlite-vec" else ("memory",)
                errors.append(doc.error(field, str(lacking).removeprefix(f"{lacking.path}: ")))
        return
    for name, role in roles.items():
        if role.memory is not None:
            message = (
                f"role {name!r} has memory: but the hive declares no memory: add a "
                "top-level 'memory: {path: memory.db}'"
            )
            errors.append(role_error(doc, places, name, ("memory",), message))


def _sqlite_lacks(*, vectors: bool) -> MemoryFeatureMissing | None:
    """What a memory needs that this Python's SQLite lacks (FTS5; with ``vectors``, one
    that loads sqlite-vec), as a memory made now would say it; None: nothing."""
    from runtime.memory.db import driver  # sqlite3 loads with a hive that has a memory

    try:
        driver(Path("memory.db"), vectors=vectors)
    except MemoryFeatureMissing as exc:
        return exc
    return None


def _check_local_models(doc: YamlDocument, spec: HiveSpec, errors: list[ConfigError]) -> None:
    """Models llama.cpp is to run in this process: xllamacpp installed, and a GGUF file
    to run (``path:``, relative to the hive file, or SmolLM2's)."""
    folder = Path(doc.file).resolve().parent
    for name, model in spec.models.items():
        if model.provider != "llama":
            continue
        if llama_server.llama_missing():
            errors.append(doc.error(("models", name, "provider"), llama_server.LLAMA_MISSING))
        wrong_context = llama_server.context_problem(model.context)
        if wrong_context is not None:
            errors.append(doc.error(("models", name, "context"), wrong_context))
        if model.path is None:
            if llama_server.bundled_gguf() is None:
                errors.append(doc.error(("models", name), llama_server.NO_GGUF))
            continue
        problem = llama_server.gguf_problem(beside(folder, model.path))
        if problem is not None:
            errors.append(doc.error(("models", name, "path"), problem))


def _check_compaction_contexts(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: Mapping[str, Role],
    places: Mapping[str, YamlPlace],
    errors: list[ConfigError],
) -> None:
    """A compacting role's budget fits a call of the llama model it thinks with, and
    of the one that writes its summaries (as an Executor of the hive would refuse it)."""
    default = spec.default_model or next(iter(spec.models), None)
    for name, role in roles.items():
        compaction = role.compaction
        if compaction is None:
            continue
        for model, use in compaction_models(compaction, role.model or default).items():
            found = spec.models.get(model) if model is not None else None
            if found is None or found.provider != "llama":
                continue
            problem = context_problem(compaction, found.context)
            if problem is not None:
                message = f"the role {use} model {model!r}: {problem}"
                errors.append(
                    role_error(doc, places, name, ("compaction", "budget_tokens"), message)
                )


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
    most = raw.get("max_subtasks", Policy.model_fields["max_subtasks"].default)
    problem = quorum_problem(failure, raw.get("quorum"), most)
    if problem is not None:
        errors.append(doc.error(("policy",), problem))
