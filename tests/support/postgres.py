"""A private PostgreSQL server for the tests: made in a temporary folder, listening on
a free port of 127.0.0.1 only, stopped at the end (one per test session).

PostgreSQL refuses to run as root: as root, the server's folder belongs to the
``postgres`` user, and its commands run as that user. ``pg_ctl -w`` returns once the
server accepts connections (and once it stopped): no test waits a fixed time for it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "AWAY_S",
    "PostgresServer",
    "SilentProxy",
    "away",
    "back",
    "binaries",
    "query",
    "role_in",
    "role_of",
]


def binaries() -> Path | None:
    """The folder of PostgreSQL's server commands (``initdb``, ``pg_ctl``), if any."""
    found = shutil.which("initdb")
    if found is not None:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: p.parts)
    return versions[-1].parent if versions else None


class PostgresServer:
    """One server, started by :meth:`start` and stopped by :meth:`stop`."""

    def __init__(self, bin_dir: Path, *, durable: bool = False) -> None:
        self.bin = bin_dir
        self.durable = durable  # commits flushed to disk (benchmarks), or not (tests)
        self.folder = Path(tempfile.mkdtemp(prefix="honeycomb-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self._schemas = itertools.count()
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(self.folder, "postgres", "postgres")

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_root else []
        done = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stdout}{done.stderr}")

    def start(self, retries: int = 3) -> None:
        """Make the cluster (once), start the server and return once it answers."""
        if not self.data.exists():
            self._run(
                str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                "-A", "trust", "--no-sync", "--no-instructions", "-E", "UTF8",
            )  # fmt: skip
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.folder} -c max_connections=200 "
            "-c deadlock_timeout=100ms"
        )
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        log = self.folder / "server.log"
        try:
            self._run(
                str(self.bin / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.data),
                "-l", str(log), "-o", options,
            )  # fmt: skip
        except RuntimeError:
            # The port was free when it was chosen, and another process took it before
            # the server bound it (PostgreSQL takes no socket bound for it): another.
            if "could not bind" not in log.read_text(errors="replace") or retries == 0:
                raise
            log.unlink()
            self.port = _free_port()
            self.start(retries - 1)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: as a crash would) and return once it stopped."""
        self._run(str(self.bin / "pg_ctl"), "stop", "-w", "-m", mode, "-D", str(self.data))

    def remove(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, schema: str | None = None) -> str:
        """The URL of the server's ``postgres`` database; with ``schema``, of a store
        there; without, a new schema of its own each time."""
        name = schema or f"t{next(self._schemas)}_{os.getpid()}"
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?schema={name}"


def query(url: str, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[tuple[Any, ...]]:
    """Run ``statements`` (``?`` placeholders) in the store of ``url``, in one
    transaction; the last one's rows (none for a statement that returns none)."""
    with _connected(url) as conn:
        rows: list[tuple[Any, ...]] = []
        with conn.transaction():
            for sql, params in statements:
                cursor = conn.execute(sql.replace("?", "%s"), params)
                rows = cursor.fetchall() if cursor.description is not None else []
        return rows


def role_of(url: str, name: str) -> str:
    """The URL of ``url``'s store for a new role ``name`` (one per test: the server lets
    it in, or not, as the test says)."""
    role = f"{name}_{url.rsplit('schema=', 1)[1]}"
    query(url, [(f'CREATE ROLE "{role}" LOGIN SUPERUSER', ())])
    return url.replace("postgres@", f"{role}@")


def role_in(url: str) -> str:
    """The role ``url`` connects as."""
    return url.split("//", 1)[1].split("@", 1)[0]


AWAY_S = 60.0
"""How long :func:`away` waits for the role's sessions to end."""
_LOOK_EVERY_S = 0.002
_END_SESSIONS = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s"
"""Signal each session of a role to end: a row for each that is still there."""


