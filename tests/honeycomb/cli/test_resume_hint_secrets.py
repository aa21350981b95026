"""The commands the command line prints to paste run as pasted, and show no secret: the
one that continues a run names the endpoint's URL it was given (with a password, a
``?key=``) by the variable ``--base-url`` is read from, and says what to set; the one a
missing run's error names gives the store's URL without its password."""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from honeycomb.cli.main import main
from honeycomb.cli.resuming import (
    MAYBE_RECORDED,
    NOT_RECORDED,
    chat_hint,
    not_recorded,
    resume_hint,
    resume_note,
)
from honeycomb.store.silence import unanswered
from runtime import StoreError
from tests.support.hives import CHATTY, hive
from tests.support.postgres import PostgresServer
from tests.support.stores import ON_POSTGRES

PASSWORD, KEY = "s3cret-long-password", "K123456789abcdef"
EXAMPLES = Path(__file__).parents[3] / "examples"
ASKED = "Plan a weekend in Lisbon and Porto and send the summary to the outbox."
URL = f"https://ann:{PASSWORD}@llm.example.com/v1?key={KEY}"


def hint_of(err: str) -> str:
    """The resume command the line that names the run's store gives."""
    [kept] = [line for line in err.splitlines() if " · kept in " in line]
    return kept[kept.index("(honeycomb resume") + 1 : kept.rindex(")")]


