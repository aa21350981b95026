"""A call a run resumes from its store, with a secret in its arguments: the store keeps
the secret masked (``[password hidden]``), and the resumed call runs with the secret
again, as this process knows it, never with the mask; one whose secret this process
does not know is refused as the run resumes, naming the call and the mask. A mask that
was the call's own text (what an endpoint's echo of a secret was masked to as it
arrived) stays a mask: a resumed call is given no secret its first life was not."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Approvals, Executor, Role, tool
from honeycomb.errors import ConfigError
from honeycomb.testing import ScriptedModel
from runtime.secrets import add_secret, isolated
from runtime.testing import call
from runtime.tools.unmasking import kept_apart, revealed

PASSWORD = "pg-pass-8f3a1c77e2"
DSN = f"postgresql://app:{PASSWORD}@db/prod"
SHOWN = "[password hidden]"

ran: list[dict[str, str]] = []


@tool(side_effects=True)
def run_sql(dsn: str, sql: str, note: str = "") -> str:
    """Run SQL on a database."""
    ran.append({"dsn": dsn, "sql": sql, "note": note})
    return "1 row"


def _executor(db: Path) -> Executor:
    arguments = {"dsn": DSN, "sql": "select 1", "note": f"the mask reads {SHOWN}"}
    model = ScriptedModel([call("run_sql", arguments, id="q1"), "done"])
    role = Role(name="dba", tools=("run_sql",), approvals=Approvals(tools=("run_sql",)))
    return Executor([role], model, tools=[run_sql], store=db, aggregator="concat")


def _kept(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))


async def test_a_resumed_call_runs_with_its_secret_which_nothing_keeps(db: Path) -> None:
    ran.clear()
    add_secret(PASSWORD, "password")
    executor = _executor(db)
    waiting = await executor.run("tidy", subtasks=[("dba", "tidy")], run_id="r1")
    (asked,) = waiting.pending
    assert asked.arguments["dsn"] == f"postgresql://app:{SHOWN}@db/prod"  # as a person sees it
    await executor.decide("r1", asked.call_id, approve=True)
    done = await _executor(db).resume("r1")
    # The secret again, not its mask; and the mask that was the call's text, as it was.
    assert ran == [{"dsn": DSN, "sql": "select 1", "note": f"the mask reads {SHOWN}"}]
    assert done.status == "ok"
    assert PASSWORD.encode() not in _kept(db)


async def test_a_resumed_call_whose_secret_this_process_does_not_know_is_refused(
    db: Path,
) -> None:
    ran.clear()
    add_secret(PASSWORD, "password")
    waiting = await _executor(db).run("tidy", subtasks=[("dba", "tidy")], run_id="r1")
    await _executor(db).decide("r1", waiting.pending[0].call_id, approve=True)
    with isolated(), pytest.raises(ConfigError) as refused:  # another process: no secret
        await _executor(db).resume("r1")
    assert str(refused.value) == (
        "worker 's1' goes on with call 'q1' to 'run_sql', whose arguments held a "
        "secret, kept as [password hidden], and this process knows no secret masked so: a "
        "run store keeps secrets only masked, and the call would run with the mask. Let "
        "this process know the secret (add_secret, or the hive that declares it) before "
        "it resumes the run"
    )
    assert ran == []  # not run with the mask
    assert (await _executor(db).resume("r1")).status == "ok"  # known again: it runs
    assert ran == [{"dsn": DSN, "sql": "select 1", "note": f"the mask reads {SHOWN}"}]


def test_only_a_mask_that_hid_a_secret_is_the_secret_again() -> None:
    add_secret(PASSWORD, "password")
    written = '{"a": ["x", "[password hidden]"], "b": "' + PASSWORD + '", "c": "\\\\[k hidden]"}'
    kept = kept_apart(written).replace(PASSWORD, SHOWN)  # as the store masks it
    assert kept == (
        '{"a": ["x", "\\u005bpassword hidden]"], "b": "[password hidden]", '
        '"c": "\\\\\\u005bk hidden]"}'
    )
    assert revealed(kept) == written.replace("[password", "\\u005bpassword").replace(
        "\\\\[k", "\\\\\\u005bk"
    )
