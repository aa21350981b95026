"""The pairwise interaction matrix: one test a cell (a feature alone, or two together),
each running a small hive with its features on, checking what every feature promises
and the invariants of all (see tests/interactions/matrix.py and docs/interactions.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interactions.cell import KnownDefects, judge, run_cell
from tests.interactions.features.base import Env
from tests.interactions.matrix import Cell, cells


def _param(cell: Cell) -> object:
    marks: list[pytest.MarkDecorator] = []
    if cell.not_applicable is not None:
        marks.append(pytest.mark.skip(reason=f"not applicable: {cell.not_applicable}"))
    if "ray" in cell.needs:
        marks.append(pytest.mark.xdist_group("ray"))
    always = [k for k in cell.known if not k.sometimes]
    if always:
        reasons = "; ".join(f"{k.label}: {k.why}" for k in always)
        marks.append(pytest.mark.xfail(strict=True, raises=KnownDefects, reason=reasons))
    return pytest.param(cell, id=cell.id, marks=marks)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("cell", [_param(c) for c in cells()])
async def test_cell(cell: Cell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    env = Env()
    if "mcp" in cell.needs:
        env = request.getfixturevalue("mcp_env")
    if "ray" in cell.needs:
        pool = request.getfixturevalue("ray_pool")
        env = Env(env.mcp_url, env.mcp_token, env.mcp_notes, backend=pool)
    judge(cell, await run_cell(cell, env, tmp_path))
