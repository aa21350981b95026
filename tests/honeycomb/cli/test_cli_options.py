"""What the command line's options take (honeycomb/cli/options.py): a value out of range
is refused as the arguments are read, in one line that names the option and what it
takes, with exit status 2, before the command touches anything; and what a store holds
is never printed with its control characters."""

from __future__ import annotations

import argparse
import ast
import asyncio
import io
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor, Role
from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.main import main
from honeycomb.cli.options import MAX_RUN_ID, integer, new_id, number
from honeycomb.store import RunStore
from honeycomb.store.sessions import StoredSessions
from honeycomb.testing import ScriptedModel
from tests.support import ROOT
from tests.support.hives import CHATTY


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """What ``honeycomb argv`` says on stderr, having checked that it exits 2 with one
    line and no traceback."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == ExitStatus.UNUSABLE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err
    assert "Traceback" not in captured.err
    return captured.err


# --- the types ------------------------------------------------------------------------


def test_a_bounded_whole_number_takes_its_range_and_nothing_else() -> None:
    port = integer(0, 65535)
    assert (port("0"), port("65535")) == (0, 65535)
    for given in ("-1", "65536", "99999", "1.5", "eight", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="from 0 to 65535"):
            port(given)
    assert integer(1)("123456789012345678901234567890") == 123456789012345678901234567890
    with pytest.raises(argparse.ArgumentTypeError, match="of at least 1, not '0'"):
        integer(1)("0")


def test_a_bounded_number_is_finite() -> None:
    seconds, days = number(0), number(0, above=True)
    assert (seconds("0"), seconds("0.25"), days("0.5")) == (0.0, 0.25, 0.5)
    for given in ("-1", "-0.001", "nan", "inf", "-inf", "1e400", "soon"):
        with pytest.raises(argparse.ArgumentTypeError, match="a finite number of at least 0"):
            seconds(given)
    with pytest.raises(argparse.ArgumentTypeError, match="a finite number above 0, not '0'"):
        days("0")


def test_a_new_run_or_eval_id_is_printable_and_bounded() -> None:
    assert new_id("nightly-2026-12-01 #3") == "nightly-2026-12-01 #3"
    assert new_id("x" * MAX_RUN_ID) == "x" * MAX_RUN_ID
    for given in ("", "a\nb", "a\x1b[31mb", "tab\there", "x" * (MAX_RUN_ID + 1), "\ud800"):
        with pytest.raises(argparse.ArgumentTypeError, match="printable characters") as told:
            new_id(given)
        assert str(told.value).isprintable()  # the refusal itself is safe to print


def test_no_option_of_the_command_line_takes_an_unbounded_number() -> None:
    # One way to bound a number: every numeric option uses a type of options.py.
    found = []
    for path in sorted((ROOT / "honeycomb" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "type"
                and isinstance(node.value, ast.Name)
                and node.value.id in ("int", "float")
            ):
                found.append(f"{path.name}:{node.value.lineno}")
    assert found == []


def test_no_option_of_the_command_line_keeps_a_tilde_as_it_is() -> None:
    # One way to read a file or folder given: every one uses options.user_path (the
    # benchmarks' --out too).
    found = []
    commands = [*(ROOT / "honeycomb" / "cli").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    for path in sorted(commands):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "type"
                and isinstance(node.value, ast.Name)
                and node.value.id == "Path"
            ):
                found.append(f"{path.name}:{node.value.lineno}")
    assert found == []


@pytest.mark.parametrize("command", [["run", "hive.yaml"], ["runs"]])
def test_an_empty_store_is_refused_as_the_arguments_are_read(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # --store "$UNSET" named the current folder: '.: this is a folder, not a run store',
    # once the run had begun.
    err = refused(capsys, [*command, "--store", ""])
    assert "argument --store: takes a run store's file or a postgresql:// URL, not ''" in err


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["init", ""], "dir"),
        (["run", ""], "hive"),
        (["validate", "hive.yaml", " "], "hives"),
        (["run", "hive.yaml", "--record", ""], "--record"),
        (["trace", "r1", "--html", ""], "--html"),
    ],
)
def test_an_empty_file_or_folder_is_refused_as_the_arguments_are_read(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    argument: str,
) -> None:
    # An empty argument ("$UNSET") named the current folder: honeycomb init "$DIR"
    # wrote the template into it, run "" was told '.: ... it is a folder'.
    monkeypatch.chdir(tmp_path)
    err = refused(capsys, argv)
    assert f"argument {argument}: takes a file or a folder, not {argv[-1]!r}" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("given", ["", " "])
def test_a_blank_session_is_refused_as_the_arguments_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    # chat --session "$UNSET" started a new conversation, of an id of its own, in place
    # of the one meant (and kept it in the store).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hive.yaml").write_text(CHATTY)
    err = refused(capsys, ["chat", "hive.yaml", "--session", given])
    assert f"argument --session: takes a conversation's id, not {given!r}" in err
    assert [p.name for p in tmp_path.iterdir()] == ["hive.yaml"]
    # One with a tab or an escape code was taken and printed as it was, where --run-id
    # refuses them.
    err = refused(capsys, ["chat", "hive.yaml", "--session", "u\t1\x1b[2J"])
    assert (
        "argument --session: takes a conversation's id of printable characters (no line "
        "breaks, tabs or escape codes), not 'u\\t1\\x1b[2J'"
    ) in err
    assert [p.name for p in tmp_path.iterdir()] == ["hive.yaml"]


def test_a_file_given_under_home_where_no_shell_expands_it_is_in_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # --record=~/calls.yaml (no shell expands ~ after '=') made a folder named '~' in
    # the current one, and so did trace --html=~/run.html.
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hive.yaml").write_text(CHATTY)
    argv = ["run", "hive.yaml", "Compare Lisbon and Porto.", "--plain", "--run-id", "r1"]
    assert main([*argv, "--record=~/calls.yaml", "--store=~/runs.db"]) == ExitStatus.OK
    assert main(["trace", "r1", "--store=~/runs.db", "--html=~/run.html"]) == ExitStatus.OK
    capsys.readouterr()
    assert {"calls.yaml", "run.html", "runs.db"} <= {p.name for p in home.iterdir()}
    assert not (tmp_path / "~").exists()


# --- sessions prune: a typo never forgets every session -------------------------------


@pytest.fixture
def three_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Path:
    """A store with sessions s1, s2 and s3 (s3 the newest), in the current folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hive.yaml").write_text(CHATTY)
    for name in ("s1", "s2", "s3"):
        monkeypatch.setattr("sys.stdin", io.StringIO("Find the weather in Rome.\n"))
        argv = ["chat", "hive.yaml", "--plain", "--session", name, "--store", "s.db"]
        assert main(argv) == 0
    capsys.readouterr()
    return tmp_path / "s.db"


