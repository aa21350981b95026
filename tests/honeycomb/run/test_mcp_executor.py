"""An Executor with MCP servers: roles name their tools, workers share one server
process, which starts when first needed and never outlives the Executor's block (or,
outside one, its run), whatever ends it. Against the SDK-written test server, run as a
real subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from honeycomb import Executor, Policy, Role, RunFailed, Subtask
from honeycomb.cli.main import main as cli
from honeycomb.events import Event, RoleToolsMissing
from honeycomb.run.mcp import McpTools
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.tools import McpServer, McpToolSettings
from runtime import (
    ApprovalError,
    AssistantMessage,
    ConfigError,
    ConfigErrors,
    McpServerError,
    ModelRequest,
    ToolMessage,
)
from runtime.testing import call
from tests.support import ROOT
from tests.support.mcp_servers import child_pids, sdk_server

pytestmark = pytest.mark.timeout(120)

CLERK = Role(name="clerk", tools=["t:lookup", "t:pid", "t:die", "t:slow"])


def plan(*roles: str) -> list[Subtask]:
    return [Subtask(id=f"s{i}", role=r, instruction="work") for i, r in enumerate(roles, 1)]


def observations(result: object, subtask: str) -> list[ToolMessage]:
    worker = result.subtasks[subtask].worker  # type: ignore[attr-defined]
    return [m for m in worker.transcript.messages if isinstance(m, ToolMessage)]


async def test_workers_call_the_tools_their_roles_name_through_one_shared_process() -> None:
    before = child_pids()
    everything = Role(name="everything", tools=["t:*"])
    model = ScriptedModel([[call("lookup", {"word": "bee"}), call("pid")], "done"])
    async with Executor([CLERK, everything], model, mcp_servers=[sdk_server()]) as executor:
        assert child_pids() - before == set()  # nothing starts with the block
        result = await executor.run("t", subtasks=plan("clerk", "clerk", "clerk"))
        assert len(child_pids() - before) == 1
        everything_seen = await executor.run(
            "t", subtasks=[Subtask(id="e", role="everything", instruction="list")]
        )
    assert child_pids() - before == set()
    assert result.status == "ok"
    pids = set()
    for subtask in ("s1", "s2", "s3"):
        looked, pid = observations(result, subtask)
        assert (looked.status, looked.content) == ("ok", "an insect that makes honey")
        pids.add(pid.content)
    assert len(pids) == 1  # one process served every worker
    assert everything_seen.status == "ok"
    setup = executor.shared.crew.setup_for(everything, None)
    assert {"lookup", "append_note", "set_flag", "refuse", "slow", "picture", "pid", "die"} <= set(
        setup.tools.names
    )
    assert set(executor.shared.crew.setup_for(CLERK, None).tools.names) == {
        "lookup", "pid", "die", "slow"
    }  # fmt: skip


async def test_a_role_called_only_as_an_agent_tool_has_its_mcp_tools() -> None:
    """No subtask of the clerk's role: its worker is a nested one, made by a call of
    ``agent:clerk``, with the tools its servers list, as a subtask's worker has them."""

    async def answer(request: ModelRequest) -> Any:
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        if "clerk" in str(request.messages[0].content):
            if not seen:
                assert [t.name for t in request.tools] == ["lookup", "pid", "die", "slow"]
                return AssistantMessage(tool_calls=(call("lookup", {"word": "bee"}, id="l1"),))
            return "clerk: " + seen[-1].content
        if not seen:
            return AssistantMessage(tool_calls=(call("clerk", {"instruction": "bee?"}, id="k1"),))
        return "lead: " + seen[-1].content

    lead = Role(name="lead", tools=["agent:clerk"])
    executor = Executor(
        [lead, CLERK], FunctionModel(answer), mcp_servers=[sdk_server()], aggregator="concat"
    )
    result = await executor.run("t", subtasks=plan("lead"))
    assert result.status == "ok", result.subtasks["s1"].error
    assert "lead: clerk: an insect that makes honey" in result.answer_text


