"""``honeycomb chat`` off a terminal, on a hive whose calls need approval: a turn that
ends waiting prints its calls and the commands that decide them, as ``honeycomb run``
does; the next message continues that turn first, and is not sent while it waits."""

from __future__ import annotations

import io
import re
import shlex
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from honeycomb.cli.chat import Chat
from honeycomb.cli.main import main
from honeycomb.executor import Executor
from honeycomb.hive import load_hive

EXAMPLES = Path(__file__).parents[3] / "examples"
ASKED = (
    "Plan a weekend in Lisbon and Porto, compare the weather and send the summary to the outbox."
)


@pytest.fixture
def hive(fast_demo: Path) -> Path:
    """The trip hive in the test's folder, its outbox asking for approval."""
    folder = fast_demo.parent / "trip"
    shutil.copytree(EXAMPLES / "trip", folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "hive.yaml"
    text = re.sub(r"latency: [\d.]+", "latency: 0", path.read_text())
    path.write_text(text + "approvals:\n  tools: [send_to_outbox]\n")
    return path


def chat(monkeypatch: pytest.MonkeyPatch, hive: Path, lines: list[str], *more: str) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    return main(["chat", str(hive), "--plain", "--session", "u1", *more])


def test_a_turn_that_waits_says_how_to_decide_it_and_the_next_message_continues_it(
    hive: Path,
    fast_demo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert chat(monkeypatch, hive, [ASKED, "And Madrid?"]) == 0
    out = capsys.readouterr().out
    assert "Waiting for approval (1):" in out
    assert "role 'courier' asks for approval of 'send_to_outbox'" in out
    found = re.search(r"honeycomb approve (\S+) (\S+)", out)
    assert found is not None
    run_id, call_id = found.groups()
    assert f"honeycomb resume {run_id}" in out
    # The second message: the waiting turn goes on first, waits again, and the message
    # is not sent; what to do is said in the command line's terms.
    assert "message 1 did not finish (waiting): it goes on first" in out
    assert out.count("Waiting for approval (1):") == 2
    assert "Your message was not sent: message 1 has to end first" in out
    assert "session.resume()" not in out
    assert not fast_demo.exists()  # nothing was sent

    assert main(["approve", run_id, call_id]) == 0
    capsys.readouterr()
    assert chat(monkeypatch, hive, ["And Madrid?", "/history"]) == 0
    out = capsys.readouterr().out
    assert "message 1 did not finish (waiting): it goes on first" in out
    assert "Waiting for approval" not in out
    assert "not sent" not in out
    assert len(list(fast_demo.glob("*.md"))) == 1  # approved: sent, once
    assert "#2  run " in out  # the message was answered after it
    assert " · waiting · " not in out


def test_a_chat_opened_on_a_waiting_turn_says_what_it_waits_on_and_how_to_decide_it(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Opened again (the terminal closed), it said "message 1 did not finish (waiting)"
    # alone: the calls and the commands that decide them were shown only once a
    # message was sent, and that message was not sent.
    assert chat(monkeypatch, hive, [ASKED]) == 0
    first = capsys.readouterr().out
    decide = re.search(r"honeycomb approve \S+ \S+ --worker \S+ --turn \d+", first)
    assert decide is not None
    assert chat(monkeypatch, hive, ["/exit"]) == 0
    opened = capsys.readouterr().out
    before_prompt = opened[: opened.index("you>")]
    assert "message 1 did not finish (waiting)" in before_prompt
    assert "Waiting for approval (1):" in before_prompt
    assert "role 'courier' asks for approval of 'send_to_outbox'" in before_prompt
    assert decide.group(0) in before_prompt


@pytest.mark.parametrize("command", ["/undo", "/new"])
def test_taking_a_waiting_turn_back_says_its_calls_are_denied(
    hive: Path, command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said 'took back message 1: ...' (or 'started over') alone: a person who then
    # approved the call in another terminal, as the chat had told them to, was refused.
    assert chat(monkeypatch, hive, [ASKED, command]) == 0
    out = capsys.readouterr().out
    found = re.search(r"honeycomb approve (\S+) (\S+)", out)
    assert found is not None
    assert "(the calls message 1 waited on are denied: it never makes them)" in out
    assert main(["approve", *found.groups()]) != 0
    assert "its turn was taken back" in capsys.readouterr().err


def test_the_command_a_waiting_turn_prints_continues_it_on_the_chats_models(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chat on --model M printed 'honeycomb resume RUN_ID': that went on on the hive's
    own models (or failed for their missing API key), not on M; so did the command of
    a chat opened again on the waiting turn."""
    assert chat(monkeypatch, hive, [ASKED], "--model", "offline") == 0
    first = capsys.readouterr().out
    again = chat(monkeypatch, hive, [], "--model", "offline")
    assert again == 0
    opened = capsys.readouterr().out
    for out in (first, opened):
        found = re.search(r"\n  (honeycomb resume .*)\n", out)
        assert found is not None, out
        assert shlex.split(found.group(1))[3:] == ["--model", "offline"]


async def test_a_waiting_turn_continued_elsewhere_is_shown_before_the_next_message(
    hive: Path, fast_demo: Path
) -> None:
    """Its calls decided and its run continued as the chat said to (honeycomb approve,
    honeycomb resume; or the page of honeycomb serve), the turn's answer was never shown
    in the chat: the next message was answered as if nothing had come of it."""
    trip = load_hive(hive)
    db = fast_demo.parent / "runs.db"
    chat = Chat(trip, Executor.from_hive(trip, store=db), "u1", "plain")
    shown = Console(file=io.StringIO())
    assert await chat.talk(io.StringIO(f"{ASKED}\n"), io.StringIO(), shown) == 0
    [waiting] = chat.results
    [call] = waiting.pending
    elsewhere = Executor.from_hive(trip, store=db)
    await elsewhere.decide(
        waiting.run_id, call.call_id, approve=True, worker=call.worker, turn=call.turn
    )
    assert (await elsewhere.resume(waiting.run_id)).status == "ok"
    out = io.StringIO()
    assert await chat.talk(io.StringIO("And Madrid?\n"), out, shown) == 0
    said = out.getvalue()
    went_on = said.index("message 1 went on elsewhere, and ended (ok):")
    assert went_on < said.index("Sent “Summary” with send_to_outbox") < said.index("“And Madrid?”")
