"""What one part of a run hands on to the next fits the model it is handed to: a
dependent subtask's inputs, the aggregator's results and a lead's round each get a fair
share of what the receiving model's context leaves; a short one stays whole, a long one
is cut to its share with a note of what was left out and where the whole is, and a
``handed_on.cut`` log entry says so. Results grew with the run, and the prompt past
the context failed a run of good results at its end: a compacting lead's round with
ContextBudgetTooSmall, another call with its endpoint's refusal."""

from __future__ import annotations

import json
import re
from pathlib import Path

from structlog.testing import capture_logs

from honeycomb import Compaction, Executor, Role
from honeycomb.models import TextToolModel
from honeycomb.planning import RolePlanner
from honeycomb.run.prompts import ResultEntry, aggregator_task
from honeycomb.testing import FunctionModel
from runtime import ModelRequest, UserMessage, WrapperModel
from runtime.models.openai.chat import OpenAIModel
from tests.support.openai_server import OpenAIServer
from workers.context import estimate_tokens
from workers.worker import format_task

LONG = "Bees dance to say where the flowers are. " * 400  # ~4,000 tokens
SHORT = "Wasps sting."
NOTE = re.compile(
    r"\[cut here to fit the context of the model it is handed to: ([\d,]+) of ([\d,]+) "
    r"characters left out; the whole text is subtask (\w+)'s result"
)
PLAN = [
    {"id": "s1", "role": "researcher", "instruction": "long notes on bees"},
    {"id": "s2", "role": "researcher", "instruction": "short notes on wasps"},
    {"id": "s3", "role": "researcher", "instruction": "long notes on ants"},
]
WRITE_UP = {
    "id": "s4",
    "role": "writer",
    "instruction": "write it up",
    "depends_on": ["s1", "s2", "s3"],
}


class Local(WrapperModel):
    """A model that says how many tokens one call of it holds, as a local one does."""

    def __init__(self, model: FunctionModel, context_tokens: int) -> None:
        super().__init__(model)
        self.context_tokens = context_tokens


def answers(request: ModelRequest) -> str:
    """A subtask's answer: long when its instruction says so, else short."""
    instruction = _task(request).split("\n", 1)[0]
    return LONG if "long" in instruction else SHORT if "short" in instruction else "done"


def _task(request: ModelRequest) -> str:
    return next(m.content for m in request.messages if isinstance(m, UserMessage))


def cut_of(text: str) -> list[tuple[int, int, str]]:
    return [(int(a.replace(",", "")), int(b.replace(",", "")), s) for a, b, s in NOTE.findall(text)]


def _sent(model: FunctionModel, instruction: str) -> ModelRequest:
    [request] = [r for r in model.requests if _task(r).startswith(instruction)]
    return request


async def test_a_dependent_subtasks_inputs_are_fitted_to_its_models_context() -> None:
    model = FunctionModel(answers)
    executor = Executor(
        [Role(name="researcher"), Role(name="writer", model="small", max_output_tokens=500)],
        {"default": model, "small": Local(model, 2048)},
        planner=[*PLAN, WRITE_UP],
        aggregator="concat",
    )
    with capture_logs() as logged:
        result = await executor.run("Study insects.")

    assert result.status == "ok"
    request = _sent(model, "write it up")
    assert estimate_tokens(request.messages, request.tools) <= 2048 - 500  # room for its answer
    task = _task(request)
    assert f"### s2 (researcher)\n{SHORT}" in task  # the short one whole
    cuts = cut_of(task)
    assert [s for _, _, s in cuts] == ["s1", "s3"]  # each long one says it was cut
    assert all(total == len(LONG) and 0 < left < total for left, total, _ in cuts)
    assert abs(cuts[0][0] - cuts[1][0]) < 10  # a fair share: as much of each, to a word
    assert LONG[:200] in task  # each keeps its start
    entries = [e for e in logged if e["event"] == "handed_on.cut"]
    assert [(e["to"], e["subtask"], e["log_level"]) for e in entries] == [
        ("s4", "s1", "warning"),
        ("s4", "s3", "warning"),
    ]
    assert result.subtasks["s1"].text == LONG  # the whole is kept where the note says