def _sessions(db: Path) -> list[str]:
    store = RunStore(db)
    try:
        return [row[0] for row in StoredSessions(store).sessions()]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("option", "value", "takes"),
    [
        ("--keep", "-1", "a whole number of at least 1"),
        ("--keep", "0", "a whole number of at least 1"),
        ("--older-than", "-1", "a finite number above 0"),
        ("--older-than", "0", "a finite number above 0"),
        ("--older-than", "nan", "a finite number above 0"),
    ],
)
def test_prune_refuses_what_would_forget_every_session(
    three_sessions: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
    takes: str,
) -> None:
    err = refused(capsys, ["sessions", "prune", option, value, "--store", str(three_sessions)])
    assert f"argument {option}: takes {takes}, not '{value}'" in err
    assert _sessions(three_sessions) == ["s3", "s2", "s1"]  # nothing forgotten


def test_the_refusal_docs_cli_md_shows_is_the_one_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, ["sessions", "prune", "--keep", "-1", "--store", str(tmp_path / "s.db")])
    assert f"\n```text\n{err}```\n" in (ROOT / "docs" / "cli.md").read_text()


def test_prune_keeps_the_newest(three_sessions: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "prune", "--keep", "2", "--store", str(three_sessions)]) == 0
    assert capsys.readouterr().out == "forgot session s1 (its turns and their runs)\n"
    assert _sessions(three_sessions) == ["s3", "s2"]


