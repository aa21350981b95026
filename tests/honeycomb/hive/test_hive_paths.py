"""The paths a hive file gives are read as a shell reads them: ``~`` is the home folder,
and a relative path is relative to the hive's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.main import main as cli
from honeycomb.hive import load_hive
from tests.support.hives import errors_of, hive

HIVE = """\
models:
  default: offline
roles:
  planner: {description: Splits the task.}
  w: {description: Works.}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder of the test's own, which ``~`` names."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


def test_a_store_memory_and_roles_dir_under_home_are_in_the_home_folder(
    tmp_path: Path, home: Path
) -> None:
    # store: ~/runs.db kept the runs in a folder named '~' beside the hive file.
    (home / "roles").mkdir()
    (home / "roles" / "r.yaml").write_text("name: r\ndescription: Reads.\n")
    extra = "store: ~/runs.db\nmemory: {path: ~/memory.db}\nroles_dir: ~/roles\n"
    loaded = load_hive(hive(tmp_path, HIVE + extra))
    assert loaded.store == home / "runs.db"
    assert loaded.memory_path == home / "memory.db"
    assert "r" in loaded.roles


def test_a_run_of_a_hive_whose_store_is_under_home_keeps_it_there(
    tmp_path: Path, home: Path, fast_demo: Path
) -> None:
    path = hive(tmp_path, HIVE + "store: ~/runs.db\n")
    assert cli(["run", str(path), "Compare Lisbon and Porto.", "--plain"]) == 0
    assert (home / "runs.db").is_file()
    assert not (tmp_path / "~").exists()


def test_a_store_given_on_the_command_line_under_home_is_in_the_home_folder(
    tmp_path: Path, home: Path, fast_demo: Path
) -> None:
    # --store=~/runs.db, which no shell expands, made a folder named '~' too.
    path = hive(tmp_path, HIVE)
    assert cli(["run", str(path), "Compare Lisbon and Porto.", "--plain", "--store=~/r.db"]) == 0
    assert (home / "r.db").is_file()
    assert not (tmp_path / "~").exists()


def test_a_home_of_no_user_is_told_at_its_line(tmp_path: Path) -> None:
    path = hive(tmp_path, HIVE + "store: ~no-such-user-here/runs.db\n")
    (error,) = errors_of(path)
    assert error.startswith(f"{path}:6:1: store: ")
    assert "~no-such-user-here, the home folder of no user here" in error


def test_a_hive_file_reached_by_a_link_reads_its_paths_in_the_folder_of_the_file(
    tmp_path: Path,
) -> None:
    # A hive linked into another folder imported its tools beside the file it links to,
    # but looked for its roles_dir, its hive tools, its store and its memory beside the
    # link: 'roles_dir: no such folder: linked/roles'.
    real = tmp_path / "real"
    (real / "roles").mkdir(parents=True)
    (real / "roles" / "r.yaml").write_text("name: r\ndescription: Reads.\n")
    (real / "facts.yaml").write_text(HIVE)
    extra = (
        "  lead: {description: Leads., tools: ['hive:facts.yaml']}\n"
        "roles_dir: roles\nstore: runs.db\nmemory: {path: memory.db}\n"
    )
    hive(real, HIVE + extra)
    (tmp_path / "linked").mkdir()
    link = tmp_path / "linked" / "hive.yaml"
    link.symlink_to(real / "hive.yaml")
    loaded = load_hive(link)
    assert "r" in loaded.roles
    assert loaded.hives["hive:facts.yaml"].file.resolve() == real / "facts.yaml"
    assert loaded.store == real / "runs.db"
    assert loaded.memory_path == real / "memory.db"
