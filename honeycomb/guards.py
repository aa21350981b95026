"""Guardrails: checks on what a worker is given, what it answers and the calls it
makes (``docs/guardrails.md``). A role's or a run's :class:`Guards` are resolved once
into :class:`ResolvedGuards`; a :class:`GuardRunner` runs them for a worker's loop, a
:class:`Judge` asks the roles that judge.

    from honeycomb.guards import GuardRunner, ResolvedGuards

``Guards`` and ``GuardCheck`` are in ``honeycomb`` too; each check is a
``GuardChecked`` event (:mod:`honeycomb.events`).
"""

from workers.guards import (
    Guard,
    GuardCheck,
    GuardRunner,
    Guards,
    Judge,
    JudgeRole,
    Refusal,
    ResolvedGuards,
)

__all__ = [
    "Guard",
    "GuardCheck",
    "GuardRunner",
    "Guards",
    "Judge",
    "JudgeRole",
    "Refusal",
    "ResolvedGuards",
]
