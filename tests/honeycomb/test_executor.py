"""Executor: planning, DAG scheduling, parallelism, failure policies, budgets,
cancellation, events and concurrent runs, all on ScriptedModel."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from honeycomb import (
    BudgetExceeded,
    Budgets,
    ConfigError,
    ConfigErrors,
    Executor,
    Plan,
    Policy,
    Role,
    RunFailed,
    RunResult,
    Subtask,
    SubtaskResult,
    tool,
)
from honeycomb.cli.view import summary
from honeycomb.errors import PlanError
from honeycomb.events import RunFinished
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.tracing import configure_logging
from runtime import AssistantMessage, Event, ModelHTTPError, ModelRequest, ToolMessage, UserMessage
from runtime.testing import call
from tests.support.concurrency import Overlap, Rendezvous

# The concurrency helpers and the executor hold on uvloop too (the `fast` extra).
pytestmark = pytest.mark.both_loops

ROLES = [
    Role(name="planner", description="Plans."),
    Role(name="aggregator", description="Merges."),
    Role(name="researcher", description="Finds facts."),
    Role(name="writer", description="Writes."),
]


def static(*items: tuple[str, str, str, Sequence[str]]) -> list[Subtask]:
    return [Subtask(id=i, role=r, instruction=t, depends_on=tuple(d)) for i, r, t, d in items]


def echo_model(latency: float = 0.0) -> FunctionModel:
    """Answers each worker with its own conversation key; the aggregator lists results."""

    async def answer(request: ModelRequest) -> str:
        await anyio.sleep(latency)
        return f"answer from {request.conversation}"

    return FunctionModel(answer)


def gathering_model(overlap: Overlap, meet: Rendezvous, latency: float = 0.0) -> FunctionModel:
    """Answers as ``echo_model`` does, each worker once ``meet.n`` workers are in a call
    together; ``overlap`` counts the workers' calls in flight (the aggregator's aside)."""

    async def answer(request: ModelRequest) -> str:
        if (request.conversation or "").endswith("/aggregator"):
            return "merged"
        async with overlap:
            await meet.meet()
            await anyio.sleep(latency)
        return f"answer from {request.conversation}"

    return FunctionModel(answer)


async def test_static_plan_runs_in_parallel_and_aggregates() -> None:
    latency = 0.2
    overlap = Overlap()
    model = gathering_model(overlap, Rendezvous(5), latency)  # five at once, or it fails
    executor = Executor(ROLES, model, aggregator="concat")
    plan = [("researcher", f"part {i}") for i in range(5)]
    result = await executor.run("task", subtasks=plan, run_id="r1")
    assert result.status == "ok"
    assert overlap.peak == 5
    assert list(result.subtasks) == ["s1", "s2", "s3", "s4", "s5"]
    assert "answer from r1/s3" in result.answer_text
    t = result.timings
    assert t.sum_worker_s >= 5 * latency * 0.9
    # The five ran side by side (the rendezvous saw to it): serial, they take 5L or
    # more; the run about L. The speedup says so with 4L to spare for a loaded machine.
    assert t.speedup == pytest.approx(t.serial_s / t.wall_s)
    assert t.serial_s >= t.sum_worker_s
    assert t.speedup > 1
    assert result.usage.model_calls == 5


async def test_max_workers_bounds_parallelism() -> None:
    overlap = Overlap()
    # Two at a time, every time: each pair must meet, and no third may join them.
    model = gathering_model(overlap, Rendezvous(2))
    executor = Executor(ROLES, model, policy=Policy(max_workers=2))
    result = await executor.run("t", subtasks=[("researcher", f"p{i}") for i in range(4)])
    assert result.status == "ok"
    assert overlap.total == 4
    assert overlap.peak == 2


async def test_dependencies_run_in_order_and_see_their_inputs() -> None:
    model = ScriptedModel(
        {"r/a": ["facts A"], "r/b": ["facts B"], "r/c": ["report"], "r/aggregator": ["final"]}
    )
    plan = static(
        ("a", "researcher", "find A", []),
        ("b", "researcher", "find B", []),
        ("c", "writer", "write it up", ["a", "b"]),
    )
    result = await Executor(ROLES, model).run("t", subtasks=plan, run_id="r")
    (writer_request,) = model.requests_for("r/c")
    task = writer_request.messages[1]
    assert isinstance(task, UserMessage)
    assert "### a (researcher)\nfacts A" in task.content
    assert "### b (researcher)\nfacts B" in task.content
    outcomes = result.subtasks
    assert outcomes["c"].started_s >= max(outcomes["a"].duration_s, outcomes["b"].duration_s) * 0.9
    assert result.answer == "final"
    aggregator_prompt = model.requests_for("r/aggregator")[0].messages[1].content
    assert "### c (writer)\nreport" in aggregator_prompt


async def test_critical_path_follows_the_longest_chain() -> None:
    async def answer(request: ModelRequest) -> str:
        await anyio.sleep(
            0.1 if request.conversation and request.conversation.endswith("/a") else 0.02
        )
        return "x"

    plan = static(("a", "researcher", "slow", []), ("b", "writer", "after a", ["a"]))
    result = await Executor(ROLES, FunctionModel(answer), aggregator="concat").run(
        "t", subtasks=plan
    )
    t = result.timings
    assert t.critical_path_s == pytest.approx(t.plan_s + t.sum_worker_s + t.aggregate_s, rel=0.01)
    assert t.wall_s >= t.critical_path_s * 0.95


async def test_planner_role_gives_the_plan_through_structured_output() -> None:
    plan = {"subtasks": [{"id": "s1", "role": "researcher", "instruction": "go", "depends_on": []}]}
    model = ScriptedModel(
        {"r/planner": [json.dumps(plan)], "r/s1": ["found"], "r/aggregator": ["ok"]}
    )
    result = await Executor(ROLES, model).run("research something", run_id="r")
    assert result.plan.ids == ("s1",)
    request = model.requests_for("r/planner")[0]
    assert request.output is not None
    assert request.output.name == "Plan"
    prompt = request.messages[1].content
    assert "- researcher: Finds facts." in prompt
    assert "- planner:" not in prompt  # the planner does not plan for itself


async def test_invalid_plan_goes_back_to_the_planner_with_the_problem() -> None:
    bad = {
        "subtasks": [
            {"id": "s1", "role": "researcher", "instruction": "go"},
            {"id": "s1", "role": "writer", "instruction": "go"},
        ]
    }
    good = {"subtasks": [{"id": "s1", "role": "researcher", "instruction": "go"}]}
    model = ScriptedModel(
        {"r/planner": [json.dumps(bad), json.dumps(good)], "r/s1": ["y"], "r/aggregator": ["z"]}
    )
    result = await Executor(ROLES, model).run("t", run_id="r")
    assert result.plan.subtasks[0].role == "researcher"
    retry_prompt = model.requests_for("r/planner")[1].messages[1].content
    assert "subtask id 's1' is used twice" in retry_prompt


async def test_a_dangling_or_self_dependency_is_dropped_with_a_warning_not_refused() -> None:
    # The plan a small model wrote under a looser schema, its ids now from the set.
    sloppy = {
        "subtasks": [
            {"id": "s1", "role": "researcher", "instruction": "go", "depends_on": ["s1"]},
            {"id": "s2", "role": "writer", "instruction": "write", "depends_on": ["s1", "s5"]},
        ]
    }
    model = ScriptedModel({"r/planner": [json.dumps(sloppy)], "r/s1": ["x"], "r/s2": ["y"]})
    events: list[Event] = []
    executor = Executor(ROLES, model, aggregator="concat", on_event=[events.append])
    result = await executor.run("t", run_id="r")
    assert result.status == "ok"
    assert result.plan.dependencies == {"s1": (), "s2": ("s1",)}
    assert len(model.requests_for("r/planner")) == 1  # one answer: not sent back
    (warning,) = [e for e in events if e.kind == "run.plan_repaired"]
    assert warning.fields()["dropped"] == (
        "subtask 's1' depended on itself",
        "subtask 's2' depended on 's5', which is not in the plan",
    )
    kinds = [e.kind for e in events]
    assert kinds.index("run.plan_repaired") < kinds.index("run.plan_ready")


def plan_schema(request: ModelRequest) -> dict[str, Any]:
    assert request.output is not None
    schema = request.output.json_schema
    subtasks = schema["properties"]["subtasks"]
    items = subtasks["items"]
    if "$ref" in items:
        items = schema["$defs"][items["$ref"].rpartition("/")[2]]
    return {"plan": subtasks, **items["properties"]}


async def test_the_plan_schema_names_the_roles_and_bounds_ids_and_size() -> None:
    plan = {"subtasks": [{"id": "s1", "role": "researcher", "instruction": "go"}]}
    model = ScriptedModel({"r/planner": [json.dumps(plan)], "r/s1": ["found"]})
    executor = Executor(ROLES, model, aggregator="concat", policy=Policy(max_subtasks=3))
    result = await executor.run("t", run_id="r")
    schema = plan_schema(model.requests_for("r/planner")[0])
    assert schema["role"]["enum"] == ["researcher", "writer"]  # not the planner or aggregator
    assert schema["id"]["enum"] == ["s1", "s2", "s3"]
    assert schema["depends_on"]["items"]["enum"] == ["s1", "s2", "s3"]
    assert schema["depends_on"]["maxItems"] == 2
    assert schema["instruction"]["maxLength"] == 1000
    assert (schema["plan"]["minItems"], schema["plan"]["maxItems"]) == (1, 3)
    assert type(result.plan) is Plan
    assert all(type(s) is Subtask for s in result.plan.subtasks)


@pytest.mark.parametrize(
    ("subtask", "problem"),
    [
        ({"id": "s1", "role": "mock-role"}, "role: Input should be 'researcher' or 'writer'"),
        ({"id": "two words", "role": "writer"}, "id: Input should be 's1', 's2'"),
        ({"id": "18447", "role": "writer"}, "id: Input should be 's1', 's2'"),
        ({"id": "s1", "role": "writer", "depends_on": ["Lasenella"]}, "depends_on.0: Input"),
        ({"id": "s1", "role": "writer", "instruction": ""}, "instruction: String should have"),
    ],
)
async def test_a_plan_outside_the_schema_is_refused_with_the_schemas_words(
    subtask: dict[str, Any], problem: str
) -> None:
    bad = {"subtasks": [{"instruction": "go", **subtask}]}
    good = {"subtasks": [{"id": "s1", "role": "researcher", "instruction": "go"}]}
    model = ScriptedModel({"r/planner": [json.dumps(bad), json.dumps(good)], "r/s1": ["found"]})
    result = await Executor(ROLES, model, aggregator="concat").run("t", run_id="r")
    assert result.plan.ids == ("s1",)
    fix = model.requests_for("r/planner")[1].messages[-1].content
    assert "does not match the required Plan schema" in fix
    assert f"subtasks.0.{problem}" in fix


async def test_a_model_plan_is_bounded_by_max_subtasks() -> None:
    ids = ["s1", "s2", "s3", "s1"]  # each one the schema allows, one too many of them
    many = {"subtasks": [{"id": i, "role": "writer", "instruction": "go"} for i in ids]}
    model = ScriptedModel({"r/planner": [json.dumps(many)] * 3})
    executor = Executor(ROLES, model, policy=Policy(max_subtasks=3, plan_attempts=1))
    with pytest.raises(PlanError, match="the plan has 4 subtasks; at most 3 allowed"):
        await executor.run("t", run_id="r")


async def test_plan_error_after_the_set_number_of_attempts() -> None:
    cyclic = {
        "subtasks": [
            {"id": "s1", "role": "researcher", "instruction": "1", "depends_on": ["s2"]},
            {"id": "s2", "role": "researcher", "instruction": "2", "depends_on": ["s1"]},
        ]
    }
    model = ScriptedModel(lambda key: [json.dumps(cyclic)] * 2)
    executor = Executor(ROLES, model, policy=Policy(plan_attempts=2))
    with pytest.raises(PlanError, match="cycle: s1 -> s2 -> s1") as caught:
        await executor.run("t", run_id="r")
    assert caught.value.attempts == 2
    assert len(model.requests) == 2


async def test_a_python_splitter_plans() -> None:
    def split(task: str) -> list[tuple[str, str]]:
        return [("researcher", part.strip()) for part in task.split(";")]

    executor = Executor(ROLES, echo_model(), planner=split, aggregator="concat")
    result = await executor.run("one; two; three")
    assert [s.instruction for s in result.plan.subtasks] == ["one", "two", "three"]


async def test_best_effort_names_the_failure_and_aggregates_the_rest() -> None:
    model = ScriptedModel(
        {
            "r/s1": ["fine"],
            "r/s2": [ModelHTTPError(400, "bad request")],
            "r/s3": ["also fine"],
        }
    )
    plan = [("researcher", "a"), ("researcher", "b"), ("researcher", "c")]
    result = await Executor(ROLES, model, aggregator="concat").run("t", subtasks=plan, run_id="r")
    assert result.status == "partial"
    (failure,) = result.failures
    assert failure.subtask.id == "s2"
    assert failure.error is not None
    assert "HTTP 400" in failure.error.message
    assert "fine" in result.answer_text
    assert "also fine" in result.answer_text
    assert "Failed subtasks: s2" in result.answer_text


async def test_a_dependent_of_a_failed_subtask_is_skipped() -> None:
    model = ScriptedModel({"r/a": [ModelHTTPError(500, "down")] * 5, "r/b": ["x"], "r/c": ["y"]})
    plan = static(
        ("a", "researcher", "1", []), ("b", "researcher", "2", []), ("c", "writer", "3", ["a"])
    )
    result = await Executor(ROLES, model, aggregator="concat").run("t", subtasks=plan, run_id="r")
    assert result.subtasks["c"].status == "skipped"
    assert result.subtasks["c"].error is not None
    assert "depends on a" in result.subtasks["c"].error.message
    assert model.requests_for("r/c") == []


async def test_fail_fast_cancels_the_rest() -> None:
    """s1 fails while s2's tool is under way (it started first: s1's model waits for
    it): the run ends without waiting for the tool, which is cancelled, not finished."""
    started, finished, cancelled = anyio.Event(), list[str](), list[str]()

    @tool
    async def slow_work(name: str) -> str:
        started.set()
        try:
            await anyio.sleep(60)  # far past any run's end here: only a cancel ends it
        except anyio.get_cancelled_exc_class():
            cancelled.append(name)
            raise
        finished.append(name)
        return "done"

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        task = next(m.content for m in request.messages if isinstance(m, UserMessage))
        if task.strip() == "a":
            await started.wait()
            raise ModelHTTPError(401, "no key")
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "never"
        return AssistantMessage(tool_calls=(call("slow_work", {"name": "s2"}),))

    roles = [Role(name="researcher", tools=("slow_work",))]
    executor = Executor(
        roles, FunctionModel(answer), tools=[slow_work], aggregator="concat",
        policy=Policy(failure="fail_fast"),
    )  # fmt: skip
    with anyio.fail_after(30), pytest.raises(RunFailed, match="subtask 's1' failed") as caught:
        await executor.run("t", subtasks=[("researcher", "a"), ("researcher", "b")], run_id="r")
    assert cancelled == ["s2"]  # ended by the run, long before its minute
    assert finished == []
    partial = caught.value.partial
    assert partial.status == "failed"
    assert partial.subtasks["s1"].status == "failed"
    assert partial.subtasks["s2"].status == "cancelled"


async def test_quorum_succeeds_with_enough_results_and_fails_early_without() -> None:
    def model_failing(*bad: str) -> ScriptedModel:
        return ScriptedModel(
            lambda key: [ModelHTTPError(403, "no") if key.split("/")[1] in bad else "ok"]
        )

    plan = [("researcher", str(i)) for i in range(4)]
    quorum = Policy(failure="quorum", quorum=3)
    ok = await Executor(ROLES, model_failing("s4"), aggregator="concat", policy=quorum).run(
        "t", subtasks=plan
    )
    assert ok.status == "partial"
    with pytest.raises(RunFailed, match="quorum of 3"):
        await Executor(ROLES, model_failing("s1", "s2"), aggregator="concat", policy=quorum).run(
            "t", subtasks=plan
        )


async def test_a_run_whose_every_subtask_failed_says_how_many_there_were() -> None:
    refused = ScriptedModel(lambda key: [ModelHTTPError(403, "no")])
    with pytest.raises(RunFailed, match=r"^its only subtask failed; nothing to aggregate"):
        await Executor(ROLES, refused, aggregator="concat").run("t", subtasks=[("researcher", "a")])
    with pytest.raises(RunFailed, match=r"^all 2 subtasks failed; nothing to aggregate"):
        await Executor(ROLES, refused, aggregator="concat").run(
            "t", subtasks=[("researcher", "a"), ("researcher", "b")]
        )


async def test_a_run_whose_every_subtask_failed_says_why() -> None:
    """'all 7 subtasks failed; nothing to aggregate' was all the error said (and a
    quorum the run could not reach named only its last failure): a person reading a log
    line, or a model calling the hive as a tool, could not tell a bad key from a bad
    task. The error now tells why, subtasks failed for the same reason together, and
    at most three reasons; a subtask skipped for a failed input is not told again."""

    def answer(request: ModelRequest) -> str:
        task = str(request.messages[-1].content)
        if task == "ok":
            return "fine"
        raise ModelHTTPError(401, "bad key") if task == "key" else ModelHTTPError(400, task)

    def plan(*tasks: str, **depends: str) -> list[dict[str, Any]]:
        return [
            {"id": f"s{i}", "role": "researcher", "instruction": task,
             "depends_on": [depends[f"s{i}"]] if f"s{i}" in depends else []}
            for i, task in enumerate(tasks, 1)
        ]  # fmt: skip

    executor = Executor(ROLES, FunctionModel(answer), aggregator="concat")
    with pytest.raises(RunFailed) as caught:
        await executor.run("t", subtasks=plan("key", "key", "one", "key", "key", "two", "three"))
    said = str(caught.value)
    assert said == (
        "all 7 subtasks failed; nothing to aggregate (s1, s2, s4 and 1 more: ModelHTTPError: "
        "HTTP 401: bad key; s3: ModelHTTPError: HTTP 400: one; s6: ModelHTTPError: HTTP 400: "
        "two; and 1 other reason)"
    )
    with pytest.raises(RunFailed) as caught:
        await executor.run("t", subtasks=plan("key", "after", s2="s1"))
    assert str(caught.value).endswith(
        "nothing to aggregate (s1: ModelHTTPError: HTTP 401: bad key)"
    )

    quorum = Policy(failure="quorum", quorum=2)
    with pytest.raises(RunFailed) as caught:
        await Executor(ROLES, FunctionModel(answer), aggregator="concat", policy=quorum).run(
            "t", subtasks=[("researcher", "key"), ("researcher", "one"), ("researcher", "ok")]
        )
    said = str(caught.value)
    assert "cannot be reached: 2 did not succeed (" in said, said
    assert "HTTP 401: bad key" in said, said
    assert "HTTP 400: one" in said, said


async def test_worker_timeout_fails_that_worker_only() -> None:
    async def answer(request: ModelRequest) -> str:
        slow = request.conversation is not None and request.conversation.endswith("/s1")
        await anyio.sleep(5 if slow else 0.01)
        return "ok"

    executor = Executor(
        ROLES, FunctionModel(answer), aggregator="concat", policy=Policy(worker_timeout_s=0.2)
    )
    result = await executor.run("t", subtasks=[("researcher", "a"), ("researcher", "b")])
    assert result.subtasks["s1"].error is not None
    assert result.subtasks["s1"].error.type == "WorkerTimeout"
    # It names the setting that cut it: a model slower than the default (a local one).
    assert "past 0.2s, its policy's worker_timeout_s" in result.subtasks["s1"].error.message
    assert result.subtasks["s2"].ok


async def test_model_call_budget_ends_the_run_with_partial_results() -> None:
    model = ScriptedModel(lambda key: [call("noop", {}), call("noop", {"x": 1}), "done"])

    @tool
    def noop(x: int = 0) -> str:
        """Do nothing."""
        return "ok"

    roles = [Role(name="researcher", tools=("noop",))]
    executor = Executor(
        roles,
        model,
        tools=[noop],
        aggregator="concat",
        policy=Policy(budgets=Budgets(model_calls=4)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=[("researcher", "a"), ("researcher", "b")])
    assert caught.value.limit == "model_calls"
    partial = caught.value.partial
    assert partial.usage.model_calls == 4
    assert set(partial.subtasks) == {"s1", "s2"}


async def test_wall_time_budget_interrupts_a_hung_run() -> None:
    executor = Executor(
        ROLES, echo_model(latency=10), policy=Policy(budgets=Budgets(wall_time_s=0.2))
    )
    started = time.perf_counter()
    with pytest.raises(BudgetExceeded, match="wall_time_s"):
        await executor.run("t", subtasks=[("researcher", "a")])
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize("wall_time_s", [None, 30.0])
@pytest.mark.parametrize("where", ["planner", "aggregator"])
async def test_a_timeout_raised_inside_a_run_is_not_the_wall_time_budget(
    where: str, wall_time_s: float | None
) -> None:
    # Only the budget's own deadline is BudgetExceeded: a TimeoutError of a planner or
    # an aggregator is an error of its phase (PlanError, RunFailed), chained.
    def own_timeout(*args: object) -> list[Subtask]:
        raise TimeoutError(f"the {where}'s own timeout")

    executor = Executor(
        ROLES,
        echo_model(),
        policy=Policy(budgets=Budgets(wall_time_s=wall_time_s)),
        **{where: own_timeout},
    )
    phase_error = PlanError if where == "planner" else RunFailed
    with pytest.raises(phase_error, match=f"TimeoutError: the {where}'s own timeout") as caught:
        await executor.run("t", subtasks=None if where == "planner" else [("researcher", "a")])
    assert isinstance(caught.value.__cause__, TimeoutError)


async def test_cancelling_run_cancels_every_worker_and_tool() -> None:
    workers = 10
    inside = Overlap()
    all_in = anyio.Event()
    cancelled: list[int] = []  # a 1 for each tool call cancelled where it waited

    @tool
    async def long_tool() -> str:
        """Wait until cancelled."""
        async with inside:
            if inside.now == workers:
                all_in.set()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(1)
                raise
        return "x"

    model = ScriptedModel(lambda key: [call("long_tool"), "done"])
    roles = [Role(name="researcher", tools=("long_tool",))]
    policy = Policy(max_workers=workers)
    executor = Executor(roles, model, tools=[long_tool], aggregator="concat", policy=policy)
    subtasks = [("researcher", str(i)) for i in range(workers)]
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: executor.run("t", subtasks=subtasks))
        with anyio.fail_after(15):
            await all_in.wait()  # every worker is inside its tool call
        tg.cancel_scope.cancel()
    assert len(cancelled) == workers
    assert inside.now == 0  # none is left running once the run's cancellation is over


async def test_stream_yields_events_in_order_then_the_result() -> None:
    executor = Executor(ROLES, echo_model(), aggregator="concat")
    kinds: list[str] = []
    async with executor.stream("t", subtasks=[("researcher", "a"), ("writer", "b")]) as events:
        async for event in events:
            kinds.append(event.kind)
    assert kinds[0] == "run.started"
    assert kinds[1] == "run.plan_ready"
    assert kinds[-3:] == ["run.aggregation_started", "run.aggregation_finished", "run.finished"]
    assert kinds.count("worker.started") == 2
    assert kinds.count("worker.finished") == 2
    assert kinds.count("model_call.finished") == 2
    first_worker_end = kinds.index("worker.finished")
    assert kinds.index("worker.started") < kinds.index("model_call.started") < first_worker_end
    assert events.result is not None
    assert events.result.status == "ok"


async def test_stream_reraises_the_run_error_after_the_last_event() -> None:
    last = None
    with pytest.raises(ConfigError, match="no planner"):  # noqa: PT012 - raised while iterating
        async with Executor([ROLES[2]], echo_model()).stream("t") as events:
            async for event in events:
                last = event
    assert isinstance(last, RunFinished)
    assert last.status == "failed"


async def test_stream_reraises_the_error_of_the_users_own_code_as_run_does() -> None:
    """An aggregator function's own error ends the iteration as Executor.run raises it,
    a RunFailed (not an iteration that ends as if the run had, then an ExceptionGroup)."""

    def broken(task: str, results: Sequence[SubtaskResult]) -> str:
        raise ValueError("my aggregator broke")

    executor = Executor([ROLES[2]], echo_model(), aggregator=broken)
    with pytest.raises(RunFailed, match="ValueError: my aggregator broke"):
        await executor.run("t", subtasks=[("researcher", "a")])
    last = None
    with pytest.raises(RunFailed, match="ValueError: my aggregator broke"):  # noqa: PT012 - raised while iterating
        async with executor.stream("t", subtasks=[("researcher", "a")]) as events:
            async for event in events:
                last = event
    assert isinstance(last, RunFinished)
    assert isinstance(events.error, RunFailed)
    assert isinstance(events.error.__cause__, ValueError)
    assert events.result is None


async def test_a_stream_read_as_the_run_goes_gets_every_event_once_in_order() -> None:
    """The reader waits for events again and again (the model takes its time), and
    gets exactly what the run's handlers got."""
    handled: list[Event] = []
    executor = Executor(
        ROLES, echo_model(latency=0.01), aggregator="concat", on_event=[handled.append]
    )
    read: list[Event] = []
    async with executor.stream("t", subtasks=[("researcher", "a"), ("writer", "b")]) as events:
        async for event in events:
            read.append(event)
    assert len(read) > 10
    assert [id(e) for e in read] == [id(e) for e in handled]
    assert events.result is not None


