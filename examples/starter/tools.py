"""The starter hive's tools: replace them with your own.

A tool is a typed function with a docstring: the model sees its name, the docstring's
first paragraph and the arguments (their types and the ``Args:`` lines). Two kinds:

- :func:`city_facts` only reads, so many calls to it run at once, each under the
  role's ``tool_timeout``.
- :func:`save_note` changes something outside the run (``side_effects=True``): its
  calls run one at a time, in the order the model asked for them, and with a run store
  they are journaled, so a resumed run never repeats one.

An ``async def`` tool awaits what it waits for (``anyio.sleep``, an async HTTP client):
``time.sleep`` or ``requests`` there would hold up every worker. A plain ``def`` tool
runs in a thread, so it may block.

``HONEYCOMB_NOTES`` (default ``./notes``) is where :func:`save_note` writes.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from typing import Any

import anyio

from honeycomb import ToolContext, tool

# Invented facts, so that the hive runs with no network; a real tool would call an API.
FACTS: dict[str, dict[str, Any]] = {
    "Lisbon": {"country": "Portugal", "population_m": 0.55, "known_for": "trams and tiles"},
    "Oslo": {"country": "Norway", "population_m": 0.71, "known_for": "fjords and museums"},
    "Kyoto": {"country": "Japan", "population_m": 1.46, "known_for": "temples and gardens"},
    "Lima": {"country": "Peru", "population_m": 10.0, "known_for": "food and old walls"},
}


@tool
async def city_facts(city: str) -> dict[str, Any]:
    """Look up facts about a city: its country, population and what it is known for.

    Args:
        city: The city's name.

    Raises:
        ValueError: for a city it has no facts about, naming the ones it has.
    """
    found = next((name for name in FACTS if name.lower() == city.strip().lower()), None)
    if found is None:
        raise ValueError(f"no facts about {city!r}; known cities: {', '.join(FACTS)}")
    await anyio.sleep(0.05)  # stands for the network round trip a real lookup makes
    return {"city": found, **FACTS[found]}


@tool(side_effects=True)
async def save_note(title: str, body: str, ctx: ToolContext) -> str:
    """Save a note as a markdown file and return its path.

    Args:
        title: A short title.
        body: The note, in markdown.
    """
    folder = anyio.Path(os.environ.get("HONEYCOMB_NOTES", "notes"))
    await folder.mkdir(parents=True, exist_ok=True)
    # A file per call, named by when it ran as well as by its id, which repeats from
    # run to run (the offline model's for one task, a local model's call_1 ...).
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
    path = folder / f"{stamp}-{_slug(title, 'note')}-{_slug(ctx.call_id, 'call')}.md"
    await path.write_text(f"# {title.strip()}\n\n{body.strip()}\n", "utf-8")
    return str(await path.resolve())


def _slug(text: str, empty: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-") or empty
