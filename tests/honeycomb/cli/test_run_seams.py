"""``honeycomb run``, ``demo`` and ``resume`` at their seams: a signal that comes after
the run ended, as it stops its MCP servers, does not make it an interrupted run; the
command that continues a run names the options that chose its models, and ``resume``
says so when it would continue a run on other models; a blank TASK is refused, and the
hive's example task runs only when TASK is left out."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import anyio
import pytest

from honeycomb import Executor, Subtask
from honeycomb.cli import resuming
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import ConfigError, ModelRequest, RunBusy
from tests.support import ROOT
from tests.support.hives import CHATTY, hive

pytestmark = pytest.mark.timeout(120)

SLOW_TO_STOP = """\
import time

from tests.support.mcp_server import server

server.run()  # until its input is closed: the client asks it to stop
time.sleep(10)  # then it lingers, as a server slow to stop does, until it is killed
"""
"""An MCP server that takes its client's grace (seconds) to stop: a run that uses it
ends, then stops it, and a signal sent as the run's last line is read comes meanwhile."""

ENDED = re.compile(r"\] run \w+ in ")
"""The line of the plain view that says how the run ended."""


def slow_to_stop_hive(folder: Path, policy: str = "{}") -> Path:
    """A hive whose one worker looks a word up on the server of :data:`SLOW_TO_STOP`."""
    server = folder / "slow_to_stop.py"
    server.write_text(SLOW_TO_STOP)
    return hive(
        folder,
        f"""\
        models: {{default: {{provider: offline, latency: 0}}}}
        mcp_servers:
          words:
            command: "{sys.executable}"
            args: ["{server}"]
            env: {{PYTHONPATH: "{ROOT}"}}
        roles:
          planner: {{description: Plans.}}
          looker:
            description: Looks words up in the dictionary.
            tools: ["words:lookup"]
          aggregator: {{description: Merges.}}
        policy: {policy}
        """,
    )


