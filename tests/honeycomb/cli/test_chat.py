"""``honeycomb chat`` and ``honeycomb sessions``: a conversation on the offline model,
its answers written as they come, and the conversation kept, shown and forgotten."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from honeycomb.cli.main import main
from tests.support.hives import CHATTY
from tests.support.stores import STORES_NOT_SET_UP, UNSET_PASSWORD


@pytest.fixture
def hive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "hive.yaml"
    path.write_text(CHATTY)
    return path


def chat(monkeypatch: pytest.MonkeyPatch, hive: Path, lines: list[str], *more: str) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    return main(["chat", str(hive), "--plain", *more])


def test_a_conversation_in_the_terminal_is_kept_and_goes_on(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    said = ["Find the weather in Rome.", "And in Oslo?", "/cost", "/undo", "/exit"]
    assert chat(monkeypatch, hive, said, "--session", "u1") == 0
    out = capsys.readouterr().out
    assert "session u1 (0 turns so far" in out
    assert out.count("[offline simulation]") == 2  # each answer, as it was written
    assert out.count("researcher") >= 2  # the table of each turn's workers
    assert "total" in out
    assert "over 2 turns" in out
    assert "took back message 2: And in Oslo?" in out

    assert chat(monkeypatch, hive, ["/history"], "--session", "u1") == 0  # end of input: leaves
    out = capsys.readouterr().out
    assert "session u1 (1 turn so far" in out
    assert "you:    Find the weather in Rome." in out
    assert "And in Oslo?" not in out

    assert main(["sessions"]) == 0
    assert "u1" in capsys.readouterr().out
    assert main(["sessions", "show", "u1"]) == 0
    shown = capsys.readouterr().out
    assert "session u1 · 1 turn" in shown
    assert "#1  run " in shown
    assert " · ok · " in shown
    assert main(["sessions", "forget", "u1"]) == 0
    assert "forgot session u1" in capsys.readouterr().out
    assert main(["sessions", "show", "u1"]) == 2


def test_a_conversation_started_over_is_forgotten_with_the_runs_of_its_turns(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its turns all taken back (/new), it was "no session", its runs kept for good.
    said = ["Find the weather in Rome.", "/new", "/exit"]
    assert chat(monkeypatch, hive, said, "--session", "u1") == 0
    assert main(["runs"]) == 0
    assert "Find the weather in Rome." in capsys.readouterr().out
    assert main(["sessions", "forget", "u1"]) == 0
    assert "forgot session u1" in capsys.readouterr().out
    assert main(["runs"]) == 0
    assert "Find the weather in Rome." not in capsys.readouterr().out


def test_a_session_the_store_does_not_keep_is_said_to_start_with_the_one_meant(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A misspelt --session started an empty conversation, its only sign "0 turns so far".
    assert chat(monkeypatch, hive, ["Find the weather in Rome."], "--session", "u-4711") == 0
    assert "no conversation 'u-4711' in .honeycomb/runs.db: this starts it" in (
        capsys.readouterr().out
    )
    assert chat(monkeypatch, hive, ["/exit"], "--session", "u-4712") == 0
    assert capsys.readouterr().out.splitlines()[2] == (
        "no conversation 'u-4712' in .honeycomb/runs.db (did you mean 'u-4711'?): this "
        "starts it (honeycomb sessions lists those kept)"
    )
    assert chat(monkeypatch, hive, ["/exit"], "--session", "u-4711") == 0
    assert "no conversation" not in capsys.readouterr().out  # kept: it goes on


def test_an_unknown_command_says_which_there_are(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert chat(monkeypatch, hive, ["/nope", "/undo", "/history"], "--no-store") == 0
    out = capsys.readouterr().out
    assert "unknown command /nope: /trace" in out
    assert "nothing to undo" in out
    assert "you> no messages yet\n" in out  # it printed nothing


def test_trace_says_why_there_is_nothing_to_draw(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "no store" before a chat with a store had a turn, and "no turn yet"
    # after a chat without one had answered.
    assert chat(monkeypatch, hive, ["/trace"], "--session", "t1") == 0
    out = capsys.readouterr().out
    assert "no turn to trace yet" in out
    assert "no store" not in out
    assert chat(monkeypatch, hive, ["Find the weather in Rome.", "/trace"], "--no-store") == 0
    out = capsys.readouterr().out
    assert "nothing to trace: no store" in out
    assert "no turn to trace yet" not in out
    assert "(0 turns so far, kept by this chat alone)" in out  # not by the memory file


def test_force_color_into_a_pipe_gets_the_plain_lines_not_the_live_table(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # FORCE_COLOR (which CI jobs set) made rich take the pipe for a terminal, and the
    # chat drew its live table into it, cursor moves and all, as run did.
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setattr("sys.stdin", io.StringIO("Find the weather in Rome.\n"))
    assert main(["chat", str(hive), "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "[offline simulation]" in out


def test_json_writes_the_events_alone_on_stdout(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its first line, its prompts and /cost were on stdout too: "you> {"event": ...}"
    # was no JSON line. They are on stderr, as `run --json` says what is not an event.
    monkeypatch.setattr("sys.stdin", io.StringIO("Find the weather in Rome.\n/cost\n"))
    assert main(["chat", str(hive), "--session", "j1", "--json"]) == 0
    out, err = capsys.readouterr()
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0]["event"] == "run.started"
    assert events[-1]["event"] == "run.finished"
    assert "session j1 (0 turns so far" in err
    assert "you> " in err
    assert "over 1 turn" in err


def test_a_memory_that_cannot_be_searched_is_said_once(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The workers go on without it, and the chat said nothing: neither the answer nor
    # the table shows a recall that failed, so every turn went on forgetting, unseen.
    hive.write_text(
        CHATTY.replace(
            "    description: Finds facts about cities and their weather.\n",
            "    description: Finds facts about cities and their weather.\n"
            "    memory: {namespace: trip}\n",
        )
        + "memory: {path: notes.txt}\n"
    )
    (hive.parent / "notes.txt").write_text("not a memory file\n")
    said = ["Find the weather in Rome.", "And in Oslo?"]
    assert chat(monkeypatch, hive, said, "--no-store") == 0
    out = capsys.readouterr().out
    assert out.count("[offline simulation]") == 2  # answered all the same
    assert out.count("  memory trip: could not recall: MemoryStoreError: ") == 1  # not each turn
    assert "notes.txt: the file is not a Honeycomb memory file" in out


@pytest.mark.parametrize(("store", "said"), STORES_NOT_SET_UP)
def test_a_store_that_cannot_be_set_up_exits_2_in_one_line(
    hive: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    store: tuple[str, ...],
    said: str,
) -> None:
    monkeypatch.delenv("HC_TEST_UNSET_PW", raising=False)
    hive.write_text(CHATTY + UNSET_PASSWORD)
    assert chat(monkeypatch, hive, ["Hello."], *store) == 2  # as `honeycomb run` refuses it
    out, err = capsys.readouterr()
    assert said in err
    assert len(err.splitlines()) == 1
    assert out == ""


def test_a_hive_its_model_given_cannot_run_exits_2_in_one_line(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hive.write_text(
        CHATTY.replace(
            "  offline:\n    provider: offline\n    latency: 0\n",
            "  gpt:\n    model: gpt-4o-mini\n    api_key: sk-test-not-used\n"
            "    price: {input_per_mtok: 0.15, output_per_mtok: 0.6}\n",
        )
        + "policy:\n  budgets: {cost: 1}\n"
    )  # priced as written; the offline model stands in for it, and has no price
    assert chat(monkeypatch, hive, ["Hello."], "--model", "offline") == 2  # as `run` exits
    out, err = capsys.readouterr()
    line = hive.read_text().splitlines().index("  budgets: {cost: 1}") + 1
    assert err.startswith(f"{hive}:{line}:13: policy.budgets.cost: a budget in dollars counts")
    assert err.rstrip().endswith("(--model offline stands in for the hive's models)")
    assert len(err.strip().splitlines()) == 1  # no traceback
    assert "you>" not in out


def test_a_session_id_no_store_keeps_exits_2_in_one_line(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert chat(monkeypatch, hive, ["Hello."], "--session", "x" * 600) == 2
    out, err = capsys.readouterr()
    assert "session_id: 'xxxx" in err
    assert "is 600 bytes long (UTF-8): an id is at most 512; pass a shorter one" in err
    assert len(err.strip().splitlines()) == 1  # no traceback
    assert "you>" not in out


def test_a_turn_over_its_budget_shows_what_it_found_and_spent(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It printed the error alone, and /cost counted none of its tokens, where `honeycomb
    # run` prints what the run found and spent before it stopped.
    hive.write_text(CHATTY + "policy:\n  budgets: {model_calls: 2}\n")  # no aggregator call
    assert chat(monkeypatch, hive, ["Find the weather in Rome.", "/cost"], "--no-store") == 0
    out = capsys.readouterr().out
    stopped = out[out.index("BudgetExceeded: budget exceeded: model_calls used 2 of 2") :]
    assert "Found before it stopped:\n## s1 (researcher)\n[offline simulation]" in stopped
    assert "\n  s1               researcher       ok  " in stopped
    assert "\n  calls                2 model, 0 tool\n" in stopped
    assert "over_budget Find the weather in Rome." in stopped  # /cost
    assert " 0 tokens in this chat" not in stopped


def test_undo_writes_the_message_it_took_back_inert(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A message kept with a terminal's escape in it (sent to a service, say) was written
    # as it was by /undo, the escape acted on: /history and /cost write it inert.
    said = ["Find the weather in \x1b[2JRome.", "/undo"]
    assert chat(monkeypatch, hive, said, "--no-store") == 0
    out = capsys.readouterr().out
    assert "took back message 1: Find the weather in  [2JRome.\n" in out
    assert "\x1b" not in out[out.index("took back") :]


def test_a_message_that_starts_with_a_path_is_sent_not_taken_for_a_command(
    hive: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Any line starting with "/" was an unknown command: such a message could not be sent.
    said = ["/tmp/rome.txt holds the weather in Rome?", "/histroy"]
    assert chat(monkeypatch, hive, said, "--no-store") == 0
    out = capsys.readouterr().out
    assert "unknown command /tmp/rome.txt" not in out
    assert out.count("[offline simulation]") == 1
    assert "unknown command /histroy: /trace" in out
