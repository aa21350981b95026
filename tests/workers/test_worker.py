"""Worker: one role, one model, one subtask, one WorkerResult; failures stay inside it."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from runtime import ModelCallError, ModelRequest, ToolRegistry, UserMessage, tool
from runtime.testing import FunctionModel, ScriptedModel, call
from tests.support.role_tools import Summary
from tests.support.sample_tools import lookup
from workers import Role, Worker


async def test_result_carries_output_transcript_usage_and_timing() -> None:
    model = ScriptedModel([call("lookup", {"key": "a"}), "the answer"])
    worker = Worker(Role(name="finder", instructions="Find things."), model, tools=[lookup])
    result = await worker.run("find a")
    assert result.ok
    assert (result.worker, result.role, result.output, result.text) == (
        "finder",
        "finder",
        "the answer",
        "the answer",
    )
    roles = [m.role for m in result.transcript.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert result.usage.model_calls == 2
    assert result.usage.tool_calls == 1
    assert result.turns == 2
    assert result.duration_s > 0
    assert result.started_at > 0
    assert result.error is None


async def test_role_tool_names_are_resolved_in_the_registry_or_by_import_path() -> None:
    role = Role(name="r", tools=("lookup", "tests.support.role_tools:word_count"))
    worker = Worker(role, ScriptedModel(["x"]), tools=ToolRegistry([lookup]))
    assert worker.tools.names == ("lookup", "word_count")


async def test_a_failed_model_call_is_a_failed_result_not_an_exception() -> None:
    def broken(request: ModelRequest) -> str:
        raise RuntimeError("model adapter bug")

    result = await Worker(Role(name="r"), FunctionModel(broken)).run("t")
    assert result.status == "failed"
    assert result.error is not None
    assert str(result.error) == (
        "ModelCallError: model FunctionModel('broken') raised RuntimeError: model adapter bug"
    )
    assert isinstance(result.exception, ModelCallError)
    assert isinstance(result.exception.__cause__, RuntimeError)
    assert [m.role for m in result.transcript.messages] == ["system", "user"]


async def test_inputs_from_dependencies_follow_the_task() -> None:
    model = ScriptedModel(["ok"])
    await Worker(Role(name="r"), model).run("write it up", inputs={"research": "facts here"})
    task = model.requests[0].messages[1]
    assert isinstance(task, UserMessage)
    assert task.content.startswith("write it up")
    assert "### research\nfacts here" in task.content


async def test_output_schema_from_the_role() -> None:
    role = Role(name="r", output_schema="tests.support.role_tools:Summary")
    model = ScriptedModel(['{"title": "T", "points": ["a"]}'])
    result = await Worker(role, model).run("t")
    assert result.output == Summary(title="T", points=["a"])


async def test_many_workers_share_one_scripted_model_by_conversation() -> None:
    model = ScriptedModel(lambda key: [call("lookup", {"key": key}), f"done {key}"])
    results: dict[str, str] = {}

    async def run(name: str) -> None:
        worker = Worker(Role(name="r"), model, tools=[lookup], name=name, run_id="run1")
        results[name] = (await worker.run("t")).text

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(run, f"w{i}")
    assert results == {f"w{i}": f"done run1/w{i}" for i in range(20)}


async def test_cancellation_propagates_out_of_run() -> None:
    model = ScriptedModel(["never"], latency=10)
    worker = Worker(Role(name="r"), model)
    with anyio.move_on_after(0.05) as scope:
        await worker.run("t")
        pytest.fail("run() should have been cancelled")
    assert scope.cancelled_caught


async def test_tool_logs_carry_the_run_worker_and_turn() -> None:
    import structlog

    @tool
    async def chatty() -> str:
        """Log something."""
        structlog.get_logger().info("inside the tool")
        return "ok"

    model = ScriptedModel([call("chatty"), "done"])
    worker = Worker(Role(name="r"), model, tools=[chatty], name="w7", run_id="run9")
    with structlog.testing.capture_logs(
        processors=[structlog.contextvars.merge_contextvars]
    ) as logs:
        await worker.run("t")
    (inside,) = [e for e in logs if e["event"] == "inside the tool"]
    assert (inside["run_id"], inside["worker"], inside["turn"]) == ("run9", "w7", 1)