async def test_an_endpoint_model_that_says_its_context_is_handed_inputs_fitted_to_it() -> None:
    """An endpoint's model that says the context its server gives it (``context_tokens``,
    a hive model's ``context:``) gets its inputs fitted to it as a local model does:
    here through the openai client, over HTTP. One that says none is sent them whole."""
    model = FunctionModel(answers)
    roles = [Role(name="researcher"), Role(name="writer", model="small", max_output_tokens=500)]
    for context, cut in [(2048, ["s1", "s3"]), (None, [])]:
        with OpenAIServer() as server:
            small = OpenAIModel(
                "small", base_url=server.base_url, api_key="sk-test", context_tokens=context
            )
            executor = Executor(
                roles,
                {"default": model, "small": small},
                planner=[*PLAN, WRITE_UP],
                aggregator="concat",
            )
            assert (await executor.run("Study insects.")).status == "ok"
        (sent,) = server.requests
        task = next(m["content"] for m in sent.body["messages"] if m["role"] == "user")
        assert task.startswith("write it up")
        assert f"### s2 (researcher)\n{SHORT}" in task  # the short one whole
        assert [s for _, _, s in cut_of(task)] == cut
        assert (LONG in task) is (context is None)


async def test_the_aggregators_results_are_fitted_to_its_compaction_budget(
    tmp_path: Path,
) -> None:
    model = FunctionModel(answers)
    aggregator = Role(name="aggregator", compaction=Compaction(budget_tokens=1500))
    executor = Executor(
        [Role(name="researcher"), aggregator],
        model,
        planner=PLAN,
        store=tmp_path / "runs.db",
    )
    with capture_logs() as logged:
        result = await executor.run("Study insects.")

    assert result.status == "ok"  # not failed with ContextBudgetTooSmall at its end
    request = model.requests[-1]
    assert _task(request).startswith("Task: Study insects.")
    assert estimate_tokens(request.messages, request.tools) <= 1500  # no tools: all its room
    task = _task(request)
    assert f"### s2 (researcher)\n{SHORT}" in task
    cuts = cut_of(task)
    assert [s for _, _, s in cuts] == ["s1", "s3"]
    assert abs(cuts[0][0] - cuts[1][0]) < 10  # a fair share: as much of each, to a word
    assert "(RunResult.subtasks) and in the run store]" in task  # a stored run keeps it
    assert [(e["to"], e["subtask"]) for e in logged if e["event"] == "handed_on.cut"] == [
        ("aggregator", "s1"),
        ("aggregator", "s3"),
    ]


async def test_a_leads_round_is_fitted_to_its_compaction_budget() -> None:
    def answer(request: ModelRequest) -> str:
        if request.output is None or request.output.name != "Plan":
            return answers(request)
        found = re.search(r"Planning round (\d+)", _task(request))
        if found is None:
            return json.dumps({"subtasks": PLAN})
        asked.append(request)
        return json.dumps({"subtasks": []})  # done

    asked: list[ModelRequest] = []
    model = FunctionModel(answer)
    lead = Role(name="lead", compaction=Compaction(budget_tokens=2000))
    executor = Executor(
        [lead, Role(name="researcher")],
        model,
        planner=RolePlanner("lead", rounds=2),
        aggregator="concat",
    )
    with capture_logs() as logged:
        result = await executor.run("Study insects.")

    assert result.status == "ok"
    assert [r.error for r in result.rounds] == [None, None]  # not ContextBudgetTooSmall
    [request] = asked
    assert estimate_tokens(request.messages, request.tools) <= 2000
    task = _task(request)
    assert f"### s2 (researcher)\nAsked: short notes on wasps\n{SHORT}" in task
    assert [s for _, _, s in cut_of(task)] == ["s1", "s3"]
    assert "Planning round 2 of at most 2" in task  # what follows the results is whole
    assert [(e["to"], e["subtask"]) for e in logged if e["event"] == "handed_on.cut"] == [
        ("lead", "s1"),
        ("lead", "s3"),
    ]


async def test_what_fits_is_handed_on_as_it_was() -> None:
    def answer(request: ModelRequest) -> str:
        if request.output is None or request.output.name != "Plan":
            return answers(request)
        if "Planning round" not in _task(request):
            return json.dumps({"subtasks": [*PLAN, WRITE_UP]})
        rounds.append(_task(request))
        return json.dumps({"subtasks": []})

    rounds: list[str] = []
    model = FunctionModel(answer)
    executor = Executor(
        [
            Role(name="lead", compaction=Compaction(budget_tokens=100_000)),
            Role(name="researcher"),
            Role(name="writer", model="big"),
            Role(name="aggregator", compaction=Compaction(budget_tokens=100_000)),
        ],
        {"default": model, "big": Local(model, 100_000)},
        planner=RolePlanner("lead", rounds=2),
    )
    with capture_logs() as logged:
        result = await executor.run("Study insects.")

    assert result.status == "ok"
    inputs = {"s1 (researcher)": LONG, "s2 (researcher)": SHORT, "s3 (researcher)": LONG}
    assert _task(_sent(model, "write it up")) == format_task("write it up", inputs)
    entries = [
        ResultEntry(id=s.subtask.id, role=s.subtask.role, ok=True, text=s.text)
        for s in result.subtasks.values()
    ]
    assert _task(model.requests[-1]) == aggregator_task("Study insects.", entries)
    [round_two] = rounds
    assert f"### s1 (researcher)\nAsked: long notes on bees\n{LONG.strip()}\n\n" in round_two
    assert f"### s3 (researcher)\nAsked: long notes on ants\n{LONG.strip()}\n\n" in round_two
    assert "cut here" not in round_two
    assert not [e for e in logged if e["event"] == "handed_on.cut"]


