"""Scenario K: a 50-message conversation whose context a rolling summary keeps within
its budget, next to the whole conversation sent every turn."""

from __future__ import annotations

from benchmarks import conversation


def test_the_conversation_scenario_meets_its_targets() -> None:
    results = conversation.measure()
    assert all(check.met for check in conversation.targets(results)), conversation.table(results)
    summary, whole = results
    assert summary["summary_calls"] > 0
    # The budget binds: the whole conversation grows past it, the summarized one never.
    assert whole["largest_conversation_tokens"] > conversation.BUDGET_TOKENS
    assert max(summary["sent_per_turn"][-20:]) - min(summary["sent_per_turn"][-20:]) < 200
    figure = conversation.svg(results)
    assert figure.count("<polyline") == 2
    assert "conversation budget" in figure
