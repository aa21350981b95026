"""The path a newcomer walks, from the outside: ``init`` a hive, ``run`` it offline, look
at it with ``runs`` and ``trace``; what each says when something is to fix."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.main import main


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HONEYCOMB_NOTES", str(tmp_path / "notes"))
    return tmp_path


@pytest.fixture
def run_id(here: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A run of a hive ``init`` made, kept in the default store."""
    assert main(["init", "myhive"]) == ExitStatus.OK
    assert main(["run", "myhive/hive.yaml", "--plain", "--run-id", "newcomer"]) == ExitStatus.OK
    capsys.readouterr()
    return "newcomer"


def test_trace_writes_its_files_into_folders_it_makes(
    run_id: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--jsonl`` and ``--html`` make the folders of their files, as eval's ``--html``
    does."""
    status = main(["trace", run_id, "--jsonl", "out/spans.jsonl", "--html", "out/run.html"])
    err = capsys.readouterr().err
    assert status == ExitStatus.OK, err
    assert (here / "out" / "spans.jsonl").read_text().count("\n") >= 4
    assert (here / "out" / "run.html").read_text().startswith("<!")
    assert "wrote out/spans.jsonl\nwrote out/run.html\n" in err


@pytest.mark.parametrize("option", ["--jsonl", "--html"])
def test_trace_names_the_option_and_the_file_it_cannot_write(
    option: str, run_id: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of ``--jsonl`` or ``--html`` that cannot be written is one line that names
    the option, the file and why (exit status 2), as eval's ``--html`` is: it was
    ``cannot write: [Errno 21] Is a directory: 'myhive'``."""
    status = main(["trace", run_id, option, "myhive"])
    err = capsys.readouterr().err
    assert status == ExitStatus.UNUSABLE
    assert err == f"{option} myhive: cannot write it: Is a directory\n"


def test_validate_names_the_files_of_a_hive_tool_as_it_names_the_hive(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lead template calls ``hive:facts.yaml``: a mistake in that file, or the file
    gone, is told under the folder the command was given (``lead/facts.yaml``), as the
    hive's own are, where it was the file's absolute path on this machine."""
    assert main(["init", "lead", "--template", "lead"]) == ExitStatus.OK
    facts = here / "lead" / "facts.yaml"
    facts.write_text(facts.read_text().replace("\nroles:", "\nrole:", 1))
    capsys.readouterr()
    assert main(["validate", "lead/hive.yaml"]) == ExitStatus.FAILED
    out = capsys.readouterr().out
    assert "\n  lead/facts.yaml:" in out
    assert str(here) not in out
    facts.unlink()
    assert main(["validate", "lead/hive.yaml"]) == ExitStatus.FAILED
    out = capsys.readouterr().out
    assert out.endswith("'hive:facts.yaml': no hive file lead/facts.yaml\n")
    assert main(["run", "lead/hive.yaml", "--no-store"]) == ExitStatus.UNUSABLE
    assert str(here) not in capsys.readouterr().err


def test_the_commands_init_says_to_run_next_run_as_pasted(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder whose name has a space: ``init`` said ``honeycomb validate my
    hive/hive.yaml``, which a shell reads as two files; now quoted, and it runs."""
    assert main(["init", "my hive"]) == ExitStatus.OK
    lines = capsys.readouterr().out.splitlines()
    said = [line.strip() for line in lines if line.startswith("  honeycomb ")]
    assert said == [
        "honeycomb validate 'my hive/hive.yaml'",
        "honeycomb run 'my hive/hive.yaml'",
    ]
    assert main(shlex.split(said[0])[1:]) == ExitStatus.OK


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["run", "myhive/hive.yaml", "Look", "up", "Kyoto's", "temples"],
            "honeycomb run: error: unrecognized arguments: up Kyoto's temples (if they are "
            'words of the task, put the task in quotes: "Look up Kyoto\'s temples")',
        ),
        (
            ["demo", "Plan", "a", "trip", "for", "$5"],
            "honeycomb demo: error: unrecognized arguments: a trip for $5 (if they are words "
            "of the task, put the task in quotes: 'Plan a trip for $5')",
        ),
        (
            ["run", "myhive/hive.yaml", "Look up", "--modle", "x"],
            "honeycomb run: error: unrecognized arguments: --modle x (did you mean '--model'?)",
        ),
        (
            ["trace", "r1", "--jsnl=out.jsonl"],
            "honeycomb trace: error: unrecognized arguments: --jsnl=out.jsonl (did you mean "
            "'--jsonl'?)",
        ),
        (
            ["run", "myhive/hive.yaml", "--zzzzz"],
            "honeycomb run: error: unrecognized arguments: --zzzzz",
        ),
        (
            ["chat", "myhive/hive.yaml", "hello"],
            "honeycomb chat: error: unrecognized arguments: hello",
        ),
        (  # told "(did you mean '--plain'?)", under "honeycomb: error:"
            ["run", "myhive/hive.yaml", "Look up", "--latency", "1"],
            "honeycomb run: error: unrecognized arguments: --latency 1 (--latency is an "
            "option of honeycomb demo and honeycomb eval, not of honeycomb run)",
        ),
        (  # told "(did you mean '--record'?)"
            ["run", "myhive/hive.yaml", "--memory"],
            "honeycomb run: error: unrecognized arguments: --memory (--memory is an option of "
            "honeycomb demo, not of honeycomb run)",
        ),
        (  # an action's own options, and its name
            ["sessions", "prune", "--kep", "3"],
            "honeycomb sessions prune: error: unrecognized arguments: --kep 3 (did you mean "
            "'--keep'?)",
        ),
    ],
    ids=[
        "run",
        "demo",
        "an-option",
        "an-option=",
        "no-option-near",
        "no-task",
        "another-commands",
        "another-commands-flag",
        "an-action",
    ],
)
def test_a_task_left_unquoted_or_an_option_misspelt_is_told_what_to_write(
    here: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """A task typed without quotes reaches the command as many words: the first was the
    task and the others were refused as unknown, with nothing said of why; an option
    misspelt was refused without the one meant; another command's option was told a
    misspelling of one of this command's."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == ExitStatus.UNUSABLE
    assert capsys.readouterr().err == f"{said}\n"
    assert list(here.iterdir()) == []  # nothing ran


@pytest.mark.parametrize("written", ["city_facts", "tools.city_facts", "tools.py:city_facts"])
def test_a_tool_path_written_another_way_is_told_the_one_to_write(
    here: Path, capsys: pytest.CaptureFixture[str], written: str
) -> None:
    assert main(["init", "myhive"]) == ExitStatus.OK
    hive = here / "myhive" / "hive.yaml"
    hive.write_text(hive.read_text().replace("[tools:city_facts]", f"[{written}]"))
    capsys.readouterr()
    assert main(["validate", "myhive/hive.yaml"]) == ExitStatus.FAILED
    [error] = capsys.readouterr().out.splitlines()[1:]
    assert "roles.researcher.tools[0]: " in error
    assert f"{written!r}" in error
    assert "(did you mean 'tools:city_facts'?)" in error
