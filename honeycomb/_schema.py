"""The run store's tables (SQLite). A change to them bumps :data:`SCHEMA_VERSION`."""

SCHEMA_VERSION = 1
SCHEMA = f"""
BEGIN;
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
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""

__all__ = ["SCHEMA", "SCHEMA_VERSION"]
