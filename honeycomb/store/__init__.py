"""The run store: runs kept in one SQLite file, turn by turn, so a run that stopped
can be resumed; one owner at a time (a lease), never modifying a file that is not a
Honeycomb store. The journal of side effects is how a resumed run runs no completed
side-effecting call twice (``docs/durable.md``)."""

from honeycomb.store.evals import EvalSummary
from honeycomb.store.store import Lease, RunStore, RunSummary, StoredRun, StoredWorker
from runtime.tools.journal import Journal, JournalEntry, MemoryJournal, OnUnknown

__all__ = [
    "EvalSummary",
    "Journal",
    "JournalEntry",
    "Lease",
    "MemoryJournal",
    "OnUnknown",
    "RunStore",
    "RunSummary",
    "StoredRun",
    "StoredWorker",
]
