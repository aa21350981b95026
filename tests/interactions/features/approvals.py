"""Approvals: calls that wait in the run store for a person, and an approver that
decides at once."""

from __future__ import annotations

import json

from honeycomb import ApprovalRequest, BudgetExceeded, Decision
from tests.interactions.brain import Call
from tests.interactions.drive import Outcome
from tests.interactions.features.base import (
    Env,
    Feature,
    calls_of,
    cut_off,
    finished,
    top_observations,
)
from tests.interactions.hive import Hive
from tests.interactions.invariants import Report

__all__ = ["Approver", "WaitingApprovals"]


def _pay_checks(outcome: Outcome, report: Report, approved: dict[tuple[str, str], bool]) -> None:
    """A paid call was approved; a denied call's observation says so; an approved
    call of a finished subtask worker ran."""
    for paid in outcome.hive.ledger.tool_calls("pay"):
        decision = approved.get((paid["worker"], paid["call"]))
        report.expect(
            decision is True,
            "approvals",
            f"{paid['worker']} paid {paid['args']} with decision {decision}",
        )
    ran = {(c["worker"], c["call"]) for c in outcome.hive.ledger.tool_calls("pay")}
    for sid, message in top_observations(outcome, "pay"):
        decision = approved.get((sid, message.tool_call_id))
        if decision is False:
            report.expect(
                message.status == "error" and "denied" in message.content,
                "approvals",
                f"{sid}'s denied call was observed as {message.status}: {message.content}",
            )
        elif decision is True:
            report.expect(
                (message.status == "ok" and (sid, message.tool_call_id) in ran)
                or cut_off(outcome, message),
                "approvals",
                f"{sid}'s approved call: {message.status}: {message.content[:200]}",
            )


class WaitingApprovals(Feature):
    name = "approvals_waiting"
    title = "approvals waiting in the store"
    about = (
        "a run store and no approver: each working role pays (`approval=True`); the run "
        "ends `waiting`, a new Executor decides (pay 10, deny the rest) and resumes"
    )
    promises = "a call runs only once approved; a denied one is observed as denied"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.store = True
        hive.decide = True
        hive.tools.add("pay")
        hive.add_calls(0, Call("pay", {"amount": "{n}0"}))

    def check(self, outcome: Outcome, report: Report) -> None:
        approved = {(d.pending.worker, d.pending.call_id): d.approve for d in outcome.decided}
        _pay_checks(outcome, report, approved)
        asked = any(life.status == "waiting" for life in outcome.lives)
        report.expect(
            asked or not outcome.hive.ledger.model_calls() or _stopped_early(outcome),
            "approvals",
            f"no life ended waiting: {[life.status for life in outcome.lives]}",
        )


def _stopped_early(outcome: Outcome) -> bool:
    """Whether the run stopped before its workers could ask (a budget)."""
    return isinstance(outcome.last.error, BudgetExceeded)


async def pay_ten(request: ApprovalRequest) -> Decision:
    """An approver: pay 10, never more."""
    if request.arguments.get("amount") == 10:
        return Decision.approved()
    return Decision.denied("only 10 may be paid")


class Approver(Feature):
    name = "approver"
    title = "approvals by an approver"
    about = (
        "each working role pays (`approval=True`); the Executor's approver pays 10, denies the rest"
    )
    promises = "a call runs only once approved; a denied one is observed as denied"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.approver = pay_ten
        hive.tools.add("pay")
        hive.add_calls(0, Call("pay", {"amount": "{n}0"}))

    def check(self, outcome: Outcome, report: Report) -> None:
        approved: dict[tuple[str, str], bool] = {}
        for sid, subtask in finished(outcome).items():
            for call in calls_of(subtask, "pay"):
                approved[(sid, call.id)] = int(json.loads(call.arguments)["amount"]) == 10
        for paid in outcome.hive.ledger.tool_calls("pay"):
            approved.setdefault((paid["worker"], paid["call"]), paid["args"]["amount"] == 10)
        _pay_checks(outcome, report, approved)
