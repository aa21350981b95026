"""``--record`` and ``--replay`` on ``honeycomb run``: a run recorded, replayed with
no model built, and a replay that asks what was not recorded, or reads a file that
is not a cassette."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from honeycomb.cli.main import main
from runtime.errors import StoreError
from runtime.models.cassettes import Cassette
from tests.support import ROOT

TRIP = str(ROOT / "examples" / "trip" / "hive.yaml")


def answer(out: str) -> str:
    return out.split("\nAnswer:\n", 1)[1].split("\n\n", 1)[0]


def test_a_run_recorded_replays_with_no_model(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", TRIP, "--plain", "--no-store"]
    assert main([*args, "--model", "offline", "--record", "trip.jsonl"]) == 0
    recorded = capsys.readouterr()
    assert "recording the model calls in trip.jsonl" in recorded.err
    calls = len(Cassette("trip.jsonl").calls)
    assert main([*args, "--replay", "trip.jsonl"]) == 0
    replayed = capsys.readouterr()
    assert f"replaying the model calls of trip.jsonl ({calls} recorded;" in replayed.err
    assert "Offline simulation" not in replayed.out  # no model is built
    assert answer(replayed.out) == answer(recorded.out)
    assert f"{calls} model, 11 tool" in replayed.out


def test_a_replay_of_another_task_fails_naming_the_planner_and_the_difference(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", TRIP, "--plain", "--no-store"]
    assert main([*args, "--model", "offline", "--record", "trip.jsonl"]) == 0
    capsys.readouterr()
    rome = ["run", TRIP, "Plan a weekend in Rome.", "--plain", "--no-store"]
    assert main([*rome, "--replay", "trip.jsonl"]) == 1
    out = capsys.readouterr().out
    assert "run failed: trip.jsonl: a call of model 'offline' (worker 'planner')" in out
    assert "message 2 (user), content: at character 25: recorded 'Task: Plan a weekend" in out


def test_a_replay_of_a_hive_whose_role_changed_names_the_first_call_that_differs(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trip = fast_demo.parent / "trip"
    shutil.copytree(ROOT / "examples" / "trip", trip, ignore=shutil.ignore_patterns("*.jsonl"))
    args = ["run", str(trip / "hive.yaml"), "--plain", "--no-store"]
    assert main([*args, "--model", "offline", "--record", "trip.jsonl"]) == 0
    capsys.readouterr()
    hive = trip / "hive.yaml"
    weekend = "quote what matters for a weekend."
    hive.write_text(hive.read_text().replace(weekend, "quote what matters for a long weekend."))
    assert main([*args, "--replay", "trip.jsonl"]) == 1
    out = capsys.readouterr().out.splitlines()
    (failed,) = [line for line in out if line.startswith("run failed: ")]
    # The aggregator differs only for the guide's failure: the run names that first.
    assert "run failed: the aggregator failed: CassetteMismatch" in failed
    assert (
        "worker 's2' asked first what it did not record: message 1 (system), content: at "
        "character 153: recorded ...' and quote what matters for a weekend.', asked ...' "
        "and quote what matters for a long weekend.'"
    ) in failed


def test_a_file_that_is_not_a_cassette_stops_the_command_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tape = tmp_path / "notes.jsonl"
    tape.write_text('{"kind": "cassette", "version": 1}\n{"kind": "call"}\n')
    assert main(["run", TRIP, "--plain", "--no-store", "--replay", str(tape)]) == 2
    err = capsys.readouterr().err
    assert f"{tape}:2: not a line of a cassette: Object missing required field" in err


RAY_HIVE = """\
models:
  default: {provider: offline, latency: 0}
roles:
  planner: {description: Splits the request into subtasks for the writer.}
  writer: {description: Writes a short note on what it is asked.}
  aggregator: {description: Merges the results into the final answer.}
