"""The models a run of a hive calls (only those are built), and what the hive asks of
them: a sessions' conversation budget their contexts hold, and budgets in dollars that
their prices (or its memory's priced embeddings) count, in the hive and in the hives
its roles call as tools. Each problem is a located error added to ``errors``, as
:mod:`honeycomb.hive.checks` adds them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from honeycomb.hive.checks import role_error
from honeycomb.hive.specs import HiveSpec
from honeycomb.run.conversation import sessions_within, shown_the_conversation
from honeycomb.run.policy import priced_by_models
from runtime import ConfigError, Limits, YamlDocument
from runtime.config.yaml_config import YamlPlace
from runtime.models.layers.cost_cap import unpriced_called, unpriced_problem
from workers import Role

__all__ = ["check_called_prices", "check_models_used", "models_built", "models_used"]


def check_models_used(
    doc: YamlDocument, spec: HiveSpec, roles: Mapping[str, Role], errors: list[ConfigError]
) -> None:
    """Add to ``errors`` what the hive ``doc`` asks of the models it uses that they
    cannot give (as an Executor of the hive would refuse it)."""
    _check_session_readers(doc, spec, roles, errors)
    _check_budget_prices(doc, spec, roles, errors)


def _check_session_readers(
    doc: YamlDocument, spec: HiveSpec, roles: Mapping[str, Role], errors: list[ConfigError]
) -> None:
    """The sessions' conversation budget given fits the context of the models it uses
    that say theirs, and the compaction budgets of the roles shown it (as an Executor
    of the hive would refuse it)."""
    planner = spec.planner.role if spec.planner is not None else "planner"
    leads = (planner, spec.aggregator or "aggregator")
    contexts = [
        (model.context, f"model {name!r}")
        for name in models_built(spec, roles)
        if (model := spec.models[name]).provider == "llama" or "context" in model.model_fields_set
    ]
    readers = shown_the_conversation(roles.values(), leads)
    try:
        sessions_within(spec.policy.sessions, (), readers, contexts=contexts)
    except ConfigError as exc:
        wrong = (exc.field or "").rsplit(".", 1)[-1]  # its token_counter, or its budget
        field = wrong if wrong == "token_counter" else "budget_tokens"
        errors.append(doc.error(("policy", "sessions", "context", field), exc.message))


def _check_budget_prices(
    doc: YamlDocument, spec: HiveSpec, roles: Mapping[str, Role], errors: list[ConfigError]
) -> None:
    """A budget in dollars has a priced model to count, or for ``cost`` priced
    embeddings its roles' memory calls (as an Executor of the hive would refuse it)."""
    priced = _models_priced(spec, roles)
    problem = unpriced_problem(_by_models(spec.policy.budgets, spec, roles), priced)
    if problem is not None:
        limit, message = problem
        errors.append(doc.error(("policy", "budgets", limit), message))


def models_used(spec: HiveSpec, roles: Mapping[str, Role]) -> list[str]:
    """The models of the hive that a run of it calls, in their declared order: each
    role's own (the default, for a role that names none), the ones that write its
    roles' and its sessions' summaries. Their keys are asked for before a run."""
    default = spec.default_model or next(iter(spec.models), None)
    used = {spec.policy.sessions.context.model}
    for role in roles.values():
        used.add(role.model or default)
        used |= {role.compaction.model} if role.compaction is not None else set()
    return [name for name in spec.models if name in used]


def models_built(spec: HiveSpec, roles: Mapping[str, Role]) -> list[str]:
    """The models of the hive its Executor holds, in their declared order: those a run
    calls (:func:`models_used`) and the default, which an Executor always has. Only
    these are built: a model declared for later (the demo's ``gpt``, which no role
    names) costs nothing, not even its client's import."""
    held = {*models_used(spec, roles), spec.default_model or next(iter(spec.models), None)}
    return [name for name in spec.models if name in held]


def _models_priced(spec: HiveSpec, roles: Mapping[str, Role]) -> bool:
    """Whether a model its Executor holds has a price (the others are not built)."""
    return any(spec.models[name].price is not None for name in models_built(spec, roles))


def _by_models(budgets: Limits, spec: HiveSpec, roles: Mapping[str, Role]) -> Limits:
    """Of ``budgets``, the limits in dollars only the hive's models' prices can count:
    ``cost`` counts its memory's embeddings too, when they have a price and a role
    uses the memory (see :func:`~honeycomb.run.policy.priced_by_models`)."""
    embeddings = spec.memory.embeddings if spec.memory is not None else None
    used = any(role.memory is not None for role in roles.values())
    return priced_by_models(
        budgets, used and embeddings is not None and embeddings.price is not None
    )


class _Called(Protocol):
    """A hive called as a tool, as loaded (a :class:`~honeycomb.hive.Hive`)."""

    @property
    def file(self) -> Path: ...

    @property
    def spec(self) -> HiveSpec: ...

    @property
    def hives(self) -> Mapping[str, _Called]: ...

    @property
    def roles(self) -> Mapping[str, Role]: ...


def check_called_prices(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: Mapping[str, Role],
    places: Mapping[str, YamlPlace],
    hives: Mapping[str, _Called],
    errors: list[ConfigError],
) -> None:
    """A hive tool (``hive:PATH``) of a hive with a budget in dollars calls a priced
    model, and so does each hive it calls: their calls spend the budget (as an Executor
    of the hive would refuse it), told at the tool's line."""
    budgets = spec.policy.budgets
    for name, role in roles.items():
        for index, ref in enumerate(role.tools):
            called = hives.get(ref)
            chain = _unpriced(called, (), budgets) if called is not None else None
            if chain is None:
                continue
            which = " → ".join(hive.file.name for hive in chain)
            counted = _by_models(budgets, chain[-1].spec, chain[-1].roles)
            problem = unpriced_called(counted, f"{ref!r} ({which})", False)
            if problem is not None:
                errors.append(role_error(doc, places, name, ("tools", index), problem[1]))


def _unpriced(
    hive: _Called, chain: tuple[_Called, ...], budgets: Limits
) -> tuple[_Called, ...] | None:
    """The hives from the one called down to one whose calls would spend ``budgets``
    in dollars uncounted (None: none would), ``chain`` the hives that call it: none of
    its models has a price, nor, for ``cost``, its memory's embeddings."""
    chain = (*chain, hive)
    if not _models_priced(hive.spec, hive.roles):
        counted = _by_models(budgets, hive.spec, hive.roles)
        if unpriced_called(counted, "", False) is not None:
            return chain
    for called in hive.hives.values():
        if called not in chain:
            found = _unpriced(called, chain, budgets)
            if found is not None:
                return found
    return None
