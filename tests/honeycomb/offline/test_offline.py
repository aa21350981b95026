"""OfflineModel: the rule-based planner, worker, aggregator and output-schema answers."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import time
from types import ModuleType
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from honeycomb import Executor, Guards, Role
from honeycomb.offline import OfflineModel
from honeycomb.offline import rules as rules
from honeycomb.offline import schema as schema_rules
from honeycomb.offline.judge import verdict
from honeycomb.run.plan import Plan, plan_problems
from honeycomb.run.prompts import (
    AGGREGATOR_INSTRUCTIONS,
    PLANNER_INSTRUCTIONS,
    CatalogEntry,
    ResultEntry,
    aggregator_task,
    planner_task,
)
from runtime import (
    AssistantMessage,
    Dispatcher,
    Message,
    Model,
    ModelRequest,
    OutputSchema,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolRegistry,
    ToolSchema,
    UserMessage,
)
from tests.support.concurrency import crowded_threads
from workers import AgentLoop, Final
from workers.guards import JUDGE_INSTRUCTIONS
from workers.loop import WRAP_UP
from workers.worker import format_task

PREFIX = "[offline simulation] "
TASK = (
    "Compare the weather in Lisbon, Porto and Madrid this Saturday, find two things to do "
    "in each city, work out the cost of 3 nights at 95 EUR plus 2 train tickets at 40 EUR, "
    "and send me a short summary in my outbox."
)


@pytest.fixture
def model() -> OfflineModel:
    return OfflineModel(latency=0)


def catalog(trip: ModuleType) -> list[CatalogEntry]:
    def first_line(text: str) -> str:
        return text.split("\n", 1)[0]

    return [
        CatalogEntry(
            role="weather",
            description="Looks up weather forecasts for cities.",
            tools=(("get_weather", first_line(trip.get_weather.description)),),
        ),
        CatalogEntry(
            role="guide",
            description="Finds sights, food and things to do in the travel guide.",
            tools=(("search_guide", first_line(trip.search_guide.description)),),
        ),
        CatalogEntry(
            role="budget",
            description="Does the arithmetic for trip costs.",
            tools=(("calculate", first_line(trip.calculate.description)),),
        ),
        CatalogEntry(
            role="courier",
            description="Writes up the findings and delivers them.",
            tools=(("send_to_outbox", first_line(trip.send_to_outbox.description)),),
        ),
    ]


def request(
    task: str,
    *rest: Message,
    tools: tuple[ToolSchema, ...] = (),
    output: OutputSchema | None = None,
    system: str = "You are a worker.",
) -> ModelRequest:
    messages = (SystemMessage(content=system), UserMessage(content=task), *rest)
    return ModelRequest(messages=messages, tools=tools, output=output)


def plan_request(
    task: str, entries: list[CatalogEntry], *rest: Message, limit: int = 6
) -> ModelRequest:
    return request(
        planner_task(task, entries, max_subtasks=limit),
        *rest,
        output=OutputSchema.for_model(Plan),
        system=PLANNER_INSTRUCTIONS,
    )


def observe(call: ToolCall, content: str, status: str = "ok") -> ToolMessage:
    return ToolMessage(tool_call_id=call.id, name=call.name, content=content, status=status)  # type: ignore[arg-type]


def arguments(call: ToolCall) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(call.arguments)
    return loaded


# --- planner ----------------------------------------------------------------------------


async def test_plan_uses_the_right_roles_and_the_sender_waits_for_the_rest(
    trip: ModuleType, model: OfflineModel
) -> None:
    entries = catalog(trip)
    response = await model.complete(plan_request(TASK, entries))
    plan = Plan.model_validate_json(response.message.content or "")
    assert plan_problems(plan, [e.role for e in entries], max_subtasks=6) == []
    by_role = {s.role: s for s in plan.subtasks}
    assert list(by_role) == ["weather", "guide", "budget", "courier"]
    assert set(by_role["courier"].depends_on) == {
        by_role[r].id for r in ("weather", "guide", "budget")
    }
    assert all(not by_role[r].depends_on for r in ("weather", "guide", "budget"))
    assert "Lisbon, Porto and Madrid" in by_role["weather"].instruction
    # "in each city" gets the cities of the task, so the subtask stands alone.
    assert "(Lisbon, Porto, Madrid)" in by_role["guide"].instruction
    assert "3 nights at 95 EUR" in by_role["budget"].instruction
    assert response.finish_reason == "stop"


async def test_plan_gives_work_to_a_role_named_planner_when_another_plans() -> None:
    # The catalog lists the roles the run gives work to: a trip "planner" under a lead
    # was left out, and a run with no other role to plan for failed its three attempts.
    roles = [
        Role(name="lead", description="Leads."),
        Role(name="planner", description="Plans trips to cities."),
        Role(name="aggregator", description="Merges."),
    ]
    executor = Executor(roles, OfflineModel(latency=0), planner="lead")
    result = await executor.run("Plan a trip to Lisbon.")
    assert [(s.role, s.instruction) for s in result.plan.subtasks] == [
        ("planner", "Plan a trip to Lisbon.")
    ]


async def test_plan_attaches_unmatched_clauses_to_the_best_role(
    trip: ModuleType, model: OfflineModel
) -> None:
    task = "Check the weather forecast in Paris and Rome. Also hum a little tune."
    response = await model.complete(plan_request(task, catalog(trip)))
    plan = Plan.model_validate_json(response.message.content or "")
    assert [s.role for s in plan.subtasks] == ["weather", "weather"]
    assert len(set(plan.ids)) == 2
    assert plan.subtasks[1].instruction == "Also hum a little tune."


async def test_plan_respects_the_subtask_limit(trip: ModuleType, model: OfflineModel) -> None:
    entries = catalog(trip)
    response = await model.complete(plan_request(TASK, entries, limit=2))
    plan = Plan.model_validate_json(response.message.content or "")
    assert plan_problems(plan, [e.role for e in entries], max_subtasks=2) == []
    text = " ".join(s.instruction for s in plan.subtasks)
    assert "weather" in text
    assert "outbox" in text


async def test_a_task_that_says_at_most_is_not_taken_for_the_subtask_limit(
    trip: ModuleType, model: OfflineModel
) -> None:
    entries = catalog(trip)
    plain = await model.complete(plan_request(TASK, entries))
    said = await model.complete(plan_request(f"{TASK} Keep it to at most 1 page.", entries))
    planned = Plan.model_validate_json(plain.message.content or "")
    told = Plan.model_validate_json(said.message.content or "")
    assert len(planned.subtasks) == 4
    # every role's subtask still (the page's clause goes to one of them), not one
    assert len(told.subtasks) >= 4
    assert {s.role for s in told.subtasks} == {s.role for s in planned.subtasks}


async def test_a_task_that_says_planning_round_is_planned_as_a_first_plan(
    trip: ModuleType, model: OfflineModel
) -> None:
    entries = catalog(trip)
    task = f"{TASK}\nPlanning round 2 of at most 3. Keep the notes of it."
    response = await model.complete(plan_request(task, entries))
    plan = Plan.model_validate_json(response.message.content or "")
    assert plan_problems(plan, [e.role for e in entries], max_subtasks=6) == []


async def test_rejected_plan_is_fixed_the_simple_way(trip: ModuleType, model: OfflineModel) -> None:
    entries = catalog(trip)
    bad = {
        "subtasks": [
            {"id": "w", "role": "weather", "instruction": "Weather in Paris."},
            {"id": "c", "role": "chef", "instruction": "Cook."},
            {"id": "g", "role": "guide", "instruction": "Sights.", "depends_on": ["c", "w"]},
            {"id": "b", "role": "budget", "instruction": "Costs.", "depends_on": ["zzz"]},
            {"id": "s", "role": "courier", "instruction": "Send.", "depends_on": ["w", "g", "b"]},
        ]
    }
    retry = UserMessage(
        content="The plan is invalid; fix these problems and answer again:\n"
        "- subtask 'c': unknown role 'chef'\n- the plan has 5 subtasks; at most 3 allowed"
    )
    response = await model.complete(
        plan_request(TASK, entries, AssistantMessage(content=json.dumps(bad)), retry, limit=3)
    )
    plan = Plan.model_validate_json(response.message.content or "")
    assert plan_problems(plan, [e.role for e in entries], max_subtasks=3) == []
    assert [(s.id, s.depends_on) for s in plan.subtasks] == [("w", ()), ("g", ("w",)), ("b", ())]


async def test_plan_retry_in_the_first_message_still_gives_a_valid_plan(
    trip: ModuleType, model: OfflineModel
) -> None:
    entries = catalog(trip)
    prompt = planner_task(TASK, entries, max_subtasks=3)
    prompt += "\n\nThe plan is invalid; fix these problems and answer again:\n- whatever"
    req = request(prompt, output=OutputSchema.for_model(Plan), system=PLANNER_INSTRUCTIONS)
    plan = Plan.model_validate_json((await model.complete(req)).message.content or "")
    assert plan_problems(plan, [e.role for e in entries], max_subtasks=3) == []


# --- worker -----------------------------------------------------------------------------


async def test_weather_for_three_cities_is_three_calls_in_one_message(
    trip: ModuleType, model: OfflineModel
) -> None:
    tools = (trip.get_weather.schema, trip.search_guide.schema, trip.calculate.schema)
    response = await model.complete(
        request("What's the weather in Paris, Rome and Berlin on Sunday?", tools=tools)
    )
    calls = response.message.tool_calls
    assert [arguments(c) for c in calls] == [
        {"city": city, "day": "sunday"} for city in ("Paris", "Rome", "Berlin")
    ]
    assert {c.name for c in calls} == {"get_weather"}
    assert len({c.id for c in calls}) == 3
    assert response.finish_reason == "tool_calls"
    assert response.model == "offline"
    assert response.usage.input_tokens > 0


async def test_after_observations_the_answer_summarises_each_result(
    trip: ModuleType, model: OfflineModel
) -> None:
    tools = (trip.get_weather.schema,)
    task = "What's the weather in Paris, Rome and Berlin?"
    first = (await model.complete(request(task, tools=tools))).message
    observations = [
        observe(c, json.dumps(await trip.get_weather(arguments(c)["city"])))
        for c in first.tool_calls
    ]
    response = await model.complete(request(task, first, *observations, tools=tools))
    text = response.message.content or ""
    assert not response.message.tool_calls
    assert text.startswith(PREFIX)
    for city, conditions in (("Paris", "partly cloudy"), ("Rome", "sunny"), ("Berlin", "showers")):
        assert re.search(rf"{city}\b[^\n.]*{conditions}", text), text
    assert "{" not in text  # sentences, not JSON


async def test_failed_and_timed_out_calls_are_summarised(
    trip: ModuleType, model: OfflineModel
) -> None:
    tools = (trip.get_weather.schema,)
    task = "Weather in Paris, Atlantis and Rome, please."
    first = (await model.complete(request(task, tools=tools))).message
    paris, atlantis, rome = first.tool_calls
    observations = [
        observe(paris, '{"city": "Paris", "conditions": "overcast"}'),
        observe(atlantis, "Error: tool 'get_weather' raised ValueError: no forecast", "error"),
        observe(rome, "Error: tool 'get_weather' timed out after 5s and was cancelled.", "timeout"),
    ]
    text = (await model.complete(request(task, first, *observations, tools=tools))).message.content
    assert text is not None
    assert "Paris: overcast" in text
    assert re.search(r"city=Atlantis failed: no forecast", text)
    assert re.search(r"city=Rome failed: .*timed out", text)
    assert "2 of 3 tool calls did not succeed" in text


async def test_arithmetic_in_words_becomes_an_expression(
    trip: ModuleType, model: OfflineModel
) -> None:
    tools = (trip.get_weather.schema, trip.calculate.schema)
    task = "Work out the cost of three nights at 95 EUR plus 2 x 40 EUR for trains."
    (call,) = (await model.complete(request(task, tools=tools))).message.tool_calls
    assert (call.name, arguments(call)) == ("calculate", {"expression": "3 * 95 + 2 * 40"})


async def test_a_query_is_searched_once_per_place(trip: ModuleType, model: OfflineModel) -> None:
    task = "Find museums in each city (Madrid, Paris)."
    calls = (await model.complete(request(task, tools=(trip.search_guide.schema,)))).message
    assert [arguments(c) for c in calls.tool_calls] == [
        {"query": "museums Madrid"},
        {"query": "museums Paris"},
    ]


async def test_each_tool_gets_the_clause_about_it(trip: ModuleType, model: OfflineModel) -> None:
    tools = (trip.get_weather.schema, trip.search_guide.schema)
    task = "Get the weather in Paris over the weekend and find museums there."
    calls = (await model.complete(request(task, tools=tools))).message.tool_calls
    assert [(c.name, arguments(c)) for c in calls] == [
        ("get_weather", {"city": "Paris", "day": "saturday"}),
        ("get_weather", {"city": "Paris", "day": "sunday"}),
        ("search_guide", {"query": "museums Paris"}),
    ]


async def test_one_stray_shared_word_does_not_pull_a_tool_in(
    trip: ModuleType, model: OfflineModel
) -> None:
    notes = ToolSchema(
        name="search_notes",
        description="Search my notes, for example about a rainy day.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    )
    task = "What is the weather forecast for Amsterdam?"
    calls = (await model.complete(request(task, tools=(notes, trip.get_weather.schema)))).message
    assert [c.name for c in calls.tool_calls] == ["get_weather"]


async def test_nothing_relevant_is_answered_directly(trip: ModuleType, model: OfflineModel) -> None:
    response = await model.complete(request("Hum a little tune.", tools=(trip.calculate.schema,)))
    assert not response.message.tool_calls
    assert response.message.content == (
        f"{PREFIX}I have no tool results to go on. The task was: Hum a little tune."
    )


async def test_sender_uses_the_dependency_results_then_answers(
    trip: ModuleType, model: OfflineModel
) -> None:
    tools = (trip.send_to_outbox.schema,)
    task = format_task(
        "Send me a short summary in my outbox.",
        {
            "weather-1 (weather)": f"{PREFIX}Lisbon: sunny, 25°C.",
            "budget-1 (budget)": f"{PREFIX}The trip costs 365 EUR.",
        },
    )
    first = (await model.complete(request(task, tools=tools))).message
    (call,) = first.tool_calls
    sent = arguments(call)
    assert call.name == "send_to_outbox"
    assert "## weather-1 (weather)\nLisbon: sunny, 25°C." in sent["body"]
    assert "The trip costs 365 EUR." in sent["body"]
    assert PREFIX not in sent["body"]
    assert sent["subject"]
    done = observe(call, "/tmp/outbox/summary.md")
    final = (await model.complete(request(task, first, done, tools=tools))).message
    assert not final.tool_calls
    assert "/tmp/outbox/summary.md" in (final.content or "")


async def test_a_follow_up_searches_what_is_still_open_not_what_its_input_found(
    model: OfflineModel,
) -> None:
    """A follow-up's instruction quotes what the result it follows up found; searching
    that quote finds the same sentence again, so the worker searches its topic."""
    search = ToolSchema(
        name="search_corpus",
        description="Search the research corpus of articles.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for."}},
            "required": ["query"],
        },
    )
    found = "How long pesticide harm lasts after spraying stops needs more research."
    task = format_task(
        "Pesticides and forage: follow up on s3, which says how long pesticide harm lasts "
        "after spraying stops needs more research.",
        {"s3 (researcher)": f"{PREFIX}Pesticides and forage — {found}"},
    )
    first = (await model.complete(request(task, tools=(search,)))).message
    assert [arguments(c) for c in first.tool_calls] == [{"query": "Pesticides and forage"}]


async def test_sender_gathers_first_then_sends_what_it_found(
    trip: ModuleType, model: OfflineModel
) -> None:
    tools = (trip.send_to_outbox.schema, trip.get_weather.schema)
    task = "Get the weather in Porto and send it to my outbox."
    first = (await model.complete(request(task, tools=tools))).message
    (weather,) = first.tool_calls
    assert weather.name == "get_weather"
    facts = observe(weather, '{"city": "Porto", "conditions": "light rain"}')
    second = (await model.complete(request(task, first, facts, tools=tools))).message
    (send,) = second.tool_calls
    assert send.name == "send_to_outbox"
    assert "conditions: light rain" in arguments(send)["body"]
    assert send.id != weather.id
    done = observe(send, "outbox/x.md")
    third = await model.complete(request(task, first, facts, second, done, tools=tools))
    assert not third.message.tool_calls
    assert "light rain" in (third.message.content or "")


async def test_wrap_up_answers_from_the_observations(model: OfflineModel) -> None:
    call = ToolCall(id="c1", name="lookup", arguments='{"key": "a"}')
    response = await model.complete(
        request(
            "Look up a.",
            AssistantMessage(tool_calls=(call,)),
            observe(call, "value-of-a"),
            UserMessage(content=WRAP_UP.format(turns=1)),
        )
    )
    text = response.message.content or ""
    assert text.startswith(PREFIX)
    assert re.search(r"key=a: value-of-a", text), text


async def test_a_plain_call_restates_the_task(model: OfflineModel) -> None:
    response = await model.complete(request("Tell me a joke."))
    assert (
        response.message.content
        == f"{PREFIX}I have no tool results to go on. The task was: Tell me a joke."
    )


async def test_a_worker_loop_runs_to_a_final_answer(trip: ModuleType) -> None:
    loop = AgentLoop(
        OfflineModel(latency=0), Dispatcher(ToolRegistry([trip.get_weather])), worker="w"
    )
    result = await loop.run("Compare the weather in Lisbon, Porto and Madrid this Saturday.")
    assert isinstance(result, Final)
    assert result.state.turn == 2
    assert result.state.usage.tool_calls == 3
    assert all(f"\n- {c}, Saturday: " in result.text for c in ("Lisbon", "Porto", "Madrid"))
    assert "Best weather" in result.text


# --- aggregator and output schemas ------------------------------------------------------


async def test_aggregator_merges_results_and_names_failures(model: OfflineModel) -> None:
    results = [
        ResultEntry(id="weather-1", role="weather", ok=True, text=f"{PREFIX}Lisbon is sunny."),
        ResultEntry(id="budget-1", role="budget", ok=True, text="365 EUR in total."),
        ResultEntry(
            id="guide-1", role="guide", ok=False, text="ToolTimeout: search_guide timed out"
        ),
    ]
    req = request(aggregator_task(TASK, results), system=AGGREGATOR_INSTRUCTIONS)
    text = (await model.complete(req)).message.content or ""
    assert text.startswith(PREFIX)
    assert "Compare the weather" in text
    assert text.count(PREFIX) == 1
    assert "\n\nLisbon is sunny.\n\n365 EUR in total." in text
    assert "guide-1 (guide): ToolTimeout: search_guide timed out" in text


class Report(BaseModel):
    title: str
    summary: str
    total: float
    count: int
    points: list[str]
    done: bool
    note: str | None = None


async def test_output_schema_answers_with_fitting_json(model: OfflineModel) -> None:
    call = ToolCall(id="c1", name="calculate", arguments='{"expression": "3 * 95"}')
    req = request(
        "Work out 3 nights at 95 EUR.",
        AssistantMessage(tool_calls=(call,)),
        observe(call, "285"),
        output=OutputSchema.for_model(Report),
    )
    report = Report.model_validate_json((await model.complete(req)).message.content or "")
    assert "285" in report.title
    assert report.summary.startswith(PREFIX)
    assert report.total == 3 * 95
    assert report.points == [report.summary]
    assert report.done is False


def test_fill_schema_resolves_refs_and_enums() -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"$ref": "#/$defs/Kind"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "score": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["kind", "tags", "score"],
        "$defs": {"Kind": {"enum": ["a", "b"], "type": "string"}},
    }
    assert schema_rules.fill_schema(schema, "no bullets, 7 apples") == {
        "kind": "a",
        "tags": ["no bullets, 7 apples"],
        "score": 7,
    }


# --- the model as a whole ---------------------------------------------------------------


async def test_answers_are_deterministic(trip: ModuleType) -> None:
    entries = catalog(trip)
    plan_a = await OfflineModel(latency=0).complete(plan_request(TASK, entries))
    plan_b = await OfflineModel(latency=0, seed=9).complete(plan_request(TASK, entries))
    assert plan_a == plan_b
    tools = (trip.get_weather.schema,)
    req = request("Weather in Paris and Rome.", tools=tools)
    assert await OfflineModel(latency=0).complete(req) == await OfflineModel(latency=0).complete(
        req
    )


def test_jitter_is_fixed_by_the_seed_and_the_request() -> None:
    one, two = request("a"), request("b")
    model = OfflineModel(latency=0.1, jitter=0.5, seed=1)
    assert model.delay(one) == OfflineModel(latency=0.1, jitter=0.5, seed=1).delay(one)
    assert 0.1 <= model.delay(one) <= 0.6
    delays = {model.delay(one), model.delay(two), OfflineModel(jitter=0.5, seed=2).delay(one)}
    assert len(delays) == 3
    assert OfflineModel(latency=0.1).delay(one) == 0.1


async def test_latency_is_honoured_and_calls_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call waits at least the latency; five at once wait together, all five
    waiting at the same moment (counted as they wait, not judged by the clock, which a
    loaded machine stretches)."""
    latency = 0.1
    model = OfflineModel(latency=latency)
    waiting = peak = 0
    sleep = asyncio.sleep

    async def counted_sleep(seconds: float) -> None:
        nonlocal waiting, peak
        waiting += 1
        peak = max(peak, waiting)
        try:
            await sleep(seconds)
        finally:
            waiting -= 1

    monkeypatch.setattr(asyncio, "sleep", counted_sleep)
    took: list[float] = []

    async def one(index: int) -> None:
        started = time.perf_counter()
        await model.complete(request(f"task {index}"))
        took.append(time.perf_counter() - started)

    async with asyncio.TaskGroup() as group:
        for index in range(5):
            group.create_task(one(index))
    assert len(took) == 5
    assert min(took) >= latency * 0.9
    assert peak == 5


