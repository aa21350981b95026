"""Agent tools in a hive file: ``tools: [agent:ROLE]``, and ``honeycomb validate``
naming a cycle or a chain too deep, at the tool that starts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import ConfigErrors, Executor
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from runtime.testing import ScriptedModel, call

CYCLE = """\
models: {default: offline}
roles:
  planner: {description: Plans.}
  a:
    tools: [agent:b]
  b:
    tools: [agent:a]
"""


def test_validate_names_a_cycle_of_agent_tools_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(CYCLE)
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}: 1 error" in out
    assert f"{path}:5:13: roles.a.tools[0]: agent tools make a cycle: a → b → a" in out


def test_a_hive_names_a_chain_past_its_max_nesting(tmp_path: Path) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models: {default: offline}\npolicy: {max_nesting: 1}\nroles:\n"
        "  a: {tools: [agent:b]}\n  b: {tools: [agent:c]}\n  c: {}\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    [error] = caught.value.errors
    assert str(error).startswith(f"{path}:4:15: roles.a.tools[0]: agent tools nest 2 deep")
    assert "a → b → c" in str(error)


def test_a_hive_role_calls_another_as_a_tool(tmp_path: Path) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models: {default: offline}\nroles:\n"
        "  lead: {tools: [agent:researcher], approvals: {tools: [researcher]}}\n"  # a known name
        "  researcher: {description: Finds things out.}\n"
    )
    hive = load_hive(path)
    assert hive.roles["lead"].tools == ("agent:researcher",)
    model = ScriptedModel([[call("researcher", {"instruction": "look"})], "found", "done"])
    executor = Executor.from_hive(hive, model=model)
    setup = executor.shared.setup_for(executor.roles["lead"], None)
    assert setup.tools.names == ("researcher",)
    assert "Finds things out." in setup.tools["researcher"].description
