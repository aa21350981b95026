"""``Shared``: what every run of one Executor shares and follows.

The Executor checks its configuration and makes one ``Shared``; each run reads it
(its crew of roles and models, policy, planner, aggregator, store) and builds its own
:class:`~workers.services.Services` from the Executor's: the lock table of exclusive
tools, the tool and model slots, the approver, the runs' guards and the memory are
every run's; the run id, tracer, budget and judge are each run's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from honeycomb.run.aggregator import Aggregator, aggregator_role
from honeycomb.run.crew import Crew
from honeycomb.run.planner import Planner, RolePlanner
from honeycomb.run.policy import Policy
from runtime import EventHandler
from runtime.concurrency import Bell
from runtime.value import Value
from workers.services import Services

if TYPE_CHECKING:
    from honeycomb.run.context import Backend
    from honeycomb.store import RunStore

__all__ = ["Phases", "Reporting", "Shared"]


class Phases(Value, frozen=True, kw_only=True):
    """How a run begins and ends around its workers.

    Attributes:
        planner: Makes a run's plan when the caller gives none (None: there is none).
        aggregator: Merges a run's results.
        output_type: The type the aggregator's answer must validate against.
    """

    planner: Planner | None
    aggregator: Aggregator
    output_type: type[BaseModel] | None = None

    @property
    def leads(self) -> tuple[str, ...]:
        """The roles that plan and merge (a session's conversation is shown to them
        unless their ``session:`` says otherwise)."""
        planner = self.planner.role if isinstance(self.planner, RolePlanner) else None
        return tuple(r for r in (planner, aggregator_role(self.aggregator)) if r is not None)


class Reporting(Value, frozen=True, kw_only=True):
    """What is kept of each run, and who hears of it.

    Attributes:
        store: Where runs are kept, if anywhere.
        trace: Whether each run's spans are recorded (in the store).
        handlers: Called with every event of every run.
        log_events: Events also go to structlog, when it is configured.
        source: Where the Executor was declared (a hive file), kept with each run.
    """

    store: RunStore | None = None
    trace: bool = False
    handlers: tuple[EventHandler, ...] = ()
    log_events: bool = True
    source: str | None = None


class Shared:
    """What the runs of one Executor share.

    Args:
        crew: The roles, their models and setups.
        policy: Parallelism, failure policy, budgets, timeouts and limits.
        phases: The planner, the aggregator and the type of the answer.
        services: What every run's services start from (locks, slots, approver,
            guards, memory).
        reporting: What is kept of each run, and who hears of it.
        backend: Where subtask workers run (None: in each run's own event loop).
    """

    def __init__(
        self,
        crew: Crew,
        policy: Policy,
        phases: Phases,
        services: Services,
        reporting: Reporting,
        backend: Backend | None = None,
    ) -> None:
        self.crew = crew
        self.policy = policy
        self.phases = phases
        self.services = services
        self.reporting = reporting
        self.backend = backend
        self.bells: dict[str, Bell] = {}
        """The runs under way in this process that keep a record, by id: the bell that
        tells their workers waiting for a decision (paused, or while their approver
        asks) that one was recorded."""
        self.budgets_written: Callable[[str], str] | None = None
        """Where a limit of the policy's budgets is written, by its name, when the
        policy is a hive file's (``policy.budgets.cost at hive.yaml:7``); None: in
        code."""

    def budget_settings(self) -> dict[str, str]:
        """Where each limit the runs' budgets set is set, by its name, as its writer
        wrote it: the hive file's field at its line (``policy.budgets.cost at
        hive.yaml:7``), or ``Budgets(cost=0.5)`` in code. A run's budget names every
        refusal it makes so (:attr:`~runtime.limits.Budget.settings`)."""
        budgets, written = self.policy.budgets, self.budgets_written
        return {
            limit: written(limit) if written is not None else f"Budgets({limit}={value!r})"
            for limit in budgets.__struct_fields__
            if (value := getattr(budgets, limit)) is not None
        }
