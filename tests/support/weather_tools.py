"""A tool the real-model tests give a worker, importable by path
(``tests.support.weather_tools:get_weather``); it notes every call it gets."""

from __future__ import annotations

from runtime.tools import tool

CALLS: list[dict[str, object]] = []
"""The arguments of every call, in order (tests clear it)."""


@tool
def get_weather(city: str) -> str:
    """The weather in a city today.

    Args:
        city: The city's name.
    """
    CALLS.append({"city": city})
    return f"{city}: sunny, 21°C"
