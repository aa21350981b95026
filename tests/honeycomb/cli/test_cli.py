"""The command line: demo, run and validate, in-process and as a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor, Role, RunFailed
from honeycomb.cli.main import demo_hive_path, main
from honeycomb.store import RunStore
from honeycomb.testing import ScriptedModel


def test_demo_prints_the_answer_and_the_summary(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--plain", "--latency", "0"]) == 0
    out = capsys.readouterr().out
    assert "Offline simulation" in out
    assert "plan ready" in out
    assert "\nAnswer:\n[offline simulation]" in out
    for label in ("wall time", "critical path", "speedup x", "tokens", "calls"):
        assert label in out
    assert len(list(fast_demo.glob("*.md"))) == 1  # the courier sent one message


def test_a_run_leaves_its_store_whole_in_its_one_file(fast_demo: Path, tmp_path: Path) -> None:
    # The command ended with the store's writer and connections open: SQLite's -wal and
    # -shm stayed beside the file, the last writes in the -wal, so a copy of the file
    # alone (a backup, a store sent on) lacked them. It closes the store as it ends.
    assert main(["demo", "--plain", "--latency", "0", "--store", "runs.db"]) == 0
    assert sorted(p.name for p in tmp_path.glob("runs.db*")) == ["runs.db"]
    alone = tmp_path / "copy" / "runs.db"
    alone.parent.mkdir()
    alone.write_bytes((tmp_path / "runs.db").read_bytes())
    [kept] = RunStore(alone).runs()
    assert kept.status == "ok"


@pytest.mark.parametrize("argv", [["demo"], ["run", "myhive/hive.yaml"]], ids=" ".join)
def test_an_offline_run_says_so_whatever_models_it_declares_for_later(
    fast_demo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    # The demo's gpt model and the starter's real one, which no role uses, hid the line:
    # it was said only with --latency or --model offline.
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    monkeypatch.setenv("HONEYCOMB_NOTES", str(fast_demo.parent / "notes"))
    assert main(["init", "myhive"]) == 0
    capsys.readouterr()
    assert main([*argv, "--plain", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Offline simulation: a rule-based model stands in for the LLM")


def test_demo_rounds_shows_a_second_round(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--rounds", "--plain", "--latency", "0", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "round 2 ready" in out
    assert "s4=researcher after s3" in out
    assert "round 3: the lead is done" in out
    assert "attempt" not in out  # a round is not a planner's retry


def test_demo_json_lines_are_every_event(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--json", "--latency", "0"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert records[0]["event"] == "run.started"
    assert records[-1]["event"] == "run.finished"
    assert records[-1]["status"] == "ok"
    kinds = {r["event"] for r in records}
    assert {
        "run.plan_ready",
        "worker.started",
        "tool_call.finished",
        "model_call.finished",
    } <= kinds


def test_demo_json_streams_the_answer_as_it_is_written(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--json", "--latency", "0.01"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    deltas = [r for r in records if r["event"] == "model_call.text"]
    written = "".join(r["text"] for r in deltas if r["worker"] == "aggregator")
    assert written == records[-1]["result"]["answer_text"]
    assert len([r for r in deltas if r["worker"] == "aggregator"]) > 10
    aggregated = next(i for i, r in enumerate(records) if r["event"] == "run.aggregation_finished")
    assert all(i < aggregated for i, r in enumerate(records) if r["event"] == "model_call.text")


def test_validate_ok_and_every_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = Path("examples/trip/hive.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "models: {default: offline}\nroles:\n"
        "  a: {max_turns: x, tools: [nope]}\npolicy: {fail: 1}\n"
    )
    assert main(["validate", str(good)]) == 0
    assert "OK (6 roles, 2 models)" in capsys.readouterr().out
    assert main(["validate", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}: 3 errors" in out
    assert f"{bad}:3:7: roles.a.max_turns" in out
    assert f"{bad}:3:29: roles.a.tools[0]: unknown tool 'nope'" in out
    assert f"{bad}:4:10: policy.fail: unknown field 'fail'" in out


def test_run_refuses_a_broken_hive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("roles: {a: {}}\n")
    assert main(["run", str(bad), "task"]) == 2
    assert "the hive defines no models" in capsys.readouterr().err


def test_run_a_hive_with_a_model_override(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["run", str(demo_hive_path()), "Compare the weather in Oslo and Rome.", "--plain",
         "--model", "offline"]
    )  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "Oslo" in out
    assert "Rome" in out


def test_a_model_override_serves_roles_that_name_a_model(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hive = fast_demo.parent / "named.yaml"
    hive.write_text(
        "models:\n  gpt: {model: gpt-4o-mini, base_url: 'http://127.0.0.1:9/v1'}\n"
        "roles:\n  planner: {description: Plans.}\n"
        "  counter: {description: Counts words., model: gpt}\n"
        "  aggregator: {description: Merges., model: gpt}\n"
    )
    code = main(["run", str(hive), "Count the words of hello world.", "--plain", "--model",
                 "offline", "--no-store"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert "Answer:" in capsys.readouterr().out


def test_the_console_script_runs_the_demo(fast_demo: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HONEYCOMB_DEMO_TOOL_LATENCY": "0.05"}
    done = subprocess.run(
        [sys.executable, "-m", "honeycomb", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Answer:" in done.stdout
    assert "speedup" in done.stdout


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_run_cleanly_and_resume_finishes_it(
    tmp_path: Path, stop: signal.Signals, code: int
) -> None:
    env = {**os.environ, "HONEYCOMB_DEMO_TOOL_LATENCY": "0.3", "PYTHONUNBUFFERED": "1"}
    store = tmp_path / "runs.db"
    command = [sys.executable, "-m", "honeycomb", "demo", "--plain", "--store", str(store)]
    child = subprocess.Popen(
        [*command, "--run-id", "stopped"], cwd=tmp_path, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    for line in child.stdout:  # stop it once workers are running
        if "started" in line and "planner" not in line:
            break
    child.send_signal(stop)
    _out, err = child.communicate(timeout=30)
    assert child.returncode == code, err
    assert f"{stop.name}: run stopped stopped." in err
    assert f"honeycomb resume stopped --store {store}" in err
    [kept] = RunStore(store).runs()
    assert (kept.run_id, kept.status) == ("stopped", "interrupted")

    resumed = subprocess.run(
        [sys.executable, "-m", "honeycomb", "resume", "stopped", "--store", str(store), "--plain"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "Answer:" in resumed.stdout
    [done] = RunStore(store).runs()
    assert (done.run_id, done.status) == ("stopped", "ok")
    assert len(list((tmp_path / "outbox").glob("*.md"))) <= 1  # the courier sent at most once


HELD_AS_IT_STOPS = """
import asyncio, sys
from honeycomb.cli.exits import stopped_by_signals
from runtime.concurrency import shielded

