"""A worker's services in a Ray actor, made from what was sent of them (no Ray here)."""

from __future__ import annotations

from honeycomb.backends._link import Link, Outbox
from honeycomb.backends._standins import served
from honeycomb.backends._wire import SentServices
from runtime.events import HeldText, Tracer
from runtime.limits import Limits
from runtime.testing import ScriptedModel
from workers.guards import ResolvedGuards


def test_the_actors_budget_has_the_runs_limits_and_reserves_at_the_driver() -> None:
    sent = SentServices(
        run_id="r1", guards=ResolvedGuards(), approval_timeout_s=None,
        limits=Limits(cost_per_call=0.1), at_driver=frozenset({"tool_slots"}),
    )  # fmt: skip
    outbox = Outbox()
    _, services = served(sent, Link("w1", outbox), ScriptedModel([]), None)
    assert services.budget.limits.cost_per_call == 0.1  # a call's cap holds in the actor
    services.budget.reserve_model_call()  # the driver reserves: nothing here to refuse
    assert services.tool_slots is not None
    assert services.approver is None
    assert services.store is None  # the run keeps nothing: no store to stand in for


def test_the_actors_tracer_holds_text_as_the_drivers_does() -> None:
    # A tracer that holds answers' text until guards pass them has its model calls made
    # whole (nobody sees the text as it is written): the actor's is made holding, or
    # not, as the driver's is, as HeldText is made holding.
    for held in (True, False):
        sent = SentServices(
            run_id="r1", guards=ResolvedGuards(), approval_timeout_s=None, limits=Limits(),
            at_driver=frozenset({"events"}), text=True, held=held,
        )  # fmt: skip
        _, services = served(sent, Link("w1", Outbox()), ScriptedModel([]), None)
        assert services.tracer.holds_text is held
        assert services.tracer.text
    assert HeldText(Tracer()).holds_text
    assert not Tracer().holds_text
