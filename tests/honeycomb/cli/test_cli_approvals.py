"""Approvals on the command line: off a terminal a run ends waiting and prints the
commands that decide it and continue it; on a terminal it asks."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from honeycomb import ApprovalRequest, Approvals, Decision, Executor, Role, tool
from honeycomb.cli.approve import TerminalApprover
from honeycomb.cli.main import main
from honeycomb.run.decide import this_user
from honeycomb.store import RunStore
from honeycomb.testing import ScriptedModel, call
from tests.support.postgres import PostgresServer
from tests.support.stores import ON_POSTGRES


def test_off_a_terminal_the_run_waits_and_says_how_to_decide_and_resume(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--approve", "--plain", "--latency", "0"]) == 3
    out = capsys.readouterr().out
    assert "run waiting" in out
    assert "role 'courier' asks for approval of 'send_to_outbox'" in out
    found = re.search(r"honeycomb approve (\S+) (\S+)", out)
    assert found is not None
    run_id, call_id = found.groups()
    assert f"honeycomb resume {run_id}" in out
    assert not fast_demo.exists()  # nothing was sent

    assert main(["approve", run_id, call_id, "--deny", "--reason", "not today"]) == 0
    assert "denied: send_to_outbox" in capsys.readouterr().out
    assert main(["approve", run_id, call_id]) == 2
    refused = capsys.readouterr().err
    assert re.search(r"it was decided already \(denied by \S+@\S+ at \d{4}-\d\d-\d\d ", refused)
    assert main(["resume", run_id, "--plain"]) == 0
    assert "Answer:" in capsys.readouterr().out
    assert not fast_demo.exists()  # denied: still nothing sent


def test_the_demo_says_when_approve_asked_nothing_and_why(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan that gives the courier no subtask sends nothing, so ``--approve`` asks
    nothing (a small model's planner seldom gives it one: SmolLM2's never did for the
    demo's task), and the demo ended as if the option had not been given."""
    weather = ["demo", "What is the weather in Lisbon?", "--approve", "--plain", "--no-store"]
    assert main([*weather, "--latency", "0"]) == 0
    assert (
        "honeycomb demo: --approve asked nothing: no worker called send_to_outbox (the plan "
        "gave courier no subtask)\n"
    ) in capsys.readouterr().err
    # Asked (off a terminal, with no store to wait in, denied): nothing more is said.
    assert main(["demo", "--approve", "--plain", "--no-store", "--latency", "0"]) == 0
    assert "asked nothing" not in capsys.readouterr().err


