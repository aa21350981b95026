"""``--help`` and the synopsis at the top of docs/cli.md say the same: every command is
there, each with the options its ``--help`` names, and no other."""

from __future__ import annotations

import re

import pytest

from honeycomb.cli.main import main
from tests.support import ROOT

_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def synopsis() -> dict[tuple[str, ...], set[str]]:
    """Each command of docs/cli.md's synopsis (``("eval", "compare")``) and the long
    options its lines name (``honeycomb bench``'s two lines as one command)."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    found: dict[tuple[str, ...], set[str]] = {}
    command: tuple[str, ...] = ()
    for line in block.splitlines():
        if line.startswith("honeycomb "):
            command = tuple(_leading(line.split()[1:]))
        found.setdefault(command, set()).update(_OPTION.findall(line))
    return found


def _leading(words: list[str]) -> list[str]:
    """The words that name the command, before its arguments and options."""
    taken = []
    for word in words:
        if not re.fullmatch(r"[a-z]+", word):
            break
        taken.append(word)
    return taken


def helped(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_every_command_has_its_lines_in_the_synopsis(capsys: pytest.CaptureFixture[str]) -> None:
    listed = re.findall(r"^    ([a-z]+)  ", helped(capsys, []), re.MULTILINE)
    assert "eval" in listed
    assert sorted(listed) == sorted({command[0] for command in synopsis()})
    assert ("eval", "compare") in synopsis()


@pytest.mark.parametrize("command", sorted(synopsis()), ids=" ".join)
def test_the_synopsis_names_the_options_of_each_command_s_help(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    options = set(_OPTION.findall(helped(capsys, list(command)))) - {"--help"}
    assert synopsis()[command] == options


def test_bench_help_names_its_peers_form(capsys: pytest.CaptureFixture[str]) -> None:
    said = helped(capsys, ["bench"])
    assert "--peers[=NAMES]" in said
    assert "honeycomb bench --peers --help" in said


@pytest.mark.parametrize(
    "command",
    # bench's --store is a benchmark's database, not a run store
    sorted(c for c, options in synopsis().items() if "--store" in options and c != ("bench",)),
    ids=" ".join,
)
def test_the_help_of_store_says_where_runs_are_read_without_it(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    # runs, trace, approve, sessions, serve and eval compare read .honeycomb/runs.db
    # unless told, and their --help did not say so, where run's did.
    text = " ".join(helped(capsys, list(command)).split())
    assert re.search(r"--store STORE the run store: .*\(default: [^)]*\.honeycomb/runs\.db\)", text)


_SAYS = re.compile(r"(--[a-z][a-z-]*)[ =]([A-Z][A-Za-z_.,]*)")


def _values(text: str) -> dict[str, str]:
    """What each option takes, as ``--name VALUE`` (or ``--name=VALUE``) writes it."""
    return dict(_SAYS.findall(text))


@pytest.mark.parametrize(
    "command", ["demo", "init", "run", "resume", "approve", "runs", "trace", "serve"]
)
def test_the_synopsis_and_the_help_name_what_each_option_takes_alike(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # The help said --html HTML, --reason REASON, --host HOST where the page says --html
    # FILE, --reason TEXT, --host ADDR.
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    lines = [line for line in f"\n{block}".split("\nhoneycomb ")[1:] if line.split()[0] == command]
    usage = helped(capsys, [command]).split("\n\n", 1)[0]
    said = _values(" ".join(lines))  # (an option of choices, {local,ray}, is shown as them)
    assert {option: said.get(option) for option in _values(usage)} == _values(usage)
