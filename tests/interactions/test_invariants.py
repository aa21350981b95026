"""What the invariants make of a run's figures, on ledgers written here (no run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from honeycomb import Usage
from tests.interactions.drive import Life, Outcome
from tests.interactions.hive import Hive
from tests.interactions.invariants import forgotten
from tests.interactions.ledger import Ledger


def model_call(life: int, worker: str, tokens: tuple[int, int], end: float) -> dict[str, Any]:
    given, taken = tokens
    kind = "plan" if worker == "planner" else "aggregate" if worker == "aggregator" else "work"
    return {"life": life, "conversation": f"cell/{worker}", "kind": kind, "input": given,
            "output": taken, "start": end - 0.001, "end": end}  # fmt: skip


def test_a_call_started_before_a_killed_lifes_last_write_and_answered_after_lacks_its_tokens(
    tmp_path: Path,
) -> None:
    """Under model_concurrency=1, s2's second answer was asked for (and counted, as a
    call counts as it starts) before s1's answer was written, and came after that last
    write, just before the kill; the next life asked for it again. The result counts
    every call the model answered, but those 155 tokens: a loss the checks did not
    know (they took a lost call to be lost from the count of calls too), and failed
    the cell once in a few runs."""
    calls = [
        model_call(1, "planner", (192, 35), 1.0),
        model_call(1, "s1", (123, 8), 1.1),
        model_call(1, "s2", (123, 8), 1.1),
        model_call(1, "s1", (152, 3), 1.3),  # asks for hold: written, then hold starts
        model_call(1, "s2", (152, 3), 1.35),  # asks for hold: killed before it was written
        model_call(2, "s1", (169, 7), 2.0),
        model_call(2, "s2", (152, 3), 2.1),  # asked again
        model_call(2, "s2", (169, 7), 2.2),
        model_call(2, "aggregator", (115, 5), 2.3),
    ]
    tools = [
        {"life": 1, "worker": "s1", "phase": "start", "at": 1.2},
        {"life": 1, "worker": "s2", "phase": "start", "at": 1.2},
        {"life": 1, "worker": "s1", "phase": "start", "at": 1.4},  # hold: the kill
    ]
    ledger = Ledger(tmp_path)
    ledger.models.write_text("".join(json.dumps(c) + "\n" for c in calls))
    ledger.tools.write_text("".join(json.dumps(t) + "\n" for t in tools))
    counted = Usage(model_calls=9, input_tokens=1195, output_tokens=76)  # as the run said
    result: Any = type("Result", (), {"usage": counted, "status": "ok"})()
    outcome = Outcome(hive=Hive(ledger=ledger, crash=True))
    outcome.lives = [Life(number=1, interrupted=True), Life(number=2, result=result)]
    assert forgotten(outcome) == (0, 152, 3)
    # A shortfall no lost answer makes is not forgotten: a token more, a call more.
    result.usage = Usage(model_calls=9, input_tokens=1195, output_tokens=75)
    assert forgotten(outcome) is None
    result.usage = Usage(model_calls=7, input_tokens=1195, output_tokens=76)
    assert forgotten(outcome) is None
