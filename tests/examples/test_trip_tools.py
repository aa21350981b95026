"""The trip demo's tools: weather, guide search, the safe calculator and the outbox."""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import anyio
import pytest

from runtime import Dispatcher, ToolCall, ToolContext, ToolRegistry
from tests.support.concurrency import crowded_threads

# --- weather ----------------------------------------------------------------------------


async def test_weather_for_a_known_city_any_case(trip: ModuleType) -> None:
    forecast = await trip.get_weather("  lisbon ", "sunday")
    assert forecast["city"] == "Lisbon"
    assert forecast["day"] == "sunday"
    assert {"conditions", "high_c", "low_c", "rain_chance_pct"} <= forecast.keys()
    assert forecast["low_c"] <= forecast["high_c"]


async def test_weather_defaults_to_saturday(trip: ModuleType) -> None:
    assert (await trip.get_weather("Rome"))["day"] == "saturday"


async def test_weather_covers_eight_cities_for_three_days(trip: ModuleType) -> None:
    forecasts = trip._forecasts()
    assert len(forecasts) >= 8
    assert all(set(days) == {"friday", "saturday", "sunday"} for days in forecasts.values())


async def test_unknown_city_names_the_known_ones(trip: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"no forecast for 'Atlantis'; known cities: .*Lisbon"):
        await trip.get_weather("Atlantis")


def test_weather_schema_offers_the_days_and_hides_nothing_required(trip: ModuleType) -> None:
    schema = trip.get_weather.schema.parameters
    assert schema["required"] == ["city"]
    assert schema["properties"]["day"]["enum"] == ["friday", "saturday", "sunday"]
    assert not trip.get_weather.side_effects


