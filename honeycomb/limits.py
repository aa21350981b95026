"""What a run may spend, and what it has spent: the :class:`Limits` of a policy's
``budgets`` (``Budgets`` in ``honeycomb``), the run's :class:`Budget` that every worker
charges, the model calls under way it can tell of, and the :class:`Slots` that bound
calls in flight.

    from honeycomb.limits import Budget, InFlight
"""

from runtime.limits.budget import Budget, CallInFlight, InFlight, Limits, Slots

__all__ = ["Budget", "CallInFlight", "InFlight", "Limits", "Slots"]