async def test_a_run_outside_a_block_starts_and_stops_its_own_server() -> None:
    before = child_pids()
    model = ScriptedModel([call("pid"), "done"])
    executor = Executor([CLERK], model, mcp_servers=[sdk_server()])
    first = await executor.run("t", subtasks=plan("clerk"))
    assert child_pids() - before == set()
    second = await executor.run("t", subtasks=plan("clerk"))
    assert child_pids() - before == set()
    (a,), (b,) = observations(first, "s1"), observations(second, "s1")
    assert a.status == b.status == "ok"
    assert a.content != b.content  # a process of each run's own


def noted(notes: Path) -> list[str]:
    return notes.read_text().splitlines() if notes.exists() else []


async def in_the_server(notes: Path, running: asyncio.Task[Any], call: str = "slow 60") -> None:
    """Wait until the server noted that the ``slow`` call is in (its notes file)."""
    deadline = time.monotonic() + 30
    while call not in noted(notes):
        assert not running.done(), "the run ended before its call reached the server"
        assert time.monotonic() < deadline, "the call never reached the server"
        await asyncio.sleep(0.01)


async def test_cancelling_a_run_mid_call_leaves_no_process(tmp_path: Path) -> None:
    before = child_pids()
    notes = tmp_path / "notes.txt"

    def slow_then_done(request: ModelRequest) -> object:
        return call("slow", {"seconds": 60})

    server = sdk_server(notes=notes)
    executor = Executor([CLERK], FunctionModel(slow_then_done), mcp_servers=[server])  # type: ignore[arg-type]
    running = asyncio.create_task(executor.run("t", subtasks=plan("clerk")))
    await in_the_server(notes, running)
    assert len(child_pids() - before) == 1
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert child_pids() - before == set()


async def test_a_block_that_ends_leaves_the_servers_to_the_executors_other_blocks(
    tmp_path: Path,
) -> None:
    """Two blocks of one Executor open at once (a service's handlers, each ``async with
    executor``): the first to end stopped the servers under the other's run, whose call
    was told the server stopped during it, and whose next could not start it ('its
    McpServers block is not open'). They stop as the last block ends."""
    before = child_pids()
    notes = tmp_path / "notes.txt"
    model = ScriptedModel([call("slow", {"seconds": 2}), call("pid"), "done"])
    executor = Executor([CLERK], model, mcp_servers=[sdk_server(notes=notes)])

    async def other_block() -> Any:
        async with executor:
            return await executor.run("t", subtasks=plan("clerk"))

    async with executor:
        running = asyncio.create_task(other_block())
        await in_the_server(notes, running, "slow 2")  # the other block's call is in the server
    result = await running
    assert child_pids() - before == set()  # stopped as the last block ended
    slept, pid = observations(result, "s1")
    assert (slept.status, slept.content) == ("ok", "slept 2.0s")
    assert pid.status == "ok", pid.content


async def test_a_block_that_ends_leaves_the_hive_tools_servers_to_the_other_blocks(
    tmp_path: Path,
) -> None:
    """As above, for the servers of a hive its roles call as a tool: the Executor held
    that hive's Executor (and its models) in its first block alone, and let go of it
    as that block ended, stopping the server under the other block's sub-run."""
    before = child_pids()
    notes = tmp_path / "notes.txt"
    told: list[tuple[str, str]] = []  # what the sub-run's clerk was told of its calls

    def clerk(request: ModelRequest) -> str | AssistantMessage:
        observed = [(m.status, m.content) for m in request.messages if isinstance(m, ToolMessage)]
        if len(observed) < 2:
            asked = call("slow", {"seconds": 2}) if not observed else call("pid")
            return AssistantMessage(tool_calls=(asked,))
        told.extend(observed)
        return "done"

    sub = Executor(
        [CLERK], FunctionModel(clerk), mcp_servers=[sdk_server(notes=notes)], aggregator="concat",
        planner=lambda task: [("clerk", task)],
    )  # fmt: skip
    lead = ScriptedModel([call("facts", {"instruction": "look"}), "done"])
    executor = Executor(
        [Role(name="lead", tools=("facts",))], lead, tools=[sub.as_tool("facts")],
        aggregator="concat",
    )  # fmt: skip

    async def other_block() -> Any:
        async with executor:
            return await executor.run("t", subtasks=plan("lead"))

    async with executor:
        running = asyncio.create_task(other_block())
        await in_the_server(notes, running, "slow 2")  # the sub-run's call is in the server
    result = await running
    assert child_pids() - before == set()  # stopped as the last block ended
    [answered] = observations(result, "s1")
    assert answered.status == "ok", answered.content
    slept, pid = told
    assert slept == ("ok", "slept 2.0s")
    assert pid[0] == "ok", pid


