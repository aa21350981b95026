"""What a run may spend, and what it has spent: the :class:`Limits` of a policy's
``budgets`` (``Budgets`` in ``honeycomb``), the run's :class:`Budget` that every worker
charges, and the model calls under way it can tell of.

    from honeycomb.limits import Budget, InFlight
"""

from runtime.limits.budget import Budget, CallInFlight, InFlight, Limits

__all__ = ["Budget", "CallInFlight", "InFlight", "Limits"]
