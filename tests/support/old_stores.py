"""Run stores as earlier versions of Honeycomb wrote them: the very tables of schema 1
(no leases, no application id), schema 2, 3 and 4, with the rows of a run copied in
from a store of today, so a test can open a real old file and watch it being upgraded."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

from honeycomb.store.schema import APPROVALS

__all__ = ["APPROVALS_4", "SCHEMA_1", "SCHEMA_2", "SCHEMA_3", "SCHEMA_4", "write_old_store"]

SCHEMA_1 = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    status TEXT NOT NULL,
    source TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    plan TEXT,
    result TEXT,
    error TEXT,
    workers INTEGER NOT NULL DEFAULT 0,
    model_calls INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS workers (
    run_id TEXT NOT NULL,
    worker TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    updated_at REAL NOT NULL,
    task TEXT,
    messages INTEGER,
    previous INTEGER,
    turn INTEGER,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost REAL,
    tool_calls INTEGER,
    nudged INTEGER,
    output_attempts INTEGER,
    wrapped_up INTEGER,
    repeats INTEGER,
    PRIMARY KEY (run_id, worker)
);
CREATE TABLE IF NOT EXISTS messages (
    run_id TEXT NOT NULL,
    worker TEXT NOT NULL,
    seq INTEGER NOT NULL,
    messages TEXT NOT NULL,
    PRIMARY KEY (run_id, worker, seq)
);
CREATE TABLE IF NOT EXISTS journal (
    run_id TEXT NOT NULL,
    worker TEXT NOT NULL,
    turn INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    status TEXT,
    content TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    PRIMARY KEY (run_id, worker, turn, call_id)
);
CREATE TABLE IF NOT EXISTS spans (
    run_id TEXT NOT NULL,
    spans TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_of_run ON spans (run_id);
PRAGMA user_version = 1;
"""
"""The tables of schema 1, as ``honeycomb/_schema.py`` created them."""

SCHEMA_2 = (
    SCHEMA_1.replace("PRAGMA user_version = 1;", "")
    + """
CREATE TABLE IF NOT EXISTS leases (
    run_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat REAL NOT NULL,
    ttl_s REAL NOT NULL
);
PRAGMA application_id = 1213809474;
PRAGMA user_version = 2;
"""
)
"""The tables of schema 2: schema 1's, the leases, and the application id."""

SCHEMA_3 = (
    SCHEMA_2.replace("PRAGMA user_version = 2;", "")
    + """
ALTER TABLE runs ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN cached_input_tokens INTEGER;
ALTER TABLE workers ADD COLUMN reasoning_tokens INTEGER;
ALTER TABLE workers ADD COLUMN summary TEXT;
ALTER TABLE workers ADD COLUMN summarized INTEGER;
ALTER TABLE workers ADD COLUMN compactions INTEGER;
ALTER TABLE workers ADD COLUMN context_tokens INTEGER;
ALTER TABLE workers ADD COLUMN context_messages INTEGER;
PRAGMA user_version = 3;
"""
)
"""The tables of schema 3: schema 2's, with the cache, reasoning and context counters
(runs did not say who made their plan)."""

SCHEMA_4 = (
    SCHEMA_3.replace("PRAGMA user_version = 3;", "")
    + """
ALTER TABLE runs ADD COLUMN planned_by TEXT;
PRAGMA user_version = 4;
"""
)
"""The tables of schema 4: schema 3's, and who made a run's plan (no table of lives;
the approvals table, when a run had asked for one, without who decided)."""

APPROVALS_4 = APPROVALS
"""The approvals table as stores of schema 4 and before made it, with the first call
that asked for approval (schema 5 makes it so too, then adds who decided)."""


def write_old_store(path: Path, version: int, source: Path, *, unfinished: bool = False) -> None:
    """A store of schema ``version`` (1 to 4) at ``path`` holding the runs of the store
    ``source`` (of today), in the columns that schema had (with its approvals, in a
    store of schema 2 or more). ``unfinished``: its runs as a crash leaves them
    (running, their workers' results not written, their last saved turns kept)."""
    script = {1: SCHEMA_1, 2: SCHEMA_2, 3: SCHEMA_3, 4: SCHEMA_4}[version]
    with contextlib.closing(sqlite3.connect(source)) as today:
        asked = today.execute("SELECT count(*) FROM approvals").fetchone()[0]
    old = sqlite3.connect(path)
    try:
        old.executescript(script)
        tables = ["runs", "workers", "messages", "journal", "spans"]
        if asked and version > 1:
            old.execute(APPROVALS_4)
            tables.append("approvals")
        old.execute("ATTACH DATABASE ? AS today", (str(source),))
        for table in tables:
            names = [row[1] for row in old.execute(f"PRAGMA main.table_info({table})")]
            listed = ", ".join(names)
            old.execute(f"INSERT INTO main.{table} ({listed}) SELECT {listed} FROM today.{table}")
        if unfinished:
            old.execute("UPDATE runs SET status = 'running', finished_at = NULL, result = NULL")
            old.execute("UPDATE workers SET status = 'running', result = NULL")
        old.commit()
        old.execute("DETACH DATABASE today")
    finally:
        old.close()


def digest(path: Path) -> str:
    """The file's bytes, hashed: equal before and after, the file did not change."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
