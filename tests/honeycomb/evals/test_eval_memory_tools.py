"""An eval of a hive that calls, as a tool, a hive with a memory: each run's sub-runs
have a memory of the run's own too (no case recalls what another's sub-run kept, and
the called hive's file is neither read nor written), so a recorded eval replays."""

from __future__ import annotations

import json
from pathlib import Path

from honeycomb import Executor, ModelRequest
from honeycomb.evals import Case, evaluate
from honeycomb.evals.memory import eval_memory
from honeycomb.hive import load_hive
from honeycomb.models import Cassette, Model, cassette
from honeycomb.testing import FunctionModel, call
from runtime import ToolMessage

OUTER = """
models: {m: offline}
roles:
  planner: {description: Plans.}
  lead: {description: Leads., tools: ["hive:guides.yaml"]}
planner: planner
"""

GUIDES = """
models: {m: offline}
memory: {path: guides.db}
roles:
  planner: {description: Plans.}
  guide: {description: Finds things., memory: {recall: 2, store_result: true}}
planner: planner
"""


def answer(request: ModelRequest) -> str | object:
    """Plans one subtask (the lead's, the guide's), calls the guides, and answers
    with what the guide recalled."""
    system, task = request.messages[0].content or "", request.messages[1].content or ""
    if "You are the planner" in system:
        role = "guide" if "Finds things" in system + task else "lead"
        return json.dumps({"subtasks": [{"id": "s1", "role": role, "instruction": "Lisbon"}]})
    if any(t.name == "guides" for t in request.tools):
        last = request.messages[-1]
        return (
            f"lead: {last.content}"
            if isinstance(last, ToolMessage)
            else call("guides", {"instruction": "Lisbon"})
        )
    recalled = [m.content or "" for m in request.messages[2:]]
    return f"guide on Lisbon: {'recalled' if recalled else 'nothing recalled'} ({task[-6:]})"


async def test_a_called_hives_memory_is_each_runs_own_and_its_eval_replays(
    tmp_path: Path,
) -> None:
    (tmp_path / "hive.yaml").write_text(OUTER)
    (tmp_path / "guides.yaml").write_text(GUIDES)
    hive = load_hive(tmp_path / "hive.yaml")
    cases = [Case(id="a", task="trip a"), Case(id="b", task="trip b")]
    tape = tmp_path / "eval.jsonl"

    async def one(models: dict[str, Model]) -> list[tuple[str, str, int]]:
        # As honeycomb eval makes it: the hive has no memory, the hive it calls has one.
        executor = Executor.from_hive(hive, models=models, memory=eval_memory(hive))
        report = await evaluate(executor, cases, concurrency=1, keep=False)
        return [(c.id, a.status, a.tokens) for c in report.cases for a in c.attempts]

    def models() -> dict[str, Model]:
        return {"m": FunctionModel(answer), "guides/m": FunctionModel(answer)}

    recorded = await one(cassette(models(), record=tape))
    assert [status for _, status, _ in recorded] == ["ok", "ok"]
    said = [c.response.message.content or "" for c in Cassette(tape).calls]
    answers = [text for text in said if text.startswith("guide on")]
    assert answers == ["guide on Lisbon: nothing recalled (Lisbon)"] * 2  # b recalls no a
    assert not (tmp_path / "guides.db").exists()
    assert await one(cassette(models(), replay=tape)) == recorded
