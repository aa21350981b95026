"""The command line with many features of one run at once (parallel workers, nested
agents and hives as tools, approvals, guards, budgets, a run store, streaming,
secrets): what it shows and says where they meet."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from honeycomb import Approvals, Executor, Role, tool
from honeycomb.cli.main import main
from honeycomb.cli.view import LiveView
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call
from runtime.tools.approvals import ApprovalRequest, Approver, Decision
from tests.support.model_requests import Answer, observations, role_of

LIMIT_S = 30.0
"""No test here waits longer than this for its run: a hang fails the test."""


@tool(side_effects=True, approval=True)
async def publish(text: str) -> str:
    """Publish a text."""
    return f"published {text}"


def _row(drawn: str, subtask: str) -> str:
    (row,) = [line for line in drawn.splitlines() if line.strip("│ ").startswith(f"{subtask} ")]
    return row


def view_and_person() -> tuple[LiveView, list[str], Approver]:
    """A live view, and a person who approves each call once the view is drawn (each
    frame kept, in order)."""
    view = LiveView(
        Console(file=io.StringIO(), force_terminal=True, width=100, color_system=None), "h"
    )
    drawn: list[str] = []

    async def person(request: ApprovalRequest) -> Decision:
        frame = io.StringIO()
        Console(file=frame, width=100, color_system=None).print(view)
        drawn.append(frame.getvalue())
        return Decision.approved()

    return view, drawn, person


async def test_the_live_view_marks_the_subtask_whose_nested_worker_waits_for_a_person() -> None:
    """Two leads run at once; only the second calls a nested worker whose call is
    asked about on the terminal. While it is asked, the second lead's row says it
    needs approval (before, no row did: the view looked for a row named after the
    nested worker, ``s2/call_N``), and the first lead's does not."""

    def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        task = str(request.messages[1].content)
        if (role == "lead" and task == "quiet") or seen:
            return f"{role} done"
        if role == "lead":
            return AssistantMessage(tool_calls=(call("writer", {"instruction": "publish"}),))
        return AssistantMessage(tool_calls=(call("publish", {"text": "bees"}),))

    view, drawn, person = view_and_person()

    roles = [
        Role(name="lead", tools=("agent:writer",)),
        Role(name="writer", tools=("publish",), approvals=Approvals(tools=("publish",))),
    ]
    executor = Executor(
        roles, FunctionModel(answer), tools=[publish], approver=view.asked(person),
        aggregator="concat",
    )  # fmt: skip
    with view:
        async with asyncio.timeout(LIMIT_S):
            async with executor.stream(
                "t", subtasks=[("lead", "quiet"), ("lead", "delegate")]
            ) as events:
                async for event in events:
                    view.handle(event)
    assert events.result is not None
    assert events.result.status == "ok"
    (frame,) = drawn
    assert "needs approval" in _row(frame, "s2")
    assert "needs approval" not in _row(frame, "s1")


async def test_the_live_view_marks_the_subtask_whose_hive_tool_waits_for_a_person() -> None:
    """As above, the second lead calling a hive as a tool whose worker's call is asked
    about: its row needs approval, not the first lead's (the sub-run's worker is
    ``s1`` of its own run: before, it was asked about as ``s1``, marking the wrong row)."""

    def answer(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        task = str(request.messages[1].content)
        if role == "planner":
            return json.dumps({"subtasks": [{"id": "s1", "role": "writer", "instruction": "go"}]})
        if (role == "lead" and task == "quiet") or seen:
            return f"{role} done"
        if role == "lead":
            return AssistantMessage(tool_calls=(call("desk", {"instruction": "publish"}),))
        return AssistantMessage(tool_calls=(call("publish", {"text": "bees"}),))

    view, drawn, person = view_and_person()

    model = FunctionModel(answer)
    desk = Executor(
        [Role(name="planner"), Role(name="writer", tools=("publish",))],
        model, tools=[publish], aggregator="concat",
    )  # fmt: skip
    executor = Executor(
        [Role(name="lead", tools=("desk",))], model, tools=[desk.as_tool("desk")],
        approver=view.asked(person), aggregator="concat",
    )  # fmt: skip
    with view:
        async with asyncio.timeout(LIMIT_S):
            async with executor.stream(
                "t", subtasks=[("lead", "quiet"), ("lead", "delegate")]
            ) as events:
                async for event in events:
                    view.handle(event)
    assert events.result is not None
    assert events.result.status == "ok"
    (frame,) = drawn
    assert "needs approval" in _row(frame, "s2")
    assert "needs approval" not in _row(frame, "s1")


ALL_ON_TOOLS = '''
"""The tools of the hive with every feature on."""
import json
from pathlib import Path

from honeycomb import GuardCheck, ToolContext, add_secret, tool

SECRET = "hunter2-all-features-on"
add_secret(SECRET, "password")  # as a tool reads a password from a vault


@tool
async def lookup_facts(topic: str) -> str:
    """Look up facts about a topic in the library.

    Args:
        topic: The topic.
    """
    return f"Facts about {topic}: bees keep the brood at 35 C."


@tool(side_effects=True, approval=True)
async def send_report(to: str, body: str, ctx: ToolContext) -> str:
    """Send the report by message to someone.

    Args:
        to: Who gets it.
        body: The report.
    """
    with Path("ledger.jsonl").open("a") as ledger:
        ledger.write(json.dumps({"to": to, "key": ctx.idempotency_key}) + "\\n")
    return f"sent to {to} (auth {SECRET})"


def no_forbidden(check: GuardCheck) -> str | None:
    return "a forbidden word" if "forbidden" in check.text else None


_SEEN: set[str] = set()


def second_answer(check: GuardCheck) -> str | None:
    """Refuses each worker's first answer: its second is accepted."""
    if check.worker in _SEEN:
        return None
    _SEEN.add(str(check.worker))
    return "answer again"
'''

ALL_ON_HIVE = """
name: all-on
description: Every feature at once.
example_task: Lead a study of how honeybees keep their brood warm, and send the report to ops.
models:
  offline: {provider: offline, latency: 0, price: {input_per_mtok: 1.0, output_per_mtok: 2.0}}
memory: {path: memory.db}
guards:
  arguments: [all_on_tools:no_forbidden]
roles:
  planner: {description: Splits the request between the lead and the courier.}
  lead:
    description: Leads the research, delegating to the researcher and the fact checkers.
    tools: [agent:researcher, hive:facts.yaml, all_on_tools:lookup_facts]
    max_turns: 3
    memory: {namespace: study, recall: 2, remember: true, store_result: true}
    compaction: {budget_tokens: 1500}
    guards: {output: [all_on_tools:second_answer]}
  researcher:
    description: Researches one question and reports what it found.
    tools: [all_on_tools:lookup_facts]
    max_turns: 2
  courier:
    description: Sends the report by message to ops once the others are done.
    tools: [all_on_tools:send_report]
    max_turns: 3
  aggregator: {description: Presents the report.}
store: runs.db
policy:
  max_workers: 4
  worker_timeout_s: 30
  max_output_tokens: 256
  budgets:
    model_calls: 40
    total_tokens: 200000
    tool_calls: 30
    wall_time_s: 60
    cost: 1.0
    cost_per_call: 0.01
"""

FACTS_HIVE = """
name: facts
description: Checks the facts of a claim.
models:
  offline: {provider: offline, latency: 0, price: {input_per_mtok: 1.0, output_per_mtok: 2.0}}
roles:
  planner: {description: Gives the claim to the checker.}
  checker:
    description: Checks the facts of a claim and says what holds.
    tools: [all_on_tools:lookup_facts]
    max_turns: 2
  aggregator: {description: Sums up the check.}
"""


def _calls_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("calls ")]
    return " ".join(line.split())


