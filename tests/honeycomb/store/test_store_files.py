"""What a path can hold a run store's file: told once, whatever another process does
to it meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.store.files import not_a_file


def test_a_store_file_made_by_another_process_as_it_is_looked_at_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Missing as it was first looked at, then made by another process (a run opening
    # the store as `honeycomb serve` read it): the file itself was taken for its
    # folder, and the page answered 500, 'runs.db is a file, not a folder'.
    path = tmp_path / "runs.db"
    stat = Path.stat
    looked: list[Path] = []

    def made_meanwhile(self: Path, **options: bool) -> object:
        if self == path and not looked:
            looked.append(self)
            path.write_bytes(b"")  # another process makes it now
            raise FileNotFoundError(self)
        return stat(self, **options)

    monkeypatch.setattr(Path, "stat", made_meanwhile)
    assert not_a_file(path) is None
    assert looked == [path]


def test_a_store_under_a_file_is_told_so(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("not a folder")
    said = f"{tmp_path / 'data'} is a file, not a folder: no run store can be in it"
    assert not_a_file(tmp_path / "data" / "runs.db") == said
    assert not_a_file(tmp_path / "data" / "deeper" / "runs.db") == said
    assert not_a_file(tmp_path / "missing" / "runs.db") is None  # its folder is made
