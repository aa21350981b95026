"""``honeycomb eval``: a table and totals, ``--json``, ``--junit``, ``--html``; exit
status 0 when every case passes, 4 when one fails, 2 on a bad cases file; a baseline
and ``eval compare`` tell what changed, and can gate on regressions only."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from honeycomb.cli import main
from honeycomb.cli.exits import ExitStatus
from honeycomb.evals import EvalReport, runner
from honeycomb.evals.kept import keep_report
from honeycomb.store import RunStore
from runtime import StoreError
from tests.support.evals import TINY_HIVE, tiny_hive, write
from tests.support.stores import STORES_NOT_SET_UP, UNSET_PASSWORD

CASES = """
name: greetings
cases:
  - id: lisbon
    task: Say hello to {{city}}
    vars: {city: Lisbon}
    assert:
      - contains: "{{city}}"
      - model_calls: {at_most: 5}
  - id: oslo
    task: Say hello to Oslo
    assert:
      - icontains: OSLO
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    tiny_hive(tmp_path)
    write(tmp_path, "evals.yaml", CASES)
    return tmp_path


def _eval(capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str, str]:
    code = main(["eval", "hive.yaml", "evals.yaml", "--plain", *options])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_passing_eval_prints_its_table_and_totals_and_exits_0(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _eval(
        capsys, "--eval-id", "ev-a", "--junit", "out/junit.xml", "--html", "r.html"
    )
    assert err.splitlines()[-2:] == [  # a line at each tenth of the runs: for CI logs
        "eval: 1 of 2 runs · 1 passed, 0 failed",
        "eval: 2 of 2 runs · 2 passed, 0 failed",
    ]
    run_id = re.search(
        r"<system-out>run (\S+)</system-out>", (folder / "out/junit.xml").read_text()
    )
    assert code == ExitStatus.OK
    assert "eval ev-a · greetings" in out
    assert "│ lisbon │ pass" in out
    assert "2 of 2 cases passed (100%) · 2 runs in" in out
    assert "eval ev-a kept in .honeycomb/runs.db" in out
    suite = ET.parse(folder / "out" / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "0")
    assert "<h1>eval ev-a · greetings</h1>" in (folder / "r.html").read_text()
    # Each case is a run of the store: honeycomb trace shows it.
    assert run_id is not None
    assert main(["trace", run_id[1]]) == ExitStatus.OK
    assert f"run {run_id[1]} · ok" in capsys.readouterr().out


def test_an_eval_of_one_run_counts_it_in_the_singular(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _eval(capsys, "--case", "oslo", "--html", "r.html")
    assert code == ExitStatus.OK
    assert err.splitlines()[-1] == "eval: 1 of 1 run · 1 passed, 0 failed"
    assert "1 of 1 case passed (100%) · 1 run in" in out
    page = (folder / "r.html").read_text()
    assert "1 run (1 a case, 8 at once)" in page
    assert "1 of 1 case passed" in page
    # A budget of one model call, spent by the first run, is said so too.
    code, out, _ = _eval(capsys, "--max-model-calls", "1", "--concurrency", "1")
    assert code == ExitStatus.CASES_FAILED
    assert "the eval's budget of 1 model call is spent" in " ".join(out.split())


def test_a_failing_case_exits_4_naming_its_check_and_reason(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(folder, "evals.yaml", CASES.replace("icontains: OSLO", "contains: Bergen"))
    code, out, _ = _eval(capsys, "--json")
    assert code == ExitStatus.CASES_FAILED == 4
    report = json.loads(out)
    assert report["totals"]["passed"] == 1
    oslo = next(c for c in report["cases"] if c["id"] == "oslo")
    (verdict,) = oslo["attempts"][0]["verdicts"]
    assert verdict["check"] == "contains 'Bergen'"
    assert verdict["reason"].startswith("the answer lacks 'Bergen': ")


@pytest.mark.parametrize("store", [".honeycomb/runs.db", "elsewhere/runs.db"])
def test_the_command_that_shows_a_failing_run_finds_it_in_its_store(
    folder: Path, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    write(folder, "evals.yaml", CASES.replace("icontains: OSLO", "contains: Bergen"))
    code, out, _ = _eval(capsys, "--store", store)
    assert code == ExitStatus.CASES_FAILED
    shown = re.search(r"a failing run: (honeycomb trace .*?);", " ".join(out.split()))
    assert shown is not None, out
    # The command as printed, pasted: it finds the run, a store named runs.db or not.
    assert main(shlex.split(shown[1])[1:]) == ExitStatus.OK
    assert "oslo" in capsys.readouterr().out.lower()


def test_a_signal_as_the_report_of_every_run_is_kept_keeps_it_whole(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def stopping(store: RunStore, report: EvalReport) -> Coroutine[Any, Any, None]:
        stopped = asyncio.current_task()  # the eval's, which the signal cancels
        os.kill(os.getpid(), signal.SIGTERM)  # it comes as the whole report is kept

        async def once_cancelled() -> None:
            # No event tells of a task's cancellation: its state is looked at.
            while stopped is not None and not stopped.cancelling():  # noqa: ASYNC110
                await asyncio.sleep(0)  # the loop's turn: it reads the signal
            await keep_report(store, report)

        return once_cancelled()

    monkeypatch.setattr(runner, "keep_report", stopping)
    code, out, err = _eval(capsys, "--eval-id", "ev-all")
    assert code == 143
    assert "2 of 2 cases passed" in out
    assert "SIGTERM: eval ev-all stopped as its report was kept: every run was made" in err
    assert "goes on with it" not in err  # it ended: run again, it would make every run
    kept = RunStore(folder / ".honeycomb" / "runs.db").eval_report("ev-all")
    report = EvalReport.from_json(kept or "")
    assert (report.interrupted, report.passed) == (False, True)


def test_a_signal_when_the_store_cannot_keep_the_report_says_so(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(folder, "checks.py", "import os, signal\n\ndef stop(answer, run):\n"
          "    os.kill(os.getpid(), signal.SIGTERM)\n    return True\n")  # fmt: skip
    # The first case's check stops it, as the second case runs.
    write(folder, "evals.yaml", CASES.replace('contains: "{{city}}"', "python: checks:stop"))

    async def failing(store: RunStore, report: EvalReport) -> None:
        raise StoreError("the disk is full", path=str(store.where))

    monkeypatch.setattr(runner, "keep_report", failing)
    code, _, err = _eval(capsys, "--eval-id", "ev-cut", "--concurrency", "1")
    assert code == 143
    assert "SIGTERM: eval ev-cut stopped: its report could not be kept in " in err
    assert "--no-store" not in err


def test_a_bad_cases_file_exits_2_with_every_error_at_its_line(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(folder, "evals.yaml", CASES.replace("icontains: OSLO", "icontain: OSLO"))
    code, _, err = _eval(capsys)
    assert code == ExitStatus.UNUSABLE
    assert "evals.yaml:12:9: cases[1].assert[0]: 'icontain' is no kind of check" in err
    assert not (folder / ".honeycomb").exists()  # nothing ran


def test_a_misspelt_status_exits_2_before_anything_runs_with_the_hives_mistakes(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = CASES.replace("icontains: OSLO", "status: okk").replace(
        "vars:", "treshold: 1\n    vars:"
    )
    write(folder, "evals.yaml", cases + "      - judge: {role: critc, rubric: It greets.}\n")
    code, _, err = _eval(capsys)
    assert code == ExitStatus.UNUSABLE
    assert err.splitlines()[1:] == [
        "  evals.yaml:5:5: cases[0].treshold: unknown field 'treshold' (did you mean "
        "'threshold'?); allowed: assert, description, expected, id, task, threshold, vars",
        "  evals.yaml:13:9: cases[1].assert[0].status: 'okk' is no status a run ends with (did "
        "you mean 'ok'?); the statuses: ok, partial, failed, over_budget, waiting, error",
        "  evals.yaml:14:9: cases[1].assert[1].judge: no role 'critc' to judge with; the roles: "
        "aggregator, planner, writer",
    ]
    assert not (folder / ".honeycomb").exists()  # nothing ran


def test_a_baseline_shows_the_regression_and_can_gate_on_it_alone(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _eval(capsys, "--eval-id", "ev-good")[0] == ExitStatus.OK
    # A prompt that broke: the answers no longer hold what the checks want.
    write(folder, "evals.yaml", CASES.replace('{{city}}"', 'Paris"'))
    code, out, _ = _eval(capsys, "--eval-id", "ev-bad", "--baseline", "ev-good")
    assert code == ExitStatus.CASES_FAILED
    assert "│ lisbon │ newly failing │ -0.50" in out
    assert "against ev-good: 1 newly failing, 0 newly passing, 1 unchanged" in out
    # Gated on regressions only: a case failing in the baseline too does not fail it.
    write(folder, "evals.yaml", CASES.replace("icontains: OSLO", "contains: Bergen"))
    assert _eval(capsys, "--eval-id", "ev-oslo")[0] == ExitStatus.CASES_FAILED
    gated = _eval(capsys, "--baseline", "ev-oslo", "--gate", "regressions")
    assert gated[0] == ExitStatus.OK
    # In JSON too, what the status gates on: the comparison beside the report.
    code, out, _ = _eval(capsys, "--baseline", "ev-good", "--gate", "regressions", "--json")
    assert code == ExitStatus.CASES_FAILED
    shown = json.loads(out)
    assert shown["cases"][0]["id"] == "lisbon"
    assert shown["comparison"]["baseline"] == "ev-good"
    assert [(c["id"], c["change"]) for c in shown["comparison"]["cases"]] == [
        ("lisbon", "passing"),
        ("oslo", "newly_failing"),
    ]
    # eval compare A B tells the same from the store, and fails on a regression.
    assert main(["eval", "compare", "ev-good", "ev-bad"]) == ExitStatus.CASES_FAILED
    assert "lisbon │ newly failing" in capsys.readouterr().out
    assert main(["eval", "compare", "ev-bad", "ev-good", "--json"]) == ExitStatus.OK
    shown = json.loads(capsys.readouterr().out)
    assert [c["change"] for c in shown["cases"]] == ["newly_passing", "passing"]


def test_a_case_renamed_since_the_baseline_is_compared_with_what_it_was(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _eval(capsys, "--eval-id", "ev-good")[0] == ExitStatus.OK
    # Renamed, and broken: not an added case a gate on regressions lets through.
    renamed = CASES.replace("id: oslo", "id: oslo-hello").replace("icontains: OSLO", "contains: X")
    write(folder, "evals.yaml", renamed.replace("id: lisbon", "id: lisbon-hello"))
    code, out, _ = _eval(capsys, "--baseline", "ev-good", "--gate", "regressions")
    assert code == ExitStatus.CASES_FAILED
    assert "│ oslo-hello (was oslo)     │ newly failing │ -1.00" in out
    assert "│ lisbon-hello (was lisbon) │ passing" in out  # renamed, its verdict stands
    assert "against ev-good: 1 newly failing, 0 newly passing, 1 unchanged · pass rate -50%" in out
    assert "removed" not in out
    code, out, _ = _eval(capsys, "--baseline", "ev-good", "--json", "--html", "r.html")
    changes = json.loads(out)["comparison"]["cases"]
    assert [(c["id"], c["change"], c["renamed_from"]) for c in changes] == [
        ("lisbon-hello", "passing", "lisbon"),
        ("oslo-hello", "newly_failing", "oslo"),
    ]
    assert "<td>oslo-hello (was oslo)</td>" in (folder / "r.html").read_text()
    # A new case of the same task as another new one is no rename of the case it had.
    twice = "\n  - id: oslo-b\n    task: Say hello to Oslo\n"
    write(folder, "evals.yaml", CASES.replace("id: oslo", "id: oslo-a") + twice)
    code, out, _ = _eval(capsys, "--baseline", "ev-good", "--json")
    changes = json.loads(out)["comparison"]["cases"]
    assert [(c["id"], c["change"]) for c in changes] == [
        ("lisbon", "passing"),
        ("oslo-a", "added"),
        ("oslo-b", "added"),
        ("oslo", "removed"),
    ]


def test_a_case_whose_task_changed_since_the_baseline_says_so(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _eval(capsys, "--eval-id", "ev-good")[0] == ExitStatus.OK
    # The same id, another task: what newly fails ran something else.
    edited = CASES.replace("Say hello to Oslo", "Say goodbye to Oslo")
    write(folder, "evals.yaml", edited.replace('{{city}}"', 'Paris"'))
    code, out, _ = _eval(capsys, "--baseline", "ev-good", "--json", "--html", "r.html")
    assert code == ExitStatus.CASES_FAILED
    changes = json.loads(out)["comparison"]["cases"]
    assert [(c["id"], c["change"], c["task_changed"]) for c in changes] == [
        ("lisbon", "newly_failing", False),
        ("oslo", "passing", True),
    ]
    assert "<td>oslo (its task changed)</td>" in (folder / "r.html").read_text()
    code, out, _ = _eval(capsys, "--baseline", "ev-good")
    assert "│ oslo (its task changed) │ passing" in out  # shown, though its verdict stands


def test_a_baseline_of_every_case_compares_with_the_cases_case_chose(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _eval(capsys, "--eval-id", "ev-all")[0] == ExitStatus.OK
    write(folder, "evals.yaml", CASES + "  - {id: gone, task: Say hello to Rome}\n")
    code, out, _ = _eval(capsys, "--case", "lisbon", "--case", "gone", "--baseline", "ev-all")
    assert code == ExitStatus.OK
    # oslo, which --case left out, is not run, not removed: only gone is new.
    assert "oslo" not in out
    assert "│ gone │ added" in out
    assert "against ev-all: 0 newly failing, 0 newly passing, 1 unchanged" in out
    # A case the file no longer has is removed still.
    write(folder, "evals.yaml", CASES.replace("id: oslo", "id: bergen"))
    code, out, _ = _eval(capsys, "--case", "lisbon", "--baseline", "ev-all")
    assert "│ oslo │ removed" in out


def test_an_unknown_baseline_or_eval_exits_2(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _eval(capsys, "--gate", "regressions")  # no baseline to gate against
    assert code == ExitStatus.UNUSABLE
    assert "--gate regressions fails on the cases that passed in a baseline" in err
    code, _, err = _eval(capsys, "--baseline", "ev-none")
    assert code == ExitStatus.UNUSABLE
    assert "no eval 'ev-none'" in err
    assert main(["eval", "compare", "ev-x", "ev-y"]) == ExitStatus.UNUSABLE
    assert "no run store" in capsys.readouterr().err


def test_a_judges_hive_grades_and_the_evals_budget_leaves_cases_unrun(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        folder,
        "judges.yaml",
        """
        name: judges
        models:
          offline: {provider: offline, latency: 0}
        roles:
          critic:
            description: Grades answers.
        """,
    )
    cases = CASES.replace("name: greetings", "name: greetings\njudges: judges.yaml")
    write(folder, "evals.yaml", cases + "      - judge: {role: critic, rubric: It greets.}\n")
    code, out, _ = _eval(capsys, "--json", "--concurrency", "1")
    assert code == ExitStatus.OK
    oslo = json.loads(out)["cases"][1]["attempts"][0]
    assert oslo["verdicts"][-1] == {
        "check": "judge critic 'It greets.'",
        "passed": True,
        "score": 1.0,
        "weight": 1.0,
        "reason": None,
    }
    code, out, _ = _eval(capsys, "--max-model-calls", "3", "--concurrency", "1")
    assert code == ExitStatus.CASES_FAILED
    assert "the eval's budget of 3 model calls is spent (3): not run: oslo" in out


def test_a_key_the_judges_hive_lacks_exits_2_before_any_case_runs(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write(
        folder,
        "judges.yaml",
        """
        name: judges
        models:
          gpt: {model: gpt-4o-mini, base_url: "https://api.openai.com/v1"}
        roles:
          critic: {description: Grades answers.}
        default_model: gpt
        """,
    )
    cases = CASES.replace("name: greetings", "name: greetings\njudges: judges.yaml")
    write(folder, "evals.yaml", cases + "      - judge: {role: critic, rubric: It greets.}\n")
    code, _, err = _eval(capsys)
    assert code == ExitStatus.UNUSABLE  # not every case run, and every judge failing
    assert "judges.yaml:3:3: models.gpt: model 'gpt-4o-mini' needs an API key" in err
    assert not (folder / ".honeycomb").exists()  # nothing ran


def test_case_picks_the_cases_to_run(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _eval(capsys, "--case", "os*", "--json")
    assert code == ExitStatus.OK
    assert [c["id"] for c in json.loads(out)["cases"]] == ["oslo"]
    code, _, err = _eval(capsys, "--case", "lisbn")
    assert code == ExitStatus.UNUSABLE
    assert "--case lisbn: no such case (did you mean 'lisbon'?); the cases: lisbon, oslo" in err
    # An id with a pattern's signs in it (a row of a table, say) is picked by its id.
    write(folder, "evals.yaml", CASES.replace("id: oslo", "id: oslo[2]"))
    code, out, _ = _eval(capsys, "--case", "oslo[2]", "--json")
    assert code == ExitStatus.OK
    assert [c["id"] for c in json.loads(out)["cases"]] == ["oslo[2]"]


def test_an_eval_recorded_once_replays_with_no_model_and_a_new_request_names_its_case(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _eval(capsys, "--record", "calls.jsonl")
    assert code == ExitStatus.OK
    assert "recording the model calls in calls.jsonl" in err
    # The hive's model is gone: the cassette answers every call.
    hive = folder / "hive.yaml"
    hive.write_text(hive.read_text().replace("provider: offline", "model: gpt-x"))
    code, _, err = _eval(capsys, "--replay", "calls.jsonl")
    assert code == ExitStatus.OK
    assert "replaying the model calls of calls.jsonl (6 recorded; no model is called)" in err
    # A case whose task changed asks what was not recorded: it fails, naming the case.
    write(folder, "evals.yaml", CASES.replace("Say hello to Oslo", "Say hello to Bergen"))
    code, out, _ = _eval(capsys, "--replay", "calls.jsonl", "--json")
    assert code == ExitStatus.CASES_FAILED
    (attempt,) = json.loads(out)["cases"][1]["attempts"]
    assert attempt["status"] == "error"
    assert "the cassette did not record" in attempt["error"]
    assert "case 'oslo'" in attempt["error"]


@pytest.mark.parametrize(("store", "said"), STORES_NOT_SET_UP)
def test_a_store_that_cannot_be_set_up_exits_2_in_one_line(
    folder: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: tuple[str, ...],
    said: str,
) -> None:
    monkeypatch.delenv("HC_TEST_UNSET_PW", raising=False)
    hive = folder / "hive.yaml"
    hive.write_text(hive.read_text() + UNSET_PASSWORD)
    code, out, err = _eval(capsys, *store)
    assert code == ExitStatus.UNUSABLE  # as `honeycomb run` refuses it
    assert said in err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert out == ""


def test_a_report_into_a_pipe_closed_early_exits_quietly(folder: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", "eval", "hive.yaml", "evals.yaml", "--no-store",
         "--plain"],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.close()  # the reader went away (`| head -1`) before the table is written
    err = child.stderr.read().decode()
    code = child.wait(timeout=60)
    assert "Traceback" not in err
    assert code == ExitStatus.BROKEN_PIPE == 141  # as `honeycomb run`: not rich's exit 1


JUDGES = """
name: judges
models:
  offline: {provider: offline, latency: 0}
roles:
  critic:
    description: Grades answers.
"""


def test_the_judges_hive_is_recorded_and_replayed_with_the_runs(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(folder, "judges.yaml", JUDGES)
    cases = CASES.replace("name: greetings", "name: greetings\njudges: judges.yaml")
    write(folder, "evals.yaml", cases + "      - judge: {role: critic, rubric: It greets.}\n")
    assert _eval(capsys, "--record", "calls.jsonl", "--no-store")[0] == ExitStatus.OK
    lines = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    asked = [(c["model"], c["case"]) for c in lines if c["kind"] == "call"]
    assert [a for a in asked if a[0] != "offline"] == [("judges/offline", "oslo")]
    # Neither hive's model is there now: the cassette answers the judge too.
    for name in ("hive.yaml", "judges.yaml"):
        hive = folder / name
        hive.write_text(hive.read_text().replace("provider: offline", "model: gpt-x"))
    code, out, err = _eval(capsys, "--replay", "calls.jsonl", "--no-store", "--json")
    assert code == ExitStatus.OK, err
    verdict = json.loads(out)["cases"][1]["attempts"][0]["verdicts"][-1]
    assert (verdict["check"], verdict["passed"]) == (
        "judge critic 'It greets.'",
        True,
    )


def test_an_interrupted_eval_recorded_again_records_every_case(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Stopped while recording, after lisbon's run: its report kept, interrupted.
    attempt = {"run_id": "r1", "passed": True, "score": 1.0, "status": "ok"}
    cut = {"eval_id": "ev-rec", "name": "greetings", "hive": "hive.yaml", "interrupted": True}
    cut |= {"cases": [{"id": "lisbon", "task": "Say hello to Lisbon", "attempts": [attempt]}]}
    cut["not_run"] = ["oslo"]

    async def keep() -> None:
        store = RunStore(folder / ".honeycomb" / "runs.db")
        await store.open()
        await store.keep_eval("ev-rec", "greetings", 0.0, False, json.dumps(cut).encode())
        store.close()

    asyncio.run(keep())
    code, _, err = _eval(capsys, "--eval-id", "ev-rec", "--record", "calls.jsonl")
    assert code == ExitStatus.OK, err
    # The cassette is started anew: lisbon's run is made again to be in it.
    lines = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    assert {c["case"] for c in lines if c["kind"] == "call"} == {"lisbon", "oslo"}
    code, _, err = _eval(capsys, "--replay", "calls.jsonl", "--no-store")
    assert code == ExitStatus.OK, err


def test_an_interrupted_eval_is_gone_on_with_on_its_hive_however_the_command_names_it(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Stopped after lisbon's run, by a command that named the hive by its whole path.
    attempt = {"run_id": "r1", "passed": True, "score": 1.0, "status": "ok"}
    hive = str(folder / "hive.yaml")
    cut = {"eval_id": "ev-cut", "name": "greetings", "hive": hive, "interrupted": True}
    cut |= {"cases": [{"id": "lisbon", "task": "Say hello to Lisbon", "attempts": [attempt]}]}
    cut["not_run"] = ["oslo"]

    async def keep() -> None:
        store = RunStore(folder / ".honeycomb" / "runs.db")
        await store.open()
        await store.keep_eval("ev-cut", "greetings", 0.0, False, json.dumps(cut).encode())
        store.close()

    asyncio.run(keep())
    command = ["eval", "./hive.yaml", "evals.yaml", "--plain", "--eval-id", "ev-cut", "--json"]
    assert main(command) == ExitStatus.OK
    shown = json.loads(capsys.readouterr().out)
    # lisbon's run is taken as it was: the same hive, named otherwise; oslo's is made.
    runs = {c["id"]: [a["run_id"] for a in c["attempts"]] for c in shown["cases"]}
    assert runs["lisbon"] == ["r1"]
    assert runs["oslo"] != ["r1"]
    assert shown["hive"] == hive


def test_an_eval_stopped_while_recording_says_it_is_made_again(folder: Path) -> None:
    write(folder, "hive.yaml", TINY_HIVE.replace("latency: 0", "latency: 0.5"))
    command = [sys.executable, "-m", "honeycomb", "eval", "hive.yaml", "evals.yaml", "--plain",
               "--concurrency", "1", "--eval-id", "ev-rec", "--record", "calls.jsonl"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        command, cwd=folder, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stderr is not None
    for line in child.stderr:  # stop it once the first case is scored
        if "eval: 1 of 2 runs" in line:
            break
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "SIGINT: eval ev-rec stopped.\nUnder --record it is not gone on with" in err
    assert "--eval-id ev-rec goes on with it" not in err


def test_a_case_whose_run_raised_under_replay_fails_whatever_its_checks_say(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holds_on_nothing = CASES.replace("icontains: OSLO", "not_contains: Norway")
    write(folder, "evals.yaml", holds_on_nothing)
    assert _eval(capsys, "--record", "calls.jsonl", "--no-store")[0] == ExitStatus.OK
    write(folder, "evals.yaml", holds_on_nothing.replace("hello to Oslo", "hello to Bergen"))
    code, out, _ = _eval(capsys, "--replay", "calls.jsonl", "--no-store", "--json")
    assert code == ExitStatus.CASES_FAILED
    oslo = json.loads(out)["cases"][1]
    (attempt,) = oslo["attempts"]
    assert (attempt["status"], attempt["passed"], attempt["score"]) == ("error", False, 0.0)
    assert [v["passed"] for v in attempt["verdicts"]] == [True]  # it holds on no answer
    # Its run, which raised before it had a result, is kept still: the report names it.
    code, out, _ = _eval(capsys, "--replay", "calls.jsonl", "--store", "runs 2.db")
    assert code == ExitStatus.CASES_FAILED
    assert "1 of 2 cases passed" in out
    shown = re.search(r"a failing run: honeycomb trace (\S+) --store 'runs 2\.db'", out)
    assert shown is not None, out
    kept = RunStore(folder / "runs 2.db").find(shown[1])
    assert kept is not None
    assert kept.status == "failed"


@pytest.mark.parametrize("option", ["--junit", "--html"])
def test_a_report_file_that_cannot_be_written_is_refused_before_anything_runs(
    folder: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    code, out, err = _eval(capsys, option, "evals.yaml/report.xml")
    assert code == ExitStatus.UNUSABLE
    assert err == f"{option} evals.yaml/report.xml: cannot write it: evals.yaml is not a folder\n"
    assert out == ""
    assert not (folder / ".honeycomb").exists()  # nothing ran


def test_a_report_file_that_cannot_be_written_after_the_runs_is_one_line_after_the_report(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from honeycomb.cli import evals

    monkeypatch.setattr(evals, "_check_writable", lambda args: None)  # taken since
    code, out, err = _eval(capsys, "--junit", "evals.yaml/report.xml", "--eval-id", "ev-a")
    assert code == ExitStatus.UNUSABLE
    assert "2 of 2 cases passed" in out  # the report first
    assert err.splitlines()[-1].startswith("--junit evals.yaml/report.xml: cannot write it: ")
    assert "Traceback" not in err
    # eval compare makes the folder of its page, and names one it cannot write.
    code = main(["eval", "compare", "ev-a", "ev-a", "--html", "new/page.html"])
    assert code == ExitStatus.OK
    assert "<h1>eval ev-a" in (folder / "new" / "page.html").read_text()
    code = main(["eval", "compare", "ev-a", "ev-a", "--html", "evals.yaml/page.html"])
    out, err = capsys.readouterr()
    assert code == ExitStatus.UNUSABLE
    assert "against ev-a" in out
    assert err.startswith("--html evals.yaml/page.html: cannot write it: ")


def test_the_command_a_failing_run_is_shown_by_is_whole_and_quoted(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = CASES.replace("icontains: OSLO", "contains: Bergen")
    write(folder, "evals.yaml", failing)
    code, out, _ = _eval(capsys, "--store", "my runs.db")
    assert code == ExitStatus.CASES_FAILED
    run_id = re.search(r"a failing run: honeycomb trace (\S+) --store 'my runs.db';", out)
    assert run_id is not None, out
    assert main(["trace", run_id[1], "--store", "my runs.db"]) == ExitStatus.OK
    # A run it does not have is told with the command that lists those it has, quoted.
    assert main(["trace", "nope", "--store", "my runs.db"]) == ExitStatus.UNUSABLE
    said = "my runs.db: no run 'nope' (honeycomb runs --store 'my runs.db')\n"
    assert capsys.readouterr().err == said
    assert main(["resume", "nope", "--store", "my runs.db"]) == ExitStatus.UNUSABLE
    assert capsys.readouterr().err == said


def test_a_terminals_escape_in_a_reason_or_an_id_reaches_the_table_inert(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A check's reason that quotes the answer as it is: the task's escapes come back.
    write(folder, "checks.py", "def quotes(answer, run):\n    return 'it said ' + answer\n")
    escaped = """
    cases:
      - id: "oslo\\e[31m"
        task: "Greet [bold]Oslo\\e[2J\\a"
        assert:
          - python: checks:quotes
    """
    write(folder, "evals.yaml", escaped)
    code, out, _ = _eval(capsys)
    assert code == ExitStatus.CASES_FAILED
    assert not {"\x1b", "\x07"} & set(out)
    assert "│ oslo [31m │ FAIL" in out
    assert "Greet [bold]Oslo [2J " in out  # rich's markup shown as written


def test_a_cases_files_name_or_an_eval_id_in_rich_markup_is_shown_as_written(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Rich's markup in a title would be read as such: '[/]' closes nothing, and the
    # command failed with a traceback once its runs were made.
    write(folder, "evals.yaml", CASES.replace("name: greetings", 'name: "greet [/]ings"'))
    code, out, _ = _eval(capsys, "--eval-id", "ev-[/]a")
    assert code == ExitStatus.OK
    assert "eval ev-[/]a · greet [/]ings" in out
    assert "eval ev-[/]a kept in .honeycomb/runs.db (compare later with --baseline ev-[/]a)" in out
    code, out, _ = _eval(capsys, "--baseline", "ev-[/]a")
    assert code == ExitStatus.OK
    assert "against ev-[/]a: 0 newly failing" in out
    assert main(["eval", "compare", "ev-[/]a", "ev-[/]a"]) == ExitStatus.OK
    assert "against ev-[/]a: 0 newly failing" in capsys.readouterr().out


def test_an_eval_kept_that_cannot_be_read_is_one_line_and_run_again_anew(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A report an earlier version kept with a score it wrote as null (a NaN).
    attempt = {"run_id": "r", "passed": False, "score": None, "status": "ok"}
    old = {"eval_id": "ev-old", "name": "greetings", "hive": "hive.yaml", "interrupted": True}
    old["cases"] = [{"id": "oslo", "task": "t", "attempts": [attempt]}]

    async def keep() -> None:
        store = RunStore(folder / ".honeycomb" / "runs.db")
        await store.open()
        await store.keep_eval("ev-old", "greetings", 0.0, False, json.dumps(old).encode())
        store.close()

    asyncio.run(keep())
    assert _eval(capsys, "--eval-id", "ev-new")[0] == ExitStatus.OK
    baseline = ["eval", "hive.yaml", "evals.yaml", "--plain", "--baseline", "ev-old"]
    for command in (["eval", "compare", "ev-old", "ev-new"], baseline):
        assert main(command) == ExitStatus.UNUSABLE
        assert capsys.readouterr().err.splitlines()[-1] == (
            ".honeycomb/runs.db: eval 'ev-old' cannot be read: Expected `float`, got `null` - "
            "at `$.cases[0].attempts[0].score`"
        )
    # Gone on with by its id, it is made anew, and replaces it.
    code, out, _ = _eval(capsys, "--eval-id", "ev-old")
    assert code == ExitStatus.OK
    assert "2 of 2 cases passed" in out
    assert main(["eval", "compare", "ev-old", "ev-new"]) == ExitStatus.OK