def signalled_once_it_ended(folder: Path, path: Path, db: Path) -> tuple[int, str, str]:
    """``honeycomb run`` of ``path``, sent SIGINT once it printed how its run ended:
    its exit status, standard output and standard error."""
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", "run", str(path), "Look up the word bee.",
         "--plain", "--store", str(db), "--run-id", "r1"],
        cwd=folder, env={**os.environ, "PYTHONUNBUFFERED": "1"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    seen = []
    for line in child.stdout:
        seen.append(line)
        if ENDED.search(line):  # the run has ended; its MCP server is stopping
            child.send_signal(signal.SIGINT)
            break
    out, err = child.communicate(timeout=60)
    return child.returncode, "".join(seen) + out, err


def test_ctrl_c_after_the_run_ended_prints_its_answer_and_exits_by_its_status(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    code, out, err = signalled_once_it_ended(tmp_path, slow_to_stop_hive(tmp_path), db)
    assert code == 0, err
    assert "\nAnswer:\n" in out
    assert "stopped" not in err
    assert "Continue it with" not in err
    assert RunStore(db).find("r1").status == "ok"  # type: ignore[union-attr]


def test_ctrl_c_after_the_run_went_over_its_budget_says_so_and_exits_1(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    path = slow_to_stop_hive(tmp_path, "{budgets: {model_calls: 2}}")  # its worker's 2nd call
    code, out, err = signalled_once_it_ended(tmp_path, path, db)
    assert code == 1, err
    assert "\nbudget exceeded: model_calls used 2 of 2 allowed" in out
    assert "budget exceeded: budget exceeded" not in out  # the error says it once
    assert "stopped" not in err
    assert RunStore(db).find("r1").status == "over_budget"  # type: ignore[union-attr]


def resume_hint(err: str) -> list[str]:
    """The resume command the line that names the run's store names, as words."""
    [kept] = [line for line in err.splitlines() if " · kept in " in line]
    return shlex.split(kept[kept.index("(honeycomb resume") + 1 : kept.rindex(")")])


def test_the_command_that_continues_a_run_names_the_options_that_chose_its_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    hive(tmp_path, CHATTY)
    task = ["run", "hive.yaml", "Find the weather in Rome.", "--plain", "--store", "my runs.db"]
    models = ["--model", "offline", "--tool-protocol", "text", "--base-url", "http://h:1/v1"]
    assert main([*task, "--run-id", "r1", *models, "--record", "calls.json"]) == 0
    # --record does not choose the models; resume goes on in its cassette.
    assert resume_hint(capsys.readouterr().err) == [
        "honeycomb", "resume", "r1", "--store", "my runs.db", *models, "--record", "calls.json",
    ]  # fmt: skip
    assert main([*task, "--run-id", "r2", "--replay", "calls.json"]) == 0
    assert resume_hint(capsys.readouterr().err)[-2:] == ["--replay", "calls.json"]
    # So does the backend chosen over the hive's: a run on Ray is continued on Ray.
    assert main([*task, "--run-id", "r3", "--backend", "local"]) == 0
    assert resume_hint(capsys.readouterr().err)[-2:] == ["--backend", "local"]
    on_ray = argparse.Namespace(backend="ray", ray_address="h:6379", model=None)
    assert resuming.resume_hint("r4", "runs.db", on_ray).endswith(
        "--backend ray --ray-address h:6379"
    )


def test_following_the_command_a_stopped_run_printed_continues_it_on_its_models(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "HONEYCOMB_DEMO_TOOL_LATENCY": "0.3",
        "HONEYCOMB_OUTBOX": str(tmp_path / "outbox"),
        "PYTHONUNBUFFERED": "1",
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", "demo", "--plain", "--store", "runs.db",
         "--run-id", "cut", "--model", "offline", "--tool-protocol", "text"],
        cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    for line in child.stdout:  # stop it once workers are running
        if "started" in line and "planner" not in line:
            break
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    [hint] = [line for line in err.splitlines() if line.startswith("Continue it with: ")]
    words = shlex.split(hint.removeprefix("Continue it with: "))
    assert words == [
        "honeycomb", "resume", "cut", "--store", "runs.db",
        "--model", "offline", "--tool-protocol", "text",
    ]  # fmt: skip
    resumed = subprocess.run(
        [sys.executable, "-m", "honeycomb", *words[1:], "--plain"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "warning" not in resumed.stderr
    assert RunStore(tmp_path / "runs.db").find("cut").status == "ok"  # type: ignore[union-attr]


async def cut_off_on_a_model_of_its_own(path: Path, db: Path) -> None:
    """Run ``cut`` of the hive at ``path`` on a model named ``elsewhere``, kept in
    ``db``, and cut it off once its worker has answered (its aggregator's call hangs)."""
    hung = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        if (request.conversation or "").endswith("aggregator"):
            hung.set()
            await anyio.sleep_forever()
        return "It is sunny in Rome."

    model = FunctionModel(answer, name="elsewhere")
    executor = Executor.from_hive(load_hive(path), model=model, store=db)
    plan = [Subtask(id="s1", role="researcher", instruction="Find the weather in Rome.")]
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: executor.run("Find the weather in Rome.", subtasks=plan, run_id="cut")
        )
        await hung.wait()
        group.cancel_scope.cancel()
    assert executor.store is not None
    executor.store.close()


def test_resume_on_other_models_than_answered_the_run_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = hive(tmp_path, CHATTY)
    asyncio.run(cut_off_on_a_model_of_its_own(path, tmp_path / "runs.db"))
    assert RunStore(tmp_path / "runs.db").find("cut").status == "interrupted"  # type: ignore[union-attr]
    assert main(["resume", "cut", "--store", "runs.db", "--plain"]) == 0  # on the hive's model
    err = capsys.readouterr().err
    assert (
        "warning: run cut was answered by elsewhere so far, and this command continues it "
        "on offline. To continue it on the models it started with, give the options that "
        "chose them (--model, --gguf, --context, --tool-protocol, --base-url, --replay)"
    ) in err


@pytest.mark.parametrize("task", ["", " \t\n"])
def test_a_blank_task_is_refused_and_the_example_task_runs_only_when_none_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], task: str
) -> None:
    monkeypatch.chdir(tmp_path)
    hive(tmp_path, CHATTY + "example_task: Find the weather in Rome.\n")
    assert main(["run", "hive.yaml", task, "--plain"]) == 2
    assert main(["demo", task, "--plain", "--latency", "0"]) == 2
    err = capsys.readouterr().err
    assert f"honeycomb run: TASK is empty ({task!r}): say what the run is to do" in err
    assert "or leave TASK out to run the hive's example_task" in err
    assert f"honeycomb demo: TASK is empty ({task!r})" in err
    assert not (tmp_path / ".honeycomb").exists()  # no run was kept
    assert main(["run", "hive.yaml", "--plain"]) == 0  # TASK left out: the example task
    assert "started: Find the weather in Rome." in capsys.readouterr().out


def test_a_hive_with_an_empty_example_task_runs_only_with_a_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    hive(tmp_path, CHATTY + 'example_task: "  "\n')
    assert main(["run", "hive.yaml", "--plain"]) == 2
    assert capsys.readouterr().err == (
        "honeycomb run: no TASK given, and hive.yaml has an empty example_task: give one "
        "(honeycomb run hive.yaml TASK), or write the hive's example_task:\n"
    )
    hive(tmp_path, CHATTY)
    assert main(["run", "hive.yaml", "--plain"]) == 2
    assert "and hive.yaml has no example_task: give one" in capsys.readouterr().err


def test_a_run_over_its_budget_says_budget_exceeded_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said 'budget exceeded: budget exceeded: model_calls ...'."""
    path = hive(
        tmp_path,
        """\
        models: {default: {provider: offline, latency: 0}}
        roles:
          planner: {description: Plans.}
          researcher: {description: Looks things up.}
          aggregator: {description: Merges.}
        policy: {budgets: {model_calls: 1}}
        """,
    )
    assert main(["run", str(path), "Look up bees.", "--plain", "--no-store"]) == 1
    out = capsys.readouterr().out
    assert "\nbudget exceeded: model_calls used 1 of 1 allowed" in out
    assert "budget exceeded: budget exceeded" not in out


def test_a_run_stopped_before_its_answer_shows_what_its_finished_subtasks_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run its budget stopped as it aggregated printed why and its figures, and
    nothing of the answers its workers had found (minutes of a local model's work)."""
    path = hive(
        tmp_path,
        """\
        models: {default: {provider: offline, latency: 0}}
        roles:
          planner: {description: Plans.}
          researcher: {description: Looks things up.}
          aggregator: {description: Merges.}
        policy: {budgets: {model_calls: 2}}
        """,
    )
    assert main(["run", str(path), "Look up bees.", "--plain", "--no-store"]) == 1
    out = capsys.readouterr().out
    setting = f"policy.budgets.model_calls at {path}:6"  # where the file sets it
    assert (
        f"\nbudget exceeded: model_calls used 2 of 2 allowed by {setting}\n\nFound before it "
        "stopped:\n"
        "## s1 (researcher)\n[offline simulation] I have no tool results to go on. The task "
        "was: Look up bees.\n\nwall time "
    ) in out
    # The run's own output guards never passed an answer made of them: none is shown.
    text = path.read_text().replace("roles:", "guards: {output: [reviewer]}\nroles:")
    path.write_text(text.replace("aggregator: {description: Merges.}", "reviewer: {}"))
    assert main(["run", str(path), "Look up bees.", "--plain", "--no-store"]) == 1
    out = capsys.readouterr().out
    setting = f"policy.budgets.model_calls at {path}:7"  # a line further down
    assert f"\nbudget exceeded: model_calls used 2 of 2 allowed by {setting}\nwall time " in out
    assert "Found before it stopped" not in out


def test_a_run_id_of_another_hives_run_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # --run-id of a run another hive file started was taken as this hive's: ended, its
    # answer was shown as this hive's; not ended, it was continued with this hive's
    # roles, its plan failed ('unknown role ...') and the run was kept as failed.
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        hive(tmp_path / name, CHATTY)
    assert main(["run", "a/hive.yaml", "Find the weather", "--run-id", "r1", "--plain"]) == 0
    store = RunStore(tmp_path / ".honeycomb" / "runs.db")
    [before] = store.runs()
    capsys.readouterr()
    assert main(["run", "b/hive.yaml", "Find the weather", "--run-id", "r1", "--plain"]) == 2
    assert capsys.readouterr().err == (
        f"run 'r1' in .honeycomb/runs.db was started from another hive file, "
        f"{tmp_path / 'a' / 'hive.yaml'}, not b/hive.yaml: show or continue it with "
        "honeycomb resume r1, or give this run a new --run-id\n"
    )
    assert store.runs() == [before]  # neither taken nor changed
    (tmp_path / "a").rename(tmp_path / "moved")  # the same hive, moved: its own run
    assert main(["run", "moved/hive.yaml", "Find the weather", "--run-id", "r1", "--plain"]) == 0


def test_a_run_id_of_a_run_of_another_task_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # --run-id of a stored run with another task said 'run failed: ...' (exit 1) of a
    # run that was left as it was, whatever its state (here one that ended).
    monkeypatch.chdir(tmp_path)
    hive(tmp_path, CHATTY)
    assert main(["run", "hive.yaml", "Find the weather", "--run-id", "r1", "--plain"]) == 0
    store = RunStore(tmp_path / ".honeycomb" / "runs.db")
    [before] = store.runs()
    capsys.readouterr()
    assert main(["run", "hive.yaml", "Find the bees", "--run-id", "r1", "--plain"]) == 2
    said = capsys.readouterr()
    assert said.err.endswith(
        "run 'r1' in .honeycomb/runs.db was started with another task ('Find the weather'): "
        "show or continue it with honeycomb resume r1, or give this run a new --run-id\n"
    )
    assert "run failed" not in said.out
    assert store.runs() == [before]
    assert main(["run", "hive.yaml", "Find the weather", "--run-id", "r1", "--plain"]) == 0


UNREACHABLE = """\
models:
  gpt:
    model: m
    base_url: http://127.0.0.1:9/v1
    api_key: k
    retry: {attempts: 1}
    price: {input_per_mtok: 1.0, output_per_mtok: 2.0}
roles:
  planner: {description: Plans.}
  writer: {description: Writes.}
"""
"""A hive whose one model, priced, is at an address nothing listens on."""


def test_a_run_that_cannot_start_is_not_said_to_be_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hive loads, and the run cannot be made on the model --model names (a budget in
    dollars, and no price on the offline model): the command said 'run ID · kept in
    .honeycomb/runs.db (honeycomb resume ID)' first, of a run no store ever held."""
    monkeypatch.chdir(tmp_path)
    path = hive(tmp_path, UNREACHABLE + "policy:\n  budgets: {cost: 1.0}\n")
    code = main(["run", str(path), "hi", "--model", "offline"])
    err = capsys.readouterr().err
    assert code == 2
    assert "policy.budgets.cost: a budget in dollars" in err
    assert "kept in" not in err
    assert "honeycomb resume" not in err


def test_a_run_another_process_carries_on_is_refused_before_it_is_said_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``resume`` of a run under way elsewhere said 'run cut · kept in runs.db
    (honeycomb resume cut)' first, and that it continued the run on the hive's model,
    then that the run was another process's."""
    monkeypatch.chdir(tmp_path)
    path = hive(tmp_path, CHATTY)
    asyncio.run(cut_off_on_a_model_of_its_own(path, tmp_path / "runs.db"))

    async def carried_on(store: RunStore, run_id: str, *, steal: bool = False) -> NoReturn:
        raise RunBusy(run_id, path=store.where, host="elsewhere", pid=4242, heartbeat_age_s=1.0)

    monkeypatch.setattr(RunStore, "take_lease", carried_on)
    assert main(["resume", "cut", "--store", "runs.db", "--plain"]) == 2
    err = capsys.readouterr().err
    assert "run 'cut' is being carried on by pid 4242 on host 'elsewhere'" in err
    assert "kept in" not in err
    assert "honeycomb resume" not in err
    assert "this command continues it" not in err


def test_run_opens_its_store_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --run-id and --record, the store was opened once to see whether the run was
    kept already, and again for the run."""
    monkeypatch.chdir(tmp_path)
    hive(tmp_path, CHATTY)
    made: list[object] = []
    init = RunStore.__init__

    def counted(store: RunStore, where: Path | str, **options: Any) -> None:
        made.append(where)
        init(store, where, **options)

    monkeypatch.setattr(RunStore, "__init__", counted)
    argv = ["run", "hive.yaml", "Find the weather in Rome.", "--plain", "--run-id", "r1"]
    assert main([*argv, "--record", "calls.json"]) == 0
    assert made == [Path(".honeycomb") / "runs.db"]
    assert " · kept in .honeycomb/runs.db (honeycomb resume r1 --record calls.json)" in (
        capsys.readouterr().err
    )


def test_the_trace_of_a_failed_run_says_what_it_failed_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`honeycomb trace` drew a failed run's planner as an error, and nowhere said why
    the run failed (the store kept its error, which only the web page showed)."""
    monkeypatch.chdir(tmp_path)
    path = hive(tmp_path, UNREACHABLE)
    assert main(["run", str(path), "hi", "--plain", "--run-id", "f1"]) == 1
    capsys.readouterr()
    assert main(["trace", "f1"]) == 0
    out = capsys.readouterr().out
    assert "failed: ModelConnectionError: cannot reach the model endpoint" in out


def test_a_run_its_output_guard_refused_says_what_it_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose answer the run's output guard refused printed why, and nothing of
    what it had spent, as a run stopped by its budget or by a failed subtask prints."""
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models:\n  m: {provider: offline, latency: 0}\n"
        "roles:\n  planner: {description: Plans.}\n  writer: {description: Writes.}\n"
        'guards: {output: ["tests.support.guards:short"]}\n'
    )
    assert main(["run", str(path), "Write about bees.", "--plain", "--no-store"]) == 1
    out = capsys.readouterr().out
    assert "run failed: output guard 'tests.support.guards:short' tripped" in out
    assert "Found before it stopped" not in out  # the answers it refused are not shown
    assert re.search(r"calls +2 model, 0 tool", out)  # the planner's and the writer's


PRICED = (
    CHATTY.replace(
        "latency: 0\n", "latency: 0\n    price: {input_per_mtok: 1, output_per_mtok: 2}\n"
    )
    + "policy:\n  budgets: {cost: 1.0}\n"
)
"""A hive whose model has a price, and whose run is bounded in dollars."""


def test_a_model_given_in_place_of_the_hives_is_told_at_the_line_it_breaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--model offline`` stands in for a priced model under a budget in dollars: the
    Executor refuses it (nothing would count against the budget), which the command
    said without the hive's line, nor that --model made the models unpriced."""
    monkeypatch.chdir(tmp_path)
    path = hive(tmp_path, PRICED)
    line = PRICED[: PRICED.index("{cost: 1.0}")].count("\n") + 1
    assert main(["run", "hive.yaml", "Find the weather in Rome.", "--plain", "--no-store"]) == 0
    argv = ["run", "hive.yaml", "Find the weather in Rome.", "--plain", "--no-store"]
    assert main([*argv, "--model", "offline"]) == 2
    err = capsys.readouterr().err
    assert f"hive.yaml:{line}:13: policy.budgets.cost: a budget in dollars" in err
    assert err.rstrip().endswith("(--model offline stands in for the hive's models)")
    with pytest.raises(ConfigError) as refused:  # from Python, alike
        Executor.from_hive(load_hive(path), model=FunctionModel(lambda _: "done"))
    assert (refused.value.file, refused.value.line) == (str(path), line)
