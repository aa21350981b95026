"""Every example hive runs end to end on the offline model, and its answer states what
its tools found. Each is also an ``honeycomb init`` template (tests/honeycomb/cli/test_init.py)."""

from __future__ import annotations

import importlib.util
import itertools
import re
import sqlite3
from pathlib import Path

import pytest

from honeycomb import Executor, OfflineModel, RunResult
from honeycomb.cli.init import examples_folder, templates
from honeycomb.hive import load_hive
from honeycomb.run.events import WorkerStarted
from honeycomb.store import RunStore
from runtime import Event, ToolCallFinished
from tests.support import ROOT
from tests.support.concurrency import crowded_threads

EXAMPLES = ROOT / "examples"


pytestmark = pytest.mark.usefixtures("example_outputs")


async def _run(name: str, store: RunStore | None = None, file: str = "hive.yaml") -> RunResult:
    hive = EXAMPLES / name / file
    executor = Executor.from_yaml(hive, model=OfflineModel(latency=0), store=store)
    return await executor.run(load_hive(hive).spec.example_task or "")


def test_every_example_is_a_template_with_a_readme() -> None:
    assert examples_folder() == EXAMPLES
    names = {p.parent.name for p in EXAMPLES.glob("*/hive.yaml")}
    assert names >= {"starter", "research", "review", "triage", "trip"}
    assert set(templates()) == names
    for name in names:
        readme = (EXAMPLES / name / "README.md").read_text()
        assert "What it shows" in readme or name == "starter", name
        assert "honeycomb run hive.yaml" in readme or "honeycomb demo" in readme


def test_first_steps_lists_every_template() -> None:
    page = (EXAMPLES.parent / "docs" / "first-steps.md").read_text()
    listed = re.findall(r"^\| `([\w-]+)` \|", page, flags=re.M)
    assert sorted(listed) == sorted(templates())


async def test_research_fans_out_then_synthesises() -> None:
    result = await _run("research")
    assert result.status == "ok"
    roles = [s.subtask.role for s in result.subtasks.values()]
    assert roles.count("researcher") == 3
    (writer,) = (s.subtask for s in result.subtasks.values() if s.subtask.role == "writer")
    assert len(writer.depends_on) == 3
    answer = result.answer_text
    for title in ("Scent and pheromones", "Keeping the brood warm", "Pesticides and forage"):
        assert title in answer
    assert "34 and 36 °C" in answer


async def test_research_in_rounds_follows_up_what_needs_more() -> None:
    result = await _run("research", file="rounds.yaml")
    assert result.status == "ok"
    assert [(r.round, r.added) for r in result.rounds] == [
        (1, ("s1", "s2", "s3")),
        (2, ("s4",)),
        (3, ()),
    ]
    assert result.rounds_ended == "done"
    follow_up = result.plan["s4"]
    assert follow_up.depends_on == ("s3",)
    assert "needs more research" in follow_up.instruction


async def test_review_reviews_each_file_and_merges_the_findings(tmp_path: Path) -> None:
    result = await _run("review")
    assert result.status == "ok"
    answer = result.answer_text
    assert re.search(r"billing\.py: 3 issues", answer), answer
    for finding in ("bare except", "outside a with block", "TODO", "mutable default", "print"):
        assert finding in answer
    assert re.search(r"users\.py: 0 issues", answer)
    (report,) = (tmp_path / "reports").glob("*.md")
    assert "bare except" in report.read_text()
    assert str(report.resolve()) in answer


async def test_triage_opens_one_ticket_per_message_serially_and_journaled(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path / "runs.db")
    result = await _run("triage", store=store)
    assert result.status == "ok"
    tickets = {p.stem: p.read_text() for p in (tmp_path / "tickets").glob("*.md")}
    assert set(tickets) == {"MSG-101", "MSG-102", "MSG-103", "MSG-104"}
    assert tickets["MSG-101"].startswith("# [high] Charged twice")
    assert tickets["MSG-103"].startswith("# [low] Dark mode?")
    calls = [s for s in store.spans(result.run_id) if s.kind == "tool_call"]
    spans = sorted((s for s in calls if s.name == "open_ticket"), key=lambda s: s.start)
    assert len(spans) == 4
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))  # serial
    classified = [s for s in calls if s.name == "classify_message"]
    assert len(classified) == 4
    with sqlite3.connect(tmp_path / "runs.db") as db:
        journaled = db.execute(
            "SELECT COUNT(*) FROM journal WHERE run_id = ? AND tool = 'open_ticket'",
            (result.run_id,),
        ).fetchone()[0]
    assert journaled == 4
    for ticket in ("MSG-101", "MSG-104"):
        assert ticket in result.answer_text