async def test_leaving_a_stream_early_cancels_its_run() -> None:
    executor = Executor(ROLES, echo_model(latency=0.05), aggregator="concat")
    with anyio.fail_after(5):
        async with executor.stream("t", subtasks=[("researcher", "a")]) as events:
            async for event in events:
                if event.kind == "model_call.started":
                    break
    assert events.result is None


async def test_one_executor_serves_many_concurrent_runs_in_isolation() -> None:
    executor = Executor(ROLES, echo_model(latency=0.01), aggregator="concat")
    answers: dict[int, str] = {}

    async def one(i: int) -> None:
        result = await executor.run(f"t{i}", subtasks=[("researcher", "x")], run_id=f"run{i}")
        answers[i] = result.answer_text

    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(one, i)
    assert all(f"answer from run{i}/s1" in answers[i] for i in range(100))


async def test_exclusive_tools_never_overlap_across_workers() -> None:
    inside = 0
    peak = 0

    @tool(exclusive="ledger")
    async def write_ledger(entry: str) -> str:
        nonlocal inside, peak
        inside += 1
        peak = max(peak, inside)
        await anyio.sleep(0.02)
        inside -= 1
        return "written"

    model = ScriptedModel(lambda key: [call("write_ledger", {"entry": key}), "ok"])
    roles = [Role(name="researcher", tools=("write_ledger",))]
    executor = Executor(roles, model, tools=[write_ledger], aggregator="concat")
    await executor.run("t", subtasks=[("researcher", str(i)) for i in range(6)])
    assert peak == 1


