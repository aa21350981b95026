"""The run's budget at its seams: spending that calls under way take past a limit
(tokens and cost are known only once a call answers), and a turn of tool calls it
refuses."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import anyio
import pytest

from runtime.concurrency import LoopSlots, OneLoop
from runtime.errors import BudgetExceeded
from runtime.limits import Budget, CallInFlight, LimitedModel, Limits
from runtime.limits.budget import attempting
from runtime.messages import Usage, UserMessage
from runtime.model import ModelRequest
from runtime.testing import FunctionModel


def test_spending_past_total_tokens_is_overspent_and_reaching_it_is_not() -> None:
    budget = Budget(Limits(total_tokens=100))
    budget.charge(Usage(input_tokens=60, output_tokens=40))
    assert budget.overspent() is None  # reached, not passed: the run kept within it
    budget.charge(Usage(output_tokens=1))
    past = budget.overspent()
    assert past is not None
    assert (past.limit, past.allowed, past.used) == ("total_tokens", 100, 101)


def test_calls_reserved_before_the_limit_is_reached_can_spend_past_it_and_none_after() -> None:
    budget = Budget(Limits(total_tokens=100))
    budget.reserve_model_call()  # two calls under way together, both allowed:
    budget.reserve_model_call()  # nothing is spent yet
    budget.charge(Usage(input_tokens=70))
    budget.charge(Usage(input_tokens=70))
    with pytest.raises(BudgetExceeded):
        budget.reserve_model_call()
    past = budget.overspent()
    assert past is not None
    assert past.used == 140
    assert budget.usage.model_calls == 2


def test_cost_past_its_limit_is_overspent_but_a_sum_of_prices_at_it_is_not() -> None:
    budget = Budget(Limits(cost=0.3))
    budget.charge(Usage(cost=0.1))
    budget.charge(Usage(cost=0.2))  # 0.30000000000000004 as floats add
    assert budget.overspent() is None
    budget.charge(Usage(cost=0.05))
    past = budget.overspent()
    assert past is not None
    assert (past.limit, past.allowed, past.used) == ("cost", 0.3, 0.35)


def test_a_budget_without_token_or_cost_limits_is_never_overspent() -> None:
    budget = Budget(Limits(model_calls=1, tool_calls=1))
    budget.charge(Usage(input_tokens=10**6, cost=100.0))
    assert budget.overspent() is None


def test_a_refused_turn_of_tool_calls_says_what_was_used_asked_for_and_allowed() -> None:
    budget = Budget(Limits(tool_calls=7))
    budget.reserve_tool_calls_now(4)
    budget.settle_tool_calls(4, 4)  # a turn answered
    budget.reserve_tool_calls_now(2)  # a turn under way
    with pytest.raises(BudgetExceeded) as refused:
        budget.reserve_tool_calls_now(2)
    assert str(refused.value) == (
        "budget exceeded: tool_calls used 6 of 7 allowed (2 in turns under way), "
        "and a turn asked for 2 more"
    )
    refusal = refused.value
    assert (refusal.used, refusal.running, refusal.requested, refusal.allowed) == (6, 2, 2, 7)
    assert budget.usage.tool_calls == 6  # nothing counted for the refused turn


def test_what_a_refused_turn_asked_for_survives_a_pickle() -> None:
    refused = BudgetExceeded("tool_calls", 7, 6, requested=2, running=2)
    again = pickle.loads(pickle.dumps(refused))
    assert (again.requested, again.running) == (2, 2)
    assert str(again) == str(refused)


def test_a_turn_never_settled_counts_in_the_runs_usage_not_in_what_a_store_keeps() -> None:
    budget = Budget(Limits(tool_calls=7))
    budget.reserve_tool_calls_now(2)  # the turn is cut off: its calls ran, unsettled
    assert budget.usage.tool_calls == 2
    assert budget.usage.tool_calls - budget.tool_calls_running == 0


def test_a_budget_named_for_a_sub_run_is_the_same_budget_its_calls_named_as_the_run_does() -> None:
    """What a sub-run spends through its view is the run's (counted, limited, told to
    the run's store), and its calls in flight are named after the caller's call, a
    sub-run's sub-run after both."""
    told: list[int] = []
    budget = Budget(Limits(model_calls=3))
    budget.on_spend = lambda: told.append(budget.usage.model_calls)
    sub = budget.named("s2/call_1/")
    deeper = sub.named("s1/call_4/")
    for each in (budget, sub, deeper):
        each.reserve_model_call()
    with pytest.raises(BudgetExceeded):
        sub.reserve_model_call()
    sub.charge(Usage(input_tokens=5))
    assert told == [1, 2, 3, 3]
    assert budget.usage == deeper.usage == Usage(input_tokens=5, model_calls=3)
    calls = [CallInFlight("s1", "turn", 1), CallInFlight("s1", "turn", 2)]
    sub.call_started(calls[0])
    deeper.call_started(calls[1])
    assert sorted(c.who for c in budget.in_flight()) == ["s2/call_1/s1", "s2/call_1/s1/call_4/s1"]
    sub.call_ended(calls[0])
    assert [c.who for c in deeper.in_flight()] == ["s2/call_1/s1/call_4/s1"]


