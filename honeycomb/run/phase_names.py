"""The names the run's planner's and aggregator's workers are kept under in its store
(:mod:`honeycomb.run.phase_workers`): what each is for, then a digest of what it was
asked (``plan:1.2:3f2a9c1e``, ``aggregate:0b7d44e2``). Never a subtask's (a ``:`` is in
no subtask id), nor a nested worker's (they have no ``/``)."""

from __future__ import annotations

import hashlib

__all__ = ["is_phase_name", "phase_name", "phase_of"]


def phase_name(what: str, prompt: str) -> str:
    """The name of the planner's or the aggregator's worker that does ``what``
    (``plan:1.1``, the plan's round and attempt; ``aggregate``), asked ``prompt``."""
    digest = hashlib.blake2b(prompt.encode("utf-8", "surrogatepass"), digest_size=4)
    return f"{what}:{digest.hexdigest()}"


def is_phase_name(name: str) -> bool:
    """Whether ``name``, a worker's in the run's store, is the planner's or the
    aggregator's."""
    return ":" in name and "/" not in name


def phase_of(name: str) -> str | None:
    """What the worker kept as ``name`` in the run's store is for, when it is its
    planner's or its aggregator's (``plan``, ``aggregate``); None for a subtask's."""
    return name.partition(":")[0] if is_phase_name(name) else None
