"""Approvals declared in a hive: per role, for the whole hive, ``default: ask`` for
every side-effecting tool, and misspelt tool names reported where they are written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from honeycomb import ApprovalRequest, Approvals, ConfigErrors, Decision, Executor, Role, tool
from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.main import demo_hive_path, main
from honeycomb.cli.running import OUTBOX_TOOL, _asking
from honeycomb.hive import load_hive
from honeycomb.testing import ScriptedModel
from runtime.tools.approvals import ApprovalRule

HIVE = """\
models:
  default: offline
tools:
  count: tests.support.role_tools:word_count
  shout: tests.support.role_tools:shout
roles:
  planner:
    description: Plans.
  counter:
    tools: [count, shout]
    approvals: {tools: [count]}
  shouter:
    tools: [shout]
"""


def load(tmp_path: Path, text: str) -> Executor:
    path = tmp_path / "hive.yaml"
    path.write_text(textwrap.dedent(text))
    return Executor.from_hive(load_hive(path))


def rule_of(executor: Executor, role: str) -> ApprovalRule:
    return executor.shared.crew.setup_for(executor.roles[role], None).approvals


def test_a_role_names_the_tools_that_ask(tmp_path: Path) -> None:
    executor = load(tmp_path, HIVE)
    assert rule_of(executor, "counter").tools == frozenset({"count"})
    assert rule_of(executor, "shouter") == ApprovalRule(owner="shouter")


def test_the_hives_approvals_are_the_default_of_roles_without_their_own(tmp_path: Path) -> None:
    executor = load(tmp_path, HIVE + "approvals: {tools: [shout], default: ask}\n")
    assert rule_of(executor, "counter").tools == frozenset({"count"})  # its own
    shouter = rule_of(executor, "shouter")
    assert shouter.tools == frozenset({"shout"})
    assert shouter.side_effects
    assert rule_of(executor, "planner").tools == frozenset()  # uses no shout


def test_default_ask_asks_for_every_side_effecting_tool() -> None:
    @tool(side_effects=True)
    def wipe(path: str) -> str:
        """Wipe a path."""
        return path

    @tool
    def look(path: str) -> str:
        """Look at a path."""
        return path

    rule = Approvals(default="ask").rule("ops")
    assert rule.why(wipe) == "role 'ops' asks for approval of every side-effecting tool"
    assert rule.why(look) is None


def test_a_misspelt_tool_in_a_roles_approvals_is_an_error_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigErrors) as caught:
        load(tmp_path, HIVE.replace("approvals: {tools: [count]}", "approvals: {tools: [cuont]}"))
    (error,) = caught.value.errors
    assert error.line == 11
    assert error.field == "roles.counter.approvals.tools[0]"
    assert "approvals names tool 'cuont' (did you mean 'count'?)" in str(error)


def test_a_misspelt_tool_in_the_hives_approvals_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigErrors) as caught:
        load(tmp_path, HIVE + "approvals: {tools: [shuot]}\n")
    (error,) = caught.value.errors
    assert error.field == "approvals.tools[0]"
    assert "approvals names tool 'shuot' (did you mean 'shout'?), which no role" in str(error)


def test_an_executor_refuses_approvals_naming_a_tool_the_role_does_not_use() -> None:
    @tool
    def look(path: str) -> str:
        """Look at a path."""
        return path

    role = Role(name="ops", tools=("look",), approvals=Approvals(tools=("wipe",)))
    with pytest.raises(ConfigErrors, match="approvals names tool 'wipe'"):
        Executor([role], ScriptedModel(["done"]), tools=[look])


def test_demo_approve_asks_only_the_roles_that_use_the_outbox() -> None:
    hive = load_hive(demo_hive_path())
    _asking(hive, OUTBOX_TOOL)
    asking = {name for name, role in hive.roles.items() if role.approvals is not None}
    assert asking == {"courier"}
    Executor.from_hive(hive)  # and it is a valid executor


CALLING = """\
models:
  default: offline
roles:
  planner:
    description: Plans.
  lead:
    description: Leads.
    tools: [shout, "hive:payroll.yaml"]
tools:
  shout: tests.support.role_tools:shout
"""

PAYROLL = """\
models:
  default: offline
tools:
  count: tests.support.role_tools:word_count
roles:
  planner:
    description: Plans.
  clerk:
    tools: [count]
    approvals: {tools: [count]}
"""


async def test_a_hive_tool_whose_calls_nobody_can_decide_is_refused_at_its_line(
    tmp_path: Path,
) -> None:
    """A hive tool whose hive asks for approval, in a run with no approver: each of its
    calls that asked was denied as the run went (told as decided by "the run's
    approver", which it has none of). Now the run does not start, and the error is at
    the tool's line; with an approver, it runs."""
    (tmp_path / "payroll.yaml").write_text(PAYROLL)
    (tmp_path / "hive.yaml").write_text(CALLING)
    hive = load_hive(tmp_path / "hive.yaml")
    plan = [{"id": "s1", "role": "lead", "instruction": "count the team"}]
    with pytest.raises(ConfigErrors) as caught:
        await Executor.from_hive(hive).run("count", subtasks=plan)
    (error,) = caught.value.errors
    assert (Path(error.file or "").name, error.line) == ("hive.yaml", 8)  # the lead's tools
    assert "the hive payroll.yaml asks for approval of some calls, and nobody can" in str(error)
    assert "honeycomb run asks there" in str(error)

    async def approves(request: ApprovalRequest) -> Decision:
        return Decision.approved()

    done = await Executor.from_hive(hive, approver=approves).run("count", subtasks=plan)
    assert done.status == "ok"


def test_honeycomb_run_refuses_such_a_hive_tool_at_its_line_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off a terminal (no one to ask), ``honeycomb run --json`` ended 1 saying nothing:
    the run's refusal came after its stream had begun, with no event of it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "payroll.yaml").write_text(PAYROLL)
    (tmp_path / "hive.yaml").write_text(CALLING)
    code = main(["run", "hive.yaml", "count the team", "--json", "--no-store"])
    captured = capsys.readouterr()
    assert code == ExitStatus.UNUSABLE
    assert "hive.yaml:8:" in captured.err
    assert "the hive payroll.yaml asks for approval of some calls" in captured.err
    assert "kept in" not in captured.err  # no run was started
