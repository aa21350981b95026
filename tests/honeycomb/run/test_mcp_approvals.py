"""An MCP tool marked ``approval: true`` under its server's ``tools:``: every role that
takes it asks a person about each call, as a tool marked ``@tool(approval=True)`` does.
Against the SDK-written test server, run as a real subprocess."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from honeycomb import ApprovalRequest, ConfigErrors, Decision, Executor, Subtask, ToolMessage
from honeycomb.hive import load_hive
from honeycomb.testing import ScriptedModel
from runtime.testing import call
from tests.support import ROOT

pytestmark = pytest.mark.timeout(120)

HIVE = f"""\
models: {{default: offline}}
mcp_servers:
  t:
    command: {sys.executable}
    args: [-m, tests.support.mcp_server]
    env: {{PYTHONPATH: {ROOT}, MCP_TEST_NOTES: "@NOTES@"}}
    tools:
      append_note: {{approval: true}}
roles:
  planner: {{description: Plans.}}
  writer: {{description: Writes., tools: ["t:*"]}}
  reader: {{description: Reads., tools: ["t:lookup", "t:append_note"]}}
"""


def write(folder: Path, text: str, name: str = "hive.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).replace("@NOTES@", str(folder / "notes.txt")))
    return path


def seen(result: object, subtask: str) -> list[str]:
    worker = result.subtasks[subtask].worker  # type: ignore[attr-defined]
    return [m.content for m in worker.transcript.messages if isinstance(m, ToolMessage)]


async def test_an_mcp_tool_marked_approval_true_asks_before_every_call(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        if request.arguments["text"] == "no":
            return Decision.denied("not that one")
        return Decision.approved()

    model = ScriptedModel(
        {
            "r/w": [
                call("append_note", {"text": "no"}),
                call("append_note", {"text": "yes"}),
                "ok",
            ],
            "r/l": [call("lookup", {"word": "bee"}), "ok"],
        }
    )
    executor = Executor.from_hive(load_hive(write(tmp_path, HIVE)), model=model, approver=approver)
    plan = [
        Subtask(id="w", role="writer", instruction="write"),
        Subtask(id="l", role="reader", instruction="read"),
    ]
    result = await executor.run("t", subtasks=plan, run_id="r")
    assert result.status == "ok"
    # The reader's lookup was not asked about.
    assert [(r.tool, r.arguments["text"]) for r in asked] == [
        ("append_note", "no"),
        ("append_note", "yes"),
    ]
    assert asked[0].why == "tool 'append_note' is marked approval=True"
    assert seen(result, "w") == ["denied: not that one", "noted yes"]
    assert seen(result, "l") == ["an insect that makes honey"]
    # The denied call never reached the server.
    assert [line.split()[:2] for line in (tmp_path / "notes.txt").read_text().splitlines()] == [
        ["start", "yes"],
        ["end", "yes"],
    ]


async def test_a_hive_tool_whose_mcp_tool_asks_and_nobody_can_decide_is_refused(
    tmp_path: Path,
) -> None:
    """Its hive's roles ask for no approval themselves: the server's ``tools:`` marks
    the tool, which the run knows before the server lists its tools."""
    write(tmp_path, HIVE, "notes.yaml")
    calling = """\
    models: {default: offline}
    roles:
      lead: {description: Leads., tools: ["hive:notes.yaml"]}
    """
    with pytest.raises(ConfigErrors) as caught:
        await Executor.from_hive(load_hive(write(tmp_path, calling))).run(
            "t", subtasks=[Subtask(id="s1", role="lead", instruction="go")]
        )
    assert "the hive notes.yaml asks for approval of some calls, and nobody can" in str(
        caught.value
    )


async def test_a_misspelt_tool_under_a_server_s_tools_fails_its_workers_before_any_call(
    tmp_path: Path,
) -> None:
    """``approval: true`` on a name the server does not list would never ask: the run
    says so before any call, as ``honeycomb validate`` does, and the other workers go
    on."""
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.approved()

    text = HIVE.replace("append_note: {approval: true}", "apend_note: {approval: true}")
    model = ScriptedModel(
        {"r/w": [call("append_note", {"text": "unasked"}), "ok"], "r/p": ["planned"]}
    )
    executor = Executor.from_hive(load_hive(write(tmp_path, text)), model=model, approver=approver)
    plan = [
        Subtask(id="w", role="writer", instruction="write"),
        Subtask(id="p", role="planner", instruction="plan"),
    ]
    result = await executor.run("t", subtasks=plan, run_id="r")
    assert result.status == "partial"
    assert result.subtasks["p"].ok
    assert str(result.subtasks["w"].error) == (
        "ConfigError: mcp_servers.t.tools: MCP server 't' has no tool 'apend_note' (did you "
        "mean 'append_note'?); its tools: append_note, die, gather, long, lookup, picture, "
        "pid, refuse, set_flag, slow, spawn, where"
    )
    assert asked == []
    assert not (tmp_path / "notes.txt").exists()  # nothing reached the server