class _Unserved(ScriptedModel):
    """A model served from this process whose server could not start the first time."""

    tried = False

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        if not self.tried:
            self.tried = True
            raise OSError("no room for the model's server")
        yield


async def test_a_block_that_could_not_hold_its_models_leaves_no_server_to_later_runs() -> None:
    """``async with`` failed as its models' server could not start (there was room
    later): the block it opened on the MCP servers stayed open, and the server a later
    run (outside any block) started was never stopped."""
    before = child_pids()
    model = _Unserved([call("pid"), "done"])
    executor = Executor([CLERK], model, mcp_servers=[sdk_server()])
    with pytest.raises(OSError, match="no room"):
        async with executor:
            pass
    result = await executor.run("t", subtasks=plan("clerk"))
    [pid] = observations(result, "s1")
    assert pid.status == "ok", pid.content
    assert child_pids() - before == set()  # its server stopped with its run


async def test_a_failed_run_raises_its_own_error_and_leaves_no_process() -> None:
    before = child_pids()

    def broken(request: ModelRequest) -> str:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return call("pid")  # type: ignore[return-value]
        raise ValueError("the model broke")

    executor = Executor([CLERK], FunctionModel(broken), mcp_servers=[sdk_server()])
    with pytest.raises(RunFailed):  # itself, not an exception group
        await executor.run("t", subtasks=plan("clerk"))
    assert child_pids() - before == set()


async def test_each_run_may_start_a_dead_server_again_once() -> None:
    first = [call("die"), call("pid"), call("die"), call("lookup", {"word": "bee"}), "done"]
    model = ScriptedModel({"r1/s1": first, "r2/s1": [call("pid"), "done"]})
    async with Executor([CLERK], model, mcp_servers=[sdk_server()]) as executor:
        one = await executor.run("t", subtasks=plan("clerk"), run_id="r1")
        two = await executor.run("t", subtasks=plan("clerk"), run_id="r2")
    died, pid, died_again, down = observations(one, "s1")
    assert died.content.endswith("it is started again for the next call")
    assert pid.status == "ok"
    assert died_again.content.endswith("it stays down for the rest of this run")
    assert "is down for the rest of this run" in down.content
    (again,) = observations(two, "s1")  # the next run starts it again
    assert again.status == "ok"
    assert again.content != pid.content


async def test_hints_can_be_overridden_and_a_slow_call_times_out() -> None:
    server = sdk_server(tools={"slow": McpToolSettings(timeout=0.3, exclusive="slowness")})
    model = ScriptedModel([call("slow", {"seconds": 30}), "done"])
    async with Executor([CLERK], model, mcp_servers=[server]) as executor:
        result = await executor.run("t", subtasks=plan("clerk"))
    (slow,) = observations(result, "s1")
    assert slow.status == "timeout"
    tool = executor.shared.crew.setup_for(CLERK, None).tools["slow"]
    assert (tool.exclusive, tool.side_effects, tool.timeout) == ("slowness", True, 0.3)


