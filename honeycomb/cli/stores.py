"""The run store a command uses, checked in one place: ``runs``, ``trace``,
``resume``, ``approve`` and ``serve`` refuse the same stores, in the same words, with
exit status 2 (``run`` and ``demo`` open theirs as a run does, with the same error:
opening a store, to read or to write, refuses a folder or a file not a run store's)."""

from __future__ import annotations

import argparse
import asyncio
import shlex
from pathlib import Path

from honeycomb.cli.options import user_path
from honeycomb.store import RunStore
from honeycomb.store.database import is_url
from honeycomb.store.postgres import url_passwords
from honeycomb.store.schema import refuse_foreign
from runtime import ConfigError, StoreError
from runtime.errors import did_you_mean
from runtime.secrets import masked_with, url_secrets

__all__ = [
    "DEFAULT_STORE",
    "KEPT_IN",
    "STORE_HELP",
    "no_run",
    "opened_store",
    "store_argument",
]

DEFAULT_STORE = Path(".honeycomb") / "runs.db"
"""Where the CLI keeps runs: under the current folder (the project), unless the hive
sets ``store:`` or ``--store`` is given."""

STORE_HELP = "the run store: its file, or a postgresql:// URL (the password from PGPASSWORD)"

KEPT_IN = f"{STORE_HELP} (default: {DEFAULT_STORE})"
"""The help of ``--store`` where a command reads the store a hive does not name."""


def store_argument(given: str) -> Path | str:
    """``--store``: a PostgreSQL URL as it is, else a file, ``~`` its home folder as a
    hive's ``store:`` reads it (a shell leaves ``--store=~/runs.db`` and a quoted
    ``'~/runs.db'`` as they are); not empty (``--store "$UNSET"``), which names the
    current folder."""
    if not given.strip():
        raise argparse.ArgumentTypeError(
            f"takes a run store's file or a postgresql:// URL, not {given!r}"
        )
    return given if is_url(given) else user_path(given)


def opened_store(where: Path | str, *, make: bool = False) -> RunStore:
    """The run store ``where`` names, ready to read: it is a run store (or an empty
    file), and it can be opened.

    Args:
        where: The store's file, or its PostgreSQL URL.
        make: Make it (and its folder) if there is none, as a run does (``serve``,
            which records decisions there, and shows the runs kept there later);
            else there must be one: no run was kept where there is none.

    Raises:
        StoreError: when there is no store at ``where`` (without ``make``), or it is a
            folder, cannot be opened (or made), or is not a run store.
    """
    path = None if is_url(where) else Path(where)
    try:
        store = RunStore(where)
    except ConfigError as exc:  # said as the store's other errors are: it cannot be used
        # The URL as given, its passwords masked: a store that cannot be made has
        # registered none, and the URL may not even be read enough to leave them out.
        given = [*url_secrets(str(where)), *url_passwords(str(where)).values()]  # with a space
        passwords = dict.fromkeys(given, "database password")
        raise StoreError(str(exc), path=masked_with(str(where), passwords)) from exc
    if make:
        asyncio.run(store.open())  # made, or refused, as a run makes or refuses it
        store.close()
    elif path is not None:
        refuse_foreign(path)  # in a folder this user cannot enter: said, not a traceback
        if not path.exists():
            raise StoreError(
                "no run store: no run was kept there (--store FILE names another)",
                path=str(path),
            )
    store.runs(1)  # read once: a file that is not a run store is refused now
    if path is None and not make and not store.read_now(lambda _: True, False):
        raise StoreError(  # a schema not made: a misspelt ?schema= reads as no runs
            "no run store: no run was kept in this schema (--store URL?schema=NAME names another)",
            path=store.where,
        )
    return store


_SCANNED = 1000
"""The newest runs :func:`no_run` looks among for the one meant."""


def no_run(store: RunStore, run_id: str) -> str:
    """What ``trace`` and ``resume`` say of a run ``store`` does not keep: the run
    meant, when the id given starts one (the start of an id, copied) or is close to
    one, and the command that lists the runs."""
    ids = [run.run_id for run in store.runs(_SCANNED)]
    starting = [found for found in ids if run_id and found.startswith(run_id)]
    meant = (
        f" (did you mean {' or '.join(map(repr, starting[:3]))}?)"
        if starting
        else did_you_mean(run_id, ids)
    )
    # The store as it is shown (a URL without its password: pasted, libpq finds it).
    known = shlex.join(["honeycomb", "runs", "--store", store.where])
    return f"{store.where}: no run {run_id!r}{meant} ({known})"
