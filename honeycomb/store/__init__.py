"""The run store: runs kept turn by turn in one SQLite file, or in a PostgreSQL
database that processes on many machines share, so a run that stopped can be resumed;
one owner at a time (a lease), never modifying a file (or tables) not a Honeycomb
store's. The journal of side effects is how a resumed run runs no completed
side-effecting call twice (``docs/durable.md``)."""

from honeycomb.store.database import Connection, Rows
from honeycomb.store.evals import EvalSummary
from honeycomb.store.store import Lease, RunStore, RunSummary, StoredRun, StoredWorker
from runtime.tools.journal import Journal, JournalEntry, MemoryJournal, OnUnknown

__all__ = [
    "Connection",
    "EvalSummary",
    "Journal",
    "JournalEntry",
    "Lease",
    "MemoryJournal",
    "OnUnknown",
    "Rows",
    "RunStore",
    "RunSummary",
    "StoredRun",
    "StoredWorker",
]