async def test_aggregator_callable_and_output_schema() -> None:
    class Report(BaseModel):
        count: int

    async def count(task: str, results: Sequence[SubtaskResult]) -> Report:
        return Report(count=sum(1 for r in results if r.ok))

    executor = Executor(ROLES, echo_model(), aggregator=count)
    result = await executor.run("t", subtasks=[("researcher", "a"), ("writer", "b")])
    assert result.answer == Report(count=2)
    assert json.loads(result.answer_text) == {"count": 2}

    model = ScriptedModel({"r/s1": ["x"], "r/aggregator": ['{"count": 1}']})
    typed = Executor(ROLES, model, output_type=Report)
    assert (await typed.run("t", subtasks=[("researcher", "a")], run_id="r")).answer == Report(
        count=1
    )


async def test_an_aggregator_that_returns_nothing_fails_the_run_naming_it() -> None:
    """A function aggregator without its return made an 'ok' run with an empty answer,
    its results lost from view; the run now fails naming the function, its partial
    result kept."""

    def merge(task: str, results: Sequence[SubtaskResult]) -> None:
        "\n".join(r.text for r in results)  # the return a person forgot

    class Forgetful:
        async def aggregate(self, task: str, results: Any, context: Any) -> None:
            return None

    for aggregator, named in ((merge, "'merge'"), (Forgetful(), "Forgetful")):
        with pytest.raises(RunFailed) as caught:
            await Executor(ROLES, echo_model(), aggregator=aggregator).run(
                "t", subtasks=[("researcher", "a")]
            )
        assert str(caught.value) == (
            f"the aggregator {named} returned None: return the run's answer (a string, or "
            "any value)"
        )
        assert caught.value.partial.subtasks["s1"].ok


