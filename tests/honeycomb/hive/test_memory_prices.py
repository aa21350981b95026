"""A budget in dollars where a memory's embeddings have a price: they give ``cost``
something to count when no model has a price (an Executor, a hive, a hive called as a
tool), though not ``cost_per_call``, a model call's cap; a memory no role uses counts
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import (
    BudgetExceeded,
    Budgets,
    ConfigError,
    ConfigErrors,
    Executor,
    Policy,
    Role,
    RoleMemory,
    SQLiteMemory,
)
from honeycomb.evals.memory import EvalMemory
from honeycomb.hive import load_hive
from honeycomb.models import OpenAIEmbeddings, Price, PricedModel
from honeycomb.testing import FunctionModel, ScriptedModel
from tests.support.hives import hive
from tests.support.openai_server import OpenAIServer

EXPENSIVE = Price(input_per_mtok=100_000.0, output_per_mtok=0.0)  # 10 cents a token


def memory_of(path: Path, base_url: str = "http://127.0.0.1:9/v1") -> SQLiteMemory:
    embeddings = OpenAIEmbeddings("embed-small", base_url=base_url, api_key="sk-t", price=EXPENSIVE)
    return SQLiteMemory(path / "memory.db", embeddings=embeddings)


def free() -> FunctionModel:
    return FunctionModel(lambda request: "done", name="free")


GUIDE = Role(name="guide", memory=RoleMemory(recall=2, remember=False))


async def test_priced_embeddings_are_what_a_budget_in_dollars_counts(tmp_path: Path) -> None:
    pytest.importorskip("sqlite_vec")
    with OpenAIServer() as server:
        executor = Executor(
            [GUIDE], free(), memory=memory_of(tmp_path, server.base_url),
            policy=Policy(budgets=Budgets(cost=0.15)),
        )  # fmt: skip
        assert executor.priced()
        with pytest.raises(BudgetExceeded) as stopped:  # its recall: 2 tokens, 20 cents
            await executor.run("trip", subtasks=[("guide", "Lisbon sights")])
    assert stopped.value.limit == "cost"
    partial = stopped.value.partial
    assert partial is not None
    assert partial.usage.cost == pytest.approx(0.2)
    assert partial.usage.model_calls == 0  # the free model's call was not made


def test_cost_per_call_still_needs_a_priced_model(tmp_path: Path) -> None:
    policy = Policy(budgets=Budgets(cost=1.0, cost_per_call=0.1))
    with pytest.raises(ConfigError) as refused:
        Executor([GUIDE], free(), memory=memory_of(tmp_path), policy=policy)
    assert refused.value.field == "policy.budgets.cost_per_call"
    assert "no model has one" in str(refused.value)


def test_a_priced_memory_no_role_uses_counts_nothing(tmp_path: Path) -> None:
    policy = Policy(budgets=Budgets(cost=1.0))
    with pytest.raises(ConfigError) as refused:
        Executor([Role(name="guide")], free(), memory=memory_of(tmp_path), policy=policy)
    assert refused.value.field == "policy.budgets.cost"
    executor = Executor([Role(name="guide")], free(), memory=memory_of(tmp_path))
    assert not executor.priced()


def test_a_hive_tools_priced_embeddings_count_under_its_callers_budget(tmp_path: Path) -> None:
    sub = Executor([Role(name="planner"), GUIDE], free(), memory=memory_of(tmp_path))
    paid = PricedModel(ScriptedModel(["done"]), Price(input_per_mtok=1, output_per_mtok=2))
    lead = Role(name="lead", tools=("guides",))
    tools = [sub.as_tool("guides")]
    Executor([lead], paid, tools=tools, policy=Policy(budgets=Budgets(cost=1.0)))  # accepted
    with pytest.raises(ConfigError) as refused:
        Executor([lead], paid, tools=tools, policy=Policy(budgets=Budgets(cost_per_call=0.1)))
    assert refused.value.field == "policy.budgets.cost_per_call"
    assert "the hive tool 'guides' calls models none of which has a price" in str(refused.value)


HIVE = """\
models: {default: offline}
memory:
  embeddings: {model: embed-small, base_url: "http://127.0.0.1:9/v1", price: {input_per_mtok: 5}}
roles:
  guide: {description: Finds things., memory: {recall: 2}}
policy:
  budgets: {cost: 1.0}
"""


def test_a_hive_whose_embeddings_alone_have_a_price_may_have_a_budget_in_dollars(
    tmp_path: Path,
) -> None:
    pytest.importorskip("sqlite_vec")  # (a hive with embeddings asks for it)
    assert load_hive(hive(tmp_path, HIVE)).spec.policy.budgets.cost == 1.0
    per_call = HIVE.replace("{cost: 1.0}", "{cost_per_call: 0.1}")
    with pytest.raises(ConfigErrors) as caught:
        load_hive(hive(tmp_path, per_call))
    [error] = caught.value.errors
    assert "policy.budgets.cost_per_call" in str(error)
    assert error.line == 7
    unused = HIVE.replace(", memory: {recall: 2}}", "}")
    with pytest.raises(ConfigErrors) as caught:
        load_hive(hive(tmp_path, unused))
    [error] = caught.value.errors
    assert "policy.budgets.cost" in str(error)


def test_a_called_hive_whose_embeddings_alone_have_a_price_counts_under_cost(
    tmp_path: Path,
) -> None:
    pytest.importorskip("sqlite_vec")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "guides.yaml").write_text(
        HIVE.replace("policy:\n  budgets: {cost: 1.0}\n", "").replace(
            "roles:\n", "roles:\n  planner: {description: Plans.}\n"
        )
    )
    outer = """\
models: {default: {provider: offline, price: {input_per_mtok: 1, output_per_mtok: 2}}}
roles:
  lead: {description: Leads., tools: ["hive:sub/guides.yaml"]}
policy:
  budgets: {cost: 1.0}
"""
    load_hive(hive(tmp_path, outer))  # accepted: the guides' embeddings count
    with pytest.raises(ConfigErrors) as caught:
        load_hive(hive(tmp_path, outer.replace("{cost: 1.0}", "{cost_per_call: 0.1}")))
    [error] = caught.value.errors
    assert error.line == 3  # the tool's line
    assert "calls models none of which has a price" in str(error)


def test_an_evals_memory_keeps_a_hives_budget_in_dollars_on_its_embeddings(
    tmp_path: Path,
) -> None:
    pytest.importorskip("sqlite_vec")
    loaded = load_hive(hive(tmp_path, HIVE))
    evaluated = Executor.from_hive(loaded, memory=EvalMemory(loaded.memory()))  # honeycomb eval's
    assert evaluated.priced()  # what an eval's --max-cost counts
