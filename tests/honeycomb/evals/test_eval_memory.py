"""Evals where they meet long-term memory: each case's run has a memory of its own,
empty as it starts, so no case recalls what another (or an earlier eval, or a real
run) kept, and a replay does not depend on the order the cases ran in; unless the
cases file says its cases share one, which is then the eval's own."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor, Role, RoleMemory
from honeycomb.cli import main
from honeycomb.cli.exits import ExitStatus
from honeycomb.evals import Case, EvalReport, evaluate, load_cases
from honeycomb.evals.memory import EvalMemory
from honeycomb.hive import Hive, load_hive
from honeycomb.testing import FunctionModel
from runtime import ModelRequest
from runtime.errors import MemoryStoreError
from tests.support.evals import write

HIVE = """
name: guide
models:
  offline: {provider: offline, latency: 0}
memory: {path: memory.db}
roles:
  planner:
    description: Splits the request into subtasks.
  guide:
    description: Finds what is known about cities.
    memory: {namespace: trip, recall: 3, remember: false, store_result: true}
  aggregator:
    description: Merges the results.
planner: planner
aggregator: aggregator
"""
"""A guide that recalls what was kept about its subtask and keeps its answer: the
offline model says what it recalled ('From memory, ... Recalled from memory ...')."""

CASES = """
{memory}
cases:
  - id: lisbon
    task: What is known about Lisbon?
    assert:
      - not_contains: memory
  - id: lisbon-porto
    task: What is known about Lisbon and Porto?
    assert:
      - not_contains: memory
"""
"""Two cases the second of which, run after the first, would recall its answer."""


def _hive(folder: Path) -> Hive:
    return load_hive(write(folder, "hive.yaml", HIVE))


def _answers(out: str) -> dict[str, tuple[bool, str]]:
    report = json.loads(out)
    return {
        c["id"]: (c["passed"], str(c["attempts"][0]["verdicts"][0]["reason"]))
        for c in report["cases"]
    }


def test_no_case_recalls_what_another_or_an_earlier_eval_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _hive(tmp_path)
    write(tmp_path, "evals.yaml", CASES.format(memory=""))
    monkeypatch.chdir(tmp_path)
    eval_ = ["eval", "hive.yaml", "evals.yaml", "--concurrency", "1", "--no-store", "--json"]
    for _ in range(2):  # a second eval finds nothing of the first either
        status = main(eval_)
        found = _answers(capsys.readouterr().out)
        assert found == {"lisbon": (True, "None"), "lisbon-porto": (True, "None")}
        assert status == ExitStatus.OK
    assert not (tmp_path / "memory.db").exists()  # the hive's memory is never touched


def test_a_replay_does_not_depend_on_the_order_the_cases_ran_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _hive(tmp_path)
    cases = CASES.format(memory="").replace("not_contains: memory", "status: ok")
    write(tmp_path, "evals.yaml", cases)
    lisbon, porto = cases.split("  - id: ")[1:]
    write(tmp_path, "reversed.yaml", f"cases:\n  - id: {porto}  - id: {lisbon}")
    monkeypatch.chdir(tmp_path)
    eval_ = ["eval", "hive.yaml", "--concurrency", "1", "--no-store", "--plain"]
    recorded = main([*eval_[:2], "evals.yaml", *eval_[2:], "--record", "calls.jsonl"])
    assert recorded == ExitStatus.OK, capsys.readouterr().out
    replayed = main([*eval_[:2], "reversed.yaml", *eval_[2:], "--replay", "calls.jsonl"])
    assert replayed == ExitStatus.OK, capsys.readouterr().out


async def test_cases_that_share_a_memory_on_purpose_share_the_evals_own(
    tmp_path: Path,
) -> None:
    hive = _hive(tmp_path)
    cases = load_cases(write(tmp_path, "evals.yaml", CASES.format(memory="memory: shared")), hive)
    assert cases.memory == "shared"
    executor = Executor.from_hive(hive, memory=EvalMemory(hive.memory()))
    for _ in range(2):  # empty as each eval starts
        report = await evaluate(executor, cases, concurrency=1)
        first, second = report.cases
        assert first.passed  # it found nothing
        assert not second.passed  # it recalled the first one's answer
        assert second.attempts[0].verdicts[0].reason == "the answer holds 'memory'"
    assert not (tmp_path / "memory.db").exists()
    with pytest.raises(MemoryStoreError, match="ended with the eval"):
        await executor.memory.list()  # type: ignore[union-attr]


async def test_an_executor_whose_runs_share_its_memory_is_refused_unless_on_purpose(
    tmp_path: Path,
) -> None:
    hive = _hive(tmp_path)
    executor = Executor.from_hive(hive)  # the hive's memory file, every run's
    cases = [Case(id="a", task="What is known about Lisbon?")]
    with pytest.raises(ValueError, match=r"roles guide .* memory=EvalMemory\(hive.memory\(\)\)"):
        await evaluate(executor, cases)
    assert (await evaluate(executor, cases, memory="shared")).passed
    assert len(await hive.memory().list("trip")) == 1  # kept where it was told to


def _guide(store: Path, *, stall: anyio.Event | None = None) -> Executor:
    """A guide that keeps its answers, on a memory each eval's cases share, and says
    what its context holds past the task; with ``stall``, its call on Porto waits,
    having set it, until it is cancelled. With nothing there, it says Lisbon is sunny."""

    async def answer(request: ModelRequest) -> str:
        if stall is not None and "Porto" in str(request.messages[1].content):
            stall.set()
            await anyio.sleep_forever()
        said = [str(m.content).splitlines()[0] for m in request.messages[2:]]
        return " | ".join(said) or "Lisbon is sunny"

    memory = RoleMemory(namespace="trip", remember=False, store_result=True)
    return Executor(
        [Role(name="guide", memory=memory)],
        FunctionModel(answer),
        aggregator="concat",
        planner=lambda task: [("guide", task)],
        store=store,
        memory=EvalMemory(),
    )


async def test_an_interrupted_eval_whose_cases_share_a_memory_makes_every_run_again(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.db"
    cases = [Case(id="lisbon", task="Lisbon"), Case(id="porto", task="Lisbon and Porto")]
    stall = anyio.Event()
    cut = _guide(store, stall=stall)
    go = partial(evaluate, cut, cases, concurrency=1, eval_id="ev-m", memory="shared")
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await stall.wait()  # the first case ran, and kept its answer
            tg.cancel_scope.cancel()
    assert cut.store is not None
    first = EvalReport.from_json(cut.store.eval_report("ev-m") or "")
    assert first.interrupted
    cut.store.close()
    again = _guide(store)
    report = await evaluate(again, cases, concurrency=1, eval_id="ev-m", memory="shared")
    lisbon, porto = report.cases
    # Lisbon's run made again, Porto's finds what it kept, as in an eval run whole.
    assert lisbon.attempts[0].run_id != first.cases[0].attempts[0].run_id
    assert porto.attempts[0].passed
    assert again.store is not None
    (run,) = [r for r in again.store.runs() if r.run_id == porto.attempts[0].run_id]
    result = await again.resume(run.run_id)  # ended: its kept result
    assert "From memory" in result.answer_text
    again.store.close()