def test_a_hive_with_every_feature_on_runs_waits_is_decided_once_and_resumes_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parallel leads with memory, compaction, an output guard, a nested agent and a
    hive as tools; the run's argument guard, budgets, store and trace; a courier whose
    call waits for a person; a tool that registers a secret and returns it. run ends
    waiting; approve decides once; resume sends once and answers; what runs, trace
    and resume say of the run agree; no output and no file holds the secret."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "all_on_tools.py").write_text(ALL_ON_TOOLS)
    (tmp_path / "hive.yaml").write_text(ALL_ON_HIVE)
    (tmp_path / "facts.yaml").write_text(FACTS_HIVE)
    secret = "hunter2-all-features-on"
    shown: list[str] = []

    def said() -> str:
        out, err = capsys.readouterr()
        shown.append(out + err)
        return out + err

    assert main(["validate", "hive.yaml"]) == 0
    said()
    assert main(["run", "hive.yaml", "--plain", "--run-id", "r1"]) == 3  # waiting
    out = said()
    found = re.search(r"honeycomb approve r1 (\S+) --store runs.db\s", out)
    assert found is not None, out
    call_id = found.group(1)
    assert not (tmp_path / "ledger.jsonl").exists()  # nothing sent before a decision
    assert main(["approve", "r1", call_id, "--store", "runs.db"]) == 0
    said()
    assert main(["approve", "r1", call_id, "--store", "runs.db", "--deny"]) == 2
    assert "it was decided already (approved by" in said()
    assert main(["resume", "r1", "--store", "runs.db", "--plain"]) == 0
    resumed = said()
    assert "\nAnswer:\n" in resumed
    assert main(["resume", "r1", "--store", "runs.db", "--plain"]) == 0  # ended: shown again
    said()
    ledger = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert len(ledger) == 1  # sent once, in two lives and a third look
    assert (
        main(["trace", "r1", "--store", "runs.db", "--jsonl", "t.jsonl", "--html", "t.html"]) == 0
    )
    traced = said()
    assert _calls_line(traced) == _calls_line(resumed)
    assert main(["runs", "--store", "runs.db"]) == 0
    (row,) = [line for line in said().splitlines() if line.startswith("r1 ")]
    model_calls = re.search(r"calls\s+(\d+) model", _calls_line(traced))
    assert model_calls is not None
    assert f" {model_calls.group(1)} model calls " in row
    files = [*tmp_path.glob("runs.db*"), *tmp_path.glob("memory.db*"), tmp_path / "t.jsonl"]
    files.append(tmp_path / "t.html")
    assert all(secret.encode() not in path.read_bytes() for path in files)
    assert all(secret not in text for text in shown)
    assert "[password hidden]" in "".join(shown)  # it reached the answer, masked


def test_validate_names_every_mistake_of_a_hive_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hive with no planner whose store is a file that is no run store: validate
    names both, each at its line (before, it named the planner alone, and the store
    only once the planner was there)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a run store\n")
    (tmp_path / "hive.yaml").write_text(
        "models:\n  default: offline\nroles:\n  lead: {description: Leads.}\nstore: notes.txt\n"
    )
    assert main(["validate", "hive.yaml"]) == 1
    out = capsys.readouterr().out
    assert "hive.yaml: 2 errors" in out
    assert "hive.yaml:3:1: roles: the hive has no planner" in out
    assert "hive.yaml:5:1: store: notes.txt: the file is not a Honeycomb run store" in out
