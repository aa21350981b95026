"""``honeycomb validate`` refuses what ``honeycomb run`` would refuse, in the same
located words, and ``run`` says a configuration error (exit status 2), never with a
traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from honeycomb import ConfigError, ConfigErrors, Executor
from honeycomb.cli.main import main
from tests.support.stores import UNSET_PASSWORD

HIVE = """\
models: {default: {provider: offline, latency: 0}}
roles:
  planner: {description: Plans.}
  w: {description: Works.}
"""


def refused(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """What validate and then run say of the hive at ``path``, which both refuse."""
    assert main(["validate", str(path)]) == 1
    said = capsys.readouterr().out
    assert main(["run", str(path), "a task", "--plain"]) == 2
    ran = capsys.readouterr()
    assert "Traceback" not in ran.err
    return said, ran.err


@pytest.mark.parametrize(
    ("store", "why"),
    [
        (".", "this is a folder, not a run store: name its file"),
        ("hive.yaml", "the file is not a Honeycomb run store (file is not a database)"),
        pytest.param(  # passed by validate; run failed after its banner, at no line
            "/proc/x/runs.db",
            "cannot open the run store: cannot make its folder /proc/x: No such file or directory",
            marks=pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux's /proc"),
        ),
    ],
    ids=["a folder", "not a store", "no folder can be made"],
)
def test_a_store_that_a_run_cannot_open_is_refused_by_validate_in_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str, why: str
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE + f"store: {store}\n")
    written = path.read_text()
    said, ran = refused(path, capsys)
    where = tmp_path / store if store != "." else tmp_path
    line = f"{path}:5:1: store: {where}: {why}"
    assert f"{path}: 1 error\n  {line}" in said
    assert f"  {line}" in ran
    assert path.read_text() == written  # read as it is: nothing made or changed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hive.yaml"]


def test_a_store_whose_folder_is_not_there_yet_passes_validate_which_makes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE + "store: data/runs/runs.db\n")
    assert main(["validate", str(path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hive.yaml"]


def test_a_run_in_another_store_than_the_hives_is_not_refused_for_the_hives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE + "store: .\n")
    assert main(["run", str(path), "a task", "--plain", "--no-store"]) == 0
    assert "not a run store" not in capsys.readouterr().err


def test_a_store_password_not_set_is_a_warning_of_validate_and_refused_by_run_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The environment's, not the file's (as an API key): validate passes the hive and
    # warns; run refuses it where it is declared, before it reaches for the server.
    monkeypatch.delenv("HC_TEST_UNSET_PW", raising=False)
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE + UNSET_PASSWORD)
    line = (
        f"{path}:7:3: store.password_env: the run store's password_env names "
        "HC_TEST_UNSET_PW, which is not set"
    )
    assert main(["validate", str(path)]) == 0
    assert f"  warning: {line}\n" in capsys.readouterr().out
    assert main(["run", str(path), "a task", "--plain"]) == 2
    assert line in capsys.readouterr().err.splitlines()
    monkeypatch.setenv("HC_TEST_UNSET_PW", "set")
    assert main(["validate", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_two_tools_of_one_name_in_a_role_are_refused_by_validate_and_run_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(
        HIVE + "  word_count: {description: Counts.}\n"
        "  x: {tools: ['tests.support.role_tools:word_count', 'agent:word_count']}\n"
    )
    said, ran = refused(path, capsys)
    line = f"{path}:6:54: roles.x.tools[1]: 'agent:word_count' is a tool named 'word_count'"
    assert f"  {line}" in said
    assert f"  {line}" in ran


def test_a_config_error_building_the_executor_is_told_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Executor:
        raise ConfigErrors([ConfigError("role 'w': what the Executor refuses")])

    monkeypatch.setattr(Executor, "from_hive", refuse)
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE)
    assert main(["run", str(path), "a task", "--plain", "--no-store"]) == 2
    assert "  role 'w': what the Executor refuses" in capsys.readouterr().err
