"""Where MCP tools meet the other features of a run: approvals decided later, in a
durable run resumed by another Executor, with its MCP servers started anew. Against the
SDK-written test server, run as a real subprocess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from honeycomb import (
    AssistantMessage,
    Executor,
    ModelRequest,
    Role,
    RunFailed,
    RunResult,
    ToolMessage,
    tool,
)
from honeycomb.approvals import PendingApproval
from honeycomb.testing import FunctionModel, ScriptedModel
from runtime import ApprovalError
from runtime.errors import AlreadyDecided
from runtime.testing import call
from tests.support.mcp_servers import sdk_server

pytestmark = pytest.mark.timeout(120)

WRITER = Role(name="writer", tools=("t:append_note",), approvals={"tools": ["append_note"]})


def noted(notes: Path) -> list[list[str]]:
    return [line.split()[:2] for line in notes.read_text().splitlines()] if notes.exists() else []


async def resumed_once_back(
    service: Callable[..., Executor], notes: Path, subtask: tuple[str, str]
) -> tuple[PendingApproval, RunResult]:
    """Run ``subtask`` until its call waits for approval, approve it, resume with the
    server down (the run fails saying why, nothing written), then resume with it
    back: the call that waited, and the result."""
    waiting = await service().run("t", subtasks=[subtask], run_id="r")
    (pending,) = waiting.pending
    await service().decide("r", pending.call_id, approve=True, worker=pending.worker)
    with pytest.raises(RunFailed) as failed:
        await service(down=True).resume("r")
    assert failed.value.partial is not None
    error = failed.value.partial.subtasks["s1"].error
    assert error is not None
    assert "MCP server 't' could not be started" in error.message
    assert noted(notes) == []
    done = await service().resume("r")
    assert done.status == "ok"
    assert noted(notes) == [["start", "draft"], ["end", "draft"]]
    return pending, done


async def test_an_edit_is_checked_against_its_own_tool_whatever_another_role_s_server_does(
    tmp_path: Path,
) -> None:
    """Deciding with edited arguments lists the tools of the waiting call's role alone:
    another role's server that cannot start, or a tool it no longer lists, is no reason
    to refuse the edit (before, the first role's failure refused every edit)."""
    notes, store = tmp_path / "notes.txt", tmp_path / "runs.db"

    def service(*others: Role, down: bool = False) -> Executor:
        model = ScriptedModel([call("append_note", {"text": "draft"}), "written"])
        u = sdk_server("u", args=("--fail-at-start",) if down else ())
        return Executor(
            [*others, WRITER], model, mcp_servers=[sdk_server(notes=notes), u], store=store
        )

    reader = Role(name="reader", tools=("u:lookup",))
    waiting = await service(reader).run("t", subtasks=[("writer", "write")], run_id="r")
    (pending,) = waiting.pending
    typo = Role(name="reader", tools=("u:lokup",))  # the server no longer lists it
    with pytest.raises(ApprovalError, match=r"the edited arguments: .*text"):
        await service(typo).decide("r", pending.call_id, approve=True, arguments={"txt": "x"})
    await service(reader, down=True).decide(
        "r", pending.call_id, approve=True, arguments={"text": "final"}
    )
    done = await service(reader).resume("r")
    assert done.status == "ok"
    assert noted(notes) == [["start", "final"], ["end", "final"]]


async def test_an_edit_whose_own_server_cannot_start_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    """The waiting call's own server down: the edit cannot be checked, and the error
    says so, why, and what can be done; the call still waits, and is decided later."""
    notes, store = tmp_path / "notes.txt", tmp_path / "runs.db"

    def service(*, down: bool = False) -> Executor:
        model = ScriptedModel([call("append_note", {"text": "draft"}), "written"])
        t = sdk_server(notes=notes, args=("--fail-at-start",) if down else ())
        return Executor([WRITER], model, mcp_servers=[t], store=store)

    waiting = await service().run("t", subtasks=[("writer", "write")], run_id="r")
    (pending,) = waiting.pending
    with pytest.raises(ApprovalError) as refused:
        await service(down=True).decide(
            "r", pending.call_id, approve=True, arguments={"text": "final"}
        )
    message = str(refused.value)
    assert "cannot be checked against tool 'append_note''s schema" in message
    assert "MCP server 't' could not be started" in message
    assert "the test server was told to fail at start" in message
    assert "approve it unedited" in message
    assert [p.call_id for p in await service().pending("r")] == [pending.call_id]
    await service().decide("r", pending.call_id, approve=True, arguments={"text": "final"})
    assert (await service().resume("r")).status == "ok"
    assert noted(notes) == [["start", "final"], ["end", "final"]]


async def test_a_paused_worker_whose_server_is_down_at_resume_goes_on_once_it_is_back(
    tmp_path: Path,
) -> None:
    """A worker that cannot start because its MCP server cannot start has not finished:
    the run fails saying why, and a later resume continues the worker from where it
    waited, its approved call run once (before, it stayed failed for good, its approval
    and its turns lost)."""
    notes, store = tmp_path / "notes.txt", tmp_path / "runs.db"

    def service(*, down: bool = False) -> Executor:
        model = ScriptedModel([call("append_note", {"text": "draft"}), "written"])
        t = sdk_server(notes=notes, args=("--fail-at-start",) if down else ())
        return Executor([WRITER], model, mcp_servers=[t], store=store)

    pending, done = await resumed_once_back(service, notes, ("writer", "write"))
    (seen, *_) = [m for m in done.subtasks["s1"].worker.transcript.messages  # type: ignore[union-attr]
                  if isinstance(m, ToolMessage)]  # fmt: skip
    assert (seen.tool_call_id, seen.content) == (pending.call_id, "noted draft")
    again = await service().resume("r")  # ended: its kept result, nothing run again
    assert again.status == "ok"
    assert noted(notes) == [["start", "draft"], ["end", "draft"]]


async def test_a_call_waiting_on_a_tool_its_server_no_longer_lists_waits_no_more(
    tmp_path: Path,
) -> None:
    """Resumed with the tool gone from its server's list, the waiting call cannot be
    made (the model is told so): it is no longer listed as waiting, and a decision on
    it is refused saying why (before, it was listed for ever, and a person's approval
    was recorded as if it would run)."""
    notes, store = tmp_path / "notes.txt", tmp_path / "runs.db"
    writer = Role(name="writer", tools=("t:*",), approvals={"default": "ask"})

    def service(*args: str) -> Executor:
        model = ScriptedModel([call("append_note", {"text": "draft"}), "written"])
        return Executor(
            [writer], model, mcp_servers=[sdk_server(notes=notes, args=args)], store=store
        )

    waiting = await service().run("t", subtasks=[("writer", "write")], run_id="r")
    (pending,) = waiting.pending
    done = await service("--without", "append_note").resume("r")
    assert done.status == "ok"
    (refused, *_) = [m for m in done.subtasks["s1"].worker.transcript.messages  # type: ignore[union-attr]
                     if isinstance(m, ToolMessage)]  # fmt: skip
    assert refused.tool_call_id == pending.call_id
    assert refused.content.startswith("Error: unknown tool 'append_note'")
    assert await service().pending("r") == []
    with pytest.raises(AlreadyDecided) as late:
        await service().decide("r", pending.call_id, approve=True)
    assert not late.value.approved
    assert late.value.decided_by == "the run: the call could not be made"
    assert noted(notes) == []


async def test_a_paused_nested_worker_whose_server_is_down_at_resume_goes_on_once_it_is_back(
    tmp_path: Path,
) -> None:
    """The same for a worker an agent tool runs: its caller stops unfinished with it
    (before, the agent call failed as any tool's, its caller answered without it, and
    the nested worker's approved call was never made)."""
    notes, store = tmp_path / "notes.txt", tmp_path / "runs.db"
    lead = Role(name="lead", tools=("agent:writer",))

    def service(*, down: bool = False) -> Executor:
        def answer(request: ModelRequest) -> str | AssistantMessage:
            system = request.messages[0].content or ""
            seen = [m for m in request.messages if isinstance(m, ToolMessage)]
            if "writer" in system:
                if seen:
                    return f"wrote: {seen[0].content}"
                return AssistantMessage(tool_calls=(call("append_note", {"text": "draft"}),))
            if seen:
                return f"lead: {seen[0].content}"
            return AssistantMessage(tool_calls=(call("writer", {"instruction": "write"}),))

        t = sdk_server(notes=notes, args=("--fail-at-start",) if down else ())
        return Executor(
            [lead, WRITER], FunctionModel(answer), mcp_servers=[t], store=store,
            aggregator="concat",
        )  # fmt: skip

    _, done = await resumed_once_back(service, notes, ("lead", "lead"))
    assert done.subtasks["s1"].text == "lead: wrote: noted draft"


TWO_OF_ONE_NAME = [
    (
        ("t:*", "u:*"),
        "MCP servers 't' and 'u' both have a tool 'lookup': name the one the role is to have "
        "(t:lookup or u:lookup), not every tool of both (server:*)",
    ),
    (
        ("append_note", "t:*"),
        "its own tool 'append_note' and MCP server 't''s have one name: give its own another "
        "(a function's with @tool(name=...); an agent or hive tool has its role's or file's), "
        "or name the server's tools it is to have one by one, without that one (not t:*)",
    ),
    (  # each named alone: the advice was to name them so, 'not every tool of both'
        ("t:lookup", "u:lookup"),
        "MCP servers 't' and 'u' both have a tool 'lookup': the role can take one of them "
        "only (t:lookup or u:lookup)",
    ),
    (
        ("append_note", "t:append_note"),
        "its own tool 'append_note' and MCP server 't''s have one name: give its own another "
        "(a function's with @tool(name=...); an agent or hive tool has its role's or file's), "
        "or leave out t:append_note",
    ),
]
"""The ways a role takes two tools of one name, and what its error says can be done."""


async def test_two_tools_of_one_name_say_what_can_be_done() -> None:
    """MCP tools cannot be renamed: the error said to give one another name. What it
    says can be done fits how the role takes the server's tool (by its name, or with
    every other). Each way is a role of one run, whose servers start once for all."""

    @tool
    def append_note(text: str) -> str:
        """Note it."""
        return text

    roles = [Role(name=f"writer{i}", tools=tools) for i, (tools, _) in enumerate(TWO_OF_ONE_NAME)]
    executor = Executor(
        roles,
        ScriptedModel(["done"]),
        tools=[append_note],
        mcp_servers=[sdk_server("t"), sdk_server("u")],
    )
    with pytest.raises(RunFailed) as failed:
        await executor.run("t", subtasks=[(role.name, "write") for role in roles])
    assert failed.value.partial is not None
    for i, (_, said) in enumerate(TWO_OF_ONE_NAME):
        error = failed.value.partial.subtasks[f"s{i + 1}"].error
        assert error is not None
        assert error.message == f"role 'writer{i}': {said}"