def test_unknown_references_are_all_reported_at_construction() -> None:
    roles = [Role(name="a", model="gtp", tools=("nope",)), Role(name="b")]
    with pytest.raises(ConfigErrors) as caught:
        Executor(roles, {"gpt": echo_model()}, planner="planer")
    text = str(caught.value)
    assert "uses model 'gtp'" in text
    assert "did you mean 'gpt'" in text
    assert "unknown tool 'nope'" in text
    assert "planner role 'planer' is not defined" in text


def test_plan_is_validated_for_every_kind_of_mistake() -> None:
    from honeycomb.run.plan import plan_problems

    plan = Plan.of(
        [
            {"id": "a", "role": "ghost", "instruction": "x"},
            {"id": "a", "role": "researcher", "instruction": " "},
            {"id": "c", "role": "researcher", "instruction": "y", "depends_on": ["zz", "c"]},
        ]
    )
    problems = plan_problems(plan, ["researcher"], max_subtasks=2)
    text = "\n".join(problems)
    assert "3 subtasks; at most 2" in text
    assert "subtask id 'a' is used twice" in text
    assert "unknown role 'ghost'" in text
    assert "instruction is empty" in text
    assert "depends on 'zz', which is not in the plan" in text
    assert "subtask 'c' depends on itself" in text