def test_is_a_model_and_validates_its_settings() -> None:
    assert isinstance(OfflineModel(), Model)
    assert "offline" in repr(OfflineModel())
    with pytest.raises(ValueError, match="latency and jitter"):
        OfflineModel(latency=-1)
    with pytest.raises(ValueError, match="latency and jitter"):
        OfflineModel(jitter=-0.1)


# --- text rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "clauses"),
    [
        (TASK, 4),
        ("Check the weather in Paris and Rome", 1),
        ("Check the weather in Paris and find museums", 2),
        ("Find museums; then send them to me", 2),
        ("Look up Rome, then Paris", 2),
    ],
)
def test_split_clauses(text: str, clauses: int) -> None:
    assert len(rules.split_clauses(text)) == clauses


def test_places_skip_verbs_days_and_currency() -> None:
    text = "Compare New York and Lisbon on Saturday for 40 EUR. Send it to me."
    assert rules.places(text) == ["New York", "Lisbon"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what is (12 + 3) * 4?", "(12 + 3) * 4"),
        ("three times 7 minus 2", "3 * 7 - 2"),
        ("100 divided by 8", "100 / 8"),
        ("2^10", "2 ** 10"),
        ("1,200 plus 300", "1200 + 300"),
        ("no numbers here", None),
        ("just 42", None),
    ],
)
def test_expression(text: str, expected: str | None) -> None:
    assert rules.expression(text) == expected


