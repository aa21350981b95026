"""``Shared``: what every run of one Executor shares and follows.

The Executor checks its configuration and makes one ``Shared``; each run reads it
(its roles, models, policy, planner, aggregator, store) and the workers of every run
share its lock table for exclusive tools, its limiters and the setups of its roles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import anyio
from pydantic import BaseModel

from honeycomb.run.aggregator import Aggregator
from honeycomb.run.planner import Planner
from honeycomb.run.policy import Policy
from runtime import EventHandler, LimitedModel, LockTable, Model
from runtime.approvals import Approver
from workers import Role, WorkerSetup

if TYPE_CHECKING:
    from honeycomb.store import RunStore

__all__ = ["Shared"]


class Shared:
    """What the runs of one Executor share.

    Attributes:
        roles: Every role, by name.
        models: The models by name, behind the policy's ``model_concurrency`` limiter.
        default_model: The model of roles that name none.
        policy: Parallelism, failure policy, budgets, timeouts and limits.
        planner: Makes a run's plan when the caller gives none (None: there is none).
        aggregator: Merges a run's results.
        output_type: The type the aggregator's answer must validate against.
        store: Where runs are kept, if anywhere.
        trace: Whether each run's spans are recorded (in the store).
        handlers: Called with every event of every run.
        log_events: Events also go to structlog, when it is configured.
        source: Where the Executor was declared (a hive file), kept with each run.
        locks: The lock table of ``exclusive`` tools, shared by every worker.
        tool_limiter: Bounds the tool calls in flight across every run.
        approver: Decides on calls that need approval (None: they wait in the store).
    """

    def __init__(
        self,
        *,
        roles: Mapping[str, Role],
        models: Mapping[str, Model],
        default_model: str,
        setups: Mapping[str, WorkerSetup],
        policy: Policy,
        planner: Planner | None,
        aggregator: Aggregator,
        output_type: type[BaseModel] | None,
        store: RunStore | None,
        trace: bool,
        handlers: Sequence[EventHandler],
        log_events: bool,
        source: str | None,
        approver: Approver | None = None,
    ) -> None:
        self.roles = dict(roles)
        limiter = _limiter(policy.model_concurrency)
        self.models: dict[str, Model] = {
            name: LimitedModel(m, limiter) if limiter is not None else m
            for name, m in models.items()
        }
        self.default_model = default_model
        self.policy = policy
        self.planner = planner
        self.aggregator = aggregator
        self.output_type = output_type
        self.store = store
        self.trace = trace
        self.handlers = tuple(handlers)
        self.log_events = log_events
        self.source = source
        self.approver = approver
        self.locks = LockTable()
        self.tool_limiter = _limiter(policy.tool_concurrency)
        self._setups: dict[tuple[Role | str, type[BaseModel] | None], WorkerSetup] = {
            (name, None): setup for name, setup in setups.items()
        }

    def model_for(self, role: Role) -> Model:
        """The model ``role`` thinks with."""
        return self.models[role.model or self.default_model]

    def setup_for(self, role: Role, output_type: type[BaseModel] | None) -> WorkerSetup:
        """A role's resolved setup, made once and shared by all its workers and runs."""
        # Key registered roles by name: hashing a role hashes all its fields.
        key = (role.name if self.roles.get(role.name) is role else role, output_type)
        found = self._setups.get(key)
        if found is None:
            # A registered role's tools were resolved with the Executor: never again by
            # import path at run time (a hive's paths resolve only as the hive loads).
            own = self._setups.get((role.name, None)) if key[0] == role.name else None
            found = self._setups[key] = (
                WorkerSetup.of(role, None, output_type)
                if own is None
                else WorkerSetup.resolved(role, own.tools, output_type)
            )
        return found


def _limiter(capacity: int | None) -> anyio.CapacityLimiter | None:
    return anyio.CapacityLimiter(capacity) if capacity is not None else None
