"""Ctrl-C while a sync side-effecting tool runs: the run stops once the tool's thread
has ended (it cannot be interrupted, and what it did is kept), and the command says so
at once, rather than seeming to hang for as long as the tool takes; what the run sends
as a signal stops it is shown."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from honeycomb.cli.main import main
from tests.support.hives import hive

pytestmark = pytest.mark.timeout(60)

SENDING = """
import asyncio, sys
from honeycomb.cli.exits import stopped_by_signals
from runtime import tool
from runtime.tools.threads import in_thread

@tool(side_effects=True)
def send_message(to: str) -> str:
    \"\"\"Send a message.\"\"\"
    print("sending", flush=True)
    sys.stdin.readline()  # until the test lets it end
    return "sent"

async def main() -> None:
    with stopped_by_signals([]):
        try:
            await in_thread(send_message, {"to": "ann"})
        except asyncio.CancelledError:
            print("stopped", flush=True)

asyncio.run(main())
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="sends POSIX signals")
def test_a_signal_while_a_sync_side_effect_runs_says_what_the_stop_waits_for() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SENDING], text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stderr is not None
    try:
        assert child.stdout.readline() == "sending\n"
        child.send_signal(signal.SIGINT)
        assert child.stderr.readline() == "\n"
        assert child.stderr.readline() == (
            "SIGINT: the run stops once send_message has ended: a sync side-effecting call "
            "cannot be interrupted, and what it did is kept. SIGINT again stops at once, and "
            "a resumed run is told its outcome is unknown\n"
        )
        child.stdin.write("\n")  # the tool ends
        child.stdin.flush()
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert out == "stopped\n"


LEFT_A_THREAD = """
import sys, threading
from honeycomb.cli.main import main

# A thread the command left, which Python waits for as it exits: one that connects to a
# server that does not answer, as the command was cut short by Ctrl-C.
threading.Thread(target=threading.Event().wait).start()
sys.argv = ["honeycomb", "init", "--list"]
code = main()
print("returned", flush=True)
sys.exit(code)
"""


def test_ctrl_c_as_python_waits_for_a_thread_the_command_left_ends_it_at_once() -> None:
    """It raised KeyboardInterrupt in Python's wait for the thread, whose traceback was
    the command's last words (``Exception ignored in: <module 'threading'>``)."""
    child = subprocess.Popen(
        [sys.executable, "-c", LEFT_A_THREAD], text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    try:
        for line in child.stdout:  # the command's own lines, then its return
            if line == "returned\n":
                break
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        child.kill()  # (ended by then, unless the signal did not end it)
    assert child.returncode == 0  # the command's status
    assert err == ""


CUT_OFF = '''
import asyncio, signal
from runtime import tool

@tool
async def look_up(city: str) -> str:
    """Look up facts about a city."""
    signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends, as the call runs
    await asyncio.Event().wait()
    return "never"
'''


def cut_off_hive(folder: Path, tools: str = CUT_OFF, module: str = "cut_off_tools") -> Path:
    """A hive whose one worker's tool call (``look_up`` of ``tools``, the module
    ``module``) is cut off by Ctrl-C, as it runs."""
    (folder / f"{module}.py").write_text(tools)
    return hive(
        folder,
        f"""\
        models: {{offline: {{provider: offline, latency: 0}}}}
        roles:
          planner: {{description: Plans.}}
          researcher:
            description: Looks up facts about cities.
            tools: [{module}:look_up]
          aggregator: {{description: Merges.}}
        """,
    )


def test_the_json_of_a_run_a_signal_stops_ends_with_what_the_run_sent_as_it_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json`` ended at the last event read before the signal: the calls and workers
    it cut off, and the run's ``run.finished`` (``interrupted``), were never printed."""
    path, store = cut_off_hive(tmp_path), str(tmp_path / "runs.db")
    argv = ["run", str(path), "Look up facts about Lisbon.", "--json", "--store", store]
    assert main(argv) == 130
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["event"], line.get("status")) for line in lines[-3:]] == [
        ("tool_call.finished", "cancelled"),
        ("worker.finished", "cancelled"),
        ("run.finished", "interrupted"),
    ]


REMOVING = '''
import asyncio, shutil, signal
from runtime import tool

@tool
async def look_up(city: str) -> str:
    """Look up facts about a city."""
    shutil.rmtree(FOLDER)  # the store's, as a clean-up would, as the run goes
    signal.raise_signal(signal.SIGINT)
    await asyncio.Event().wait()
    return "never"
'''


def test_a_run_whose_store_was_removed_as_it_went_is_said_to_be_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its folder removed as the run went (SQLite wrote on into the file it had open),
    a run stopped by Ctrl-C was said to have stopped before anything of it was kept."""
    folder = tmp_path / "kept"
    tools = REMOVING.replace("FOLDER", repr(str(folder)))
    path, store = cut_off_hive(tmp_path, tools, "removing_tools"), folder / "runs.db"
    argv = ["run", str(path), "Look up facts about Lisbon.", "--plain", "--store", str(store)]
    assert main([*argv, "--run-id", "gone"]) == 130
    assert capsys.readouterr().err.endswith(
        f"\nSIGINT: run gone stopped, and its store {store} is not there any more (removed "
        "as the run went): nothing of it is left to continue\n"
    )


class _ClosedBySignal(io.StringIO):
    """Standard output into a pipe whose reader the signal ended (``| jq``, in the
    shell that got the Ctrl-C): it takes no line after the call the signal cuts off."""

    def write(self, text: str) -> int:
        if "tool_call.started" in self.getvalue():
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


def test_a_run_a_signal_stops_says_so_though_its_json_pipe_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Showing what the run sent as it stopped into a pipe the same Ctrl-C closed ended
    the command as a closed pipe (status 141), without a word of how the run stopped."""
    monkeypatch.setattr("sys.stdout", _ClosedBySignal())
    path, store = cut_off_hive(tmp_path), str(tmp_path / "runs.db")
    argv = ["run", str(path), "Look up facts about Lisbon.", "--json", "--store", store]
    assert main(argv) == 130
    assert capsys.readouterr().err.startswith("\nSIGINT: run ")


EXITING = '''
import sys
from runtime import tool

@tool
async def look_up(city: str) -> str:
    """Look up facts about a city."""
    sys.exit(3)  # as a command-line library a tool calls may
'''


def test_a_tool_that_ends_the_process_is_named_with_the_command_that_continues_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool's ``sys.exit(3)`` stops the run, kept interrupted, and ends the command
    with status 3: the command said nothing of why, nor how to continue the run."""
    path = cut_off_hive(tmp_path, EXITING, "exiting_tools")
    store = str(tmp_path / "runs.db")
    argv = ["run", str(path), "Look up facts about Lisbon.", "--json", "--store", store]
    argv += ["--run-id", "ended"]
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 3
    assert capsys.readouterr().err == (
        "\nSystemExit: 3; raised by tool 'look_up' of worker s1: run ended stopped.\n"
        f"Continue it with: honeycomb resume ended --store {store}\n"
    )
