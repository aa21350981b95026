"""A run that answers a message of a session: told the conversation before it."""

from __future__ import annotations

import time

from honeycomb.run.session import turn_of
from honeycomb.store import RunStore
from honeycomb.store.sessions import StoredSessions
from tests.interactions.drive import Outcome
from tests.interactions.features.base import Env, Feature
from tests.interactions.hive import TASK, Hive
from tests.interactions.invariants import Report

__all__ = ["Session"]


class Session(Feature):
    name = "session"
    title = "sessions"
    about = (
        "a run store holding a session whose first turn (a message and its answer) came "
        "before; the run is its second turn"
    )
    promises = (
        "the planner and the aggregator are told the conversation in every life; the "
        "turn reads as its run ended"
    )

    SESSION = "chat"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.store = True

    async def prepare(self, hive: Hive) -> None:
        store = RunStore(hive.ledger.folder / "runs.db")
        stored = StoredSessions(store)
        try:
            await stored.begin((self.SESSION, 1, f"earlier-{hive.token}", "What are bees for?",
                                time.time(), "", 0))  # fmt: skip
            await stored.ended(self.SESSION, 1, f"They make honey ({hive.token}).", "[]")
            await stored.begin(
                (self.SESSION, 2, hive.run_id, TASK, time.time(), "", 0), f"earlier-{hive.token}"
            )
        finally:
            store.close()

    def check(self, outcome: Outcome, report: Report) -> None:
        for call in outcome.hive.ledger.model_calls():
            if call["scope"] == "run" and call["kind"] in ("plan", "aggregate"):
                report.expect(
                    call["told"],
                    "session",
                    f"the {call['kind']} call of life {call['life']} was not told the conversation",
                )
        store = RunStore(outcome.hive.ledger.folder / "runs.db")
        turns = [turn_of(row) for row in StoredSessions(store).turns_now(self.SESSION)]
        report.expect(len(turns) == 2, "session", f"the session holds {len(turns)} turns")
        result = outcome.result
        if len(turns) == 2 and result is not None and outcome.last.status in ("ok", "partial"):
            report.expect(
                turns[1].status == result.status,
                "session",
                f"the turn reads {turns[1].status}; its run ended {result.status}",
            )
