"""The run store: runs kept in one SQLite file, turn by turn, so a run that stopped
can be resumed; one owner at a time (a lease), never modifying a file that is not a
Honeycomb store."""

from honeycomb.store.store import RunStore, RunSummary, StoredRun, StoredWorker

__all__ = ["RunStore", "RunSummary", "StoredRun", "StoredWorker"]