async def test_observations_reach_the_worker_model() -> None:
    @tool
    async def fetch(key: str) -> str:
        """Fetch."""
        return f"v-{key}"

    model = ScriptedModel(lambda key: [call("fetch", {"key": "k"}), "done"])
    roles = [Role(name="researcher", tools=("fetch",))]
    await Executor(roles, model, tools=[fetch], aggregator="concat").run(
        "t", subtasks=[("researcher", "x")], run_id="r"
    )
    second = model.requests_for("r/s1")[1]
    assert [m.content for m in second.messages if isinstance(m, ToolMessage)] == ["v-k"]


async def test_cancelling_run_stops_a_cooperative_sync_tool_thread() -> None:
    import threading

    from honeycomb import check_cancelled

    stopped = threading.Event()
    finished = threading.Event()

    @tool
    def crunch(n: int) -> str:
        """Work in a thread, checking for cancellation as it goes."""
        try:
            for _ in range(500):
                time.sleep(0.01)
                check_cancelled()
        except BaseException:
            stopped.set()
            raise
        finished.set()
        return "done"

    model = ScriptedModel(lambda key: [call("crunch", {"n": 1}), "ok"])
    roles = [Role(name="researcher", tools=("crunch",))]
    executor = Executor(roles, model, tools=[crunch], aggregator="concat")
    with anyio.move_on_after(0.2):
        await executor.run("t", subtasks=[("researcher", "a"), ("researcher", "b")])
    assert await anyio.to_thread.run_sync(stopped.wait, 2.0), "the thread kept working"
    assert not finished.is_set()