async def test_latency_comes_from_the_environment(
    trip: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    latency = 1.0  # past the default 0.3s: a call that ignored the setting would be quick
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", str(latency))
    dispatcher = Dispatcher(ToolRegistry([trip.get_weather]))
    calls = [
        ToolCall(id=f"c{i}", name="get_weather", arguments=f'{{"city": "{city}"}}')
        for i, city in enumerate(["Paris", "Rome", "Berlin"])
    ]
    started = time.perf_counter()
    observations = await dispatcher.dispatch(calls)
    elapsed = time.perf_counter() - started
    assert [o.status for o in observations] == ["ok", "ok", "ok"]
    assert latency * 0.9 <= elapsed  # each waited the latency it was told
    # Three calls run together: about one latency, a whole latency short of the serial
    # three.
    assert elapsed < latency * 2


async def test_bad_latency_setting_is_named(
    trip: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "fast")
    with pytest.raises(ValueError, match="HONEYCOMB_DEMO_TOOL_LATENCY"):
        await trip.get_weather("Paris")


# --- guide ------------------------------------------------------------------------------


async def test_guide_ranks_the_city_entry_first(trip: ModuleType) -> None:
    found = await trip.search_guide("museums Madrid")
    assert found[0]["title"].startswith("Madrid")
    assert "museum" in found[0]["snippet"].lower()
    assert len(found) <= 3
    assert [e["score"] for e in found] == sorted((e["score"] for e in found), reverse=True)


async def test_guide_respects_the_limit(trip: ModuleType) -> None:
    assert len(await trip.search_guide("museums park river rain", limit=2)) == 2


async def test_guide_has_about_ten_entries(trip: ModuleType) -> None:
    assert 8 <= len(trip._guide()) <= 12


async def test_guide_finds_nothing_for_unknown_words(trip: ModuleType) -> None:
    assert await trip.search_guide("zeppelin xylophone") == []


async def test_guide_refuses_an_empty_query(trip: ModuleType) -> None:
    with pytest.raises(ValueError, match="no words to search for"):
        await trip.search_guide(" ? ")


def test_guide_limit_is_bounded_in_the_schema(trip: ModuleType) -> None:
    limit = trip.search_guide.schema.parameters["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 10, 3)


# --- calculator -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("3 * 95 + 2 * 40", 365),
        ("(12 + 3) * 4", 60),
        ("-5 + +3", -2),
        ("7 / 2", 3.5),
        ("6 / 2", 3),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("2 ** 10", 1024),
        ("2 ^ 3", 8),
        ("0.1 + 0.2", 0.3),
        ("12 × 3 =", 36),
    ],
)
def test_calculator_does_arithmetic(trip: ModuleType, expression: str, expected: float) -> None:
    assert trip.calculate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "only arithmetic is allowed, not a function call"),
        ("os", "not the name 'os'"),
        ("x + 1", "not the name 'x'"),
        ("(1).__class__", "not the attribute '__class__'"),
        ("'a' * 3", "not the value 'a'"),
        ("True + 1", "not the value True"),
        ("[1, 2]", "not a List expression"),
        ("2 ** 1000", "exponent 1000 is too large"),
        ("9 ** 9 ** 9", "exponent 387420489 is too large"),
        ("(10 ** 100) ** 50", "too large"),
        ("1e308 * 10", "too large"),
        ("(-8) ** 0.5", "not a real number"),
        ("1 / 0", "division by zero"),
        ("1 +", "cannot read"),
        ("", "empty"),
        ("1+" * 150 + "1", "at most 200"),
    ],
)
def test_calculator_refuses_anything_else(trip: ModuleType, expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        trip.calculate(expression)


async def test_calculator_is_sync_and_runs_through_the_dispatcher(trip: ModuleType) -> None:
    assert not trip.calculate.is_async
    dispatcher = Dispatcher(ToolRegistry([trip.calculate]))
    good, bad = await dispatcher.dispatch(
        [
            ToolCall(id="a", name="calculate", arguments='{"expression": "3 * 95"}'),
            ToolCall(id="b", name="calculate", arguments='{"expression": "__import__(\'os\')"}'),
        ]
    )
    assert (good.status, good.content) == ("ok", "285")
    assert bad.status == "error"
    assert "function call" in bad.content


# --- outbox -----------------------------------------------------------------------------


async def test_outbox_writes_a_markdown_file(
    trip: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outbox = tmp_path / "out"
    monkeypatch.setenv("HONEYCOMB_OUTBOX", str(outbox))
    ctx = ToolContext(call_id="call_7", worker="courier-1", run_id="run-1")
    written = Path(await trip.send_to_outbox("Weekend trip: Lisbon!", "## Weather\nsunny", ctx))
    assert written.parent == await anyio.Path(outbox).resolve()
    assert written.name.endswith("-weekend-trip-lisbon-call-7.md")
    text = await anyio.Path(written).read_text(encoding="utf-8")
    assert text.startswith("# Weekend trip: Lisbon!\n\n## Weather\nsunny\n")
    assert "courier-1" in text
    assert "call_7" in text


async def test_outbox_default_is_relative_to_the_working_directory(
    trip: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HONEYCOMB_OUTBOX", raising=False)
    monkeypatch.chdir(tmp_path)
    written = await trip.send_to_outbox("Hi", "body", ToolContext(call_id="c/1"))
    assert Path(written).parent == await anyio.Path(tmp_path / "outbox").resolve()
    assert Path(written).name.endswith("-hi-c-1.md")


async def test_outbox_is_side_effecting_and_hides_the_context(trip: ModuleType) -> None:
    assert trip.send_to_outbox.side_effects
    assert set(trip.send_to_outbox.schema.parameters["properties"]) == {"subject", "body"}


async def test_outbox_refuses_an_empty_subject(
    trip: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HONEYCOMB_OUTBOX", str(tmp_path))
    with pytest.raises(ValueError, match="subject is empty"):
        await trip.send_to_outbox("  ", "body", ToolContext(call_id="c1"))
    assert [p async for p in anyio.Path(tmp_path).iterdir()] == []


async def test_data_paths_do_not_depend_on_the_working_directory(
    trip: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    trip._forecasts.cache_clear()
    trip._guide.cache_clear()
    assert (await trip.get_weather("Paris"))["city"] == "Paris"
    assert await trip.search_guide("Paris")


def test_the_calculator_is_safe_in_many_threads_at_once(trip: ModuleType) -> None:
    # Sync tools run in threads; CPython 3.11's AST building is not safe in two at once.
    expression = " + ".join(f"({n} * 3 - 1)" for n in range(14))
    assert crowded_threads(lambda: trip.calculate(expression)) == []
