"""The checks of a hive that span its fields: references between them (models,
roles, planner, aggregator, judges), agent tools that nest, model settings, memory and
the policy's rule across fields. Each problem is a located error added to ``errors``,
so that every mistake of a hive is reported at once."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import get_args

import pydantic

import runtime.models.llama_server as llama_server
from honeycomb.hive.backend import RAY_MISSING, ray_missing
from honeycomb.hive.specs import HiveSpec, PlannerSpec
from honeycomb.run.policy import FailurePolicy, Policy, quorum_problem
from runtime import ConfigError, YamlDocument, did_you_mean
from runtime.models.openai.request import Api, settings_problems
from workers import Role
from workers.nesting import nesting_problems
from workers.role import guard_problems

__all__ = ["check_across_fields"]


def check_across_fields(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: Mapping[str, Role],
    models: list[str],
    errors: list[ConfigError],
) -> None:
    """Add to ``errors`` each problem of the hive ``doc`` that no one field shows."""
    _check_references(doc, spec, roles, models, errors)
    _check_nesting(doc, spec, roles, errors)
    _check_settings(doc, errors)
    _check_memory(doc, spec, roles, errors)
    _check_policy_rules(doc, errors)
    _check_local_models(doc, spec, errors)
    if spec.backend.ray is not None and ray_missing():
        errors.append(doc.error(("backend",), RAY_MISSING))


def _check_references(
    doc: YamlDocument,
    spec: HiveSpec,
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
    doc: YamlDocument, spec: HiveSpec, roles: Mapping[str, Role], errors: list[ConfigError]
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
    doc: YamlDocument, spec: HiveSpec, roles: Mapping[str, Role], errors: list[ConfigError]
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


def _check_local_models(doc: YamlDocument, spec: HiveSpec, errors: list[ConfigError]) -> None:
    """Models llama.cpp is to run in this process: xllamacpp installed, and a GGUF file
    to run (``path:``, relative to the hive file, or SmolLM2's)."""
    folder = Path(doc.file).resolve().parent
    for name, model in spec.models.items():
        if model.provider != "llama":
            continue
        if llama_server.llama_missing():
            errors.append(doc.error(("models", name, "provider"), llama_server.LLAMA_MISSING))
        if model.path is None:
            if llama_server.bundled_gguf() is None:
                errors.append(doc.error(("models", name), llama_server.NO_GGUF))
            continue
        problem = llama_server.gguf_problem(folder / model.path)
        if problem is not None:
            errors.append(doc.error(("models", name, "path"), problem))


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
