"""A session's conversation fits the smallest context among the Executor's models and
the compaction budgets of the roles shown it: the default budget (2,000 tokens) is
lowered to half a local model's context (or such a role's budget), and a budget given
that fills it is refused when the Executor is made. On the real model, a conversation
past a 1,024-token context failed every turn after the first; a role shown it whose
compaction budget was 1,000 tokens failed every turn from the third."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from honeycomb import (
    Compaction,
    ConfigError,
    Executor,
    OfflineModel,
    Policy,
    Role,
    SessionPolicy,
)
from honeycomb.hive import load_hive
from honeycomb.testing import FunctionModel
from runtime import WrapperModel
from runtime.models.llama import LlamaModel
from tests.support.hives import errors_of, hive
from tests.support.llama import start_server

ROLES = [Role(name="researcher", description="Answers briefly."), Role(name="aggregator")]


class Local(WrapperModel):
    """A model that says how many tokens one call of it holds, as a local one does."""

    def __init__(self, context_tokens: int) -> None:
        super().__init__(FunctionModel(lambda request: "ok"))
        self.context_tokens = context_tokens


def budget_of(executor: Executor) -> int:
    return executor.policy.sessions.context.budget_tokens


@pytest.mark.parametrize(
    ("models", "budget"),
    [
        ({"a": FunctionModel(lambda request: "ok")}, 2000),  # no context said: as it was
        ({"a": Local(8192)}, 2000),
        ({"a": Local(1024)}, 512),
        ({"a": Local(8192), "b": WrapperModel(Local(1024))}, 512),  # the smallest, wrapped
        ({"a": Local(300)}, 256),  # the least a compaction budget may be
    ],
)
def test_the_default_conversation_budget_is_half_the_smallest_context(
    models: dict[str, WrapperModel | FunctionModel], budget: int
) -> None:
    assert budget_of(Executor(ROLES, models)) == budget


def test_a_budget_given_is_kept_when_it_fits_and_refused_when_it_fills_the_context() -> None:
    def policy(tokens: int) -> Policy:
        return Policy(sessions=SessionPolicy(context=Compaction(budget_tokens=tokens)))

    assert budget_of(Executor(ROLES, Local(1024), policy=policy(900))) == 900
    with pytest.raises(ConfigError) as refused:
        Executor(ROLES, Local(1024), policy=policy(2000))
    assert refused.value.field == "policy.sessions.context.budget_tokens"
    assert "2000 tokens of conversation leave no room" in str(refused.value)
    assert "which holds 1024" in str(refused.value)


def _compacting(name: str, tokens: int, session: str | None = None) -> Role:
    return Role.model_validate(
        {"name": name, "session": session, "compaction": {"budget_tokens": tokens}}
    )


@pytest.mark.parametrize(
    ("roles", "budget"),
    [
        ([_compacting("researcher", 1000, "full")], 500),  # shown it: half its budget
        ([_compacting("researcher", 1200, "summary")], 600),
        ([_compacting("researcher", 1000)], 2000),  # shown none of it, by default
        ([_compacting("researcher", 1000, "none")], 2000),
        ([_compacting("aggregator", 1200)], 600),  # shown it, by default
        ([_compacting("planner", 1400), Role(name="aggregator")], 700),
        ([_compacting("aggregator", 1200, "none")], 2000),
    ],
)
def test_the_default_conversation_budget_is_half_that_of_a_compacting_role_shown_it(
    roles: list[Role], budget: int
) -> None:
    assert budget_of(Executor(roles, FunctionModel(lambda r: "ok"))) == budget


def test_a_budget_given_that_fills_a_compacting_role_shown_it_is_refused() -> None:
    policy = Policy(sessions=SessionPolicy(context=Compaction(budget_tokens=1000)))
    with pytest.raises(ConfigError) as refused:
        Executor([_compacting("writer", 1000, "full")], Local(8192), policy=policy)
    assert refused.value.field == "policy.sessions.context.budget_tokens"
    assert "role 'writer', shown the conversation" in str(refused.value)
    assert "roles.writer.compaction.budget_tokens" in str(refused.value)


async def test_a_compacting_role_shown_the_conversation_answers_every_turn() -> None:
    roles = [
        Role(name="planner"),
        Role(
            name="researcher",
            description="Finds facts about cities and weather.",
            session="full",
            compaction=Compaction(budget_tokens=1000, keep_turns=1),
        ),
        Role(name="aggregator"),
    ]
    session = Executor(roles, OfflineModel(latency=0)).session("trip")
    first = " ".join(["Compare the weather in Lisbon and Porto."] * 5)
    for message in (first, "And Madrid?", "Which is the warmest?", "And Rome?"):
        result = await session.run(message)
        # Shown a conversation of up to 2,000 tokens, its worker of the third
        # message could not hold it (ContextBudgetTooSmall): now it is 500 at most.
        assert result.status == "ok", result.subtasks


@pytest.mark.real_model
@pytest.mark.xdist_group("real_model")
def test_a_local_model_says_the_context_of_one_call() -> None:
    model = LlamaModel(context=1536)  # its server starts with its first call: none here
    assert model.context_tokens == 1536
    assert budget_of(Executor(ROLES, model)) == 768


@pytest.mark.real_model
@pytest.mark.xdist_group("real_model")
async def test_on_the_real_model_a_long_conversation_goes_on_within_its_context() -> None:
    server = start_server(parallel=1, context=512)  # small: a conversation past it is short
    try:
        model = LlamaModel(server=server, settings={"temperature": 0})
        roles = [
            Role(name="researcher", description="Answers briefly.", max_output_tokens=16),
            Role(name="aggregator", max_output_tokens=16),
        ]
        ex = Executor(
            roles, model, planner=lambda task: [("researcher", task.splitlines()[0][:200])]
        )
        notes = " ".join(
            f"Note {i}: the tram line {i} climbs the hill past bakery {i}." for i in range(18)
        )  # the first turn's prompts fit, with room for a cut-off answer's note
        session = ex.session("trams")
        async with ex:
            first = await session.run(f"Tell me about the weather in Lisbon. {notes}")
            second = await session.run("And Madrid?")
        assert first.status == "ok"
        # Its aggregator's prompt was 556 tokens of a 512-token context (1,038 of 1,024
        # with a context twice this size and its conversation twice as long).
        assert second.status == "ok", second.subtasks
    finally:
        server.stop()


COUNTED_HIVE = """\
models:
  offline: {provider: offline, latency: 0}
