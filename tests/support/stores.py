"""The two run stores the store's tests run on: an SQLite file and a schema of the
session's PostgreSQL server (``tests/conftest.py``: ``postgres``), and reading and
changing either behind the store's back.

A store is named as ``RunStore`` takes it: a file (a :class:`~pathlib.Path`) or a URL
(a ``str``)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from honeycomb.store import RunStore
from tests.support.concurrency import MEET_LIMIT_S
from tests.support.where import Where, named

__all__ = [
    "KINDS",
    "ON_POSTGRES",
    "STORES_NOT_SET_UP",
    "UNSET_PASSWORD",
    "Where",
    "change",
    "finished_in_store",
    "named",
    "query",
    "saved_in_store",
]

ON_POSTGRES = pytest.mark.xdist_group("postgres")
"""The tests on PostgreSQL go to one test process: one server for them all."""

KINDS = [pytest.param("sqlite"), pytest.param("postgresql", marks=ON_POSTGRES)]
"""The kinds of store, to parametrize a fixture with."""


def query(where: Where, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` (``?`` placeholders) in the store ``where``."""
    return change(where, (sql, params))


def change(where: Where, *statements: tuple[str, Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Run ``statements`` in the store ``where``, in one transaction; the last one's
    rows."""
    if isinstance(where, str):
        from tests.support.postgres import query as on_postgres

        return on_postgres(where, statements)
    rows: list[tuple[Any, ...]] = []
    with contextlib.closing(sqlite3.connect(where)) as raw, raw:
        for sql, params in statements:
            rows = raw.execute(sql, params).fetchall()
    return rows


async def finished_in_store(where: Where, run_id: str, worker: str) -> None:
    """Wait until ``worker``'s result of run ``run_id`` is committed (read again every
    few milliseconds), failing after the rendezvous limit."""
    store = RunStore(where)
    with anyio.move_on_after(MEET_LIMIT_S):
        while True:
            stored = await store.load(run_id)
            found = None if stored is None else stored.workers.get(worker)
            if found is not None and found.result is not None:
                return
            await anyio.sleep(0.005)
    raise AssertionError(f"{worker}'s result of run {run_id!r} never reached the store")


async def saved_in_store(where: Where, run_id: str, worker: str, **fields: Any) -> None:
    """Wait until ``worker``'s saved loop state of run ``run_id`` has ``fields`` (its
    columns) committed (read again every few milliseconds), failing after the
    rendezvous limit."""
    store = RunStore(where)
    with anyio.move_on_after(MEET_LIMIT_S):
        while True:
            stored = await store.load(run_id)
            found = None if stored is None else stored.workers.get(worker)
            state = None if found is None else found.state
            if state is not None and all(state[k] == v for k, v in fields.items()):
                return
            await anyio.sleep(0.005)
    raise AssertionError(f"{worker}'s state of run {run_id!r} never had {fields} in the store")


UNSET_PASSWORD = (
    "store:\n  url: postgresql://app@127.0.0.1:1/db\n  password_env: HC_TEST_UNSET_PW\n"
)
"""A hive's store whose password's variable is not set: refused before it connects."""

STORES_NOT_SET_UP = [
    (
        (),
        "store.password_env: the run store's password_env names HC_TEST_UNSET_PW, which is not set",
    ),
    (
        ("--store", "postgresql://app@127.0.0.1:1/db?schema=bad-name"),
        "the run store's schema 'bad-name' is not a plain name",
    ),
]
"""A command's store options that cannot be set up (with a hive holding
:data:`UNSET_PASSWORD`), and the line that says why (the hive's own at the line of its
``password_env``)."""