# --- follow-ups: one call per item the results name ---------------------------------


def _schema(name: str, description: str, *required: str) -> ToolSchema:
    props = {p: {"type": "string"} for p in required}
    return ToolSchema(
        name=name,
        description=description,
        parameters={"type": "object", "properties": props, "required": list(required)},
    )


async def test_a_listing_is_followed_by_one_call_per_file(model: OfflineModel) -> None:
    tools = (
        _schema("list_files", "List the files of the folder to review."),
        _schema("review_file", "Review one file of the folder.", "path"),
    )
    task = "Review every file of the folder."
    first = (await model.complete(request(task, tools=tools))).message
    assert [c.name for c in first.tool_calls] == ["list_files"]  # no made-up path
    listing = observe(first.tool_calls[0], '["a.py", "lib/b.py"]')
    second = (await model.complete(request(task, first, listing, tools=tools))).message
    assert [(c.name, arguments(c)) for c in second.tool_calls] == [
        ("review_file", {"path": "a.py"}),
        ("review_file", {"path": "lib/b.py"}),
    ]


async def test_a_side_effect_per_item_takes_each_items_fields(model: OfflineModel) -> None:
    tools = (
        _schema("read_queue", "Read the queue of requests."),
        _schema("open_ticket", "Open a ticket for one request.", "request_id", "priority"),
    )
    task = "Read the queue and open a ticket for each."
    first = (await model.complete(request(task, tools=tools))).message
    queue = observe(
        first.tool_calls[0],
        json.dumps([{"request_id": "R-1", "priority": "high"}, {"request_id": "R-2"}]),
    )
    second = (await model.complete(request(task, first, queue, tools=tools))).message
    calls = [arguments(c) for c in second.tool_calls]
    assert [c["request_id"] for c in calls] == ["R-1", "R-2"]
    assert calls[0]["priority"] == "high"
    assert len({c.id for c in second.tool_calls}) == 2