async def main() -> None:
    stopped = []
    with stopped_by_signals(stopped):
        try:
            print("ready", flush=True)
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            print("recording how it ended", flush=True)
            await shielded(asyncio.Event().wait())  # a store that does not answer

asyncio.run(main())
"""


def test_a_second_signal_stops_the_command_at_once() -> None:
    # The first Ctrl-C cancels the run, which then records that it was interrupted: with
    # its store away (PostgreSQL down), that waits for the store's tries to end (half a
    # minute), and further Ctrl-Cs did nothing. A second one now ends it at once.
    child = subprocess.Popen(
        [sys.executable, "-c", HELD_AS_IT_STOPS], text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    try:
        assert child.stdout.readline() == "ready\n"
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline() == "recording how it ended\n"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        child.kill()  # (ended by then, unless the second signal did not end it)
    assert child.returncode == 130
    assert err.endswith(
        "\nSIGINT again: stopping at once, as if the process had died: the run goes on from "
        "what its store kept when it is continued (honeycomb resume; in a chat, the session's "
        "next message), as after a crash\n"
    )  # not --force, which a process gone from this machine does not need


def test_a_signal_before_the_run_is_kept_says_there_is_nothing_to_continue(
    fast_demo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ctrl-C as the run began said "Continue it with: honeycomb resume early", and
    # that command found no such run: nothing of it had been written.
    async def stopped_as_it_begins(*_: object, **__: object) -> None:
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends
        await asyncio.Event().wait()  # until the signal cancels the run

    monkeypatch.setattr(RunStore, "take_lease", stopped_as_it_begins)
    store = fast_demo.parent / "runs.db"
    argv = ["demo", "--latency", "0", "--plain", "--run-id", "early", "--store", str(store)]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.endswith(
        "\nSIGINT: run early stopped before anything of it was kept: nothing to continue; "
        "run the command again to start it\n"
    )
    assert "honeycomb resume early" not in err.splitlines()[-1]
    assert RunStore(store).runs() == []


def test_json_into_a_pipe_closed_early_exits_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "HONEYCOMB_DEMO_TOOL_LATENCY": "0.05"}
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", "run", str(demo_hive_path()), "--json",
         "--no-store", "--model", "offline"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stderr is not None
    first = child.stdout.readline()  # what `| head -1` reads, before it closes the pipe
    child.stdout.close()
    err = child.stderr.read().decode()
    code = child.wait(timeout=60)
    assert json.loads(first)["event"] == "run.started"
    assert err == ""
    assert code == 141  # as a Unix tool killed by SIGPIPE: 128 + 13


def test_the_short_guide_into_a_pipe_closed_early_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `honeycomb | head`: the guide was printed outside the command's handling of a
    # closed pipe, and ended in a BrokenPipeError traceback with exit status 1.
    read, write = os.pipe()
    os.close(read)  # the reader went away
    with open(write, "w", buffering=1) as closed:  # each line written at once, as a tty's
        monkeypatch.setattr(sys, "stdout", closed)
        assert main([]) == 141
    assert capsys.readouterr().err == ""


def test_a_command_whose_output_streams_are_closed_runs_as_it_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With >&- 2>&- (a daemon's, a cron job's), Python has None for sys.stdout and
    # sys.stderr: the command failed with an AttributeError (exit status 1) before it
    # began, whatever it was asked.
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: {default: offline}\nroles: {planner: {}}\n\t")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", None)
    assert main(["run", str(bad), "a task"]) == 2  # the hive's error, said nowhere
    assert main(["demo", "--latency", "0", "--no-store"]) == 0
    assert sys.stdout is None  # as it was


def test_resume_json_of_a_run_that_ended_prints_its_stored_result(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = fast_demo.parent / "runs.db"
    args = ["--store", str(store), "--json"]
    assert main(["demo", "--latency", "0", "--run-id", "done", *args]) == 0
    live = [json.loads(line) for line in capsys.readouterr().out.splitlines()][-1]
    assert main(["resume", "done", *args]) == 0
    out = capsys.readouterr().out
    [record] = [json.loads(line) for line in out.splitlines()]
    assert record["event"] == "run.finished"
    assert record["status"] == "ok"
    assert record["result"]["answer_text"] == live["result"]["answer_text"]
    assert record["result"]["run_id"] == "done"


@pytest.mark.parametrize("command", ["trace", "resume"])
def test_the_start_of_a_run_id_is_told_the_run_it_starts(
    fast_demo: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # An id copied short (as git's are) was told only that there is no such run.
    assert main(["demo", "--latency", "0", "--json", "--run-id", "4f2a9c1e7b04"]) == 0
    capsys.readouterr()
    for given in ("4f2a", "4f2a9c1e7b0"):
        assert main([command, given]) == 2
        assert capsys.readouterr().err == (
            f".honeycomb/runs.db: no run {given!r} (did you mean '4f2a9c1e7b04'?) "
            "(honeycomb runs --store .honeycomb/runs.db)\n"
        )
    assert main([command, "4f2b9c1e7b04"]) == 2  # one character off: close to it
    assert "(did you mean '4f2a9c1e7b04'?)" in capsys.readouterr().err


def resume_hint(err: str) -> list[str]:
    """The resume command the first line names, as words."""
    first = err.splitlines()[0]
    return shlex.split(first[first.index("(honeycomb resume") + 1 : first.rindex(")")])


def test_the_first_line_names_the_resume_command_that_finds_the_run(
    fast_demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trip = tmp_path / "my trip"
    shutil.copytree(demo_hive_path().parent, trip)
    with (trip / "hive.yaml").open("a") as hive:
        hive.write("store: runs.db\n")  # beside the hive, not the default store
    assert (
        main(["run", "my trip/hive.yaml", "--plain", "--model", "offline", "--run-id", "r1"]) == 0
    )
    hint = resume_hint(capsys.readouterr().err)
    where = str(Path("my trip") / "runs.db")
    assert hint == ["honeycomb", "resume", "r1", "--store", where, "--model", "offline"]
    assert main(hint[1:]) == 0  # following it finds the run (it had ended: its result)
    assert "Answer:" in capsys.readouterr().out

    assert main(["demo", "--plain", "--latency", "0", "--run-id", "r2"]) == 0
    hint = resume_hint(capsys.readouterr().err)
    # The default store, named by no option; --latency ran it on --model offline.
    assert hint == ["honeycomb", "resume", "r2", "--model", "offline"]


def test_a_waiting_run_names_the_resume_command_with_the_options_that_chose_its_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    demo = ["demo", "--approve", "--plain", "--latency", "0", "--store", "r.db", "--run-id", "w1"]
    assert main(demo) == 3  # off a terminal, it waits
    told = capsys.readouterr().out.splitlines()
    # --approve too: the run goes on asking before the outbox sends
    assert "  honeycomb resume w1 --store r.db --model offline --approve" in told


def test_resume_of_a_run_made_from_python_that_ended_prints_its_stored_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    executor = Executor(
        [Role(name="w", description="d")], ScriptedModel(["the answer"]), aggregator="concat",
        store=db,
    )  # fmt: skip
    anyio.run(lambda: executor.run("task", subtasks=[("w", "go")], run_id="r0"))
    executor.store.close()  # type: ignore[union-attr]

    assert main(["resume", "r0", "--store", str(db), "--json"]) == 0
    [record] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (record["event"], record["status"]) == ("run.finished", "ok")
    assert record["result"]["answer_text"] == "## s1 (w)\nthe answer"

    assert main(["resume", "r0", "--store", str(db)]) == 0
    assert "\nAnswer:\n## s1 (w)\nthe answer\n" in capsys.readouterr().out


def test_resume_of_a_run_made_from_python_that_did_not_end_says_where_it_continues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    executor = Executor(
        [Role(name="w", description="d")], ScriptedModel([]), aggregator="concat", store=db
    )
    with pytest.raises(RunFailed):  # the script has no answer: the run failed
        anyio.run(lambda: executor.run("task", subtasks=[("w", "go")], run_id="r0"))
    executor.store.close()  # type: ignore[union-attr]

    assert main(["resume", "r0", "--store", str(db)]) == 2
    err = capsys.readouterr().err
    assert "run 'r0' was not started from a hive file" in err
    assert "Executor.resume('r0')" in err


def test_a_hive_without_a_planner_is_reported_by_validate_and_run_does_not_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hive = tmp_path / "hive.yaml"
    hive.write_text("models: {default: offline}\nroles:\n  w: {description: Works.}\n")
    assert main(["validate", str(hive)]) == 1
    out = capsys.readouterr().out
    assert f"{hive}: 1 error" in out
    assert "the hive has no planner" in out
    assert "define a role named 'planner', or name one with planner:" in out

    store = tmp_path / "runs.db"
    assert main(["run", str(hive), "a task", "--plain", "--store", str(store)]) == 2
    assert "the hive has no planner" in capsys.readouterr().err
    assert not store.exists()  # nothing started, so nothing is kept

    named = tmp_path / "named.yaml"  # a planner: naming another role will do
    named.write_text(hive.read_text() + "  v: {description: Works too.}\nplanner: w\n")
    assert main(["validate", str(named)]) == 0


def test_the_cli_runs_on_uvloop_when_it_is_installed_and_says_so(
    fast_demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    import uvloop

    from honeycomb.cli import running

    loops: list[type[asyncio.AbstractEventLoop]] = []
    real = running._run_and_report

    async def spy(*args: object, **kwargs: object) -> int:
        loops.append(type(asyncio.get_running_loop()))
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(running, "_run_and_report", spy)
    assert main(["demo", "--plain", "--latency", "0", "--no-store"]) == 0
    assert loops == [uvloop.Loop]
    assert "event loop: uvloop " in capsys.readouterr().err


def test_without_uvloop_the_cli_runs_on_asyncios_loop_and_says_nothing(
    fast_demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import importlib.util

    from honeycomb.cli import running

    real_find = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "uvloop" else real_find(name, *a),
    )
    loops: list[type[asyncio.AbstractEventLoop]] = []
    real = running._run_and_report

    async def spy(*args: object, **kwargs: object) -> int:
        loops.append(type(asyncio.get_running_loop()))
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(running, "_run_and_report", spy)
    assert main(["demo", "--plain", "--latency", "0", "--no-store"]) == 0
    assert loops == [asyncio.SelectorEventLoop]  # asyncio's own on Unix
    assert "event loop" not in capsys.readouterr().err