def look(query: str) -> str:
    """Look a query up in the field notes: every note on bees, wasps and ants, their
    nests, flowers, seasons, swarms, dances, stings and queens, with where and when
    each was seen and by whom, and how sure the one who saw it was of what it saw."""
    return query


async def test_a_role_with_tools_keeps_room_for_its_answer_as_its_protocol_writes_them() -> None:
    model = FunctionModel(answers)
    writer = Role(
        name="writer", model="text", tools=["look"], compaction=Compaction(budget_tokens=2000)
    )
    executor = Executor(
        [Role(name="researcher"), writer],
        {"default": model, "text": TextToolModel(model)},
        tools=[look],
        planner=[*PLAN, WRITE_UP],
        aggregator="concat",
    )
    result = await executor.run("Study insects.")

    assert result.status == "ok"
    request = _sent(model, "write it up")  # as its endpoint is sent it: the tools in its prompt
    assert "look" in request.messages[0].content
    # its answer's calls come back in its next request: half its budget is theirs
    assert estimate_tokens(request.messages, request.tools) <= 2000 - 1000
    assert [s for _, _, s in cut_of(_task(request))] == ["s1", "s3"]


def counts_no_bees(text: str) -> int:
    """A role's token counter that fails on some texts (a tokenizer's bug, say)."""
    if "bees dance" in text.lower():
        raise ValueError("cannot count this")
    return len(text) // 4 + 1


async def test_a_token_counter_that_fails_on_the_inputs_fails_their_subtask_alone() -> None:
    # The counter failed as the dependent subtask's inputs were fitted to its role: the
    # whole run raised ConfigError, no partial result, as if the hive could not run,
    # where the same failure in the worker's own count fails its subtask alone.
    counted = Compaction(budget_tokens=400, token_counter=counts_no_bees)
    executor = Executor(
        [Role(name="researcher"), Role(name="writer", compaction=counted)],
        FunctionModel(answers),
        planner=[*PLAN, WRITE_UP],
        aggregator="concat",
    )
    result = await executor.run("Study insects.")
    assert result.status == "partial"
    statuses = {name: sub.status for name, sub in result.subtasks.items()}
    assert statuses == {"s1": "ok", "s2": "ok", "s3": "ok", "s4": "failed"}
    error = result.subtasks["s4"].error
    assert error is not None
    assert error.type == "ConfigError"
    assert "the token counter" in error.message
    assert "raised ValueError: cannot count this" in error.message


async def test_a_token_counter_that_fails_on_a_leads_round_ends_the_rounds_with_what_ran() -> None:
    # The lead's counter failed as the results were fitted to its round: the run raised
    # ConfigError with no partial result, every result of the first round lost.
    def answer(request: ModelRequest) -> str:
        if request.output is None or request.output.name != "Plan":
            return answers(request)
        if re.search(r"Planning round (\d+)", _task(request)) is None:
            return json.dumps({"subtasks": PLAN})
        return json.dumps({"subtasks": []})

    counted = Compaction(budget_tokens=2000, token_counter=counts_no_bees)
    executor = Executor(
        [Role(name="lead", compaction=counted), Role(name="researcher")],
        FunctionModel(answer),
        planner=RolePlanner("lead", rounds=2),
        aggregator="concat",
    )
    result = await executor.run("Study insects.")
    assert result.status == "ok"
    assert result.rounds_ended == "lead_failed"
    assert {name: sub.status for name, sub in result.subtasks.items()} == dict.fromkeys(
        ["s1", "s2", "s3"], "ok"
    )
    error = result.rounds[-1].error
    assert error is not None
    assert error.startswith("ConfigError: compaction.token_counter: the token counter")
