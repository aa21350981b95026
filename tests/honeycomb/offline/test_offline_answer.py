"""The offline model's answers read as prose and state the facts the tools returned:
the demo's answer, and the rules behind it on results of other shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from honeycomb import Executor, OfflineModel
from honeycomb.cli.main import demo_hive_path
from honeycomb.hive import load_hive
from honeycomb.offline.answer import Seen, lead, seen, worker_answer
from honeycomb.offline.model import respond
from honeycomb.run.prompts import ResultEntry, aggregator_task
from runtime import (
    AssistantMessage,
    ModelRequest,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

PREFIX = "[offline simulation] "


async def test_the_demo_answer_states_the_facts_in_sentences(fast_demo: Path) -> None:
    executor = Executor.from_yaml(demo_hive_path(), model=OfflineModel(latency=0))
    weather = json.loads((demo_hive_path().parent / "data" / "weather.json").read_text())
    result = await executor.run(load_hive(demo_hive_path()).spec.example_task or "")
    _check_demo_answer(result.answer_text, weather, fast_demo)


def _check_demo_answer(answer: str, weather: dict[str, Any], outbox: Path) -> None:
    assert answer.startswith(PREFIX)
    assert "rules" in answer.split("\n", 1)[0]  # says how it was written
    # The best weather of the three cities' weekend: Madrid on Saturday, no rain, 30 °C.
    madrid = weather["cities"]["Madrid"]["saturday"]
    best = re.search(r"Best weather[^\n]*", answer)
    assert best is not None, answer
    for fact in ("Madrid", "Saturday", f"{madrid['high_c']} °C", f"{madrid['rain_chance']}%"):
        assert fact in best.group()
    # One line from the guide per city, under the guide entry's title.
    for city in ("Lisbon", "Porto", "Madrid"):
        title = (demo_hive_path().parent / "data" / "guide" / f"{city.lower()}.md").read_text()
        assert title.splitlines()[0].removeprefix("# ") in answer
    assert re.search(r"\b361\b", answer)
    (sent,) = outbox.glob("*.md")
    assert str(sent.resolve()) in answer
    assert re.search(r"[Ss]ent\b", answer)
    assert "{" not in answer
    assert "; high_c" not in answer
    assert len(answer) < 1500


def _seen(tool: str, arguments: dict[str, object], value: object, ok: bool = True) -> Seen:
    return Seen(tool=tool, arguments=arguments, ok=ok, value=value)


def test_the_best_record_is_lowest_where_high_is_bad() -> None:
    quotes = [
        _seen("get_quote", {"vendor": "acme"}, {"vendor": "acme", "price_eur": 120, "rating": 5}),
        _seen("get_quote", {"vendor": "bolt"}, {"vendor": "bolt", "price_eur": 95, "rating": 3}),
        _seen("get_quote", {"vendor": "coil"}, {"vendor": "coil", "price_eur": 95, "rating": 4}),
    ]
    text = worker_answer("Compare the quotes and pick the best.", (), quotes)
    best = lead(text).split(".")[0]
    assert "Coil" in best
    assert "95 EUR" in best
    assert "Acme" not in best
    assert all(f"- {v.capitalize()}: " in text for v in ("acme", "bolt", "coil"))


def test_without_a_comparison_every_record_is_in_the_lead() -> None:
    records = [
        _seen("get_weather", {"city": "Rome"}, {"city": "Rome", "high_c": 28}),
        _seen("get_weather", {"city": "Oslo"}, "no forecast for 'Oslo'", ok=False),
    ]
    text = lead(worker_answer("Get the weather in Rome and Oslo.", (), records))
    assert "Rome: high 28 °C" in text
    assert "1 of 2 tool calls did not succeed" in text
    assert "Oslo" in text
    assert "no forecast" in text


def test_the_aggregator_joins_each_lead_and_names_what_failed() -> None:
    results = [
        ResultEntry(id="a-1", role="a", ok=True, text=f"{PREFIX}Alpha is first.\n\n- detail"),
        ResultEntry(id="b-1", role="b", ok=False, text="ToolTimeout: lookup timed out"),
    ]
    task = aggregator_task("Find alpha and beta.", results)
    request = ModelRequest(
        messages=(SystemMessage(content="You merge."), UserMessage(content=task))
    )
    text = respond(request).content or ""
    assert text.count(PREFIX) == 1
    assert "Alpha is first." in text
    assert "- detail" not in text  # only the lead paragraph
    assert "b-1" in text
    assert "timed out" in text


def test_a_lead_said_twice_is_said_once_and_a_synthesis_stands_for_its_inputs() -> None:
    results = [
        ResultEntry(id="a-1", role="a", ok=True, text=f"{PREFIX}Same words."),
        ResultEntry(id="a-2", role="a", ok=True, text=f"{PREFIX}Same words."),
        ResultEntry(id="w-1", role="w", ok=True, text=f"{PREFIX}From a-1: Other. Fine."),
        ResultEntry(id="a-3", role="a", ok=True, text=f"{PREFIX}Other."),
    ]
    task = aggregator_task("Do it.", results)
    request = ModelRequest(
        messages=(SystemMessage(content="You merge."), UserMessage(content=task))
    )
    text = respond(request).content or ""
    assert text.count("Same words.") == 1
    assert text.count("Other.") == 1
    assert "From a-1: Other. Fine." in text


def test_a_send_that_failed_is_not_said_to_hold_what_it_would_have_sent() -> None:
    """The demo's courier, resumed after Ctrl-C stopped its send, said the summary
    "holds the results of s1, s2 and s3" after its send failed, and the error, cut
    at 160 characters, ended mid-word ("It was not run again. Chec.")."""
    unknown = (
        "Error: Outcome unknown: the run stopped while 'send_to_outbox' was running (call "
        "call_1), so it may or may not have taken effect. It was not run again. Check "
        "whether it took effect before calling it again."
    )
    call = ToolCall(id="call_1", name="send_to_outbox", arguments='{"subject": "Summary"}')
    request = ModelRequest(
        messages=(
            SystemMessage(content="You send."),
            UserMessage(content="Send the summary."),
            AssistantMessage(tool_calls=(call,)),
            ToolMessage(
                tool_call_id="call_1", name="send_to_outbox", content=unknown, status="error"
            ),
        )
    )
    inputs = [("s1 (meteorologist)", "Sunny."), ("s2 (guide)", "Trams.")]
    answer = worker_answer("Send the summary.", inputs, seen(request))
    assert "holds the results" not in answer
    assert "may or may not have taken effect" in answer
    assert answer.endswith("…"), answer  # cut short, after a whole word
    assert answer.removesuffix("…").split()[-1] in unknown.split()