def away(url: str, role: str) -> None:
    """The server lets ``role`` in no more, and ends its sessions: it returns once it
    lists none.

    The refusal is committed before any session is ended: a store connects again as
    soon as it loses its connection, and one let in before the commit stayed.
    ``pg_terminate_backend`` only signals a session, so the server is asked again until
    it lists none, each session it lists ended (one that logged in as the refusal was
    committed among them).

    Raises:
        AssertionError: when a session of ``role`` is still there after AWAY_S.
    """
    query(url, [(f'ALTER ROLE "{role}" NOLOGIN', ())])
    deadline = time.monotonic() + AWAY_S
    with _connected(url) as conn:  # (each statement a transaction: a new look each time)
        while conn.execute(_END_SESSIONS, (role,)).fetchall():
            if time.monotonic() > deadline:
                raise AssertionError(f"the sessions of {role} did not end in {AWAY_S}s")
            time.sleep(_LOOK_EVERY_S)


def back(url: str, role: str) -> None:
    """The server lets ``role`` in again (after :func:`away`)."""
    query(url, [(f'ALTER ROLE "{role}" LOGIN', ())])


@contextlib.contextmanager
def _connected(url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to the store of ``url`` (as its role), its search path the
    store's schema, each statement committed as it is made."""
    import psycopg

    from honeycomb.store.postgres import split_url

    conninfo, schema, _ = split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        yield conn


class SilentProxy:
    """A TCP proxy on 127.0.0.1 in front of a server, which can go silent as a server
    cut off by the network does (or a host paused): what is sent is taken and never
    answered, with no reset; connections it accepts then are never answered either.

    Args:
        port: The server's port.
        answer_after_s: How long the server's first answer on each connection is held
            (a server slow to let a connection in: far away, TLS, a proxy).
    """

    def __init__(self, port: int, *, answer_after_s: float = 0.0) -> None:
        self.upstream = port
        self._late = answer_after_s
        self.silent = threading.Event()
        self._going = threading.Event()  # cleared: paused (what is sent is held)
        self._going.set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="silent-proxy", daemon=True).start()

    def url(self, url: str) -> str:
        """``url`` (of the server) through the proxy."""
        return url.replace(f":{self.upstream}/", f":{self.port}/")

    def silence(self, *, reset: bool = False, refuse: bool = False) -> None:
        """Go silent; ``reset``: the connections open now are ended first (the server's
        host restarted), the ones made after are never answered; ``refuse``: new ones
        are refused at once, by no server (its network unreachable, its name not
        resolved), the ones open stay silent."""
        self.silent.set()
        if refuse:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # (its accept ends)
            self._listener.close()
        if reset:
            with self._lock:
                for sock in self._sockets[1:]:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

    def pause(self) -> None:
        """Hold what is sent either way, answering nothing (a host paused, whose kernel
        still takes it), until :meth:`resume`."""
        self._going.clear()

    def resume(self) -> None:
        """Pass on what was held, and what is sent after it."""
        self._going.set()

    def close(self) -> None:
        """End every connection (the server's sessions end with them) and the proxy."""
        self.silent.set()
        self._going.set()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                client, _ = self._listener.accept()
                with self._lock:
                    self._sockets.append(client)
                if self.silent.is_set():
                    continue  # taken, never answered
                server = socket.create_connection(("127.0.0.1", self.upstream))
                with self._lock:
                    self._sockets.append(server)
                for ends in ((client, server, 0.0), (server, client, self._late)):
                    threading.Thread(target=self._pump, args=ends, daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, late: float) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                time.sleep(late)  # (the first answer only: a connection's being let in)
                late = 0.0
                self._going.wait()
                if not self.silent.is_set():
                    sink.sendall(data)
            if not self.silent.is_set():
                sink.shutdown(socket.SHUT_WR)  # ended: the other end is told


def _free_port() -> int:
    """A port of 127.0.0.1 free now (the server binds it later: see ``start``)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