def test_the_store_refuses_to_keep_fewer_than_one_session(three_sessions: Path) -> None:
    store = RunStore(three_sessions)
    try:
        for keep in (0, -1):
            with pytest.raises(ValueError, match="keep is at least 1"):
                asyncio.run(StoredSessions(store).prune(before=None, keep=keep))
    finally:
        store.close()
    assert _sessions(three_sessions) == ["s3", "s2", "s1"]


# --- numbers out of range, command by command -----------------------------------------


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "1e400"])
@pytest.mark.parametrize(
    "command",
    [["demo", "--no-store", "--plain"], ["eval", "hive.yaml", "evals.yaml"]],
    ids=["demo", "eval"],
)
def test_a_latency_is_finite_and_not_negative(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    value: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    err = refused(capsys, [*command, "--latency", value])
    assert f"argument --latency: takes a finite number of at least 0, not '{value}'" in err
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was kept


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_serve_refuses_a_port_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], port: str
) -> None:
    err = refused(capsys, ["serve", "--store", str(tmp_path / "ex.db"), "--port", port])
    assert f"argument --port: takes a whole number from 0 to 65535, not '{port}'" in err
    assert not (tmp_path / "ex.db").exists()


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["runs", "--limit", "-1"], "--limit"),
        (["runs", "--limit", "0"], "--limit"),
        (["runs", "--limit", "99999999999999999999"], "--limit"),
        (["sessions", "--limit", "-1"], "--limit"),
        (["memory", "list", "--limit", "-5"], "--limit"),
        (["memory", "search", "x", "-k", "0"], "-k"),
        (["eval", "h.yaml", "c.yaml", "--max-cost", "-1"], "--max-cost"),
        (["eval", "h.yaml", "c.yaml", "--max-cost", "nan"], "--max-cost"),
        (["eval", "h.yaml", "c.yaml", "--max-tokens", "-1"], "--max-tokens"),
        (["eval", "h.yaml", "c.yaml", "--max-model-calls", "0"], "--max-model-calls"),
        (["eval", "h.yaml", "c.yaml", "--concurrency", "0"], "--concurrency"),
        (["eval", "h.yaml", "c.yaml", "--repeat", "0"], "--repeat"),
    ],
)
def test_counts_and_budgets_out_of_range_are_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    option: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    err = refused(capsys, argv)
    assert f"argument {option}: takes " in err
    assert list(tmp_path.iterdir()) == []


def test_runs_lists_at_most_its_limit(fast_demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        assert main(["demo", "--plain", "--latency", "0"]) == 0
    capsys.readouterr()
    assert main(["runs", "--limit", "1"]) == 0
    title, _header, _row = capsys.readouterr().out.splitlines()
    assert title.startswith("the newest 1 run in ")  # of the two it holds


# --- the options of --model, without it -----------------------------------------------

STARTER = str(ROOT / "examples" / "starter" / "hive.yaml")
STARTER_EVALS = str(ROOT / "examples" / "starter" / "evals.yaml")
ENDPOINT = ["--base-url", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", STARTER, *ENDPOINT],
        ["run", STARTER, "--tool-protocol", "text"],
        ["demo", *ENDPOINT],  # the demo's --tool-protocol alone runs the offline model on it
        ["chat", STARTER, *ENDPOINT],
        ["chat", STARTER, "--tool-protocol", "text"],
        ["eval", STARTER, STARTER_EVALS, *ENDPOINT],
        ["eval", STARTER, STARTER_EVALS, "--tool-protocol", "json"],
        ["run", STARTER, "--context", "4096"],  # it went unused, and into the resume command
        ["chat", STARTER, "--context", "4096"],
    ],
    ids=lambda argv: f"{argv[0]} {argv[-2]}",
)
def test_an_option_of_model_without_it_is_refused_not_left_unused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    # An endpoint given with no model to call there ran every role on the hive's own
    # models instead (OpenAI's endpoint, or the offline model), and said nothing.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HONEYCOMB_MODEL", raising=False)
    assert main([*argv, "--no-store"]) == ExitStatus.UNUSABLE
    out, err = capsys.readouterr()
    flag = argv[-2]
    field = flag.removeprefix("--").replace("-", "_")
    assert (out, err) == (
        "",
        f"{flag} is for --model: name the model too (--model NAME {flag} ...; a hive's own "
        f"models say theirs with {field}:)\n",
    )
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was kept


