"""Where approvals waiting in the run store meet agents as tools and processes sharing
the store (an SQLite file, a PostgreSQL server): a nested worker's call waits in the
store, one Executor decides it (as another process would), another continues the run,
and the call runs once, with what was decided."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from honeycomb import Executor, Role
from honeycomb.testing import FunctionModel
from tests.support.ray_tools import scripted
from tests.support.stores import Where


def script(*turns: list[tuple[str, dict[str, Any]]]) -> str:
    return json.dumps({"turns": [list(t) for t in turns]})


def executor(store: Where) -> Executor:
    lead = Role(name="lead", tools=("agent:clerk",))
    clerk = Role(name="clerk", tools=("tests.support.ray_tools:guarded_note",))
    return Executor([lead, clerk], FunctionModel(scripted), aggregator="concat", store=store)


async def test_a_nested_call_waiting_in_the_store_is_decided_and_continued_elsewhere(
    store: Where, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    inner = script([("guarded_note", {"path": str(notes), "text": "draft"})])
    calls = script([("clerk", {"instruction": inner})])
    waiting = await executor(store).run("t", subtasks=[("lead", calls)], run_id="n1")
    assert waiting.status == "waiting"
    (pending,) = waiting.pending
    assert (pending.tool, pending.worker) == ("guarded_note", "s1/c0_0")
    deciding = executor(store)  # another process's view of the store
    (listed,) = await deciding.pending("n1")
    assert listed.call_id == pending.call_id
    await deciding.decide(
        "n1", pending.call_id, approve=True, worker=pending.worker,
        arguments={"path": str(notes), "text": "final"},
    )  # fmt: skip
    done = await executor(store).resume("n1")
    assert done.status == "ok"
    assert done.subtasks["s1"].text.endswith("noted final")  # told it was edited
    assert notes.read_text() == "final\n"  # once, as edited
    again = await executor(store).resume("n1")  # ended: its stored result, nothing run
    assert again.answer_text == done.answer_text
    assert notes.read_text() == "final\n"
