"""``honeycomb sessions``' actions read the store given before them as well as after
them, and the command a missing session's error names looks in that store."""

from __future__ import annotations

import shlex
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor, OfflineModel, Role
from honeycomb.cli.main import main

ROLES = [
    Role(name="planner"),
    Role(name="researcher", description="Finds facts about cities."),
    Role(name="aggregator"),
]


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store, not the default one, holding session ann's one turn."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "other.db"

    async def talk() -> None:
        executor = Executor(ROLES, OfflineModel(latency=0), store=db)
        await executor.session("ann").run("Compare the weather in Lisbon and Porto.")
        executor.store.close()  # type: ignore[union-attr]

    anyio.run(talk)
    return Path("other.db")


@pytest.mark.parametrize("before", [True, False])
def test_an_action_reads_the_store_given_before_it_or_after_it(
    before: bool, kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", str(kept)]
    show = ["sessions", *store, "show", "ann"] if before else ["sessions", "show", "ann", *store]
    assert main(show) == 0, capsys.readouterr().err
    assert "Compare the weather in Lisbon and Porto." in capsys.readouterr().out


def test_the_command_a_missing_session_names_looks_in_its_store(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "bob", "--store", str(kept)]) == 2
    err = capsys.readouterr().err
    known = shlex.split(err[err.index("(honeycomb sessions") + 1 : err.rindex(")")])
    assert known == ["honeycomb", "sessions", "--store", str(kept)]
    assert main(known[1:]) == 0  # as pasted: the sessions of that store
    assert "ann" in capsys.readouterr().out


def test_a_session_id_misspelt_is_told_the_one_kept_close_to_it(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only `honeycomb chat --session` named the close id: show and forget said "no
    # session 'anne'" and left the reader to list them all.
    assert main(["sessions", "show", "anne", "--store", str(kept)]) == 2
    assert "no session 'anne' (did you mean 'ann'?) (honeycomb sessions" in (
        capsys.readouterr().err
    )
    assert main(["sessions", "forget", "anne", "zed", "--store", str(kept)]) == 2
    assert "no session 'anne' (did you mean 'ann'?), 'zed'" in capsys.readouterr().err


def test_forgetting_sessions_one_of_which_is_not_kept_forgets_none_and_says_so(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "no session 'zed'" alone: whether ann, named beside it, was forgotten
    was left to guess (it was not)."""
    assert main(["sessions", "forget", "ann", "zed", "--store", str(kept)]) == 2
    assert capsys.readouterr().err.endswith("no session 'zed'; none forgotten\n")
    assert main(["sessions", "show", "ann", "--store", str(kept)]) == 0


def test_a_session_named_twice_is_forgotten_once(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "forgot session ann (its turns and their runs)" twice.
    assert main(["sessions", "forget", "ann", "ann", "--store", str(kept)]) == 0
    assert capsys.readouterr().out == "forgot session ann (its turns and their runs)\n"
    assert main(["sessions", "show", "ann", "--store", str(kept)]) == 2


def test_a_session_id_holding_terminal_escapes_is_printed_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # prune and show printed a session id (any text a service was given) as it was: its
    # escapes reached the terminal, and its line break forged a line of the output.
    db = tmp_path / "s.db"
    evil = "ann\x1b[31m\nforgot session bob"

    async def talk() -> None:
        executor = Executor(ROLES, OfflineModel(latency=0), store=db)
        for session_id in (evil, "carl"):
            await executor.session(session_id).run("Compare the weather in Lisbon and Porto.")
        executor.store.close()  # type: ignore[union-attr]

    anyio.run(talk)
    assert main(["sessions", "show", evil, "--store", str(db)]) == 0
    assert capsys.readouterr().out.startswith("session ann [31m forgot session bob · 1 turn")
    assert main(["sessions", "prune", "--keep", "1", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert out == "forgot session ann [31m forgot session bob (its turns and their runs)\n"


def test_a_session_started_over_is_shown_as_one_whose_runs_stay_until_it_is_forgotten(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "no session 'ann'" (exit 2), while sessions forget ann found it and
    # deleted the runs of the turns it took back.
    async def start_over() -> None:
        executor = Executor(ROLES, OfflineModel(latency=0), store=kept)
        await executor.session("ann").clear()
        executor.store.close()  # type: ignore[union-attr]

    anyio.run(start_over)
    assert main(["sessions", "show", "ann", "--store", str(kept)]) == 0
    said = capsys.readouterr().out
    assert said.startswith("session ann · 0 turns: it was started over")
    forget = shlex.split(said[said.rindex("(") + 1 : said.rindex(")")])
    assert forget == ["honeycomb", "sessions", "forget", "ann", "--store", str(kept)]
    assert main(forget[1:]) == 0  # as pasted
    assert main(["sessions", "show", "ann", "--store", str(kept)]) == 2
