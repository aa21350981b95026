"""The cache-hit share of a run: the cached input tokens its models reported, in the
run's usage and cost, in the run store, in ``honeycomb runs`` and in the timeline
(terminal and HTML)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from honeycomb import AssistantMessage, Executor, ModelRequest, ModelResponse, Role, Usage
from honeycomb.cli.runs import run_line
from honeycomb.models import Price, PricedModel
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.tracing import build_timeline, render_timeline, to_html


def cached(request: ModelRequest) -> ModelResponse:
    """Every answer: 1,000 tokens in, 600 of them read from the cache."""
    return ModelResponse(
        message=AssistantMessage(content="done"),
        usage=Usage(input_tokens=1000, output_tokens=10, cached_input_tokens=600),
    )


async def test_a_runs_cache_hits_are_counted_priced_stored_and_shown(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    price = Price(input_per_mtok=1.0, output_per_mtok=2.0, cached_input_per_mtok=0.1)
    executor = Executor(
        [Role(name="worker")], PricedModel(FunctionModel(cached), price),
        aggregator="concat", store=db,
    )  # fmt: skip
    result = await executor.run("go", subtasks=[("worker", "a"), ("worker", "b")], run_id="r1")

    assert result.usage.cached_input_tokens == 1200
    # 400 fresh tokens at $1, 600 cached at $0.10, 10 out at $2: per call, per million.
    assert result.usage.cost == pytest.approx(2 * (400 * 1.0 + 600 * 0.1 + 10 * 2.0) / 1e6)
    store = RunStore(db)
    (summary,) = store.runs()
    assert summary.cached_input_tokens == 1200
    assert "60% cached" in run_line(summary)
    timeline = build_timeline(store.spans("r1"), run_id="r1")
    console = Console(record=True, width=120)
    console.print(render_timeline(timeline, width=120))
    assert "60% of in cached" in console.export_text()
    assert "600 cached" in to_html(timeline)
    store.close()
