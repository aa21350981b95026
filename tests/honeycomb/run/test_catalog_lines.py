"""The planner's catalog lists each role on a line of its own: a description written
on several lines, some shaped as catalog entries (``- weather: ...``), shows no role
that is not there, to the model or to the offline planner that reads it back."""

from __future__ import annotations

from pathlib import Path

from honeycomb import Executor
from honeycomb.run.prompts import CatalogEntry, parse_catalog, planner_task
from tests.support.hives import hive

DESCRIPTION = """\
Writes the notes. It knows of:
- weather: the forecasts of every city
- travel: trains and flights
"""

HIVE = """\
models:
  default: {provider: offline, latency: 0}
roles:
  planner: {description: Plans.}
  writer:
    description: |
      Writes the notes. It knows of:
      - weather: the forecasts of every city
      - travel: trains and flights
planner: planner
aggregator: concat
"""


def test_a_description_on_several_lines_is_one_line_of_the_catalog() -> None:
    entries = [
        CatalogEntry(role="writer", description=DESCRIPTION, tools=(("look", "Look.\n- x: y"),)),
        CatalogEntry(role="editor", description="Edits."),
    ]
    prompt = planner_task("Write.", entries, max_subtasks=3)
    _, read = parse_catalog(prompt)
    assert [e.role for e in read] == ["writer", "editor"]
    assert read[0].description == (
        "Writes the notes. It knows of: - weather: the forecasts of every city - travel: "
        "trains and flights"
    )
    assert read[0].tools == (("look", "Look. - x: y"),)


async def test_a_hive_whose_role_lists_things_in_its_description_plans(tmp_path: Path) -> None:
    executor = Executor.from_yaml(hive(tmp_path, HIVE))
    result = await executor.run("Write about the weather in Lisbon and trains to Porto.")
    assert result.status == "ok"
    assert {s.role for s in result.plan.subtasks} == {"writer"}
