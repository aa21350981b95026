"""Where a hive file meets the PostgreSQL run store: a mistake in its ``store:`` URL is
told as the hive's other mistakes are, with the file, line and field, by ``honeycomb
validate`` too, and not first when a run opens the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.main import main as cli
from tests.support.hives import errors_of, hive

HIVE = """\
models:
  default: offline
roles:
  planner: {description: Splits the task.}
  w: {description: Works.}
store: postgresql://app:s3cret-pass@127.0.0.1:9/db?schema=run-store
"""


def test_a_store_schema_that_is_no_plain_name_is_told_where_it_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # validate said OK, and a run stopped at the store's opening, with 'store: the run
    # store's schema ...', no file and no line.
    path = hive(tmp_path, HIVE)
    (error,) = errors_of(path)
    assert error.startswith(f"{path}:6:1: store: ")
    assert "'run-store' is not a plain name" in error
    assert "s3cret-pass" not in error
    assert cli(["validate", str(path)]) == 1
    told = capsys.readouterr()
    assert "6:1: store: the run store's schema 'run-store'" in told.out + told.err