async def test_a_callers_own_plan_is_not_bounded_by_max_subtasks() -> None:
    executor = Executor(ROLES, echo_model(), aggregator="concat")  # max_subtasks: 20
    result = await executor.run("t", subtasks=[("researcher", f"part {i}") for i in range(50)])
    assert result.status == "ok"
    assert len(result.subtasks) == 50
    split = Executor(ROLES, echo_model(), aggregator="concat", planner=lambda task: [
        ("writer", str(i)) for i in range(30)
    ])  # fmt: skip
    assert len((await split.run("t")).subtasks) == 30


async def test_the_summary_says_subtasks_ran_in_waves_of_max_workers() -> None:
    executor = Executor(ROLES, echo_model(), aggregator="concat")  # max_workers: 8
    result = await executor.run("t", subtasks=[("researcher", f"part {i}") for i in range(50)])
    assert result.max_workers == 8
    assert result.summary().startswith("ok: 50 subtasks, 8 at a time | ")
    few = await executor.run("t", subtasks=[("researcher", "one"), ("writer", "two")])
    assert few.summary().startswith("ok: 2 subtasks | ")


async def test_the_summary_counts_the_subtasks_that_did_not_succeed_by_how_they_ended() -> None:
    # A subtask skipped for a failed input was counted as failed: '3 subtasks, 2 failed'.
    def answer(request: ModelRequest) -> str:
        if "fetch" in str(request.messages[-1].content):
            raise RuntimeError("the fetcher's bug")
        return "done"

    executor = Executor(
        ROLES, FunctionModel(answer), aggregator="concat", policy=Policy(failure="best_effort")
    )
    plan = [
        {"id": "a", "role": "researcher", "instruction": "fetch"},
        {"id": "b", "role": "writer", "instruction": "write", "depends_on": ["a"]},
        {"id": "c", "role": "writer", "instruction": "other"},
    ]
    result = await executor.run("t", subtasks=plan)
    assert [result.subtasks[i].status for i in "abc"] == ["failed", "skipped", "ok"]
    assert result.summary().startswith("partial: 3 subtasks, 1 failed, 1 skipped | ")


def test_a_results_repr_is_one_line_whatever_the_size_of_its_run() -> None:
    # asyncio.run on Python 3.11 builds the repr of its main task's result as it
    # returns: every field of a result would be every worker's transcript.
    result = a_run_of_200_long_subtasks()
    shown = repr(result)
    assert shown.startswith(f"RunResult(run_id={result.run_id!r}, ok: 200 subtasks, 8 at a time")
    assert len(shown) < 400
    assert repr(result.answer_text[:20])[1:-1] in shown
    assert str(result) == shown  # print(result), f"{result}": the same line