def pasted(hint: str, url: str | None) -> list[str]:
    """The words a POSIX shell runs for ``hint``, with ``HONEYCOMB_BASE_URL`` set to
    ``url`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "HONEYCOMB_BASE_URL"}
    if url is not None:
        env["HONEYCOMB_BASE_URL"] = url
    line = "printf '%s\\n'" + hint.removeprefix("honeycomb")
    said = subprocess.run(
        ["sh", "-c", line], env=env, capture_output=True, text=True, check=True, timeout=30
    )
    return said.stdout.splitlines()


@pytest.mark.parametrize("given", ["option", "environment"])
def test_the_resume_command_names_a_secret_url_by_its_variable_and_runs_as_pasted(
    given: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HONEYCOMB_BASE_URL", raising=False)
    hive(tmp_path, CHATTY)
    command = ["run", "hive.yaml", "Find the weather in Rome.", "--plain"]
    command += ["--store", "runs.db", "--run-id", "r1", "--model", "offline"]
    if given == "option":
        command += ["--base-url", URL]
    else:
        monkeypatch.setenv("HONEYCOMB_BASE_URL", URL)
    assert main(command) == 0
    err = capsys.readouterr().err
    assert PASSWORD not in err
    assert KEY not in err
    hint = hint_of(err)
    assert "hidden" not in hint  # no mask in it: it would be pasted as the URL
    assert hint.endswith('--base-url "$HONEYCOMB_BASE_URL"')
    said = "set it to the URL given to --base-url" if given == "option" else "as this one did"
    assert said in err
    words = pasted(hint, URL)  # where the variable holds the URL, the URL is given
    assert words == [
        "resume", "r1", "--store", "runs.db", "--model", "offline", "--base-url", URL,
    ]  # fmt: skip
    monkeypatch.delenv("HONEYCOMB_BASE_URL", raising=False)
    assert main([*words, "--plain"]) == 0  # as pasted: the run, continued (ended: shown)


def test_a_url_without_a_secret_is_named_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HONEYCOMB_BASE_URL", raising=False)
    hive(tmp_path, CHATTY)
    command = ["run", "hive.yaml", "Find the weather in Rome.", "--plain", "--store", "runs.db"]
    assert main([*command, "--model", "offline", "--base-url", "http://h:1/v1"]) == 0
    err = capsys.readouterr().err
    assert hint_of(err).endswith("--base-url http://h:1/v1")
    assert "holds a secret" not in err


def test_a_token_written_as_the_urls_user_is_named_by_its_variable_too() -> None:
    """``https://TOKEN@host/v1``, which the HTTP client sends as a password: the commands
    that continue a run and a chat give the variable, not the URL with its token masked
    (which would not run as pasted), and say what to set."""
    url = "https://tok-5ecret-value@llm.example.com/v1"
    args = argparse.Namespace(hive="hive.yaml", store=None, model="gpt-4o", base_url=url)
    for hint in (resume_hint("r1", "runs.db", args), chat_hint("s1", "runs.db", args)):
        assert hint.endswith('--model gpt-4o --base-url "$HONEYCOMB_BASE_URL"')
    assert "set it to the URL given to --base-url" in (resume_note(args) or "")


def test_the_note_on_a_stores_password_says_where_the_command_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = argparse.Namespace(hive="hive.yaml", store=None, model=None, base_url=None)
    url = f"postgresql://app:{PASSWORD}@db.internal/prod"
    monkeypatch.delenv("PGPASSWORD", raising=False)
    assert "set PGPASSWORD or ~/.pgpass first" in (resume_note(args, url) or "")
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    assert "reads it from $PGPASSWORD, as set here" in (resume_note(args, url) or "")
    for without in ("postgresql://app@db.internal/prod", Path("runs.db"), None):
        assert resume_note(args, without) is None


@ON_POSTGRES
@pytest.mark.parametrize("command", ["resume", "trace"])
def test_the_command_a_missing_run_names_gives_the_store_without_its_password(
    command: str,
    postgres: PostgresServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    hive(tmp_path, CHATTY)
    url = postgres.url()
    user, rest = url.split("@", 1)
    with_password = f"{user}:{PASSWORD}@{rest}"  # the test server trusts, whatever it says
    task = ["run", "hive.yaml", "Find the weather in Rome.", "--plain", "--model", "offline"]
    monkeypatch.delenv("PGPASSWORD", raising=False)
    assert main([*task, "--store", with_password]) == 0  # a store with a run in it
    # The command that continues it leaves the password out, and says where libpq
    # reads it from: pasted as it was, it failed "fe_sendauth: no password supplied".
    err = capsys.readouterr().err
    assert shlex.split(hint_of(err))[3:5] == ["--store", url]
    assert "(the store's URL held a password: that command leaves it out; set PGPASSWORD" in err
    assert main([command, "nope", "--store", with_password]) == 2
    err = capsys.readouterr().err
    assert PASSWORD not in err
    assert "hidden" not in err  # no mask: the command is pasted as it is shown
    known = err[err.index("(honeycomb runs") + 1 : err.rindex(")")]
    assert shlex.split(known) == ["honeycomb", "runs", "--store", url]


def test_what_a_stopped_run_says_its_store_keeps_follows_the_stores_error() -> None:
    """A run stopped as its PostgreSQL server went silent said the store kept it
    running, where its end's commit may have reached the server (the error says so:
    "it may be there or not"), or may still, held by the store's writer."""
    told = "Honeycomb could not record the run as interrupted: "
    refused = StoreError("cannot write the run store: disk I/O error", path="runs.db")
    assert not_recorded([f"{told}{refused}"]) == f"{told}{refused}\n{NOT_RECORDED}"
    assert "keeps the run as it was before the signal: running" in NOT_RECORDED
    for sent in (True, False):
        note = f"{told}{unanswered('postgresql://app@db/prod', sent=sent)}"
        assert not_recorded([note]) == f"{note}\n{MAYBE_RECORDED}"
    assert "unless its end reached the server after all" in MAYBE_RECORDED


@ON_POSTGRES
def test_a_chat_turn_waiting_on_approvals_says_where_its_resume_command_reads_the_password(
    postgres: PostgresServer,
    fast_demo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command that continues a chat's turn waiting on approvals left the store's
    password out, as it should, and said nothing of where it reads it from, as the
    commands of honeycomb run do."""
    folder = fast_demo.parent / "trip"
    shutil.copytree(EXAMPLES / "trip", folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "hive.yaml"
    text = re.sub(r"latency: [\d.]+", "latency: 0", path.read_text())
    path.write_text(text + "approvals:\n  tools: [send_to_outbox]\n")
    user, rest = postgres.url().split("@", 1)
    with_password = f"{user}:{PASSWORD}@{rest}"  # the test server trusts, whatever it says
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{ASKED}\n"))
    assert main(["chat", str(path), "--plain", "--store", with_password]) == 0
    out = capsys.readouterr().out
    assert PASSWORD not in out
    resume = re.search(r"\n  honeycomb resume .*\n(.*)\n", out)
    assert resume is not None, out
    assert resume.group(1) == (
        "  (the store's URL held a password: that command leaves it out; set PGPASSWORD "
        "or ~/.pgpass first)"
    )
