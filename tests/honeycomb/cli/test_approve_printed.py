"""The commands a waiting run prints to decide its calls, for a call whose id (the
model's: an endpoint may send any text) holds a terminal's escapes and characters
that reorder text: shown as text, and pasted into a shell, the very call decided."""

from __future__ import annotations

import io
import shutil
import subprocess
import unicodedata
from pathlib import Path

import anyio
import pytest

from honeycomb import ApprovalRequest, Approvals, Executor, Role, tool
from honeycomb.approvals import PendingApproval
from honeycomb.cli.approve import asked, print_pending, print_waiting, shell_line
from honeycomb.cli.main import main
from honeycomb.run.decide import pending_of
from honeycomb.store import RunStore
from honeycomb.testing import ScriptedModel
from runtime.testing import call

CALL_ID = "c1\x1b]0;pwned\x07\x1b[2J\u202e'\\\x85\u2066"
"""A title set, the screen cleared, a right-to-left override, a quote, a backslash, a
C1 control and an isolate: what a terminal must not act on."""


@tool(side_effects=True)
def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


def _controls(text: str) -> list[str]:
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]


@pytest.mark.skipif(shutil.which("bash") is None, reason="reads the commands back with bash")
def test_a_call_id_with_escapes_is_printed_inert_and_pasted_back_whole(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    model = ScriptedModel([call("pay", {"to": "ann"}, id=CALL_ID), "paid"])
    executor = Executor([role], model, tools=[pay], store=db, aggregator="concat")
    waiting = anyio.run(lambda: executor.run("pay", subtasks=[("payer", "pay")], run_id="r1"))
    assert [p.call_id for p in waiting.pending] == [CALL_ID]  # kept as the model sent it
    out = io.StringIO()
    print_waiting(out, waiting, db, Path(".honeycomb/runs.db"))
    printed = out.getvalue()
    assert _controls(printed) == []
    (line,) = [x.strip() for x in printed.splitlines() if x.strip().startswith("honeycomb approve")]
    command = line.split("   (or add", 1)[0]
    read = subprocess.run(
        ["bash", "-c", f"set -- {command.removeprefix('honeycomb ')}; printf '%s\\0' \"$@\""],
        capture_output=True,
        check=True,
        env={"LC_ALL": "C.UTF-8"},
    )
    words = read.stdout.decode().split("\0")[:-1]
    assert words == ["approve", "r1", CALL_ID, "--store", str(db), "--worker", "s1", "--turn", "1"]
    assert main(words) == 0
    said = capsys.readouterr().out
    assert said == "approved: pay (c1 ]0;pwned  [2J '\\  ) of s1 in run r1\n"  # each a space
    assert _controls(said) == []
    assert anyio.run(pending_of, RunStore(db), "r1") == []  # that very call decided


def test_plain_words_are_quoted_as_shlex_quotes_them() -> None:
    assert shell_line(["honeycomb", "approve", "r 1", "it's"]) == (
        "honeycomb approve 'r 1' 'it'\"'\"'s'"
    )
    assert shell_line(["a\tb"]) == "$'a\\x09b'"


def test_an_argument_named_with_a_line_break_reads_as_one_argument() -> None:
    """An MCP tool's call may hold names its schema does not list (the server checks
    them): a name with a line break would show a line of its own, an argument the call
    does not have (``amount: 5`` under the real amount)."""
    arguments = {"amount": 5000, "memo\n    amount": 5}
    request = ApprovalRequest(
        run_id="r1",
        worker="s1",
        role="payer",
        call_id="c1",
        turn=1,
        tool="pay",
        arguments=arguments,
        why="asks",
    )
    shown = asked(request).splitlines()
    assert [line.strip() for line in shown if "amount" in line] == [
        "amount: 5000",
        "memo     amount: 5",
    ]
    waiting = PendingApproval(
        call_id="c1",
        worker="s1",
        role="payer",
        turn=1,
        tool="pay",
        arguments=arguments,
        why="asks",
        asked_at=0.0,
    )
    out = io.StringIO()
    print_pending(out, "r1", [waiting], None, Path(".honeycomb/runs.db"))
    listed = [line.strip() for line in out.getvalue().splitlines() if "amount" in line]
    assert listed == ["amount: 5000", "memo     amount: 5"]