async def test_a_clause_with_no_roles_words_stays_with_the_role_before(
    model: OfflineModel,
) -> None:
    entries = [
        CatalogEntry(role="researcher", description="Researches a question in the corpus."),
        CatalogEntry(role="writer", description="Writes a synthesis of the findings."),
    ]
    task = "Research how bees dance, how they keep warm, then write a synthesis."
    plan = Plan.model_validate_json(
        (await model.complete(plan_request(task, entries))).message.content or ""
    )
    assert [s.role for s in plan.subtasks] == ["researcher", "researcher", "writer"]
    assert plan.subtasks[2].depends_on == ("researcher-1", "researcher-2")


# --- a guard's judge ----------------------------------------------------------------------


def judged(*roles: Role) -> Executor:
    return Executor(
        [
            Role(name="writer", guards=Guards(input=("reviewer",), output=("reviewer",))),
            Role(name="reviewer", description="Judges whether a text is safe to show."),
            *roles,
        ],
        OfflineModel(latency=0),
        aggregator="concat",
    )


async def test_as_a_judge_it_passes_what_holds_no_secret() -> None:
    result = await judged().run("Write a note.", subtasks=[("writer", "Write a short note.")])
    assert result.status == "ok", [str(f.error) for f in result.failures]
    assert result.usage.model_calls == 3  # the answer, and a verdict on its input and on it


