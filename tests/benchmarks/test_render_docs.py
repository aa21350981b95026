"""docs/performance.md and benchmarks/README.md show the figures of the reference runs,
as ``python -m benchmarks.render_docs`` writes them from benchmarks/reference/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import render_docs
from benchmarks.render_docs import DOC, README, REFERENCE, REFERENCE_DIR, between, rendered


def test_the_pages_show_the_reference_figures() -> None:
    behind = [str(page) for page in render_docs.stale()]
    assert behind == [], "run python -m benchmarks.render_docs"


def test_every_reference_run_has_its_file_and_its_figures_on_the_page() -> None:
    text = DOC.read_text()
    for ref in REFERENCE:
        assert (REFERENCE_DIR / ref.file).is_file()
        assert f"### {ref.title}\n" in text
        assert f"(../docs/performance.md#{ref.anchor})" in README.read_text()


def test_a_changed_reference_file_leaves_the_page_behind(tmp_path: Path) -> None:
    folder = tmp_path / "reference"
    shutil.copytree(REFERENCE_DIR, folder)
    lines = (folder / "context.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["total_input_tokens"] += 1000
    (folder / "context.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert rendered(folder)[DOC] != DOC.read_text()
    assert f"{first['total_input_tokens']:,}" in rendered(folder)[DOC]


def test_a_figure_edited_by_hand_is_written_over() -> None:
    text = DOC.read_text()
    edited = text.replace("| compaction | 237,801 |", "| compaction | 200,000 |")
    assert edited != text
    assert between(edited, "figures", render_docs.figures()) == text


def test_a_page_without_its_markers_is_named() -> None:
    with pytest.raises(ValueError, match="figures"):
        between("# Performance\n", "figures", "")
