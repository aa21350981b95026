"""Evals where they meet long-term memory: each case's run has a memory of its own,
empty as it starts, so no case recalls what another (or an earlier eval, or a real
run) kept, and a replay does not depend on the order the cases ran in; unless the
cases file says its cases share one, which is then the eval's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honeycomb import Executor
from honeycomb.cli import main
from honeycomb.cli.exits import ExitStatus
from honeycomb.evals import Case, evaluate, load_cases
from honeycomb.evals.memory import EvalMemory
from honeycomb.hive import Hive, load_hive
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
