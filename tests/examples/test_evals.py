"""Every example has an ``evals.yaml`` whose cases pass on the offline model; and a
prompt broken on purpose shows as a regression against the eval before it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from honeycomb import Executor, OfflineModel
from honeycomb.cli import main
from honeycomb.cli.exits import ExitStatus
from honeycomb.evals import evaluate, load_cases
from honeycomb.hive import load_hive
from tests.support import ROOT

EXAMPLES = ROOT / "examples"
NAMES = sorted(p.parent.name for p in EXAMPLES.glob("*/hive.yaml"))


pytestmark = pytest.mark.usefixtures("example_outputs")


@pytest.mark.parametrize("name", NAMES)
async def test_each_examples_cases_pass_on_the_offline_model(name: str) -> None:
    hive = load_hive(EXAMPLES / name / "hive.yaml")
    cases = load_cases(EXAMPLES / name / "evals.yaml", hive)
    executor = Executor.from_hive(hive, model=OfflineModel(latency=0))
    report = await evaluate(executor, cases, concurrency=4)
    failing = {c.id: f"{c.failing.check}: {c.failing.reason}" for c in report.failed if c.failing}
    assert report.passed, failing
    kinds = {v.check.split()[0] for a in report.attempts for v in a.verdicts}
    assert {"status", "tool_called"} <= kinds, kinds


def test_the_examples_show_every_kind_of_check_but_json() -> None:
    from honeycomb.evals.spec import KINDS

    written = "\n".join((EXAMPLES / n / "evals.yaml").read_text() for n in NAMES)
    shown = {kind for kind in KINDS if f"- {kind}:" in written or f"    - {kind}:" in written}
    assert set(KINDS) - shown == {"equals", "json"}


def test_a_broken_prompt_shows_as_a_regression_and_fails_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trip = tmp_path / "trip"
    shutil.copytree(EXAMPLES / "trip", trip)
    command = ["eval", str(trip / "hive.yaml"), str(trip / "evals.yaml"), "--latency", "0"]
    assert main([*command, "--plain", "--eval-id", "ev-before"]) == ExitStatus.OK
    hive = trip / "hive.yaml"
    # The analyst is told to do sums in its head: it no longer calls the calculator.
    text = hive.read_text().replace("    tools: [trip_tools:calculate]\n", "")
    hive.write_text(text.replace("never do arithmetic in your head", "do sums in your head"))
    capsys.readouterr()
    code = main([*command, "--plain", "--baseline", "ev-before", "--eval-id", "ev-after"])
    out = capsys.readouterr().out
    assert code == ExitStatus.CASES_FAILED, out
    assert "│ three-cities │ newly failing" in out, out
    assert "contains 'comes to 361': the answer lacks 'comes to 361'" in out, out
    assert main(["eval", "compare", "ev-before", "ev-after", "--json"]) == ExitStatus.CASES_FAILED
    shown = json.loads(capsys.readouterr().out)
    changes = {c["id"]: c["change"] for c in shown["cases"]}
    assert changes == {"three-cities": "newly_failing", "two-cities": "newly_failing"}, out