planner: planner
aggregator: aggregator
backend: {ray: {actors: 1, actor_cpus: 0}}
"""


@pytest.mark.xdist_group("ray")
@pytest.mark.usefixtures("ray_session")
def test_a_run_on_ray_is_recorded_and_replayed_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused before ("--record works in this process ... with --backend local"):
    # the workers' calls, made in the actors, are recorded in the one cassette here.
    hive = tmp_path / "hive.yaml"
    hive.write_text(RAY_HIVE)
    tape = str(tmp_path / "calls.jsonl")
    args = ["run", str(hive), "Write a note on bees.", "--plain", "--no-store"]
    assert main([*args, "--record", tape]) == 0, capsys.readouterr().err
    recorded = capsys.readouterr()
    assert "backend: Ray, 1 actor" in recorded.err
    workers = {call.worker for call in Cassette(tape).calls}
    assert {"planner", "s1", "aggregator"} <= workers  # s1's in the actor
    assert main([*args, "--replay", tape]) == 0, capsys.readouterr().err
    replayed = capsys.readouterr()
    assert "backend: Ray, 1 actor" in replayed.err
    assert answer(replayed.out) == answer(recorded.out)


def test_a_run_that_waited_recorded_through_resume_replays_decided_without_waiting(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = ["demo", "--approve", "--plain", "--latency", "0"]
    assert main([*demo, "--record", "demo.jsonl"]) == 3  # it waits for a person
    out = capsys.readouterr().out
    approve = re.search(r"honeycomb (approve \S+ \S+ --worker \S+ --turn \d+)", out)
    resume = re.search(r"honeycomb (resume \S+ .*--record demo\.jsonl --approve)\n", out)
    assert approve is not None
    assert resume is not None  # it goes on in the same cassette
    edited = '{"subject": "Edited", "body": "short"}'
    assert main([*approve.group(1).split(), "--arguments", edited]) == 0
    assert main([*resume.group(1).split(), "--plain"]) == 0
    resumed = capsys.readouterr()
    assert "continuing the model calls in demo.jsonl" in resumed.err
    # The first life left the call waiting; the second went on with the decision.
    waited, decided = Cassette("demo.jsonl").decisions
    assert (waited.worker, waited.waited, decided.waited) == ("s4", True, False)
    assert (decided.worker, decided.edited) == ("s4", json.loads(edited))

    # Replayed whole, nobody is asked: the call is approved, edited, as it was.
    assert main([*demo, "--replay", "demo.jsonl", "--no-store"]) == 0
    replayed = capsys.readouterr().out
    assert answer(replayed) == answer(resumed.out)
    sent = sorted(fast_demo.glob("*.md"))
    assert len(sent) == 2
    assert all(path.read_text().startswith("# Edited\n\nshort\n") for path in sent)


def test_a_run_its_run_id_continues_goes_on_in_its_cassette(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = ["demo", "--approve", "--plain", "--latency", "0", "--record", "demo.jsonl"]
    assert main([*demo, "--run-id", "trip-1"]) == 3  # it waits for a person
    approve = re.search(
        r"honeycomb (approve \S+ \S+ --worker \S+ --turn \d+)", capsys.readouterr().out
    )
    assert approve is not None
    assert main(approve.group(1).split()) == 0
    recorded = len(Cassette("demo.jsonl").calls)
    # Continued by its --run-id, as resume continues it: the first life's calls stay.
    assert main([*demo, "--run-id", "trip-1"]) == 0
    assert "continuing the model calls in demo.jsonl" in capsys.readouterr().err
    assert len(Cassette("demo.jsonl").calls) > recorded
    assert main([*demo, "--run-id", "trip-1"]) == 0  # ended: shown, and its calls kept
    capsys.readouterr()
    replay = ["demo", "--approve", "--plain", "--latency", "0", "--replay", "demo.jsonl"]
    assert main([*replay, "--no-store"]) == 0, capsys.readouterr().out


def test_a_store_that_cannot_be_read_leaves_the_runs_cassette_as_it_was(
    fast_demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run continued by its --run-id, --record given again, whose store could not be
    read as it asked whether the run was kept, took it for a new one and recorded its
    cassette anew: the calls of the run's earlier lives were lost. It is refused with
    the store's error, as a store that cannot be opened is."""
    demo = ["demo", "--approve", "--plain", "--latency", "0", "--record", "demo.jsonl"]
    assert main([*demo, "--run-id", "trip-1"]) == 3  # it waits for a person
    before = Path("demo.jsonl").read_text()
    capsys.readouterr()

    def unreadable(self: object, run_id: str) -> None:
        raise StoreError("database is locked", path="runs.db")

    monkeypatch.setattr("honeycomb.store.RunStore.find", unreadable)
    assert main([*demo, "--run-id", "trip-1"]) == 2
    assert "runs.db: database is locked" in capsys.readouterr().err
    assert Path("demo.jsonl").read_text() == before