def test_an_endpoint_from_the_environment_alone_needs_no_model(
    fast_demo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # HONEYCOMB_BASE_URL is --base-url's default: a shell may keep it set for the runs
    # that name a model, and a run on the hive's own models goes on without it.
    monkeypatch.setenv("HONEYCOMB_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("HONEYCOMB_MODEL", raising=False)
    assert main(["run", STARTER, "--plain", "--no-store"]) == ExitStatus.OK
    assert "[offline simulation]" in capsys.readouterr().out


# --- demo: one example at a time -----------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["--compact", "--rounds"], ["--memory", "--compact"], ["--rounds", "--memory"]],
    ids=" ".join,
)
def test_the_demo_runs_one_example_and_refuses_two(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    # Each option runs another example "instead": given two, the demo ran the first
    # it looked at and said nothing of the other.
    monkeypatch.chdir(tmp_path)
    err = refused(capsys, ["demo", *argv])
    assert f"argument {argv[1]}: not allowed with argument {argv[0]}" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("example", ["--compact", "--rounds"])
def test_approve_with_an_example_that_has_no_outbox_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    example: str,
) -> None:
    # --approve asked about the trip's outbox tool, which the logbook and the research
    # examples lack: their runs went on with nothing to approve, and said nothing.
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--approve", example, "--no-store"]) == ExitStatus.UNUSABLE
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "honeycomb demo: --approve asks before the trip's send_to_outbox sends, and this "
        "example has no such tool: give it to the trip (honeycomb demo --approve, or "
        "with --memory)\n"
    )
    assert list(tmp_path.iterdir()) == []


# --- init: a folder it cannot make ----------------------------------------------------


def test_init_refuses_a_file_in_place_of_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools.py").write_text("# mine\n")
    assert main(["init", "tools.py"]) == ExitStatus.UNUSABLE
    err = capsys.readouterr().err
    assert err == (
        "honeycomb init: tools.py is a file, not a folder: name a new folder, or one to add "
        "the template to\n"
    )
    assert main(["init", "tools.py/hive"]) == ExitStatus.UNUSABLE
    err = capsys.readouterr().err
    assert err.startswith("honeycomb init: cannot make the folder tools.py/hive: ")
    assert len(err.splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["tools.py"]
    assert (tmp_path / "tools.py").read_text() == "# mine\n"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_init_refuses_a_place_where_no_folder_can_be_made(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["init", "/proc/x"]) == ExitStatus.UNUSABLE
    err = capsys.readouterr().err
    assert err.startswith("honeycomb init: cannot make the folder /proc/x: ")
    assert len(err.splitlines()) == 1


# --- run and eval ids -----------------------------------------------------------------


@pytest.mark.parametrize(
    "run_id", ["a\nb", "a\x1b[31mb", "x" * 5000, ""], ids=["newline", "escape", "long", "empty"]
)
@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["demo"], "--run-id"),
        (["run", "hive.yaml"], "--run-id"),
        (["eval", "hive.yaml", "evals.yaml"], "--eval-id"),
    ],
    ids=["demo", "run", "eval"],
)
def test_a_new_run_or_eval_id_with_control_characters_or_too_long_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    option: str,
    run_id: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    err = refused(capsys, [*command, "--plain", option, run_id])
    assert f"argument {option}: takes 1 to {MAX_RUN_ID} printable characters" in err
    assert "\x1b" not in err
    assert list(tmp_path.iterdir()) == []