@pytest.mark.parametrize(
    ("instruction", "what"),
    [
        ("Post this: password: hunter22", "a password"),
        ("Use the key sk-proj-abcdefghijklmnop1234 to call it", "an API key"),
        ("Store -----BEGIN RSA PRIVATE KEY----- MIIE", "a private key"),
    ],
)
async def test_as_a_judge_it_refuses_what_looks_like_a_secret(instruction: str, what: str) -> None:
    plan = [("writer", instruction), ("writer", "Write a short note.")]
    result = await judged().run("Write a note.", subtasks=plan)
    assert result.status == "partial"
    (failure,) = result.failures
    assert failure.error is not None
    assert failure.error.type == "GuardrailTripped"
    assert f"input guard 'reviewer' tripped: {PREFIX}It holds what looks like {what}" in (
        failure.error.message
    )


def test_as_a_judge_it_refuses_an_empty_text() -> None:
    shown = ModelRequest(
        messages=(SystemMessage(content=JUDGE_INSTRUCTIONS.format(what="an answer")),
                  UserMessage(content="  ")),
    )  # fmt: skip
    assert verdict(shown) == f"{PREFIX}There is nothing to judge: what I was shown is empty."


def test_reading_arithmetic_is_safe_in_many_threads_at_once() -> None:
    # A tool's ast.parse in a thread may run beside it: CPython 3.11's AST building
    # is not safe in two threads at once, so the offline model does not build one.
    text = "3 nights at 95 EUR plus 2 x 40 and (7 + 8) * 2 minus 1 " * 3
    assert rules.expression(text) is not None
    assert crowded_threads(lambda: rules.expression(text)) == []


