"""``honeycomb chat`` at its seams: it holds its Executor (a model served from the
process keeps its server, and its prompt cache, from one message to the next) and lets
it go however the chat ends; a turn cut off by Ctrl-C is answered, and shown, before
the next message of the conversation; Ctrl-C at the prompt ends the chat at once, on
asyncio's loop and on uvloop; lines come from a pipe as typed."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from honeycomb.cli.main import main
from honeycomb.cli.resuming import NOT_RECORDED
from honeycomb.cli.typed import Typed
from honeycomb.errors import StoreError
from honeycomb.offline import OfflineModel
from honeycomb.run.record import RunRecord
from honeycomb.store import RunStore
from runtime import Model, ModelRequest, ModelResponse, ModelResponseError, WrapperModel
from tests.support import ROOT
from tests.support.hives import CHATTY
from tests.support.postgres import PostgresServer
from tests.support.stores import ON_POSTGRES


class Served(WrapperModel):
    """A model served from this process, as llama.cpp is: its server starts with a
    call that finds it stopped, and stops once the last block that holds it ends."""

    def __init__(self, inner: Model) -> None:
        super().__init__(inner)
        self.holders = 0
        self.running = False
        self.starts = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not self.running:
            self.starts += 1
            self.running = True
        return await self.inner.complete(request)

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        self.holders += 1
        try:
            yield
        finally:
            self.holders -= 1
            if self.holders == 0:
                self.running = False


class Offline(OfflineModel):
    """The offline model, but a message that says ``stop`` is Ctrl-C'd (SIGINT, as the
    terminal sends it) as it is called with it, and one that says ``fail`` fails."""

    stops = True
    sends = signal.SIGINT

    async def complete(self, request: ModelRequest) -> ModelResponse:
        said = str(request.messages[-1].content)
        if "fail" in said:
            raise ModelResponseError("the model said nothing of use")
        if self.stops and "stop" in said:
            signal.raise_signal(self.sends)
            await asyncio.Event().wait()
        return await super().complete(request)


@pytest.fixture
def hive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "hive.yaml"
    path.write_text(CHATTY)
    return path


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Served:
    """The model of every role of the chats the test starts."""
    model = Served(Offline(latency=0))
    monkeypatch.setattr("honeycomb.cli.chat.model_of", lambda args, hive: model)
    return model


def chat(monkeypatch: pytest.MonkeyPatch, hive: Path, typed: str, *more: str) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    return main(["chat", str(hive), "--plain", *more])


@pytest.mark.parametrize(
    ("typed", "status"),
    [
        pytest.param("Find the weather in Rome.\nAnd in Oslo?\n/exit\n", 0, id="exit"),
        pytest.param("Find the weather in Rome.\nAnd in Oslo?\n", 0, id="end of input"),
        pytest.param("Find the weather in Rome.\nAnd in Oslo?\nfail now\n", 0, id="a failed turn"),
        pytest.param("Find the weather in Rome.\nAnd in Oslo?\nstop now\n", 130, id="Ctrl-C"),
    ],
)
def test_the_chat_holds_its_models_for_every_turn_and_lets_go_however_it_ends(
    hive: Path,
    served: Served,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    typed: str,
    status: int,
) -> None:
    """Each message is a run, and a run outside an Executor's block starts and stops
    its served models: a chat not holding its Executor reloaded its model (losing its
    prompt cache) on every message."""
    assert chat(monkeypatch, hive, typed, "--no-store") == status
    out = capsys.readouterr().out
    assert out.count("[offline simulation]") == 2
    assert served.starts == 1  # once for the conversation, not once a message
    assert served.holders == 0  # let go as the chat ended
    assert not served.running


def test_a_turn_cut_off_by_ctrl_c_is_answered_and_shown_before_the_next_message(
    hive: Path,
    served: Served,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cut_off = "Find the weather in Rome, then stop.\n"
    assert chat(monkeypatch, hive, cut_off, "--session", "u1") == 130
    capsys.readouterr()

    assert isinstance(served.inner, Offline)
    served.inner.stops = False
    assert chat(monkeypatch, hive, "/cost\nAnd in Oslo?\n/cost\n", "--session", "u1") == 0
    out = capsys.readouterr().out
    # Said as the chat starts, before anything runs.
    started = out.index("message 1 did not finish (interrupted): your next message continues")
    assert started < out.index("you>")
    assert "#1          -  interrupted" in out
    # Its answer, then its table with what it spent, before the new message's.
    resumed = out.index("message 1 did not finish (interrupted): it goes on first")
    first = out.index("“Find the weather in Rome, then stop”", resumed)
    second = out.index("“And in Oslo?”", first)
    tables = [int(n) for n in re.findall(r"tokens +(\d+)", out[resumed:])]
    assert len(tables) == 2
    assert all(tokens > 0 for tokens in tables)
    assert out.index("tokens", first) < second
    assert f"; {sum(tables)} tokens in this chat" in out
    assert "#1          -  ok" in out[resumed:]


def test_a_chat_stopped_by_ctrl_c_says_the_command_that_goes_on_with_it(
    hive: Path,
    served: Served,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It said ``cancelled`` alone: the conversation's id, which the next chat needs
    (``--session``) to go on with it, was on its first line, scrolled away."""
    typed = "Find the weather in Rome.\nAnd in Oslo, then stop.\n"
    assert chat(monkeypatch, hive, typed, "--model", "offline", "--store", "my runs.db") == 130
    err = capsys.readouterr().err
    [said] = [line for line in err.splitlines() if line.startswith("Continue the conversation")]
    words = shlex.split(said.removeprefix("Continue the conversation with: "))
    assert words[:4] == ["honeycomb", "chat", str(hive), "--session"]
    assert words[5:] == ["--store", "my runs.db", "--model", "offline"]

    assert isinstance(served.inner, Offline)
    served.inner.stops = False
    assert chat(monkeypatch, hive, "/history\n", *words[3:]) == 0
    out = capsys.readouterr().out
    assert "message 2 did not finish (interrupted): your next message continues it" in out
    assert "you:    Find the weather in Rome." in out