async def test_the_starter_looks_up_in_parallel_and_saves_a_note(tmp_path: Path) -> None:
    result = await _run("starter")
    assert result.status == "ok"
    for city, country in (("Lisbon", "Portugal"), ("Oslo", "Norway"), ("Kyoto", "Japan")):
        assert re.search(rf"{city}: {country}", result.answer_text)
    (note,) = (tmp_path / "notes").glob("*.md")
    assert "Kyoto" in note.read_text()
    assert str(note.resolve()) in result.answer_text


async def test_triage_with_approvals_opens_only_the_tickets_a_person_approves(
    tmp_path: Path,
) -> None:
    """The triage hive with ``approvals: {tools: [open_ticket]}`` on its desk (what its
    README shows): every ticket waits for a person, the run ends waiting, the decisions
    are recorded, and the resumed run opens the approved tickets only, each once."""
    text = (EXAMPLES / "triage" / "hive.yaml").read_text()
    folder = tmp_path / "triage"
    folder.mkdir()
    for name in ("tools.py", "inbox.json"):
        (folder / name).write_bytes((EXAMPLES / "triage" / name).read_bytes())
    asking = text.replace(
        "    max_turns: 5\n", "    max_turns: 5\n    approvals: {tools: [open_ticket]}\n"
    )
    assert asking != text
    (folder / "hive.yaml").write_text(asking)
    store = RunStore(tmp_path / "runs.db")
    executor = Executor.from_yaml(folder / "hive.yaml", model=OfflineModel(latency=0), store=store)
    waiting = await executor.run(load_hive(folder / "hive.yaml").spec.example_task or "")
    assert waiting.status == "waiting"
    assert not (tmp_path / "tickets").exists()  # nothing opened before a decision
    pending = {p.arguments["message_id"]: p for p in waiting.pending}
    assert set(pending) == {"MSG-101", "MSG-102", "MSG-103", "MSG-104"}
    for message, call in pending.items():
        approve = message != "MSG-103"
        await executor.decide(
            waiting.run_id, call.call_id, approve=approve, worker=call.worker,
            reason=None if approve else "feature requests go to the roadmap, not a ticket",
        )  # fmt: skip
    result = await executor.resume(waiting.run_id)
    assert result.status == "ok"
    opened = sorted(p.stem for p in (tmp_path / "tickets").glob("*.md"))
    assert opened == ["MSG-101", "MSG-102", "MSG-104"]


async def test_lead_calls_a_role_and_a_hive_as_its_tools_at_once() -> None:
    events: list[Event] = []
    hive = EXAMPLES / "lead" / "hive.yaml"
    executor = Executor.from_yaml(hive, model=OfflineModel(latency=0), on_event=[events.append])
    result = await executor.run(load_hive(hive).spec.example_task or "")
    assert result.status == "ok"
    assert [s.role for s in result.plan.subtasks] == ["lead"]
    (lead,) = result.plan.subtasks
    calls = [e for e in events if isinstance(e, ToolCallFinished) and e.worker == lead.id]
    assert sorted(c.tool for c in calls) == ["facts", "researcher"]
    assert all(c.turn == 1 and c.status == "ok" for c in calls)  # one turn: together
    nested = [e for e in events if isinstance(e, WorkerStarted) and e.parent == lead.id]
    assert [e.role for e in nested] == ["researcher"]
    answer = result.answer_text
    assert "Researcher for" in answer  # the nested worker's answer, through the lead's
    assert "Facts for" in answer  # the sub-run's aggregated answer


def test_the_review_tool_is_safe_in_many_threads_at_once() -> None:
    # Sync tools run in threads; CPython 3.11's AST building is not safe in two at once.
    spec = importlib.util.spec_from_file_location("review_tools", ROOT / "examples/review/tools.py")
    assert spec is not None
    assert spec.loader is not None
    tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tools)
    assert tools.review_file("billing.py")["issues"] == 3
    files = tools.list_files()
    assert crowded_threads(lambda: [tools.review_file(f) for f in files], times=400) == []
