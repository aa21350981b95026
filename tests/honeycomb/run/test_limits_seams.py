"""Budgets where they meet other features: where a refused run's limit is set, a
person's approval that outlasts the wall time, what a denied call counts, and what a
call never sent (refused once it had its slot) counts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from honeycomb import (
    ApprovalRequest,
    Approvals,
    BudgetExceeded,
    Budgets,
    Decision,
    Executor,
    Policy,
    Role,
    load_hive,
    tool,
)
from honeycomb.events import WorkerFinished
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, ScriptedModel, call
from runtime import AssistantMessage, ModelRequest
from runtime.events import Event, ModelCallFinished, ModelCallStarted
from tests.support.model_requests import Answer, observations, role_of

LIMIT_S = 30  # a run that hangs fails the test rather than the suite

HIVE = """\
models: {m: {provider: offline, latency: 0}}
roles:
  w: {model: m}
aggregator: concat
policy:
  budgets:
    model_calls: 1
"""


async def answer(request: ModelRequest) -> str:
    return "done"


async def test_a_refused_run_names_where_its_limit_is_set_in_code_or_in_its_hive_file(
    tmp_path: Path,
) -> None:
    """The message named the limit (``model_calls``) but not where it is set: the
    Executor's ``Budgets(...)`` or its hive file's field, at its line. So do the
    subtasks it stopped, and those whose workers it refused, as the run gave them: in
    its partial result, their ``worker.finished`` events and its store."""
    db, seen = tmp_path / "runs.db", []
    coded = Executor(
        [Role(name="w")],
        FunctionModel(answer),
        aggregator="concat",
        policy=Policy(budgets=Budgets(model_calls=1), max_workers=1),
        store=db,
    )
    subtasks = [("w", "a"), ("w", "b"), ("w", "c")]
    with pytest.raises(BudgetExceeded) as caught:
        await coded.run("t", subtasks=subtasks, run_id="r1", on_event=[seen.append])
    assert caught.value.limit == "model_calls"
    assert caught.value.setting == "Budgets(model_calls=1)"
    said = "budget exceeded: model_calls used 1 of 1 allowed by Budgets(model_calls=1)"
    assert str(caught.value) == said
    partial = caught.value.partial
    assert partial is not None
    stopped = {i: s.error for i, s in partial.subtasks.items() if s.status == "over_budget"}
    assert sorted(stopped) == ["s2", "s3"]  # s2's own refusal; s3's, or the run's end
    assert all(e is not None and e.message.endswith(said) for e in stopped.values())
    told = {e.worker: e.error for e in seen if isinstance(e, WorkerFinished)}
    assert all(told[i] == str(e) for i, e in stopped.items())
    store = RunStore(db)
    kept = await store.load("r1")
    store.close()
    assert kept is not None
    assert kept.result is not None
    stored = json.loads(kept.result)["subtasks"]
    assert all(stored[i]["error"] == e.model_dump() for i, e in stopped.items())
    assert stored["s2"]["worker"]["error"] == stopped["s2"].model_dump()
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE)
    hive = load_hive(path)
    with pytest.raises(BudgetExceeded) as caught:
        await Executor.from_hive(hive, model=FunctionModel(answer)).run(
            "t", subtasks=[("w", "a"), ("w", "b")]
        )
    assert caught.value.limit == "model_calls"
    setting = f"policy.budgets.model_calls at {path}:7"
    assert caught.value.setting == setting
    assert str(caught.value) == f"budget exceeded: model_calls used 1 of 1 allowed by {setting}"
    # A policy given in code in place of the file's is named as code.
    replaced = Executor.from_hive(
        hive, model=FunctionModel(answer), policy=Policy(budgets=Budgets(model_calls=1))
    )
    with pytest.raises(BudgetExceeded) as caught:
        await replaced.run("t", subtasks=[("w", "a"), ("w", "b")])
    assert caught.value.setting == "Budgets(model_calls=1)"


async def test_a_refusal_deep_in_a_run_names_where_its_limit_is_set_as_it_is_told() -> None:
    """Two refusals that no scheduler of the run named before they were told: a nested
    agent worker's (its ``worker.finished`` was told as its call ended, before its
    caller's subtask did), and a subtask's of a hive the aggregator calls as a tool (no
    scheduler ran above its sub-run). Each says, as it is told, where the limit is set."""

    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    async def think(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        if role in ("w", "agg") and not seen:  # w asks its helper; agg, the inner hive
            asked = "helper" if role == "w" else "inner"
            return AssistantMessage(tool_calls=(call(asked, {"instruction": "go"}, id="c1"),))
        if role == "helper" and not seen:
            return AssistantMessage(tool_calls=(call("ping", {}),))  # refused: no call left
        return "done"

    seen: list[Event] = []
    nested = Executor(
        [Role(name="w", tools=("agent:helper",)), Role(name="helper", tools=("ping",))],
        FunctionModel(think),
        tools=[ping],
        aggregator="concat",
        policy=Policy(budgets=Budgets(model_calls=2)),  # w's call, and helper's one
    )
    with pytest.raises(BudgetExceeded) as caught:
        await nested.run("t", subtasks=[("w", "a")], on_event=[seen.append])
    said = "model_calls used 2 of 2 allowed by Budgets(model_calls=2)"
    assert str(caught.value).endswith(said)
    told = {e.worker: e.error for e in seen if isinstance(e, WorkerFinished)}
    assert sorted(told) == ["s1", "s1/c1"]
    assert all(error is not None and error.endswith(said) for error in told.values())
    seen.clear()
    inner = Executor(
        [Role(name="x")],
        FunctionModel(think),
        planner=lambda task: [("x", task), ("x", task)],
        aggregator="concat",
        policy=Policy(max_workers=1),
        on_event=[seen.append],
    )
    outer = Executor(
        [Role(name="x"), Role(name="agg", tools=("inner",))],
        FunctionModel(think),
        tools=[inner.as_tool("inner")],
        aggregator="agg",
        policy=Policy(budgets=Budgets(model_calls=3)),  # x's, agg's, the inner first x's
    )
    with pytest.raises(BudgetExceeded) as caught:
        await outer.run("t", subtasks=[("x", "a")])
    said = "model_calls used 3 of 3 allowed by Budgets(model_calls=3)"
    assert str(caught.value).endswith(said)
    told = {e.worker: e.error for e in seen if isinstance(e, WorkerFinished)}
    assert told["s1"] is None
    assert told["s2"] is not None
    assert told["s2"].endswith(said)  # the sub-run's subtask its budget refused


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


PAYER = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))


async def test_a_wall_time_that_runs_out_while_a_person_decides_stops_the_run_there() -> None:
    """The approver never answers: the run stops at its wall time, naming it, the
    approver's wait cut off, and the other worker's answer kept."""
    asked, left = asyncio.Event(), asyncio.Event()

    async def never(request: ApprovalRequest) -> Decision:
        asked.set()
        try:
            await asyncio.Event().wait()
        finally:
            left.set()
        raise AssertionError("unreachable")

    async def think(request: ModelRequest) -> object:
        if "Pay ann" in str(request.messages[1].content) and len(request.messages) == 2:
            return call("pay", {"to": "ann"})
        return "done"

    executor = Executor(
        [PAYER, Role(name="other")],
        FunctionModel(think),
        tools=[pay],
        approver=never,
        aggregator="concat",
        # Time enough for the other worker's one call on a busy machine.
        policy=Policy(budgets=Budgets(wall_time_s=0.5), approval_timeout_s=LIMIT_S),
    )
    with pytest.raises(BudgetExceeded) as caught:
        async with asyncio.timeout(LIMIT_S):
            await executor.run("t", subtasks=[("payer", "Pay ann"), ("other", "Say hi")])
    assert asked.is_set()  # the person was asked ...
    assert left.is_set()  # ... and is no more
    assert caught.value.limit == "wall_time_s"
    partial = caught.value.partial
    assert partial is not None
    assert partial.status == "over_budget"
    assert {k: (s.status, s.text) for k, s in partial.subtasks.items()} == {
        "s1": ("over_budget", ""),
        "s2": ("ok", "done"),
    }


async def test_a_call_a_person_denied_counts_as_one_of_the_runs_tool_calls() -> None:
    """A denied call runs nothing, but the model made it and read its answer: it counts
    in the run's usage and against ``tool_calls`` as the docs say, so the turn after it
    that would take the run past the budget runs none of its calls."""
    ran: list[str] = []

    @tool(side_effects=True, name="pay")
    async def paid(to: str) -> str:
        """Pay someone."""
        ran.append(to)
        return f"paid {to}"

    async def deny(request: ApprovalRequest) -> Decision:
        return Decision.denied("not today")

    model = ScriptedModel([call("pay", {"to": "ann"}), call("pay", {"to": "bob"}), "gave up"])
    executor = Executor(
        [PAYER],
        model,
        tools=[paid],
        approver=deny,
        policy=Policy(budgets=Budgets(tool_calls=1)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=[("payer", "Pay ann, then bob.")])
    assert ran == []
    assert (caught.value.limit, caught.value.used, caught.value.requested) == ("tool_calls", 1, 1)
    partial = caught.value.partial
    assert partial is not None
    assert partial.usage.tool_calls == 1
    (outcome,) = partial.subtasks.values()
    assert outcome.worker is not None
    assert outcome.worker.usage.tool_calls == 1
    denied = [m for m in outcome.worker.transcript.messages if m.role == "tool"]
    assert [m.content for m in denied] == ["denied: not today"]


async def test_a_call_refused_once_it_had_its_slot_counts_as_a_model_call_and_no_token() -> None:
    """Three workers' calls start under ``model_concurrency=1``; the first's answer
    spends ``total_tokens``, and the two that waited for its slot are refused before
    they are sent. Each counts as a model call, as it was reserved, in the run's usage,
    its workers' and its events alike; only the call sent counts tokens."""
    starts, all_started, seen = [0], asyncio.Event(), list[Event]()

    def heard(event: Event) -> None:
        seen.append(event)
        if isinstance(event, ModelCallStarted):
            starts[0] += 1
            if starts[0] == 3:
                all_started.set()

    async def think(request: ModelRequest) -> str:
        await all_started.wait()  # the other two wait for the slot this call holds
        return "word " * 200

    model = FunctionModel(think)
    executor = Executor(
        [Role(name="w")],
        model,
        aggregator="concat",
        policy=Policy(budgets=Budgets(total_tokens=100), model_concurrency=1),
    )
    with pytest.raises(BudgetExceeded) as caught:
        async with asyncio.timeout(LIMIT_S):
            await executor.run("t", subtasks=[("w", f"t{i}") for i in range(3)], on_event=[heard])
    assert len(model.requests) == 1  # one call was sent
    partial = caught.value.partial
    assert partial is not None
    assert caught.value.limit == "total_tokens"
    finished = [e for e in seen if isinstance(e, ModelCallFinished)]
    assert sorted(e.status for e in finished) == ["error", "error", "ok"]
    workers = [s.worker.usage for s in partial.subtasks.values() if s.worker is not None]
    assert partial.usage.model_calls == sum(u.model_calls for u in workers) == len(finished) == 3
    (sent,) = [e for e in finished if e.status == "ok"]
    assert partial.usage.total_tokens == sent.input_tokens + sent.output_tokens
