"""What a worker's memory spends on embeddings counts in its run as its model calls do:
in the budget's usage (tokens, and dollars at the embeddings' price), each call a
``memory.embedded`` event, and a spent budget sends none. Through the real ``openai``
client, over real HTTP, against the local test server, on real memory files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import (
    Budget,
    BudgetExceeded,
    Event,
    ModelCallFinished,
    OpenAIEmbeddings,
    Price,
    SQLiteMemory,
    Tracer,
    Usage,
)
from runtime.events import Caller
from runtime.limits import Limits, RetryPolicy
from runtime.limits.spending import paid_by
from runtime.testing import ScriptedModel, call
from tests.support.openai_server import OpenAIServer, Raw, embedding
from workers import MemoryEmbedded, MemoryRecalled, Role, RoleMemory, Worker
from workers.memory import MemorySpending
from workers.services import Services

PRICE = Price(input_per_mtok=2.0, output_per_mtok=0.0)


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture
def openai_server(server: OpenAIServer) -> Iterator[OpenAIServer]:
    server.reset()
    yield server
    server.reset()


def embeddings_of(server: OpenAIServer, price: Price | None = PRICE) -> OpenAIEmbeddings:
    return OpenAIEmbeddings("embed-small", base_url=server.base_url, api_key="sk-t", price=price)


def words(text: str) -> int:
    """The tokens the test server counts for ``text``."""
    return len(text.split())


async def test_a_workers_embeddings_count_in_its_runs_usage_and_budget(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    pytest.importorskip("sqlite_vec")
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=embeddings_of(openai_server))
    events: list[Event] = []
    budget = Budget()
    model = ScriptedModel(
        [
            [call("remember", {"text": "a red automobile by the station"})],
            [call("recall", {"query": "where is the vehicle"})],
            "done",
        ]
    )
    role = Role(name="guide", memory=RoleMemory(recall=2))
    services = Services(
        memory=memory, budget=budget, tracer=Tracer(events.append, log=False), run_id="r1"
    )
    task = "find the car"
    result = await Worker(role, model, name="w1", services=services).run(task)
    assert result.ok, result.error
    texts = [task, "a red automobile by the station", "where is the vehicle"]
    embedded = [e for e in events if isinstance(e, MemoryEmbedded)]
    assert [(e.worker, e.run_id, e.model) for e in embedded] == [("w1", "r1", "embed-small")] * 3
    assert [e.input_tokens for e in embedded] == [words(t) for t in texts]
    tokens = sum(words(t) for t in texts)
    assert sum(e.cost for e in embedded) == pytest.approx(tokens * 2.0 / 1e6)
    # The budget counts them besides the model calls, as tokens and dollars.
    by_model = sum(e.input_tokens for e in events if isinstance(e, ModelCallFinished))
    assert budget.usage.input_tokens == by_model + tokens
    assert budget.usage.cost == pytest.approx(tokens * 2.0 / 1e6)
    assert budget.usage.model_calls == 3  # an embeddings call is not a model call


async def test_a_kept_result_is_paid_by_its_worker(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    pytest.importorskip("sqlite_vec")
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=embeddings_of(openai_server))
    budget = Budget()
    role = Role(name="guide", memory=RoleMemory(recall=0, remember=False, store_result=True))
    services = Services(memory=memory, budget=budget)
    result = await Worker(role, ScriptedModel(["Lisbon is sunny"]), services=services).run(
        "Lisbon?"
    )
    assert result.ok
    # The worker's usage is its model call's; the run's budget counts the kept answer too.
    assert budget.usage.input_tokens == result.usage.input_tokens + words("Lisbon is sunny")


async def test_an_answer_without_usage_is_counted_by_the_estimate(
    openai_server: OpenAIServer,
) -> None:
    vector = embedding("a car")
    openai_server.enqueue(Raw(200, body={"data": [{"index": 0, "embedding": vector}]}))
    budget = Budget()
    with paid_by(MemorySpending(budget, Caller())):
        [got] = await embeddings_of(openai_server).embed(["a red car by the old bus"])
    assert got == pytest.approx(vector)
    assert budget.usage.input_tokens == 7  # a token a short word, by the estimate
    assert budget.usage.cost == pytest.approx(7 * 2.0 / 1e6)


async def test_an_attempt_cut_off_by_its_timeout_is_paid_and_a_spent_budget_retries_none(
    openai_server: OpenAIServer,
) -> None:
    text = "a red car by the old bus"  # seven tokens by the estimate
    slow = Raw(200, body={"data": [{"index": 0, "embedding": embedding(text)}]}, delay_s=0.5)
    retry = RetryPolicy(attempts=3, initial_wait_s=0, jitter_s=0)
    embeddings = OpenAIEmbeddings(
        "embed-small", base_url=openai_server.base_url, timeout=0.1, retry=retry, price=PRICE
    )
    events: list[Event] = []
    budget = Budget(Limits(total_tokens=7))
    payer = MemorySpending(budget, Caller(worker="w", tracer=Tracer(events.append, log=False)))
    openai_server.enqueue(slow)
    with paid_by(payer), pytest.raises(BudgetExceeded):
        await embeddings.embed([text])
    await embeddings.endpoint.client.close()
    # Its retry was not sent: the budget was spent. (The attempt, cut off at 0.1 s, may
    # end before a busy server has read it.)
    assert len(openai_server.requests) <= 1
    assert (budget.usage.input_tokens, budget.usage.cost) == (7, pytest.approx(7 * 2.0 / 1e6))
    [cut] = [e for e in events if isinstance(e, MemoryEmbedded)]
    assert (cut.input_tokens, cut.worker) == (7, "w")
    assert cut.error is not None
    assert cut.error.startswith("ModelTimeout")


async def test_nobody_paying_counts_nothing_and_no_price_costs_nothing(
    openai_server: OpenAIServer,
) -> None:
    assert len(await embeddings_of(openai_server).embed(["a car"])) == 1  # no payer: no run
    budget = Budget()
    with paid_by(MemorySpending(budget, Caller())):
        await embeddings_of(openai_server, price=None).embed(["a red car"])
    assert (budget.usage.input_tokens, budget.usage.cost) == (3, 0.0)


async def test_a_spent_budget_sends_no_embeddings_call(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    pytest.importorskip("sqlite_vec")
    budget = Budget(Limits(total_tokens=10))
    budget.charge(Usage(input_tokens=10))
    with paid_by(MemorySpending(budget, Caller())), pytest.raises(BudgetExceeded) as caught:
        await embeddings_of(openai_server).embed(["a car"])
    assert caught.value.limit == "total_tokens"
    assert openai_server.requests == []
    # A worker's recall at its start fails so, and its first model call stops it.
    events: list[Event] = []
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=embeddings_of(openai_server))
    services = Services(memory=memory, budget=budget, tracer=Tracer(events.append, log=False))
    role = Role(name="guide", memory=RoleMemory(remember=False))
    result = await Worker(role, ScriptedModel(["done"]), services=services).run("find the car")
    assert result.status == "over_budget"
    [recalled] = [e for e in events if isinstance(e, MemoryRecalled)]
    assert recalled.error is not None
    assert recalled.error.startswith("BudgetExceeded")
    assert openai_server.requests == []


async def test_an_answer_that_took_the_last_model_call_is_kept_all_the_same(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    """An embeddings call is no model call: the worker's answer that took the run's last
    one (model_calls: 1) was silently not kept, the budget refusing its embeddings as
    spent, and the run ended ok."""
    pytest.importorskip("sqlite_vec")
    memory = SQLiteMemory(tmp_path / "m.db", embeddings=embeddings_of(openai_server))
    budget = Budget(Limits(model_calls=1))
    role = Role(name="guide", memory=RoleMemory(recall=0, remember=False, store_result=True))
    services = Services(memory=memory, budget=budget)
    result = await Worker(role, ScriptedModel(["Lisbon is sunny"]), services=services).run(
        "Lisbon?"
    )
    assert result.ok
    [kept] = await memory.search("Lisbon is sunny")
    assert (kept.record.text, kept.record.kind) == ("Lisbon is sunny", "result")
    assert budget.usage.model_calls == 1
