"""The run store a command uses, checked in one place: ``runs``, ``trace``,
``resume``, ``approve`` and ``serve`` refuse the same stores, in the same words, with
exit status 2 (``run`` and ``demo`` open theirs as a run does, with the same error)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from honeycomb.store import RunStore
from runtime import StoreError

__all__ = ["opened_store"]


def opened_store(path: Path, *, make: bool = False) -> RunStore:
    """The run store at ``path``, ready to read: it is a run store (or an empty file),
    and it can be opened.

    Args:
        path: The store's file.
        make: Make it (and its folder) if there is none, as a run does (``serve``,
            which records decisions there, and shows the runs kept there later);
            else there must be one: no run was kept where there is none.

    Raises:
        StoreError: when there is no store at ``path`` (without ``make``), or it is a
            folder, cannot be opened (or made), or is not a run store.
    """
    if path.is_dir():
        raise StoreError("this is a folder, not a run store: name its file", path=str(path))
    store = RunStore(path)
    if make:
        asyncio.run(store.open())  # made, or refused, as a run makes or refuses it
        store.close()
    elif not path.exists():
        raise StoreError(
            "no run store: no run was kept there (--store FILE names another)",
            path=str(path),
        )
    store.runs(1)  # read once: a file that is not a run store is refused now
    return store
