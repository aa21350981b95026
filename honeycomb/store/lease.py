"""Leases: which process carries a stored run on.

A run is leased to one process at a time. The lease is a row of the store's
``leases`` table (the run, a random owner token, the owner's host and pid, its last
heartbeat and its time to live), taken in one transaction when the run starts or
resumes, renewed by the store's writer thread while the run goes, and deleted when the
run ends, however it ends. Every write of a run is committed only while its lease is
still its own, so an owner whose lease was taken over writes nothing more: its
side-effecting calls fail, as their intent cannot be journaled.

A lease is *live* while its heartbeat is younger than its TTL, and *expired* once it
is older. A lease whose owner is certainly gone (a process of this host that no longer
exists, or a run of this very process that ended without letting go) is free, so a
resume right after a crash need not wait (a process ended is gone even before its
parent reaps it). A process is this host's when it has the
host's name and sees the same processes (its PID namespace and boot, named in its
owner token): replicas in containers that share the host's name (host networking) but
not its process ids are as other hosts. An expired lease whose owner may still be
alive (on another host, or stopped, or hung) is taken only with ``steal``; a live one
never.

A lease may be taken before its run starts, by what starts it in this process (a
session's turn, leased as it is kept: :func:`handed`): the run, as it starts, takes
that very lease (:func:`new_lease` gives it), so the run is carried on from the moment
its turn was kept, with no moment between when it reads as cut off.

These functions run in the store's writer thread, inside its transaction. In SQLite a
transaction that writes holds the whole file; in PostgreSQL, a lease is taken under a
lock of its run (an advisory lock, so two processes that take it at once take it one
after the other), and a write under a lease holds the lease's row until it commits
(``FOR SHARE``: a process taking the run over waits for it, and then it is over).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sys
import time
from collections.abc import Iterable

from honeycomb.store.database import Connection
from runtime import RunBusy
from runtime.value import Value

__all__ = [
    "HOST",
    "RELEASE",
    "Lease",
    "carried_on",
    "check",
    "ended",
    "handed",
    "new_lease",
    "renew",
    "take",
]

HOST = socket.gethostname()
RELEASE = "DELETE FROM leases WHERE run_id = ? AND owner = ?"
_HOLDER = "SELECT owner, host, pid, heartbeat, ttl_s FROM leases WHERE run_id = ?"
_TAKE = (
    "INSERT INTO leases (run_id, owner, host, pid, heartbeat, ttl_s) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, host = excluded.host, "
    "pid = excluded.pid, heartbeat = excluded.heartbeat, ttl_s = excluded.ttl_s"
)
_RENEW = "UPDATE leases SET heartbeat = ? WHERE run_id = ? AND owner = ?"


def _place() -> str:
    """What the process ids of this process are ids in: its PID namespace, in this boot
    of the machine (Linux; '' elsewhere, where none is told apart)."""
    seen = []
    with contextlib.suppress(OSError):
        seen.append(os.readlink("/proc/self/ns/pid"))
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            seen.append(boot.read().strip())
    return hashlib.sha256("|".join(seen).encode()).hexdigest()[:12] if seen else ""


_PLACE = _place()
"""Begins each owner token this process makes (``PLACE.RANDOM``)."""

_GOING: set[str] = set()
"""The owner tokens of this process's runs that are still going."""

_HANDED: dict[str, Lease] = {}
"""The leases taken for runs of this process that have not taken them yet, by run."""


class Lease(Value, frozen=True, kw_only=True):
    """A run's lease as its owner knows it: the run and the owner's token."""

    run_id: str
    owner: str


def new_lease(run_id: str) -> Lease:
    """A lease for a run of this process, to take (counted as going from now on, so that
    no other run of this process mistakes it for one that ended): the one
    :func:`handed` to it, if there is one."""
    token = f"{_PLACE}.{os.urandom(8).hex()}" if _PLACE else os.urandom(8).hex()
    lease = _HANDED.get(run_id) or Lease(run_id=run_id, owner=token)
    _GOING.add(lease.owner)
    return lease


