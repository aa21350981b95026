"""``honeycomb init``, ``--version`` and the guide ``honeycomb`` prints with no arguments."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from honeycomb.cli import init
from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.init import templates
from honeycomb.cli.main import main


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("OUTBOX", "NOTES", "REPORTS", "TICKETS"):
        monkeypatch.setenv(f"HONEYCOMB_{name}", str(tmp_path / name.lower()))
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    return tmp_path


def test_init_makes_a_hive_that_validates_and_runs(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "myhive"]) == 0
    made = capsys.readouterr().out
    assert "honeycomb run myhive/hive.yaml" in made
    hive = (here / "myhive" / "hive.yaml").read_text()
    assert hive.count("\n#") + hive.count("  # ") >= 10  # commented for a newcomer
    for section in ("models:", "default_model:", "roles:", "planner:", "aggregator:", "policy:"):
        assert section in hive
    tools = (here / "myhive" / "tools.py").read_text()
    assert "@tool\n" in tools
    assert "@tool(side_effects=True)" in tools
    readme = (here / "myhive" / "README.md").read_text()
    assert "--model" in readme
    assert "--base-url" in readme
    assert main(["validate", "myhive/hive.yaml"]) == 0
    assert main(["run", "myhive/hive.yaml", "--plain", "--no-store", "--model", "offline"]) == 0
    out = capsys.readouterr().out
    assert "\nAnswer:\n[offline simulation]" in out
    assert "Kyoto: Japan" in out


@pytest.mark.parametrize("name", sorted(templates()))
def test_every_template_validates_once_made(
    name: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", name, "--template", name]) == 0
    assert main(["validate", f"{name}/hive.yaml"]) == 0
    assert "OK" in capsys.readouterr().out


def test_init_refuses_to_overwrite_and_writes_nothing(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "myhive").mkdir()
    (here / "myhive" / "tools.py").write_text("# mine\n")
    assert main(["init", "myhive"]) == 1
    err = capsys.readouterr().err
    assert "myhive/tools.py" in err
    assert "not overwritten" in err
    assert (here / "myhive" / "tools.py").read_text() == "# mine\n"
    assert sorted(p.name for p in (here / "myhive").iterdir()) == ["tools.py"]


def test_init_names_the_templates(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--list"]) == 0
    listed = capsys.readouterr().out
    for name in ("starter", "research", "review", "triage", "trip"):
        assert f"\n{name} " in f"\n{listed}"
    assert main(["init", "x", "--template", "nope"]) == ExitStatus.UNUSABLE
    err = capsys.readouterr().err
    assert "no template 'nope'" in err
    assert "research, review" in err
    assert not (here / "x").exists()
    assert main(["init", "x", "--template", "reserch"]) == ExitStatus.UNUSABLE
    assert "no template 'reserch' (did you mean 'research'?); the templates are: " in (
        capsys.readouterr().err
    )


def test_version_and_the_guide_with_no_arguments() -> None:
    def honeycomb(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "honeycomb", *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    version = honeycomb("--version")
    assert version.returncode == 0
    assert version.stdout.strip() == f"honeycomb {metadata.version('honeycomb-agents')}"
    guide = honeycomb()
    assert guide.returncode == 0
    for command in ("honeycomb demo", "honeycomb init", "honeycomb run", "honeycomb trace"):
        assert command in guide.stdout
    assert len(guide.stdout.splitlines()) < 20


def test_init_with_no_folder_makes_the_hive_here(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "--template", "review"]) == 0
    assert (here / "hive.yaml").is_file()
    assert (here / "code" / "billing.py").is_file()  # the template's data comes along
    assert main(["init"]) == 1  # hive.yaml is there now
    assert "hive.yaml" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "missing"),
    [(["demo", "--compact"], "examples/logbook/hive.yaml"),
     (["demo", "--rounds"], "examples/research/rounds.yaml"),
     (["init", "x", "--template", "logbook"], "no template 'logbook'")],
)  # fmt: skip
def test_an_example_the_package_lacks_is_one_line_of_error(
    command: list[str],
    missing: str,
    here: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    only_starter = here / "installed"
    (only_starter / "starter").mkdir(parents=True)
    (only_starter / "starter" / "hive.yaml").write_text("name: starter\n")
    monkeypatch.setattr(init, "examples_folder", lambda: only_starter)
    assert main(command) == ExitStatus.UNUSABLE
    (line,) = capsys.readouterr().err.splitlines()
    assert missing in line


def test_a_file_where_a_templates_folder_goes_is_named_and_nothing_is_written(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A file 'data' where the trip's data/ folder goes: the README and hive were
    # written, then 'cannot write x/data/...: Not a directory' (exit 2), half a hive.
    (here / "x").mkdir()
    (here / "x" / "data").write_text("mine")
    assert main(["init", "x", "--template", "trip"]) == ExitStatus.FAILED
    assert capsys.readouterr().err == (
        "honeycomb init: 1 file already there, not overwritten: x/data; choose another "
        "folder or move them away\n"
    )
    assert sorted(p.name for p in (here / "x").iterdir()) == ["data"]


LINK = re.compile(r"\[[^\]]+\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


@pytest.mark.parametrize("template", sorted(templates()))
def test_every_link_of_a_folder_made_from_a_template_leads_somewhere(
    template: str, tmp_path: Path
) -> None:
    """A template's pages link to Honeycomb's docs from the repository (../../docs):
    in the folder made from it, they would lead nowhere, so they name the page."""
    written = init.scaffold(tmp_path / "mine", template)
    for page in [p for p in written if p.suffix == ".md"]:
        text = page.read_text(encoding="utf-8")
        for target in LINK.findall(text):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name} links to {target}"
    source = init.examples_folder() / template / "README.md"
    if "../../docs/" in source.read_text(encoding="utf-8"):
        assert "Honeycomb's `docs/" in (tmp_path / "mine" / "README.md").read_text()