def test_a_runs_last_log_line_is_one_line_whatever_the_size_of_its_run() -> None:
    # Once the application configures logging, run.finished is logged with the run's
    # result, which a renderer shows by its repr: not every worker's transcript.
    log = io.StringIO()
    configure_logging(json=True, stream=log)
    result = a_run_of_200_long_subtasks()
    finished = [json.loads(line) for line in log.getvalue().splitlines() if "run.finished" in line]
    assert [entry["result"] for entry in finished] == [repr(result)]
    assert len(finished[0]["result"]) < 400


def a_run_of_200_long_subtasks() -> RunResult:
    """A run through ``asyncio.run``, as a script makes one, of 200 subtasks whose
    transcripts are long."""
    executor = Executor(ROLES, echo_model(), aggregator="concat")
    parts = [("researcher", f"part {i} " * 50) for i in range(200)]
    return asyncio.run(executor.run("t", subtasks=parts))


def budgeted(tmp_path: Path | None = None, calls: int = 4, **policy: Any) -> Executor:
    """Workers that each need three model calls, on a budget of four."""
    model = ScriptedModel(lambda key: [call("noop", {}), call("noop", {"x": 1}), "done"])

    @tool
    def noop(x: int = 0) -> str:
        """Do nothing."""
        return "ok"

    return Executor(
        [Role(name="researcher", tools=("noop",))],
        model,
        tools=[noop],
        aggregator="concat",
        policy=Policy(budgets=Budgets(model_calls=calls), **policy),
        store=tmp_path / "runs.db" if tmp_path is not None else None,
    )


@pytest.mark.parametrize("max_workers", [8, 1])
async def test_every_subtask_the_budget_stopped_has_the_one_budget_status(
    max_workers: int,
) -> None:
    plan = [("researcher", str(i)) for i in range(4)]
    with pytest.raises(BudgetExceeded) as caught:
        await budgeted(max_workers=max_workers).run("t", subtasks=plan)
    partial = caught.value.partial
    assert partial.status == "over_budget"
    statuses = {s.status for s in partial.subtasks.values()}
    assert statuses <= {"ok", "over_budget"}
    assert "over_budget" in statuses
    stopped = [s for s in partial.subtasks.values() if not s.ok]
    assert {s.error.type for s in stopped if s.error is not None} <= {"BudgetExceeded"}


async def test_the_wall_time_budget_stops_workers_with_the_budget_status() -> None:
    executor = Executor(
        ROLES, echo_model(latency=10), policy=Policy(budgets=Budgets(wall_time_s=0.2))
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=[("researcher", "a"), ("writer", "b")])
    partial = caught.value.partial
    assert partial.status == "over_budget"
    assert {s.status for s in partial.subtasks.values()} == {"over_budget"}
    # every stopped subtask says why, wherever it is shown
    for stopped in partial.failures:
        assert stopped.error is not None
        assert stopped.error.type == "BudgetExceeded"
        assert "wall_time_s" in stopped.error.message
    failed_line = [line for line in summary(partial) if line.startswith("failed")]
    assert failed_line
    assert "None" not in failed_line[0]


@pytest.mark.parametrize("status", ["failed", "skipped", "cancelled", "over_budget"])
def test_a_subtask_that_did_not_succeed_always_has_a_reason(status: str) -> None:
    # as a stored result from before reasons were kept reads back, or one made bare
    made = SubtaskResult(subtask=Subtask(id="s1", role="r", instruction="i"), status=status)
    assert made.error is not None
    assert made.error.message
    read = SubtaskResult.model_validate_json(made.model_dump_json(exclude={"error"}))
    assert read.error == made.error
    ok = SubtaskResult(subtask=Subtask(id="s1", role="r", instruction="i"), status="ok")
    assert ok.error is None


async def test_a_run_stopped_by_its_budget_is_stored_and_read_back_as_over_budget(
    tmp_path: Path,
) -> None:
    from honeycomb import RunResult

    executor = budgeted(tmp_path)
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("t", subtasks=[("researcher", "a"), ("researcher", "b")], run_id="b1")
    assert executor.store is not None
    stored = await executor.store.load("b1")
    assert stored is not None
    assert stored.status == "over_budget"
    assert stored.result is not None
    back = RunResult.model_validate_json(stored.result)
    partial = caught.value.partial
    assert back.status == partial.status == "over_budget"
    assert {k: s.status for k, s in back.subtasks.items()} == {
        k: s.status for k, s in partial.subtasks.items()
    }
    executor.store.close()


async def test_a_run_stopped_by_its_budget_resumes_every_stopped_worker(tmp_path: Path) -> None:
    plan = [("researcher", "a"), ("researcher", "b")]
    with pytest.raises(BudgetExceeded):
        await budgeted(tmp_path).run("t", subtasks=plan, run_id="b1")
    result = await budgeted(tmp_path, calls=100).run("t", subtasks=plan, run_id="b1")
    assert result.status == "ok"
    assert {s.status for s in result.subtasks.values()} == {"ok"}