def handed(run_id: str) -> Lease:
    """A lease for a run of this process that starts later, to take now: the run takes
    it over as it starts (as its own, going on under the same owner), until
    :func:`ended` by the run or by what took it."""
    lease = _HANDED[run_id] = new_lease(run_id)
    return lease


def ended(lease: Lease) -> None:
    """The run holding ``lease`` has ended: if its lease was left behind, it is free."""
    _GOING.discard(lease.owner)
    if _HANDED.get(lease.run_id) == lease:
        del _HANDED[lease.run_id]


def take(db: Connection, lease: Lease, *, steal: bool, ttl_s: float, path: str) -> float | None:
    """Make ``lease`` the run's, unless another holds it (in ``db``'s transaction).

    Returns:
        The last heartbeat of the lease it took from another owner, which never let go:
        the life that owner carried on never ended (its process died, or hung and its
        expired lease was stolen). None when the run had no lease, or had this one.

    Raises:
        RunBusy: when another process holds it: live, or expired and not ``steal``.
    """
    db.lock_run(lease.run_id)
    row = db.execute(_HOLDER + db.row_lock, (lease.run_id,)).fetchone()
    now = time.time()
    if row is not None and row[0] != lease.owner and not _gone(row[0], row[1], row[2]):
        age = now - row[3]
        expired = age > row[4]
        if not (expired and steal):
            raise RunBusy(
                lease.run_id,
                path=path,
                host=row[1],
                pid=row[2],
                heartbeat_age_s=age,
                expired=expired,
                here=row[1] == HOST and row[2] == os.getpid() and _seen_here(row[0]),
            )
    db.execute(_TAKE, (lease.run_id, lease.owner, HOST, os.getpid(), now, ttl_s))
    return float(row[3]) if row is not None and row[0] != lease.owner else None


def check(db: Connection, lease: Lease, path: str) -> RunBusy | None:
    """None while ``lease`` is still the run's (held so until the transaction ends),
    else the error saying who has it."""
    row = db.execute(_HOLDER + db.row_lock, (lease.run_id,)).fetchone()
    if row is not None and row[0] == lease.owner:
        return None
    host, pid, age = (row[1], row[2], time.time() - row[3]) if row else (None, None, None)
    return RunBusy(
        lease.run_id, path=path, host=host, pid=pid, heartbeat_age_s=age, taken_over=True
    )


def renew(db: Connection, leases: Iterable[Lease]) -> None:
    """A heartbeat for every lease in ``leases`` still held."""
    now = time.time()
    db.executemany(_RENEW, [(now, lease.run_id, lease.owner) for lease in leases])


def carried_on(db: Connection, run_id: str) -> bool:
    """Whether a process may still carry run ``run_id`` on: its lease is live (its
    heartbeat younger than its TTL) and its owner not certainly gone."""
    if not db.columns("leases"):  # a store of the first schema, read as it is: no leases
        return False
    row = db.execute(_HOLDER, (run_id,)).fetchone()
    if row is None:
        return False
    owner, host, pid, heartbeat, ttl_s = row
    return time.time() - heartbeat <= ttl_s and not _gone(owner, host, pid)


def _gone(owner: str, host: str, pid: int) -> bool:
    """Whether the owner of a lease certainly no longer runs."""
    if host != HOST or not _seen_here(owner):
        # Another machine's processes cannot be seen, nor another PID namespace's (a
        # container's with the host's name): only the TTL tells.
        return False
    if pid == os.getpid():
        return owner not in _GOING
    return not _alive(pid)


def _seen_here(owner: str) -> bool:
    """Whether the process that took a lease as ``owner`` is one this process sees by
    its id: of the same PID namespace and boot (an owner token of an earlier Honeycomb
    says none, and is taken to be)."""
    place, dot, _ = owner.rpartition(".")
    return not dot or place == _PLACE


def _alive(pid: int) -> bool:
    if sys.platform == "win32":
        return True  # os.kill would end the process: only the TTL tells
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, as another user's
        pass
    return not _ended(pid)


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has ended though its id is still taken: a zombie, which
    its parent has not reaped yet (a service that killed its run's process and
    resumes the run at once). Linux says so in ``/proc``; elsewhere nothing tells."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return False
    return bool(fields) and fields[0] in (b"Z", b"X")