@ON_POSTGRES
def test_the_command_that_goes_on_with_a_chat_gives_its_store_without_its_password(
    hive: Path,
    served: Served,
    postgres: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It gave --store as given, its password masked: pasted, the mask was the password."""
    url = postgres.url()
    user, rest = url.split("@", 1)
    password = "s3cret-long-password"
    with_password = f"{user}:{password}@{rest}"  # the test server trusts, whatever it says
    monkeypatch.setattr(Typed, "readline", _ctrl_c_at_the_end)
    assert chat(monkeypatch, hive, "Find the weather in Rome.\n", "--store", with_password) == 130
    err = capsys.readouterr().err
    assert password not in err
    [said] = [line for line in err.splitlines() if line.startswith("Continue the conversation")]
    assert shlex.split(said)[-2:] == ["--store", url]


async def _ctrl_c_at_the_end(typed: Typed) -> str:
    """The next line typed; at the end, Ctrl-C at the prompt (SIGINT, as the terminal
    sends it), waiting for it there."""
    line = typed.inp.readline()
    if not line:
        signal.raise_signal(signal.SIGINT)
        await asyncio.Event().wait()
    return line


@pytest.mark.parametrize(
    ("typed", "more"),
    [("Find the weather in Rome, then stop.\n", ["--no-store"]), ("/new\n", [])],
    ids=["kept nowhere", "no turn kept"],
)
def test_a_chat_stopped_with_nothing_kept_names_no_command_to_go_on(
    hive: Path,
    served: Served,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    typed: str,
    more: list[str],
) -> None:
    monkeypatch.setattr(Typed, "readline", _ctrl_c_at_the_end)
    assert chat(monkeypatch, hive, typed, *more) == 130
    assert capsys.readouterr().err.endswith("cancelled\n")


def test_a_turn_cut_off_that_its_store_could_not_record_is_said_so(
    hive: Path,
    served: Served,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C during a turn whose store cannot be written: the chat said ``cancelled``
    alone, as if the turn were kept interrupted."""
    recorded = RunRecord.finished

    async def away(record: RunRecord, status: str, *rest: Any) -> None:
        if status == "interrupted":
            raise StoreError("cannot write the run store: disk I/O error", path="runs.db")
        await recorded(record, status, *rest)

    monkeypatch.setattr(RunRecord, "finished", away)
    assert chat(monkeypatch, hive, "Find the weather in Rome, then stop.\n") == 130
    err = capsys.readouterr().err
    said = (
        "cancelled\nHoneycomb could not record the run as interrupted: runs.db: cannot write "
        f"the run store: disk I/O error\n{NOT_RECORDED}\nContinue the conversation with: "
    )
    assert re.search(f"{re.escape(said)}honeycomb chat \\S+ --session [0-9a-f]{{8}}\n$", err)


def test_sigterm_during_a_turn_stops_the_chat_as_ctrl_c_does(
    hive: Path, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM (a service manager's stop, ``timeout``) killed the chat where it was:
    its turn's run not recorded as interrupted, its store left with its ``-wal``."""
    assert isinstance(served.inner, Offline)
    served.inner.sends = signal.SIGTERM

    def killed(*_: object) -> None:  # (as the process would be: not the test's)
        raise AssertionError("SIGTERM was not handled")

    before = signal.signal(signal.SIGTERM, killed)
    try:
        status = chat(monkeypatch, hive, "Find the weather in Rome, then stop.\n")
    finally:
        signal.signal(signal.SIGTERM, before)
    assert status == 143
    assert sorted(p.name for p in hive.parent.joinpath(".honeycomb").iterdir()) == ["runs.db"]
    [kept] = RunStore(hive.parent / ".honeycomb" / "runs.db").runs()
    assert kept.status == "interrupted"


def test_lines_come_from_a_pipe_as_they_were_written(
    hive: Path, served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lines that came at once (read together from the pipe), and a last line without
    its newline: each line is one message, as written."""
    read, write = os.pipe()
    os.write(write, "Find the weather in Röme.\n/coé\nAnd in Oslo?".encode())
    os.close(write)
    with os.fdopen(read, encoding="utf-8") as piped:
        monkeypatch.setattr("sys.stdin", piped)
        assert main(["chat", str(hive), "--plain", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "“Find the weather in Röme”" in out
    assert "unknown command /coé" in out
    assert "“And in Oslo?”" in out


def test_a_conversation_gone_on_with_record_keeps_the_calls_of_its_earlier_chats(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chat going on with a kept conversation, --record given again, started its
    cassette anew: the calls of the conversation's earlier chats were lost, and a
    replay of the whole conversation failed at its first message."""
    tape = str(hive.parent / "calls.jsonl")
    recorded = ("--session", "c1", "--record", tape)
    assert chat(monkeypatch, hive, "Find the weather in Rome.\n", *recorded) == 0
    before = Path(tape).read_text()
    assert chat(monkeypatch, hive, "And in Oslo?\n", *recorded) == 0
    assert "continuing the model calls in" in capsys.readouterr().err
    after = Path(tape).read_text()
    assert after.startswith(before)
    assert len(after) > len(before)
    both = "Find the weather in Rome.\nAnd in Oslo?\n"
    assert chat(monkeypatch, hive, both, "--session", "c2", "--replay", tape) == 0
    replayed = capsys.readouterr()
    assert replayed.out.count("[offline simulation] Here is what") == 2
    assert "Cassette" not in replayed.out + replayed.err


def test_a_store_that_cannot_be_read_leaves_the_conversations_cassette_as_it_was(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chat going on with a kept conversation, --record given again, whose store could
    not be read as it asked whether the conversation was kept, took it for a new one and
    recorded its cassette anew: the calls of the conversation's earlier chats were lost.
    It is refused with the store's error, as a store that cannot be opened is."""
    tape = hive.parent / "calls.jsonl"
    recorded = ("--session", "c1", "--record", str(tape))
    assert chat(monkeypatch, hive, "Find the weather in Rome.\n", *recorded) == 0
    before = tape.read_text()
    capsys.readouterr()

    def unreadable(self: object, session_id: str) -> list[tuple[Any, ...]]:
        raise StoreError("database is locked", path="runs.db")

    monkeypatch.setattr("honeycomb.cli.chat.StoredSessions.turns_now", unreadable)
    assert chat(monkeypatch, hive, "And in Oslo?\n", *recorded) == 2
    assert "runs.db: database is locked" in capsys.readouterr().err
    assert tape.read_text() == before


UVLOOP_HIDDEN = "import sys; sys.modules['uvloop'] = None  # as if it were not installed\n"
CLI = "import sys\nfrom honeycomb.cli.main import main\nraise SystemExit(main(sys.argv[1:]))\n"


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_ctrl_c_at_the_prompt_ends_the_chat_at_once_without_a_traceback(
    hive: Path, loop: str
) -> None:
    """A prompt read by a thread held the loop's shutdown until Enter (and uvloop then
    raised in that thread: the loop was closed)."""
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    code = (UVLOOP_HIDDEN if loop == "asyncio" else "") + CLI
    with _on_a_terminal([sys.executable, "-c", code, "chat", str(hive), "--no-store"]) as chat:
        chat.read_until("you> ")
        chat.process.send_signal(signal.SIGINT)  # what Ctrl-C sends
        status = chat.process.wait(timeout=20)
        shown = chat.read_to_end()
    assert status == 130, shown
    assert "Traceback" not in shown
    assert "Event loop is closed" not in shown
    assert shown.endswith("you> \r\ncancelled\r\n")


class _Terminal:
    """A command on a pseudo-terminal: what it shows, read as it comes."""

    def __init__(self, process: subprocess.Popen[bytes], controller: int) -> None:
        self.process = process
        self.controller = controller
        self.shown = ""

    def read_until(self, wanted: str, limit_s: float = 60.0) -> None:
        ends = time.monotonic() + limit_s
        while wanted not in self.shown:
            assert time.monotonic() < ends, f"never saw {wanted!r} in {self.shown!r}"
            if select.select([self.controller], [], [], 0.5)[0]:
                self.shown += os.read(self.controller, 65536).decode(errors="replace")

    def read_to_end(self) -> str:
        """What it showed, once it has ended."""
        while select.select([self.controller], [], [], 0.5)[0]:
            try:
                chunk = os.read(self.controller, 65536)
            except OSError:  # its end of the terminal closed
                break
            if not chunk:
                break
            self.shown += chunk.decode(errors="replace")
        return self.shown


@contextmanager
def _on_a_terminal(command: list[str]) -> Iterator[_Terminal]:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        command, cwd=Path.cwd(), env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=terminal, stdout=terminal, stderr=terminal,
    )  # fmt: skip
    os.close(terminal)
    try:
        yield _Terminal(process, controller)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