def test_runs_never_prints_the_control_characters_a_store_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"  # as an older store, or one written from Python, may hold
    executor = Executor(
        [Role(name="w", description="d")], ScriptedModel(["done"]), aggregator="concat", store=db
    )
    task = "first line\nsecond \x1b[2Jline"
    anyio.run(lambda: executor.run(task, subtasks=[("w", "go")], run_id="r\x1b[31m\n1"))
    assert executor.store is not None
    executor.store.close()
    assert main(["runs", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    _title, _header, row = out.splitlines()  # one row: not split by the line break
    assert row.startswith("r [31m 1  ")
    assert row.endswith("first line second  [2Jline")


def test_sessions_never_print_the_control_characters_a_store_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hive.yaml").write_text(CHATTY)

    async def talk() -> None:  # from Python: chat --session refuses such an id
        async with Executor.from_yaml("hive.yaml", store=".honeycomb/runs.db") as executor:
            await executor.session("s\x1b1").run("the weather \x1b[2Jin Rome")

    asyncio.run(talk())
    assert main(["sessions"]) == 0
    listed = capsys.readouterr().out
    assert "\x1b" not in listed
    assert "the weather [2Jin Rome" in listed  # on one line, its spaces collapsed
    assert main(["sessions", "show", "s\x1b1"]) == 0
    shown = capsys.readouterr().out
    assert "you:    the weather  [2Jin Rome" in shown


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["valdiate", "hive.yaml"], "invalid choice: 'valdiate' (did you mean 'validate'?) ("),
        (["check", "hive.yaml"], "invalid choice: 'check' (did you mean 'validate'?) ("),
        (["new", "myhive"], "invalid choice: 'new' (did you mean 'init'?) ("),
        (["run", "h.yaml", "--backend", "rey"], "invalid choice: 'rey' (did you mean 'ray'?) ("),
    ],
)
def test_a_misspelt_command_or_choice_is_told_with_the_one_meant(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    # argparse listed the choices alone: 'honeycomb valdiate' was told every command, and
    # so was 'honeycomb check', the word other tools use for what validate does.
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert said in err
    assert err.count("\n") == 1  # one line


def test_a_hive_file_given_as_the_command_is_told_the_command_that_runs_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 'honeycomb myhive/hive.yaml' was told the commands alone.
    err = refused(capsys, ["myhive/hive.yaml"])
    said = "invalid choice: 'myhive/hive.yaml' (a hive file runs with: honeycomb run "
    assert f"{said}myhive/hive.yaml) (choose from " in err


def test_an_option_after_a_double_dash_is_told_where_it_goes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # After '--' every word is the task's: '--no-store' there was told
    # "(did you mean '--no-store'?)".
    err = refused(capsys, ["run", STARTER, "--", "-5 degrees in Oslo", "--no-store"])
    assert err.endswith(
        "unrecognized arguments: --no-store (--no-store after '--' is read as a word of the "
        "task: put it before '--')\n"
    )


def test_a_choice_far_from_every_one_is_told_the_choices_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["zzz"])
    assert "did you mean" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["run", STARTER], ["chat", STARTER], ["eval", STARTER, STARTER_EVALS]],
    ids=lambda argv: argv[0],
)
def test_a_model_given_without_its_key_names_the_option_and_its_cure(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    # It said "model 'gpt-4o-mini' needs an API key: ... (or give the model an api_key,
    # or the base_url of a local endpoint)": fields of a hive's model, which --model's
    # is not.
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HONEYCOMB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main([*argv, "--model", "gpt-4o-mini", "--no-store"]) == ExitStatus.UNUSABLE
    assert capsys.readouterr().err.endswith(
        "\n  --model gpt-4o-mini needs an API key: set OPENAI_API_KEY (or give --base-url of "
        "a local endpoint: Ollama, vLLM, llama.cpp's server)\n"
    )
    # A misspelt offline or local model was taken for an endpoint's, said to need a key.
    for given, meant in (("ofline", "offline"), ("Local", "local")):
        assert main([*argv, "--model", given, "--no-store"]) == ExitStatus.UNUSABLE
        said = f"--model {given} needs an API key (did you mean {meant!r}?): set OPENAI_API_KEY"
        assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