roles:
  planner: {description: Plans.}
  researcher: {description: Finds facts about cities and their weather.}
policy:
  sessions: {context: {budget_tokens: 1000, token_counter: "COUNTER:count"}}
"""


@pytest.mark.parametrize("counter", ["session_chars_counter", "session_chars_countr"])
async def test_a_sessions_token_counter_beside_the_hive_is_imported_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter: str
) -> None:
    # The sessions' token_counter, a module beside the hive, did not import: honeycomb
    # validate said nothing of it, and every message failed with 'cannot import
    # ...: no module named ...'. A misspelt one is an error at its line, as a role's is.
    folder = tmp_path / "hive"
    folder.mkdir()
    counts = "COUNTED = []\n\n\ndef count(text):\n    COUNTED.append(text)\n    return len(text)\n"
    (folder / "session_chars_counter.py").write_text(counts)
    path = hive(folder, COUNTED_HIVE.replace("COUNTER", counter))
    monkeypatch.chdir(tmp_path)  # not the hive's folder
    monkeypatch.delitem(sys.modules, "session_chars_counter", raising=False)
    if counter != "session_chars_counter":
        [error] = errors_of(path)
        assert "policy.sessions.context.token_counter: cannot import" in error
        return
    session = Executor.from_hive(load_hive(path)).session("s")
    await session.run("Find the weather in Rome.")
    await session.run("And in Oslo?")
    assert sys.modules["session_chars_counter"].COUNTED  # it counted the conversation
