"""Agent tools in a hive file: ``tools: [agent:ROLE]``, and ``honeycomb validate``
naming a cycle or a chain too deep, at the tool that starts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import BudgetExceeded, ConfigError, ConfigErrors, Executor, Policy, Role
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from honeycomb.run.policy import Budgets
from runtime import Event, ModelCallFinished
from runtime.models.pricing import Price, PricedModel
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


def test_an_agent_tool_of_a_role_with_mistakes_is_told_once_at_the_role(
    tmp_path: Path,
) -> None:
    # 'agent:w' of a role w whose field was misspelt was also told as a role that does
    # not exist ('agent:w' names no role: roles are planner, lead).
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models: {default: offline}\n"
        "roles:\n"
        "  planner: {description: Plans.}\n"
        "  w: {description: Works., max_turn: 3}\n"
        "  lead: {description: Leads., tools: [agent:w, agent:x]}\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    told = [str(error) for error in caught.value.errors]
    assert len(told) == 2
    assert told[0].startswith(f"{path}:4:28: roles.w.max_turn: unknown field 'max_turn'")
    assert told[1] == (
        f"{path}:5:48: roles.lead.tools[1]: 'agent:x' names no role: roles are planner, lead, w"
    )


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
    setup = executor.shared.crew.setup_for(executor.roles["lead"], None)
    assert setup.tools.names == ("researcher",)
    assert "Finds things out." in setup.tools["researcher"].description


OUTER = """\
models: {default: offline}
roles:
  planner: {description: Plans.}
  lead:
    description: Leads the research.
    tools: [hive:sub/facts.yaml]
  aggregator: {description: Merges.}
"""
INNER = """\
name: facts
models: {default: offline}
roles:
  planner: {description: Plans.}
  checker: {description: Checks facts about a topic.}
  aggregator: {description: Merges.}