@pytest.mark.parametrize(
    ("task", "said"),
    [
        ("", r"task is empty .*: pass what the run is to do"),
        (" \n\t", r"task is empty .*: pass what the run is to do"),
        (123, r"task: 123 \(type int\) is not text: pass what the run is to do"),
    ],
    ids=["empty", "blank", "not text"],
)
async def test_a_blank_task_is_refused_before_anything_runs_or_is_kept(
    tmp_path: Path, task: Any, said: str
) -> None:
    # A task that is not text failed with "'int' object has no attribute 'strip'".
    model = ScriptedModel(["never asked"])
    executor = Executor(ROLES, model, store=tmp_path / "runs.db")
    with pytest.raises(ConfigError, match=said):
        await executor.run(task)
    with pytest.raises(ConfigError, match=said):
        executor.stream(task)  # at once, not once its block is entered
    assert model.requests == []
    assert executor.store is not None
    assert executor.store.runs() == []
    executor.store.close()


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("", "run_id: it is empty"),
        ("r" * 513, r"run_id: 'r{40}'... is 513 bytes long \(UTF-8\): an id is at most 512"),
        (123, r"run_id: 123 \(type int\) is not text: pass an id as text"),
    ],
    ids=["empty", "long", "not-text"],
)
async def test_an_id_no_store_keeps_is_refused_by_its_name_before_anything_is_kept(
    tmp_path: Path, given: str | int, said: str
) -> None:
    # An empty session id was taken, an empty run id was made one; PostgreSQL's index
    # takes no id of more than about 2,700 bytes: one run failed with the database's
    # words, where SQLite kept it. An id that is not text failed with "'int' object
    # has no attribute 'encode'".
    model = ScriptedModel(["never asked"])
    executor = Executor(ROLES, model, store=tmp_path / "runs.db")
    with pytest.raises(ConfigError, match=said):
        await executor.run("t", subtasks=[("researcher", "a")], run_id=given)
    with pytest.raises(ConfigError, match=said.replace("run_id", "session_id")):
        executor.session(given)
    assert model.requests == []
    assert executor.store is not None
    assert executor.store.runs() == []
    executor.store.close()


async def test_an_id_that_is_not_valid_text_is_refused_by_its_name_before_anything_is_kept(
    tmp_path: Path,
) -> None:
    # A lone surrogate (what Python makes of bytes that are not UTF-8) reached the
    # store's lease, which failed to encode it ("cannot write the run store").
    model = ScriptedModel(["never asked"])
    executor = Executor(ROLES, model, store=tmp_path / "runs.db")
    said = r"run_id: 'a\\ud800b' is not valid text: it holds a lone surrogate \('\\ud800', at 1\)"
    with pytest.raises(ConfigError, match=said):
        await executor.run("t", subtasks=[("researcher", "a")], run_id="a\ud800b")
    with pytest.raises(ConfigError, match=said):
        executor.stream("t", run_id="a\ud800b")  # at once, as a blank task
    for asked in (executor.resume("a\ud800b"), executor.pending("a\ud800b")):
        with pytest.raises(ConfigError, match=said):
            await asked
    with pytest.raises(ConfigError, match=r"session_id: 'chat\\udcff' is not valid text"):
        executor.session("chat\udcff")
    assert model.requests == []
    assert executor.store is not None
    assert executor.store.runs() == []
    executor.store.close()


def test_a_memory_whose_file_is_the_run_stores_is_refused_as_the_executor_is_made(
    tmp_path: Path,
) -> None:
    # The store's tables and the memory's in one file: every recall failed, the runs
    # going on as if the roles remembered nothing.
    (tmp_path / "data").mkdir()
    same = tmp_path / "data" / "runs.db"
    model = ScriptedModel(["never asked"])
    said = "the memory's file '.*runs.db' is the run store's: give each a file of its own"
    for memory in (same, tmp_path / "data" / ".." / "data" / "runs.db"):
        with pytest.raises(ConfigError, match=said):
            Executor(ROLES, model, store=same, memory=memory)
    apart = Executor(ROLES, model, store=same, memory=tmp_path / "data" / "memory.db")
    assert apart.store is not None
    apart.store.close()


@pytest.mark.parametrize(
    ("roles", "models", "policy", "field", "said"),
    [
        (
            ROLES,
            "gpt-4o-mini",
            None,
            "models",
            r"'gpt-4o-mini' \(type str\) is not a Model: pass "
            r"a model \(OpenAIModel\('gpt-4o-mini'\)",
        ),
        (ROLES, {"b": "gpt-4o"}, None, "models['b']", r"'gpt-4o' \(type str\) is not a Model"),
        (ROLES, None, None, "models", "None is not a Model: pass a model"),
        (ROLES, {}, None, "models", "it is empty: pass a model"),
        (
            ROLES[0],
            "m",
            None,
            "roles",
            r"a list of roles, not one: write \[Role\(name='planner'\)\]",
        ),
        (["planner"], "m", None, "roles[0]", r"'planner' \(type str\) is not a Role"),
        (ROLES, "m", 4, "policy", r"4 \(type int\) is not a Policy: pass Policy\("),
        (ROLES, "m", {"max_workrs": 2}, "Policy.max_workrs", r"field 'max_workrs' \(did you mean"),
    ],
    ids=[
        "model str",
        "models str",
        "models None",
        "models empty",
        "one role",
        "role str",
        "policy int",
        "policy typo",
    ],
)
def test_an_argument_of_the_wrong_type_is_refused_by_its_name_as_the_executor_is_made(
    tmp_path: Path, roles: Any, models: Any, policy: Any, field: str, said: str
) -> None:
    # A model's name given for a model failed at run time (ModelCallError, "'str'
    # object has no attribute 'complete'"), a policy as a dict or one role given alone
    # with an AttributeError as the Executor was made.
    model = ScriptedModel(["never asked"]) if models == "m" else models
    with pytest.raises(ConfigError, match=said) as refused:
        Executor(roles, model, policy=policy, store=tmp_path / "runs.db")
    assert refused.value.field == field
    assert not (tmp_path / "runs.db").exists()  # refused before the store was opened


def test_a_policy_may_be_given_as_its_fields_as_a_hive_file_writes_them() -> None:
    policy = {"max_workers": 2, "budgets": {"model_calls": 3}}
    executor = Executor(ROLES, ScriptedModel(["x"]), policy=policy)
    assert executor.policy == Policy(max_workers=2, budgets=Budgets(model_calls=3))
