"""MCP servers whose tool list is odd, as MCP allows it (``tests/support/mcp_odd_server.py``,
written with the SDK's low-level server, run as a real subprocess): a tool whose input
schema is ``{"type": "object"}`` alone, two tool names a model calls by one, a server
that answers the handshake but refuses its list, a tool whose input schema is no JSON
schema, and one that answers against its own output schema."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import pytest

from honeycomb import Executor, Role, Subtask
from honeycomb.testing import FunctionModel
from runtime import (
    AssistantMessage,
    McpServer,
    McpServerError,
    ModelRequest,
    ToolCall,
    ToolMessage,
    ToolRegistry,
)
from runtime.testing import call
from runtime.tools.mcp import mcp_tools
from tests.support.dispatching import layered
from tests.support.mcp_servers import ROOT, child_pids, http_test_server, running

pytestmark = pytest.mark.timeout(60)


def odd_server(*args: str) -> McpServer:
    return McpServer(
        name="odd",
        command=sys.executable,
        args=("-m", "tests.support.mcp_odd_server", *args),
        env={"PYTHONPATH": str(ROOT)},
    )


async def test_a_server_that_refuses_its_list_says_why_and_leaves_nothing() -> None:
    before = child_pids()
    with pytest.raises(McpServerError) as raised:
        async with running(odd_server("--refuse-list")) as run:
            await run.listed("odd")
    assert str(raised.value) == (
        "MCP server 'odd' could not be started: the tool list is broken today"
    )
    assert child_pids() - before == set()


async def test_every_tool_is_offered_as_a_model_api_takes_it_and_called_by_its_own_name() -> None:
    offered: list[ModelRequest] = []

    def model(request: ModelRequest) -> AssistantMessage:
        offered.append(request)
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(content="done")
        names = sorted(t.name for t in request.tools)
        return AssistantMessage(tool_calls=tuple(call(n, {"n": i}) for i, n in enumerate(names)))

    role = Role(name="r", tools=["odd:*"])
    executor = Executor([role], FunctionModel(model), mcp_servers=[odd_server()])
    result = await executor.run("t", subtasks=[Subtask(id="s", role="r", instruction="all")])
    assert result.status == "ok", result.subtasks["s"].error
    tools = {t.name: t.parameters for t in offered[0].tools}
    # 'a.b' and 'a_b' both come to 'a_b': the one whose name it is not is told apart.
    assert sorted(tools) == ["a_b", "a_b_2e7336", "bare"]
    # {"type": "object"} alone, as MCP allows, is refused by OpenAI's API.
    assert all(p == {"type": "object", "properties": {}} for p in tools.values())
    worker = result.subtasks["s"].worker
    assert worker is not None
    seen = sorted(m.content for m in worker.transcript.messages if isinstance(m, ToolMessage))
    assert seen == ['a.b got {"n": 1}', 'a_b got {"n": 0}', 'bare got {"n": 2}']


async def test_a_tool_whose_schema_is_no_json_schema_fails_the_roles_taking_it_naming_it() -> None:
    """A model's API refuses such a schema, and no call could be checked against it:
    the roles that take the tool fail, saying which tool of which server and why; a
    role that takes the server's other tools goes on (the tool's list raised TypeError
    out of the run, for every role of the server)."""

    def model(request: ModelRequest) -> AssistantMessage:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(content="done")
        return AssistantMessage(tool_calls=(call(request.tools[0].name, {}),))

    taking = {"one": "odd:bare", "named": "odd:broken", "all": "odd:*", "own": "odd:own_draft"}
    roles = [Role(name=name, tools=[ref]) for name, ref in taking.items()]
    executor = Executor(roles, FunctionModel(model), mcp_servers=[odd_server("--broken-schema")])
    plan = [Subtask(id=role.name, role=role.name, instruction="go") for role in roles]
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        result = await executor.run("t", subtasks=plan)
    assert result.status == "partial"
    assert result.subtasks["one"].ok
    # A $schema of its own is checked as the latest draft, without a word of it.
    assert result.subtasks["own"].ok
    worker = result.subtasks["own"].worker
    assert worker is not None
    assert [m.content for m in worker.transcript.messages if isinstance(m, ToolMessage)] == [
        "own_draft got {}"
    ]
    assert [str(w.message) for w in warned if "metaschema" in str(w.message)] == []
    why = (
        "MCP server 'odd' lists its tool 'broken' so that no model can be offered it: its "
        "input schema is no JSON schema (at 'required': True is not of type 'array')"
    )
    assert str(result.subtasks["named"].error) == f"ConfigError: role 'named': {why}"
    assert str(result.subtasks["all"].error) == (
        f"ConfigError: role 'all': {why}; name the tools the role is to have one by one, "
        "without it (not odd:*)"
    )


async def test_an_answer_that_breaks_its_tools_output_schema_is_the_servers_error() -> None:
    """The SDK refuses it (RuntimeError, its schema's error over lines): the model read
    that the tool raised, not which server answered what."""
    async with running(odd_server("--off-its-schema")) as run:
        tools = mcp_tools(odd_server(), await run.listed("odd"))
        dispatcher = layered(ToolRegistry(tools.values()))
        (seen,) = await dispatcher.dispatch([ToolCall(id="c", name="count", arguments="{}")])
    assert seen.content == (
        "Error: MCP server 'odd' answered the call to 'count' with a result that cannot be "
        "taken: its structured content breaks its tool's output schema ('many' is not of "
        "type 'integer' at 'n')"
    )


def raw_server(*tools: dict[str, Any]) -> McpServer:
    return McpServer(
        name="raw",
        command=sys.executable,
        args=("-m", "tests.support.mcp_raw_server", json.dumps(tools)),
        env={"PYTHONPATH": str(ROOT)},
    )


GARBLED = {"name": "garbled", "inputSchema": {"type": "object"}}


async def test_a_list_mcp_does_not_allow_says_where_in_one_line_and_leaves_nothing() -> None:
    """The SDK refuses the whole list (it said so over lines, with a link, and named
    the tool by its index from 0: 'ValidationError: 1 validation error for
    ListToolsResult tools.1.inputSchema.type ...')."""
    before = child_pids()
    with pytest.raises(McpServerError) as raised:
        async with running(
            raw_server(GARBLED, {"name": "s", "inputSchema": {"type": "string"}})
        ) as run:
            await run.listed("raw")
    assert str(raised.value) == (
        "MCP server 'raw' could not be started: its answer is not as MCP has it: its tool "
        "2's inputSchema.type: Input should be 'object'"
    )
    assert child_pids() - before == set()


async def test_a_result_mcp_does_not_allow_is_the_servers_error_in_one_line() -> None:
    async with running(raw_server(GARBLED)) as run:
        tools = mcp_tools(raw_server(GARBLED), await run.listed("raw"))
        dispatcher = layered(ToolRegistry(tools.values()))
        (seen,) = await dispatcher.dispatch([ToolCall(id="c", name="garbled", arguments="{}")])
    assert seen.content == (
        "Error: MCP server 'raw' answered the call to 'garbled' with a result that is not as "
        "MCP has it: content: Input should be a valid list"
    )


async def test_a_command_that_is_no_mcp_server_shows_what_it_wrote_to_stdout() -> None:
    """A program that does not speak MCP on its stdout (one that serves HTTP, as many
    servers can) never answers the handshake: its start's error says what it wrote
    there instead, not only that it did not start in time."""
    before = child_pids()
    banner = "print('Listening on http://127.0.0.1:8000', flush=True); import time; time.sleep(60)"
    server = McpServer(name="web", command=sys.executable, args=("-c", banner), start_timeout=0.5)
    with pytest.raises(McpServerError) as raised:
        async with running(server) as run:
            await run.listed("web")
    assert str(raised.value) == (
        "MCP server 'web' did not start and list its tools within 0.5s, its start_timeout "
        "(on stdout, where MCP messages go, it wrote: 'Listening on http://127.0.0.1:8000')"
    )
    assert child_pids() - before == set()


async def test_a_streamable_http_server_that_crashes_as_it_lists_its_tools_says_so() -> None:
    """Its connection drops under the SDK's task group, which wrapped what went wrong in
    an ExceptionGroup ('failed: ExceptionGroup: unhandled errors in a TaskGroup'). The
    server refuses the client's GET of a stream of its own (405), as MCP lets it: that
    is not why it did not start."""
    token = "crashing-server-token"
    with http_test_server(token, crash_at_list=True, legacy=True) as url:
        server = McpServer(name="h", url=url, headers={"Authorization": f"Bearer {token}"})
        with pytest.raises(McpServerError) as raised:
            async with running(server) as run:
                await run.listed("h")
    assert str(raised.value) == (
        "MCP server 'h' could not be started: RemoteProtocolError: Server disconnected "
        "without sending a response."
    )


async def test_an_http_endpoint_answering_json_that_is_no_mcp_message_says_so_in_one_line() -> None:
    """A url that is not the server's MCP endpoint but answers JSON (an API of its own):
    the SDK says so with the pydantic errors of each kind of message, about forty
    lines, which were why the server did not start."""
    token = "json-server-token"
    with http_test_server(token) as url:
        elsewhere = url.replace("/mcp", "/not-mcp")
        server = McpServer(name="h", url=elsewhere, headers={"Authorization": f"Bearer {token}"})
        with pytest.raises(McpServerError) as raised:
            async with running(server) as run:
                await run.listed("h")
    said = str(raised.value)
    assert said.startswith("MCP server 'h' could not be started: Failed to parse JSON response")
    union = "union[JSONRPCRequest,JSONRPCNotification,JSONRPCResponse,JSONRPCError]"
    assert said.endswith(f"validation errors for {union} ...")  # and not each of them
    assert "\n" not in said