ARITHMETIC = ["1", "23", "0", "00", "007", "4.5", "-3", "-0.5", "+", "-", "*", "/", "**", "(", ")"]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(ARITHMETIC), min_size=1, max_size=8))
def test_an_expression_is_well_formed_exactly_when_python_reads_it_as_arithmetic(
    tokens: list[str],
) -> None:
    text = " ".join(tokens).replace("( ", "(").replace(" )", ")")
    opens_a_call = any(
        t == "(" and i and tokens[i - 1] not in {"+", "-", "*", "/", "**", "("}
        for i, t in enumerate(tokens)
    )
    assume("()" not in text and not opens_a_call)  # Python's, not arithmetic
    try:
        ast.parse(text, mode="eval")
    except SyntaxError:
        python_reads_it = False
    else:
        python_reads_it = True
    assert rules._well_formed(tokens) == python_reads_it


def test_fill_schema_keeps_within_the_bounds_a_schema_gives() -> None:
    # A role's schema of bounded fields failed its every offline answer: a score of 0
    # under ge=1, a city longer than max_length, no tag where one was the least.
    class Verdict(BaseModel):
        city: str = Field(min_length=2, max_length=12)
        score: int = Field(ge=1, le=10)
        share: float = Field(gt=0, lt=1)
        tags: list[str] = Field(min_length=2, max_length=3)
        counts: list[int] = Field(max_length=1)
        code: str = Field(min_length=4)

    text = "Lisbon is lovely: 0 faults, 40 trams\n- tiles\n- food\n- fado\n- port"
    filled = schema_rules.fill_schema(Verdict.model_json_schema(), text)
    assert Verdict.model_validate(filled)
    assert (filled["score"], filled["share"]) == (1, 0.5)
    assert filled["tags"] == ["tiles", "food", "fado"]
    empty = schema_rules.fill_schema(Verdict.model_json_schema(), "")
    assert Verdict.model_validate(empty)