"""
LEAD_TASK = [{"id": "s1", "role": "lead", "instruction": "check the facts about bees"}]


def hives(tmp_path: Path, outer: str = OUTER, inner: str = INNER) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "facts.yaml").write_text(inner)
    path = tmp_path / "hive.yaml"
    path.write_text(outer)
    return path


def own_calls(events: list[Event]) -> int:
    return sum(1 for e in events if isinstance(e, ModelCallFinished))


async def test_a_hive_tool_runs_a_sub_run_under_the_runs_budget(tmp_path: Path) -> None:
    path = hives(tmp_path)
    events: list[Event] = []
    executor = Executor.from_yaml(path, on_event=[events.append])
    assert "facts" in executor.shared.crew.setup_for(executor.roles["lead"], None).tools
    result = await executor.run("bees", subtasks=LEAD_TASK)
    assert result.status == "ok"
    assert "Facts for" in result.subtasks["s1"].text  # the sub-run's aggregated answer
    outer = own_calls(events)
    # the sub-run's planner, worker and aggregator calls are the run's too
    assert result.usage.model_calls >= outer + 2

    events.clear()
    tight = Policy(budgets=Budgets(model_calls=outer + 1))
    with pytest.raises(BudgetExceeded) as caught:
        await Executor.from_yaml(path, policy=tight, on_event=[events.append]).run(
            "bees", subtasks=LEAD_TASK
        )
    partial = caught.value.partial
    assert partial is not None
    assert partial.usage.model_calls <= outer + 1


def test_a_chain_of_hive_tools_is_bounded_by_the_max_nesting_of_each_caller(
    tmp_path: Path,
) -> None:
    """a.yaml (max_nesting 1) calls b.yaml, which calls c.yaml, which calls d.yaml:
    each hive checked only its own limit (3, by default) against the whole chain."""
    for name, called in (("a", "b"), ("b", "c"), ("c", "d"), ("d", None)):
        policy = "policy: {max_nesting: 1}\n" if name == "a" else ""
        tools = f", tools: ['hive:{called}.yaml']" if called else ""
        (tmp_path / f"{name}.yaml").write_text(
            f"models: {{default: offline}}\n{policy}roles:\n"
            f"  planner: {{description: Plans.}}\n  w: {{description: Works.{tools}}}\n"
        )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(tmp_path / "a.yaml")
    [error] = caught.value.errors
    assert str(error).startswith(f"{tmp_path / 'b.yaml'}:4:")
    assert str(error).endswith(
        "hive tools nest 2 deep, past the limit of 1 (the policy max_nesting of a.yaml): "
        "a.yaml → b.yaml → c.yaml"
    )
    load_hive(tmp_path / "b.yaml")  # alone, b.yaml's own limit (3) holds its chain


def test_hive_tools_that_make_a_cycle_or_name_no_file_are_told(tmp_path: Path) -> None:
    back = INNER.replace(
        "  checker: {description: Checks facts about a topic.}\n",
        "  checker: {description: Checks., tools: ['hive:../hive.yaml']}\n",
    )
    path = hives(tmp_path, inner=back)
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    [error] = caught.value.errors
    assert str(error).startswith(f"{tmp_path / 'sub' / 'facts.yaml'}:5:")
    assert "hive tools make a cycle: hive.yaml → facts.yaml → hive.yaml" in str(error)

    path.write_text(OUTER.replace("sub/facts.yaml", "sub/fact.yaml"))
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    assert "'hive:sub/fact.yaml': no hive file" in str(caught.value)
    # The file meant was not said, of a name misspelt or of its folder alone.
    assert str(caught.value).endswith("(did you mean 'hive:sub/facts.yaml'?)")
    path.write_text(OUTER.replace("sub/facts.yaml", "sub"))
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    assert str(caught.value).endswith(
        f"'hive:sub': no hive file {tmp_path / 'sub'} (did you mean 'hive:sub/facts.yaml'?)"
    )


PRICED = "models: {default: {provider: offline, price: {input_per_mtok: 1, output_per_mtok: 2}}}\n"


async def test_a_hive_tool_whose_models_have_no_price_is_refused_under_a_budget_in_dollars(
    tmp_path: Path,
) -> None:
    outer = OUTER.replace("models: {default: offline}\n", PRICED) + "policy: {budgets: {cost: 1}}\n"
    path = hives(tmp_path, outer=outer)
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    [error] = caught.value.errors
    assert str(error).startswith(f"{path}:6:")  # the tool's line: its calls spend at 0
    assert "'hive:sub/facts.yaml' (facts.yaml) calls models none of which has a price" in str(error)
    assert "budgets.cost at 0 each" in str(error)

    (tmp_path / "sub" / "facts.yaml").write_text(
        INNER.replace("models: {default: offline}\n", PRICED)
    )
    result = await Executor.from_hive(load_hive(path)).run("bees", subtasks=LEAD_TASK)
    spent = result.usage  # the sub-run's calls counted at its price
    assert spent.cost == pytest.approx((spent.input_tokens + 2 * spent.output_tokens) / 1e6)


async def test_an_executor_whose_hive_tool_has_no_priced_model_refuses_a_budget_in_dollars(
    tmp_path: Path,
) -> None:
    sub = Executor.from_hive(load_hive(hives(tmp_path)))  # offline, unpriced
    paid = PricedModel(ScriptedModel(["done"]), Price(input_per_mtok=1, output_per_mtok=2))
    with pytest.raises(ConfigError) as refused:
        Executor(
            [Role(name="lead", tools=("facts",))],
            paid,
            tools=[sub.as_tool("facts")],
            policy=Policy(budgets=Budgets(cost_per_call=0.1)),
        )
    assert refused.value.field == "policy.budgets.cost_per_call"
    assert "the hive tool 'facts' calls models none of which has a price" in str(refused.value)


def test_an_agent_tool_of_a_misspelt_role_is_told_with_the_one_meant(tmp_path: Path) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models: {default: offline}\n"
        "roles:\n"
        "  planner: {description: Plans.}\n"
        "  researcher: {description: Finds.}\n"
        "  lead: {description: Leads., tools: [agent:reseacher]}\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    assert [str(error) for error in caught.value.errors] == [
        f"{path}:5:39: roles.lead.tools[0]: 'agent:reseacher' names no role (did you mean "
        "'researcher'?): roles are planner, researcher, lead"
    ]


def test_an_executor_with_no_planner_is_refused_as_a_tool() -> None:
    """A call of its tool gives an instruction, never subtasks: each would have told the
    calling model to pass ``subtasks=``, which it cannot. A hive file without a planner
    is refused as it loads; an Executor made in Python as it becomes a tool."""
    planless = Executor([Role(name="researcher")], ScriptedModel(["done"]))
    with pytest.raises(ConfigError, match=r"as_tool\('facts'\): this Executor has no planner"):
        planless.as_tool("facts")
