"""The terminal's prompt, editing a call whose arguments hold characters that act on a
terminal or reorder what it shows: the JSON it shows to edit holds none of them (each
a JSON escape), and sent back as it is, it is the call's own arguments; and editing a
call whose arguments hold a secret, shown masked."""

from __future__ import annotations

import io
import json
import os
import time
import unicodedata
from pathlib import Path

import anyio

from honeycomb import (
    ApprovalRequest,
    Approvals,
    Decision,
    Executor,
    Policy,
    Role,
    add_secret,
    tool,
)
from honeycomb.cli.approve import TerminalApprover, asked, json_line
from honeycomb.testing import ScriptedModel, call
from runtime.secrets import masked

ARGUMENTS = {
    "account": "IBAN DE44 5001 0517 \u202e5407 3249 31\u202c",
    "memo": "rent\x85\x9b2J for march\u200b\U000e0041",
}
"""An account a right-to-left override shows reversed, a C1 control (NEL, CSI), a
zero-width space and a tag character."""
PASSWORD = "pg-pass-8f3a1c77e2"
DSN = f"postgresql://app:{PASSWORD}@db/prod"


class _Screen(io.StringIO):
    """What the prompt writes; ``asked`` is set once it asks for the edited JSON."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = anyio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if "arguments (JSON object): " in self.getvalue():
            self.asked.set()
        return written


def _controls(text: str) -> list[str]:
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]


async def test_the_json_to_edit_shows_no_character_that_acts_and_reads_back_as_the_call() -> None:
    request = ApprovalRequest(
        run_id="r", worker="w", role="payer", call_id="c", turn=1, tool="pay",
        arguments=ARGUMENTS, why="role 'payer' asks for approval of 'pay'",
    )  # fmt: skip
    shown = _Screen()
    read_fd, write_fd = os.pipe()
    decided: list[Decision] = []
    with os.fdopen(read_fd) as typed_in, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def decide() -> None:
                decided.append(await TerminalApprover(typed_in, shown, by="ann")(request))

            tg.start_soon(decide)
            os.write(write_fd, b"e\n")
            await shown.asked.wait()
            assert _controls(shown.getvalue()) == []
            (line,) = [x for x in shown.getvalue().split("\n") if "as JSON now: " in x]
            now = line.split("as JSON now: ", 1)[1]
            os.write(write_fd, now.encode() + b"\n")  # pasted back as it is
    os.close(write_fd)
    assert "\\u202e5407" in now
    assert "\\u0085\\u009b2J" in now
    assert decided == [Decision.approved(ARGUMENTS, by="ann")]  # the call's own arguments
    assert json_line(ARGUMENTS) == now


async def test_an_edit_that_changes_a_masked_secret_is_refused_at_the_prompt() -> None:
    """The prompt shows the password masked; an edit that changes the value holding
    the mask is refused there, naming the argument, and the question asked again (not
    told to the model after the person has gone); one that leaves it is taken."""
    add_secret(PASSWORD, "password")
    request = masked(
        ApprovalRequest(
            run_id="r", worker="w", role="dba", call_id="c", turn=1, tool="run_sql",
            arguments={"dsn": DSN, "sql": "select 1"}, why="role 'dba' asks",
        )
    )  # fmt: skip
    assert request.arguments["dsn"] == "postgresql://app:[password hidden]@db/prod"
    moved = json.dumps({"dsn": "postgresql://app:[password hidden]@db/test", "sql": "select 1"})
    kept = json.dumps({**request.arguments, "sql": "select 2"})
    shown = io.StringIO()
    read_fd, write_fd = os.pipe()
    os.write(write_fd, f"e\n{moved}\ne\n{kept}\n".encode())
    with os.fdopen(read_fd) as typed_in, anyio.fail_after(10):
        decided = await TerminalApprover(typed_in, shown, by="ann")(request)
    os.close(write_fd)
    said = shown.getvalue()
    assert "argument 'dsn' holds a secret (shown as [password hidden]) in a value the" in said
    assert said.count("[a]pprove, [d]eny, [e]dit arguments? ") == 2  # asked again
    assert PASSWORD not in said
    assert decided == Decision.approved(json.loads(kept), by="ann")  # the run keeps the password


async def test_a_question_whose_time_to_decide_ran_out_says_so_as_it_is_withdrawn() -> None:
    """The prompt says by when to decide; once that passes the call is denied, and the
    prompt says it is withdrawn (a line typed at it then answers nothing of it), as
    it does for a call another decider answered first."""

    @tool(side_effects=True)
    def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    shown = io.StringIO()
    read_fd, write_fd = os.pipe()
    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    with os.fdopen(read_fd) as typed_in, anyio.fail_after(10):
        executor = Executor(
            [role],
            ScriptedModel([call("pay", {"to": "ann"}), "not paid"]),
            tools=[pay],
            approver=TerminalApprover(typed_in, shown, by="ann"),
            policy=Policy(approval_timeout_s=0.2),
        )
        result = await executor.run("pay", subtasks=[("payer", "pay ann")])
    os.close(write_fd)
    said = shown.getvalue()
    assert "  decide by: " in said
    assert said.endswith(
        "\n  withdrawn: the time to decide ran out (approval_timeout_s): the call is denied\n"
    )
    worker = result.subtasks["s1"].worker
    assert worker is not None
    assert [m.content for m in worker.transcript.messages if m.role == "tool"] == [
        "denied: no decision within 0.2s"
    ]


def test_a_time_to_decide_of_another_day_says_its_date() -> None:
    later = time.time() + 3 * 86400
    request = ApprovalRequest(
        run_id="r", worker="w", role="payer", call_id="c", turn=1, tool="pay",
        arguments={}, why="asks", deadline=later,
    )  # fmt: skip
    day = time.strftime("%Y-%m-%d", time.localtime(later))
    assert f"  decide by: {day} " in asked(request)


async def test_a_question_the_input_ended_at_leaves_the_call_waiting(tmp_path: Path) -> None:
    """Ctrl-D at the prompt (the input ended) denied the call, as a failing approver
    (``the approver failed (EOFError ...)``), a decision nobody made, and the prompt's
    line was never ended. The call waits in the store now, as one asked off a terminal,
    and the run ends waiting."""
    paid: list[str] = []

    @tool(side_effects=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    shown = io.StringIO()
    read_fd, write_fd = os.pipe()
    os.close(write_fd)  # the input has ended
    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    with os.fdopen(read_fd) as typed_in, anyio.fail_after(10):
        executor = Executor(
            [role],
            ScriptedModel([call("pay", {"to": "ann"}), "not paid"]),
            tools=[pay],
            approver=TerminalApprover(typed_in, shown, by="ann"),
            store=tmp_path / "runs.db",
        )
        async with executor:
            result = await executor.run("pay", subtasks=[("payer", "pay ann")])
            pending = await executor.pending(result.run_id)
    assert shown.getvalue().endswith("[e]dit arguments? \n  not decided: the input ended\n")
    assert result.status == "waiting"
    assert [p.tool for p in pending] == ["pay"]
    assert paid == []


async def test_a_question_the_input_ended_at_in_a_run_with_no_store_is_denied_saying_why() -> None:
    """With no store to wait in, the call is denied: it was said to the model as
    ``no approver is attached``, where the terminal's was, and decided nothing."""

    @tool(side_effects=True)
    def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    read_fd, write_fd = os.pipe()
    os.close(write_fd)  # the input has ended
    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    with os.fdopen(read_fd) as typed_in, anyio.fail_after(10):
        executor = Executor(
            [role],
            ScriptedModel([call("pay", {"to": "ann"}), "not paid"]),
            tools=[pay],
            approver=TerminalApprover(typed_in, io.StringIO(), by="ann"),
        )
        result = await executor.run("pay", subtasks=[("payer", "pay ann")])
    worker = result.subtasks["s1"].worker
    assert worker is not None
    assert [m.content for m in worker.transcript.messages if m.role == "tool"] == [
        "denied: the approver decided nothing (the input ended while a call waited for "
        "approval) and the run has no store to wait in"
    ]
