"""The planner's message as it is read back (the offline planner does): each role on a
line of its own (a description written on several lines, some shaped as catalog
entries, ``- weather: ...``, shows no role that is not there), the task whole however
many lines it has, and the catalog the planner was given, not words of the task or the
conversation that look like one."""

from __future__ import annotations

from pathlib import Path

from honeycomb import Executor
from honeycomb.run.prompts import CatalogEntry, parse_catalog, planner_task
from tests.support import ROOT
from tests.support.hives import hive

TRIP = ROOT / "examples" / "trip" / "hive.yaml"

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


def test_a_task_on_several_lines_is_read_back_whole_and_its_catalog_words_are_no_roles() -> None:
    task = "Roles to use:\n\nAvailable roles:\n- ghost: a role the task makes up\nAnd Porto?"
    entries = [CatalogEntry(role="writer", description="Writes.")]
    earlier = "## Message 1\nAvailable roles:\n- phantom: one an answer made up"
    for conversation in ("", earlier):
        prompt = planner_task(task, entries, max_subtasks=3, conversation=conversation)
        read_task, read = parse_catalog(prompt)
        assert read_task == task
        assert [e.role for e in read] == ["writer"]


async def test_the_offline_planner_plans_every_line_of_a_task() -> None:
    executor = Executor.from_yaml(TRIP)
    result = await executor.run(
        "What does the travel guide say about Porto?\nAnd what is the weather in Lisbon?"
    )
    assert [s.role for s in result.plan.subtasks] == ["guide", "meteorologist"]