async def test_a_role_naming_a_tool_the_server_lacks_fails_alone() -> None:
    typo = Role(name="typo", tools=["t:lokup"])
    model = ScriptedModel([call("pid"), "done"])
    async with Executor(
        [CLERK, typo], model, mcp_servers=[sdk_server()], policy=Policy(failure="best_effort")
    ) as executor:
        result = await executor.run("t", subtasks=plan("clerk", "typo"))
    assert result.status == "partial"
    assert result.subtasks["s1"].ok
    error = result.subtasks["s2"].error
    assert error is not None
    assert error.message == (
        "role 'typo': MCP server 't' has no tool 'lokup' (did you mean 'lookup'?); its tools: "
        "append_note, die, gather, long, lookup, picture, pid, refuse, set_flag, slow, spawn, where"
    )


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        # The first was dropped: its role's calls went to the other, unsaid.
        (
            [sdk_server("t"), sdk_server("t", args=("--without", "pid"))],
            "mcp_servers[1]: two servers are named 't': give each its own name (roles name a "
            "server's tools t:tool)",
        ),
        # Python's words: 'McpServer' object is not iterable, 'dict' object has no
        # attribute 'name'.
        (
            sdk_server("t"),
            "mcp_servers: must be a list of servers (got one, 't': put it in a list)",
        ),
        (
            [sdk_server("t"), {"name": "u", "command": "x"}],
            "mcp_servers[1]: must be an McpServer(...) (got dict)",
        ),
    ],
    ids=["two of one name", "one server", "a dict"],
)
def test_servers_that_are_not_a_list_of_servers_of_their_own_names_are_told_at_once(
    servers: Any, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        Executor([CLERK], ScriptedModel(["done"]), mcp_servers=servers)
    assert str(info.value) == message


def test_a_misspelt_server_or_one_named_without_a_tool_is_told_as_the_executor_is_made() -> None:
    """As a hive file's roles are told: a misspelt server's ``ntoes:lookup`` is read as
    an import path, and its error said only that there was no module ``ntoes``;
    ``notes:`` failed its worker once the server had started, as if it had no tool
    ``''``."""
    misspelt = Role(name="misspelt", tools=["ntoes:lookup"])
    bare = Role(name="bare", tools=["notes:"])
    with pytest.raises(ConfigErrors) as info:
        Executor([misspelt, bare], ScriptedModel(["done"]), mcp_servers=[sdk_server("notes")])
    misspelt_error, bare_error = (error.message for error in info.value.errors)
    assert misspelt_error.startswith("role 'misspelt': cannot import 'ntoes:lookup'")
    assert misspelt_error.endswith(
        "; 'ntoes' is not a declared MCP server (did you mean 'notes'?), so 'ntoes:lookup' is "
        "read as an import path (MCP servers: notes)"
    )
    assert bare_error == (
        "role 'bare': 'notes:' names the MCP server 'notes' but no tool: write 'notes:TOOL', "
        "or 'notes:*' for all of its tools"
    )


async def test_a_server_that_cannot_start_fails_its_workers_with_why(tmp_path: Path) -> None:
    broken = sdk_server(args=("--fail-at-start",))
    model = ScriptedModel(["done"])
    executor = Executor([CLERK], model, mcp_servers=[broken])
    with pytest.raises(RunFailed) as info:
        await executor.run("t", subtasks=plan("clerk"))
    partial = info.value.partial
    assert partial is not None
    error = partial.subtasks["s1"].error
    assert error is not None
    assert error.type == "McpServerError"
    assert "the test server was told to fail at start" in error.message


async def test_the_planner_sees_the_mcp_tools_of_every_role() -> None:
    prompts: list[str] = []

    def planner(request: ModelRequest) -> str:
        prompts.append(str(request.messages[-1].content))
        return '{"subtasks": [{"id": "s1", "role": "clerk", "instruction": "look"}]}'

    roles = [Role(name="planner", model="planner"), CLERK]
    models = {"planner": FunctionModel(planner), "work": ScriptedModel(["done"])}
    async with Executor(roles, models, default_model="work", mcp_servers=[sdk_server()]) as ex:
        result = await ex.run("look a word up")
    assert result.status == "ok"
    assert "    tool lookup: Look a word up in a tiny dictionary." in prompts[0]


async def test_an_error_in_the_executor_s_block_is_itself_and_leaves_no_process() -> None:
    before = child_pids()

    class Stop(Exception):
        pass

    async def fail() -> None:
        model = ScriptedModel([call("pid"), "done"])
        async with Executor([CLERK], model, mcp_servers=[sdk_server()]) as executor:
            await executor.run("t", subtasks=plan("clerk"))
            assert len(child_pids() - before) == 1
            raise Stop

    with pytest.raises(Stop):  # itself, not wrapped in an exception group
        await fail()
    assert child_pids() - before == set()


async def test_cancelling_the_executor_s_block_leaves_no_process(tmp_path: Path) -> None:
    before = child_pids()
    notes = tmp_path / "notes.txt"

    def slow(request: ModelRequest) -> object:
        return call("slow", {"seconds": 60})

    async def serve() -> None:
        server = sdk_server(notes=notes)
        async with Executor([CLERK], FunctionModel(slow), mcp_servers=[server]) as ex:  # type: ignore[arg-type]
            await ex.run("t", subtasks=plan("clerk"))

    task = asyncio.create_task(serve())
    await in_the_server(notes, task)
    assert len(child_pids() - before) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert child_pids() - before == set()


async def test_with_a_planner_a_server_that_cannot_start_fails_only_its_workers() -> None:
    plan_json = (
        '{"subtasks": [{"id": "s1", "role": "clerk", "instruction": "look"},'
        ' {"id": "s2", "role": "writer", "instruction": "write"}]}'
    )
    roles = [Role(name="planner"), CLERK, Role(name="writer")]
    model = ScriptedModel({"r/planner": [plan_json], "r/s2": ["written"], "r/aggregator": ["ok"]})
    broken = sdk_server(args=("--fail-at-start",))
    policy = Policy(failure="best_effort")
    executor = Executor(roles, model, mcp_servers=[broken], policy=policy)
    result = await executor.run("t", run_id="r")
    assert result.status == "partial"
    assert result.subtasks["s2"].ok
    error = result.subtasks["s1"].error
    assert error is not None
    assert error.type == "McpServerError"
    assert "the test server was told to fail at start" in error.message


async def test_a_plan_without_the_role_whose_server_cannot_start_says_why_it_lacked_tools() -> None:
    """A planner shown a role without its tools, as its MCP server did not start, that
    plans without it: the run went on, and nothing it gave (its result, its events, the
    lines of honeycomb run) said why the role had no tools (a warning in the log
    reaches only an app that configures logging). A warning event says it, before the
    plan."""
    plan_json = '{"subtasks": [{"id": "s1", "role": "writer", "instruction": "write"}]}'
    roles = [Role(name="planner"), CLERK, Role(name="writer")]
    model = ScriptedModel({"r/planner": [plan_json], "r/s1": ["written"], "r/aggregator": ["ok"]})
    events: list[Event] = []
    broken = sdk_server(args=("--fail-at-start",))
    executor = Executor(roles, model, mcp_servers=[broken], on_event=[events.append])
    result = await executor.run("t", run_id="r")
    assert result.status == "ok"
    (warning,) = [e for e in events if isinstance(e, RoleToolsMissing)]
    assert (warning.role, warning.round) == ("clerk", 1)
    assert warning.error.startswith("McpServerError: MCP server 't' ")
    assert "the test server was told to fail at start" in warning.error
    kinds = [e.kind for e in events]
    assert kinds.index("run.role_tools_missing") < kinds.index("run.plan_ready")


@pytest.fixture
def starting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The most MCP servers seen starting (to list their tools) at once, as a
    one-item list."""
    now: list[str] = []
    most = [0]
    real = McpTools._listed

    async def counted(self: McpTools, run: Any, name: str) -> Any:
        now.append(name)
        most[0] = max(most[0], len(now))
        try:
            return await real(self, run, name)
        finally:
            now.remove(name)

    monkeypatch.setattr(McpTools, "_listed", counted)
    return most


def mute(count: int) -> list[McpServer]:
    """Servers that never speak MCP: each fails its start after half a second."""
    return [
        McpServer(name=f"m{i}", command="sleep", args=("30",), start_timeout=0.5)
        for i in range(count)
    ]


async def test_the_planners_catalog_starts_its_roles_servers_together(
    starting: list[int],
) -> None:
    """The planner's catalog started its roles' MCP servers one after another: a
    planner over roles of three servers waited for three starts in a row (here each
    its start_timeout, as a program that never speaks MCP). They start together."""
    roles = [Role(name="planner"), Role(name="writer")]
    roles += [Role(name=f"r{i}", tools=[f"m{i}:lookup"]) for i in range(3)]
    plan_json = '{"subtasks": [{"id": "s1", "role": "writer", "instruction": "write"}]}'
    model = ScriptedModel({"r/planner": [plan_json], "r/s1": ["written"], "r/aggregator": ["ok"]})
    events: list[Event] = []
    executor = Executor(roles, model, mcp_servers=mute(3), on_event=[events.append])
    result = await executor.run("t", run_id="r")
    assert result.status == "ok"
    assert starting == [3]
    assert sorted(e.role for e in events if isinstance(e, RoleToolsMissing)) == ["r0", "r1", "r2"]


async def test_the_planners_own_servers_start_with_its_catalogs_and_fail_it_as_before(
    starting: list[int],
) -> None:
    """The planner's own MCP servers started before its catalog's: the plan waited for
    them, then for the slowest of the rest. They all start together; one of its own
    that cannot start fails the run with its error, as before (not a PlanError)."""
    roles = [Role(name="planner", tools=["m3:lookup"]), Role(name="writer")]
    roles += [Role(name=f"r{i}", tools=[f"m{i}:lookup"]) for i in range(3)]
    own = McpServer(name="m3", command="sleep", args=("30",), start_timeout=0.8)  # the last
    executor = Executor(roles, ScriptedModel([]), mcp_servers=[*mute(3), own])
    with pytest.raises(McpServerError, match=r"^MCP server 'm3' did not start"):
        await executor.run("t")
    assert starting == [4]


async def test_a_roles_servers_start_together_and_it_fails_with_the_first_ones_error(
    starting: list[int],
) -> None:
    """A worker whose role takes the tools of three servers started them one after
    another, its start three starts long. They start together; it fails with the
    error of the first the role names, as before."""
    role = Role(name="r", tools=["m1:lookup", "m0:lookup", "m2:lookup"])
    executor = Executor([role], ScriptedModel(["done"]), mcp_servers=mute(3))
    with pytest.raises(RunFailed) as info:
        await executor.run("t", subtasks=plan("r"))
    assert starting == [3]
    assert info.value.partial is not None
    error = info.value.partial.subtasks["s1"].error
    assert error is not None
    assert error.type == "McpServerError"
    assert error.message.startswith("MCP server 'm1' did not start")


async def test_an_aggregator_whose_server_cannot_start_fails_the_run_as_an_aggregator_does() -> (
    None
):
    roles = [Role(name="writer"), Role(name="aggregator", tools=["t:lookup"])]
    executor = Executor(
        roles, ScriptedModel(["written"]), mcp_servers=[sdk_server(args=("--fail-at-start",))]
    )
    with pytest.raises(
        RunFailed, match="the aggregator failed: MCP server 't' could not be"
    ) as info:
        await executor.run("t", subtasks=plan("writer"))
    partial = info.value.partial
    assert partial is not None
    assert partial.subtasks["s1"].ok  # the workers' results are kept


async def test_a_resumed_run_never_calls_a_completed_side_effecting_mcp_tool_again(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    writer = Role(name="writer", tools=["t:append_note"])
    called = asyncio.Event()  # the call is done: the model is asked for the next turn
    hold = asyncio.Event()  # never set: the first life stops there

    async def first_life(request: ModelRequest) -> object:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            called.set()
            await hold.wait()
        return call("append_note", {"text": "once"})

    def second_life(request: ModelRequest) -> object:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "written"
        return call("append_note", {"text": "once"})  # a repeat, if the turn were lost

    store = tmp_path / "runs.db"
    first = Executor(
        [writer], FunctionModel(first_life), mcp_servers=[sdk_server(notes=notes)], store=store
    )
    running = asyncio.create_task(first.run("t", subtasks=plan("writer"), run_id="r"))
    await called.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    second = Executor(
        [writer], FunctionModel(second_life), mcp_servers=[sdk_server(notes=notes)], store=store
    )
    result = await second.resume("r")
    assert result.status == "ok"
    assert [line.split()[:2] for line in notes.read_text().splitlines()] == [
        ["start", "once"],
        ["end", "once"],
    ]


async def test_an_mcp_calls_arguments_are_edited_from_an_executor_that_has_not_run(
    tmp_path: Path,
) -> None:
    """A service started again (or another process) decides on a call of the run with
    edited arguments: they are checked against the MCP tool's schema, its server started
    to list it (an Executor that had run nothing knew none of its tools)."""
    notes = tmp_path / "notes.txt"

    def service() -> Executor:
        writer = Role(name="writer", tools=("t:append_note",), approvals={"tools": ["append_note"]})
        model = ScriptedModel([call("append_note", {"text": "draft"}), "written"])
        return Executor(
            [writer], model, mcp_servers=[sdk_server(notes=notes)], store=tmp_path / "runs.db"
        )

    waiting = await service().run("t", subtasks=[("writer", "write")], run_id="r")
    (pending,) = waiting.pending
    later = service()
    with pytest.raises(ApprovalError, match=r"the edited arguments: .*text"):
        await later.decide("r", pending.call_id, approve=True, arguments={"txt": "final"})
    # Checked against the whole schema: a number where the text goes was final, and
    # failed as the resumed call ran.
    with pytest.raises(ApprovalError, match=r"argument 'text': 5 is not of type 'string'"):
        await later.decide("r", pending.call_id, approve=True, arguments={"text": 5})
    await later.decide("r", pending.call_id, approve=True, arguments={"text": "final"})
    done = await service().resume("r")
    assert done.status == "ok"
    assert [line.split()[:2] for line in notes.read_text().splitlines()] == [
        ["start", "final"],
        ["end", "final"],
    ]  # the edited note, once


async def test_honeycomb_approve_edits_an_mcp_call_of_a_hive_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line loads the run's hive to check an edit: its MCP server starts to
    list the tool's schema."""
    notes = tmp_path / "notes.txt"
    hive = tmp_path / "hive.yaml"
    hive.write_text(
        f"""
models: {{default: offline}}
mcp_servers:
  t:
    command: {sys.executable}
    args: [-m, tests.support.mcp_server]
    env: {{PYTHONPATH: {ROOT}, MCP_TEST_NOTES: {notes}}}
roles:
  writer: {{tools: ["t:append_note"], approvals: {{tools: [append_note]}}}}
store: runs.db
"""
    )
    model = ScriptedModel([call("append_note", {"text": "draft"}), "written"])
    executor = Executor.from_yaml(hive, model=model)
    waiting = await executor.run("t", subtasks=[("writer", "write")], run_id="r")
    assert executor.store is not None
    executor.store.close()
    (pending,) = waiting.pending
    approve = ["approve", "r", pending.call_id, "--store", str(tmp_path / "runs.db")]
    assert await asyncio.to_thread(cli, [*approve, "--arguments", '{"txt": "x"}']) == 2
    assert "the edited arguments:" in capsys.readouterr().err
    assert await asyncio.to_thread(cli, [*approve, "--arguments", '{"text": "final"}']) == 0


async def test_starting_a_server_is_not_a_calls_time(tmp_path: Path) -> None:
    """Outside the Executor's block each run starts the server again (its tools were
    listed once, by the first): that start, slower than the tool's time limit, is not
    counted in it. Its first call timed out in every run but the first."""
    slow = sdk_server(args=("--start-delay", "2"), tools={"lookup": McpToolSettings(timeout=1)})
    executor = Executor(
        [Role(name="clerk", tools=("t:lookup",))],
        ScriptedModel([call("lookup", {"word": "bee"}), "done"]),
        mcp_servers=[slow],
    )
    for _ in range(2):
        result = await executor.run("t", subtasks=[("clerk", "look up bee")])
        (seen,) = [m for m in result.subtasks["s1"].worker.transcript.messages  # type: ignore[union-attr]
                   if isinstance(m, ToolMessage)]  # fmt: skip
        assert seen.status == "ok", seen.content


async def test_approvals_naming_a_misspelt_mcp_tool_stop_the_run_before_any_call(
    tmp_path: Path,
) -> None:
    """An MCP tool's name is known once its server lists it: a misspelling in a role's
    approvals, not checked as the role was made, would let the call run unasked."""
    notes = tmp_path / "notes.txt"
    writer = Role(name="writer", tools=("t:append_note",), approvals={"tools": ["apend_note"]})
    executor = Executor(
        [writer],
        ScriptedModel([call("append_note", {"text": "unasked"}), "written"]),
        mcp_servers=[sdk_server(notes=notes)],
    )
    with pytest.raises(RunFailed) as failed:
        await executor.run("t", subtasks=[("writer", "write")])
    assert failed.value.partial is not None
    error = failed.value.partial.subtasks["s1"].error
    assert error is not None
    assert "'apend_note' (did you mean 'append_note'?)" in error.message
    assert not notes.exists()  # its worker never started


async def test_a_hive_called_as_a_tool_shares_its_server_through_the_callers_block() -> None:
    """Each call of a hive tool started (and stopped) its MCP server anew, inside the
    calling Executor's block too: four calls, four processes. The block holds the hive
    tools' servers as it holds its own: one process served every call."""
    before = child_pids()

    def seen(request: ModelRequest) -> list[ToolMessage]:
        return [m for m in request.messages if isinstance(m, ToolMessage)]

    def clerk(request: ModelRequest) -> AssistantMessage | str:
        if seen(request):
            return seen(request)[0].content  # the server's process id, as its answer
        return AssistantMessage(tool_calls=(call("pid"),))

    def lead(request: ModelRequest) -> AssistantMessage | str:
        if seen(request):
            return "done"
        return AssistantMessage(tool_calls=(call("clerks", {"instruction": "pid"}),))

    clerks = Executor(
        [CLERK], FunctionModel(clerk), mcp_servers=[sdk_server()],
        planner=lambda task: [("clerk", task)], aggregator="concat",
    )  # fmt: skip

    caller = Executor(
        [Role(name="lead", tools=["clerks"])], FunctionModel(lead),
        tools=[clerks.as_tool("clerks")], aggregator="concat",
    )  # fmt: skip
    pids = set()
    async with caller:
        for _ in range(2):
            result = await caller.run("t", subtasks=plan("lead", "lead"))
            assert result.status == "ok"
            assert len(child_pids() - before) == 1  # the block's, kept between its runs
            for subtask in ("s1", "s2"):
                worker = result.subtasks[subtask].worker
                assert worker is not None
                (observed,) = [m for m in worker.transcript.messages if isinstance(m, ToolMessage)]
                pids.add(observed.content)
    assert child_pids() - before == set()  # and stopped with it
    assert len(pids) == 1