def test_approve_refuses_edited_arguments_that_fail_the_tools_schema(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--approve", "--plain", "--latency", "0"]) == 3
    found = re.search(r"honeycomb approve (\S+) (\S+)", capsys.readouterr().out)
    assert found is not None
    run_id, call_id = found.groups()
    assert main(["approve", run_id, call_id, "--arguments", '{"subject": 1}']) == 2
    err = capsys.readouterr().err
    assert "argument 'subject'" in err
    assert "argument 'body': Field required" in err
    edited = '{"subject": "Edited", "body": "short"}'
    assert main(["approve", run_id, call_id, "--arguments", edited]) == 0
    assert main(["resume", run_id, "--plain"]) == 0
    (sent,) = fast_demo.glob("*.md")
    assert sent.read_text().startswith("# Edited\n\nshort\n")


@ON_POSTGRES
def test_run_approve_resume_runs_and_trace_take_a_postgresql_store(
    fast_demo: Path, postgres: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--store", postgres.url()]
    assert main(["demo", "--approve", "--plain", "--latency", "0", *where]) == 3
    found = re.search(r"honeycomb approve (\S+) (\S+)", capsys.readouterr().out)
    assert found is not None
    run_id, call_id = found.groups()
    assert main(["runs", *where]) == 0
    assert " waiting " in capsys.readouterr().out.splitlines()[-1]
    assert main(["approve", run_id, call_id, *where]) == 0
    assert "approved: send_to_outbox" in capsys.readouterr().out
    assert main(["resume", run_id, "--plain", *where]) == 0
    assert "Answer:" in capsys.readouterr().out
    assert len(list(fast_demo.glob("*.md"))) == 1  # sent once
    assert main(["trace", run_id, *where]) == 0
    assert "critical path" in capsys.readouterr().out
    assert not Path(".honeycomb").exists()  # no file was made for it


async def test_the_terminal_prompt_approves_denies_and_edits() -> None:
    request = ApprovalRequest(
        run_id="r", worker="w", role="courier", call_id="c", turn=1, tool="send",
        arguments={"to": "ann"}, why="role 'courier' asks for approval of 'send'",
    )  # fmt: skip
    answers = {
        "a\n": Decision.approved(by="ann"),
        "d\nnot now\n": Decision.denied("not now", by="ann"),
        'e\n[1]\ne\n{"to": "bob"}\n': Decision.approved({"to": "bob"}, by="ann"),
    }
    for typed, wanted in answers.items():
        read_fd, write_fd = os.pipe()
        os.write(write_fd, typed.encode())
        with os.fdopen(read_fd) as typed_in, anyio.fail_after(5):
            assert await TerminalApprover(typed_in, io.StringIO(), by="ann")(request) == wanted
        os.close(write_fd)


def _read_until(fd: int, wanted: str, seen: list[str], limit_s: float = 60.0) -> None:
    ends = time.monotonic() + limit_s
    while wanted not in "".join(seen):
        assert time.monotonic() < ends, f"never saw {wanted!r} in {''.join(seen)!r}"
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            seen.append(os.read(fd, 65536).decode(errors="replace"))


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_on_a_terminal_the_demo_asks_and_runs_the_call_with_the_arguments_typed(
    tmp_path: Path,
) -> None:
    controller, terminal = pty.openpty()
    env = {
        **os.environ,
        "HONEYCOMB_DEMO_TOOL_LATENCY": "0",
        "HONEYCOMB_OUTBOX": str(tmp_path / "outbox"),
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", "demo", "--approve", "--plain", "--latency", "0"],
        cwd=tmp_path, env=env, stdin=terminal, stdout=subprocess.PIPE, stderr=terminal,
    )  # fmt: skip
    os.close(terminal)
    seen: list[str] = []
    try:
        _read_until(controller, "[a]pprove, [d]eny, [e]dit arguments?", seen)
        assert "send_to_outbox" in "".join(seen)
        os.write(controller, b"e\n")
        _read_until(controller, "arguments (JSON object):", seen)
        os.write(controller, b'{"subject": "Typed", "body": "from the terminal"}\n')
        out, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
        os.close(controller)
    assert child.returncode == 0, "".join(seen)
    assert b"Answer:" in out
    (sent,) = (tmp_path / "outbox").glob("*.md")
    assert sent.read_text().startswith("# Typed\n\nfrom the terminal\n")


BODY = "## meteorologist-1 (meteorologist)\nBest weather of the 6 looked up:\n" + "sun " * 500


async def test_the_prompt_shows_the_call_as_a_person_reads_it() -> None:
    """The tool, what it will do in its own words, why it asks, each argument as text
    (a string's lines as lines, a terminal's escapes made harmless), long values cut,
    and the choices: not one line of escaped JSON."""
    request = ApprovalRequest(
        run_id="r", worker="courier-1", role="courier", call_id="c", turn=1,
        tool="send_to_outbox", arguments={"subject": "Trip \x1b[31m", "body": BODY},
        why="role 'courier' asks for approval of 'send_to_outbox'",
        summary="Send 'Trip\x1b[2J' to the outbox.",
    )  # fmt: skip
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"a\n")
    out = io.StringIO()
    with os.fdopen(read_fd) as typed_in, anyio.fail_after(5):
        assert (await TerminalApprover(typed_in, out)(request)).approve
    os.close(write_fd)
    shown = out.getvalue()
    assert "Approval needed: courier-1 (courier) calls send_to_outbox" in shown
    assert "  will: Send 'Trip [2J' to the outbox.\n" in shown
    assert "    body:\n      ## meteorologist-1 (meteorologist)\n      Best weather" in shown
    assert "\\n" not in shown  # no escapes
    assert "\x1b" not in shown
    assert "more characters" in shown  # the body, cut
    assert len(shown) < 1000
    assert shown.rstrip().endswith("[a]pprove, [d]eny, [e]dit arguments?")


def _tool_calls(text: str) -> int:
    """The tool calls a command's closing lines count."""
    found = re.search(r"^calls\s+\d+ model, (\d+) tool", text, re.M)
    assert found is not None, f"no tool calls in:\n{text}"
    return int(found.group(1))


def _figure(text: str, label: str) -> float:
    """The number after ``label`` in a command's closing lines (the first one)."""
    found = re.search(rf"^{label}\s+([\d.]+)", text, re.M)
    assert found is not None, f"no {label!r} in:\n{text}"
    return float(found.group(1))


def test_after_a_resume_every_command_tells_the_same_figures(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that waited, was denied its call and resumed: ``resume``, ``runs`` and
    ``trace`` count the same model calls, tool calls (the denied one too: it was
    answered, with a refusal) and tokens (every life's), and say the same wall time
    and critical path, no longer than the wall time; ``runs`` says how long the run
    took, pause included, and how long it ran: the wall time."""
    assert main(["demo", "--approve", "--plain", "--latency", "0.05", "--run-id", "w1"]) == 3
    found = re.search(r"honeycomb approve w1 (\S+)", capsys.readouterr().out)
    assert found is not None
    assert main(["approve", "w1", found.group(1), "--deny", "--reason", "not today"]) == 0
    capsys.readouterr()
    assert main(["resume", "w1", "--plain"]) == 0
    resumed = capsys.readouterr().out.split("\nAnswer:\n", 1)[1]
    assert "denied: not today" in resumed
    assert main(["runs"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("w1 ")]
    assert main(["trace", "w1"]) == 0
    traced = capsys.readouterr().out
    assert "2 lives" in traced
    calls, tokens = _figure(resumed, "calls"), _figure(resumed, "tokens")
    assert (_figure(traced, "calls"), _figure(traced, "tokens")) == (calls, tokens)
    assert _tool_calls(traced) == _tool_calls(resumed)
    for label in ("wall time", "critical path"):
        assert _figure(traced, label) == _figure(resumed, label), label
    assert f" {calls:.0f} model calls " in row
    assert f" {tokens:.0f} tokens " in row
    took, ran = re.split(r"\s{2,}", row)[3:5]  # pause included, and the wall time
    assert ran == f"{_figure(resumed, 'wall time'):.2f}s"
    assert float(took.removesuffix("s")) > float(ran.removesuffix("s"))
    for shown in (resumed, traced):
        assert _figure(shown, "critical path") <= _figure(shown, "wall time")


async def test_a_decision_at_the_terminal_is_kept_as_its_users(tmp_path: Path) -> None:
    """The prompt's decision was kept as made by "the run's approver": a reader of the
    run's approvals could not tell a person at the terminal from a policy's code."""
    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    model = ScriptedModel([call("pay", {"to": "ann"}, id="c1"), "paid"])
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"a\n")
    with os.fdopen(read_fd) as typed_in, anyio.fail_after(10):
        prompt = TerminalApprover(typed_in, io.StringIO())
        executor = Executor(
            [role], model, tools=[pay], approver=prompt, store=tmp_path / "runs.db",
            aggregator="concat",
        )  # fmt: skip
        done = await executor.run("pay", subtasks=[("payer", "pay ann")], run_id="r1")
    os.close(write_fd)
    assert done.status == "ok"
    store = RunStore(tmp_path / "runs.db")
    try:
        (entry,) = store.approvals("r1")
    finally:
        store.close()
    assert entry.decided_by == f"{this_user()} (at the terminal)"


@tool(side_effects=True)
def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"
