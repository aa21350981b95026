"""A model's (or a memory's embeddings') ``base_url`` without ``http://`` is an error
of the hive file, at its line, as the adapter's own check says it when the model is
made: ``validate`` said OK, and every call of the run then failed to reach it."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.main import main

HIVE = """\
models:
  default:
    model: llama3.1
    base_url: localhost:11434/v1
memory:
  embeddings:
    model: nomic-embed-text
    base_url: 127.0.0.1:11434/v1
roles:
  planner:
    description: Splits the task.
  writer:
    description: Writes.
"""


def test_a_base_url_without_http_is_an_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hive = tmp_path / "hive.yaml"
    hive.write_text(HIVE)
    assert main(["validate", str(hive)]) == 1
    said = capsys.readouterr().out
    assert (
        f"{hive}:4:5: models.default.base_url: base_url 'localhost:11434/v1' has no http:// "
        "or https:// (write 'http://localhost:11434/v1')"
    ) in said
    assert f"{hive}:8:5: memory.embeddings.base_url: base_url '127.0.0.1:11434/v1'" in said
