"""Edited arguments of a call that holds a secret: a person sees the secret masked
(``[password hidden]``), and the run store keeps it so; what the edit leaves as it was
shown keeps the call's own value, and a changed value holding a mask is refused,
naming it, never run with the mask in place of the secret."""

from __future__ import annotations

import pytest

from runtime import ToolMessage, tool
from runtime.secrets import add_secret
from runtime.testing import ScriptedModel, call
from runtime.tools.approvals import ApprovalRequest, Decision, MaskedEdit, unmasked_edit
from workers import Approvals, Role, Worker
from workers.services import Services

PASSWORD = "pg-pass-8f3a1c77e2"
DSN = f"postgresql://app:{PASSWORD}@db/prod"
SHOWN = "postgresql://app:[password hidden]@db/prod"


async def _edited(edit: dict[str, object]) -> tuple[list[tuple[str, str]], str, ApprovalRequest]:
    """A worker whose call to ``run_sql`` (its ``dsn`` holding the password) is approved
    with ``edit`` laid over the arguments the approver was shown: what the tool ran
    with, the call's observation, and what the approver was asked."""
    ran: list[tuple[str, str]] = []
    asked: list[ApprovalRequest] = []

    @tool(side_effects=True)
    def run_sql(dsn: str, sql: str) -> str:
        """Run SQL on a database."""
        ran.append((dsn, sql))
        return "1 row"

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.approved({**request.arguments, **edit})

    model = ScriptedModel([call("run_sql", {"dsn": DSN, "sql": "select 1"}), "done"])
    role = Role(name="dba", tools=("run_sql",), approvals=Approvals(tools=("run_sql",)))
    worker = Worker(role, model, tools=[run_sql], services=Services(approver=approver))
    add_secret(PASSWORD, "password")
    result = await worker.run("tidy")
    (seen,) = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    return ran, seen.content, asked[0]


async def test_a_masked_value_the_edit_leaves_as_shown_runs_with_the_secret() -> None:
    ran, seen, asked = await _edited({"sql": "select 2"})
    assert asked.arguments == {"dsn": SHOWN, "sql": "select 1"}  # the person sees no secret
    assert ran == [(DSN, "select 2")]  # the secret, not its mask
    assert PASSWORD not in seen
    assert '"dsn": "postgresql://app:[password hidden]@db/prod", "sql": "select 2"' in seen


async def test_a_changed_value_holding_a_mask_is_refused_naming_the_argument() -> None:
    ran, seen, _ = await _edited({"dsn": "postgresql://app:[password hidden]@db/test"})
    assert ran == []  # never run with the mask for a password
    assert seen.startswith("Error: the edited arguments approved were not run: argument 'dsn'")
    assert "holds a secret (shown as [password hidden]) in a value the edit changed" in seen
    assert "Leave that value as the call has it" in seen


def test_where_an_edit_leaves_values_as_shown_they_are_the_calls_own() -> None:
    add_secret(PASSWORD, "password")
    called = {"db": {"url": DSN, "pool": 2}, "hosts": ["a", DSN], "sql": "select 1"}
    shown = {"db": {"url": SHOWN, "pool": 2}, "hosts": ["a", SHOWN], "sql": "select 1"}
    kept = unmasked_edit({**shown, "sql": "select 2", "db": {"url": SHOWN, "pool": 5}}, called)
    assert kept == {"db": {"url": DSN, "pool": 5}, "hosts": ["a", DSN], "sql": "select 2"}
    assert unmasked_edit({"sql": "select 2"}, called) == {"sql": "select 2"}  # no mask: as is
    refused = {
        "db.url": {**shown, "db": {"url": SHOWN + "?ssl=1", "pool": 2}},
        "hosts[1]": {**shown, "hosts": ["a", SHOWN + "/test"]},
        "note": {**shown, "note": f"use {SHOWN}"},  # a mask put where the call had none
        "sql": {**shown, "sql": f"-- {PASSWORD}"},  # a secret typed in: kept only masked
    }
    for where, edit in refused.items():
        with pytest.raises(MaskedEdit) as raised:
            unmasked_edit(edit, called)
        assert (raised.value.argument, raised.value.mask) == (where, "[password hidden]")
        assert PASSWORD not in str(raised.value)


def test_a_mask_of_a_secret_this_process_does_not_know_is_still_a_mask() -> None:
    """The store masked it in another process: a changed value holding it is refused,
    one left as the stored call has it is the stored value."""
    stored = {"token": "Bearer [api key hidden]", "path": "/v1/items"}
    assert unmasked_edit({**stored, "path": "/v2/items"}, stored) == {**stored, "path": "/v2/items"}
    with pytest.raises(MaskedEdit, match="argument 'token' holds a secret"):
        unmasked_edit({**stored, "token": "Token [api key hidden]"}, stored)