@pytest.mark.parametrize(
    ("made", "said"),
    [
        (
            lambda: BudgetExceeded("total_tokens", 2_000_000, 2_000_123),
            "total_tokens used 2000123 of 2000000 allowed",
        ),
        (
            lambda: BudgetExceeded("tool_calls", 1_000_000, 1_000_000, requested=5, running=1_000),
            "tool_calls used 1000000 of 1000000 allowed (1000 in turns under way), and a turn "
            "asked for 5 more",
        ),
        (lambda: BudgetExceeded("cost", 12.5, 12.534567), "cost used 12.534567 of 12.5 allowed"),
        (lambda: BudgetExceeded("wall_time_s", 3600, 3600.123), "used 3600.123 of 3600 allowed"),
        (lambda: BudgetExceeded("cost", 0.1, 0.000001), "cost used 0.000001 of 0.1 allowed"),
        (lambda: BudgetExceeded("cost_per_call", 0.00001, 0.000012), "would cost 0.000012 ("),
    ],
)
def test_a_budget_says_its_figures_whole(made: Callable[[], BudgetExceeded], said: str) -> None:
    """A budget of millions of tokens said 'used 2.00012e+06 of 2e+06 allowed': six
    figures, in the notation of a float, of counts a person set and reads in full."""
    assert said in str(made())


def test_a_budget_named_where_it_is_set_says_so_and_crosses_a_process_so() -> None:
    """Where the limit is set is named in the message, its fields kept, and so it is
    made again from a pickle (a Ray actor's error)."""
    spent = BudgetExceeded("tool_calls", 7, 6, requested=2, running=6)
    spent.set_by("policy.budgets.tool_calls at hive.yaml:7")
    said = (
        "budget exceeded: tool_calls used 6 of 7 allowed by policy.budgets.tool_calls at "
        "hive.yaml:7 (6 in turns under way), and a turn asked for 2 more"
    )
    assert str(spent) == said
    again = pickle.loads(pickle.dumps(spent))
    assert (str(again), again.limit, again.setting) == (said, "tool_calls", spent.setting)
    capped = BudgetExceeded("cost_per_call", 0.1, 0.4)
    capped.set_by("Budgets(cost_per_call=0.1)")
    assert "(raise cost_per_call, set by Budgets(cost_per_call=0.1), or keep" in str(capped)


async def test_a_call_is_checked_again_once_it_has_its_slot_only_if_it_waited_for_it() -> None:
    """A call that had its slot at once is sent without another look at the budget
    (nothing was spent since it was reserved); one that waited for it is checked as
    it comes (the calls that held the slot meanwhile may have spent the budget)."""
    checked: list[str] = []

    class Counted(CallInFlight):
        def retried(self) -> None:  # as a call's budget is checked before it is sent
            checked.append(self.who)

    slots = LoopSlots(1, OneLoop("the test"))
    model = LimitedModel(FunctionModel(lambda request: "ok"), slots)
    request = ModelRequest(messages=(UserMessage(content="hi"),))

    async def made(who: str) -> None:
        attempting.set(Counted(who, "turn", 1))  # (in this task only)
        await model.complete(request)

    await made("at once")
    let_go = anyio.Event()

    async def held() -> None:
        async with slots:
            await let_go.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(held)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(made, "waited")
        await anyio.wait_all_tasks_blocked()
        let_go.set()
    assert checked == ["waited"]
