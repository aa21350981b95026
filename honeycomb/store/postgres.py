"""The run store in a PostgreSQL database, which every process that names it shares, on
any machine (the ``postgresql`` extra: psycopg 3 and its pool).

The store's tables are in a schema of their own (``honeycomb``, or the URL's
``?schema=``), made on first write with the tables of :mod:`honeycomb.store.schema`
in PostgreSQL's types (a whole-number column is a ``BIGINT``, a real one a ``DOUBLE
PRECISION``), and known as a store by its ``store_schema`` table, which holds its
version: a schema that holds other tables is never written to. Upgrades run in one
transaction under an advisory lock, so that of the processes that open a store of an
earlier version at once, one upgrades it; reading changes nothing (a table or column
an earlier version lacks reads as none, or as its default, as in SQLite). Each
connection's ``search_path`` is the store's schema alone: its statements reach no
other table.

The writer has a connection of its own (:class:`PostgresConnection`); reads take one
from a pool of at most ``pool_size``, each in one snapshot (``REPEATABLE READ``). Each
connection learns by itself that its server went silent (a network cut, a paused host),
rather than waiting for it for the kernel's minutes: it sends TCP keepalives and gives
up on what the server leaves unacknowledged (:data:`_SILENT`), and a new one gives up
after 10 s; each of these is libpq's own when the URL sets it (or ``PGCONNECT_TIMEOUT``
the connect timeout).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import SplitResult, unquote, urlsplit

from honeycomb.store import readers, silence
from honeycomb.store.database import Connection, Rows
from honeycomb.store.schema import SCHEMA_VERSION, upgrade_statements
from runtime import ConfigError, StoreError
from runtime.config.stores import DEFAULT_SCHEMA, password_problem, store_problem, url_schema
from runtime.secrets import PASSWORD_PARAMETERS, add_secret, url_secrets
from runtime.text import valid_text

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DEFAULT_SCHEMA",
    "PostgresConnection",
    "PostgresDatabase",
    "in_postgres",
    "split_url",
    "url_passwords",
]

T = TypeVar("T")

_APPLICATION = "honeycomb run store"
_VERSIONS = "store_schema"
"""The table that says the schema holds a store, and of which version."""
_CONNECT_TIMEOUT_S = 10
_SILENT = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
"""How a connection learns that its server went silent: a TCP keepalive after 10 s of
quiet, the connection lost after three unanswered ones 5 s apart, or once what it sent
is left unacknowledged for 30 s (libpq's ``tcp_user_timeout``, from libpq 12)."""
_MOST_MS = 2**31 - 1
"""The longest timeout the server takes (about 24 days), in milliseconds."""
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtext('honeycomb store'), hashtext(%s))"
_TABLES = (
    "SELECT c.relname FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
)
_USAGE = "SELECT current_user, has_schema_privilege(%s, 'USAGE')"
"""The role connected, and whether it may use the schema (see its tables)."""
_COLUMNS = (
    "SELECT column_name FROM information_schema.columns "
    "WHERE table_schema = current_schema() AND table_name = %s"
)


def split_url(url: str) -> tuple[str, str, str]:
    """``url`` as libpq takes it (without ``schema``, nor its passwords: they are given
    apart, see :func:`url_passwords`), the schema it names, and the URL to show
    (without its passwords either: its userinfo's, its ``password`` and ``sslpassword``
    parameters').

    Raises:
        ConfigError: when the schema is not a plain name.
    """
    problem = store_problem(url)
    if problem is not None:
        raise ConfigError(problem, field="store")
    parts = urlsplit(url)
    # Each parameter as written, with its name: decoded and encoded again, a password's
    # ``+`` or ``%20`` would not be the one libpq reads.
    params = [(pair, unquote(pair.partition("=")[0])) for pair in parts.query.split("&") if pair]
    schema = url_schema(url)
    shown_query = "&".join(p for p, name in params if name not in PASSWORD_PARAMETERS)
    libpq_query = "&".join(p for p, name in params if name not in {*PASSWORD_PARAMETERS, "schema"})
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username
    netloc = f"{user}@{host}" if user else host
    return _joined(parts, netloc, libpq_query), schema, _joined(parts, netloc, shown_query)


def url_passwords(url: str) -> dict[str, str]:
    """The passwords ``url`` holds, percent-decoded as libpq decodes them, by libpq's
    name for each: ``password`` (its userinfo's, or its ``?password=``, which libpq
    takes over it) and ``sslpassword``. They are given to libpq apart from the URL, so
    that none of its errors quotes them (one with a space, or a ``%`` that begins no
    escape, was quoted whole)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # a host's "[" never closed: a URL that cannot be read
        return {}
    found = {"password": unquote(parts.password)} if parts.password else {}
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if unquote(name) in PASSWORD_PARAMETERS:
            found[unquote(name)] = unquote(value)
    return found


def _given(conninfo: str) -> set[str]:
    """The parameters ``conninfo`` sets, and ``tcp_user_timeout`` where libpq is older
    than 12, which knows none: it is then not set."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    given = set(conninfo_to_dict(conninfo))
    if psycopg.pq.version() < 120000:  # it knows no tcp_user_timeout: not set
        given.add("tcp_user_timeout")
    return given


def _joined(parts: SplitResult, netloc: str, query: str) -> str:
    """The URL of ``parts`` with ``netloc`` and ``query``, its ``//`` kept when
    ``netloc`` is empty (``postgresql:///db?host=/run/postgresql``, a Unix socket's),
    which ``urlunsplit`` drops for a scheme it does not know."""
    joined = f"{parts.scheme}://{netloc}{parts.path}"
    return (
        joined + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    )


@functools.lru_cache(maxsize=512)
def _sql(statement: str) -> str:
    """A statement of the store (``?`` placeholders) as psycopg takes it."""
    return statement.replace("%", "%%").replace("?", "%s")


def _values(row: Sequence[Any]) -> Sequence[Any]:
    """A row's parameters as PostgreSQL takes them: booleans as the whole numbers the
    columns hold (as SQLite keeps them), and NUL, which no ``TEXT`` holds, replaced."""
    for value in row:
        kind = type(value)
        if kind is bool or (kind is str and "\0" in value):
            return tuple(_value(v) for v in row)
    return row


def _value(value: Any) -> Any:
    if type(value) is bool:
        return int(value)
    if type(value) is str:
        return _text(value)
    return value


def _text(text: str) -> str:
    """``text`` as a ``TEXT`` column holds it: no NUL."""
    return text.replace("\0", "\ufffd")


def in_postgres(statement: str) -> str:
    """A table's SQLite definition in PostgreSQL's types."""
    statement = re.sub(r"\bREAL\b", "DOUBLE PRECISION", statement)
    return re.sub(r"\bINTEGER\b", "BIGINT", statement)


class PostgresConnection:
    """A connection to the store's schema (see
    :class:`~honeycomb.store.database.Connection`)."""

    row_lock = " FOR SHARE"

    def __init__(self, conn: psycopg.Connection[Any], known: dict[str, frozenset[str]]) -> None:
        import psycopg

        self.conn = conn
        self.errors: tuple[type[Exception], ...] = (psycopg.Error,)
        self._known = known  # the columns of each table, kept as they are read

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return self.conn.execute(_sql(sql), _values(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(_sql(sql), [_values(row) for row in rows])

    def columns(self, table: str) -> frozenset[str]:
        found = self._known.get(table)
        if found is None:
            rows = self.conn.execute(_COLUMNS, (table,)).fetchall()
            found = self._known[table] = frozenset(name for (name,) in rows)
        return found

    def lock_run(self, run_id: str) -> None:
        self.conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext(current_schema()), hashtext(%s))",
            _values((run_id,)),  # as the run's rows have it
        )

    def json_number(self, column: str, *keys: str) -> str:
        # A stored text may hold NUL (a model's or a tool's), which JSON writes \u0000
        # and jsonb refuses, failing the whole query: it is read as U+FFFD, as the
        # columns of plain text keep it.
        text = f"replace({column}, '\\u0000', '\\ufffd')"
        return f"(({text})::jsonb #>> '{{{','.join(keys)}}}')::float8"

    def begin(self) -> None:
        self.conn.execute("BEGIN")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        import psycopg

        with contextlib.suppress(psycopg.Error):
            if not self.lost():
                self.conn.execute("ROLLBACK")

    def checkpoint(self, final: bool) -> None:
        pass  # the server's own business

    def lost(self) -> bool:
        return self.conn.broken or self.conn.closed

    def retryable(self, error: Exception) -> bool:
        # Two processes' transactions that lock the same rows (leases taken, decisions)
        # in another order: the server rolls one back.
        from psycopg import errors

        return isinstance(error, errors.DeadlockDetected | errors.SerializationFailure)

    def of_one_write(self, error: Exception) -> bool:
        # A value the server refuses (out of range, a constraint, a key too long for
        # its index) or psycopg cannot send; not the server's state (a lock, a full
        # disk, a read-only server).
        import psycopg
        from psycopg import errors

        return not isinstance(error, psycopg.Error) or isinstance(
            error,
            psycopg.DataError
            | psycopg.IntegrityError
            | psycopg.ProgrammingError
            | errors.ProgramLimitExceeded,
        )

    def close(self) -> None:
        self.conn.close()


class PostgresDatabase:
    """A store's schema in a PostgreSQL database (see
    :class:`~honeycomb.store.database.Database`).

    Raises:
        ConfigError: when psycopg is not installed, or ``password_env`` names a
            variable that is not set.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        password_env: str | None = None,
        lease_ttl_s: float = 30.0,
    ) -> None:
        # Known before anything can fail: an error that shows the URL masks them. The
        # URL's are its userinfo's and its ?password= and ?sslpassword=, as written
        # and decoded (url_secrets).
        for secret in (*url_secrets(url), os.environ.get("PGPASSWORD")):
            add_secret(secret, "database password", owner=self)
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                f"a PostgreSQL run store needs psycopg and psycopg-pool ({exc.name} is "
                "missing): pip install 'honeycomb-agents[postgresql]'",
                field="store",
            ) from exc
        self.conninfo, self.schema, self.where = split_url(url)
        self.lease_ttl_s = lease_ttl_s
        self._options: dict[str, Any] = url_passwords(url)
        for secret in self._options.values():  # one with a space, which url_secrets ends at
            add_secret(secret, "database password", owner=self)
        given = _given(self.conninfo)
        self._options.update({k: v for k, v in _SILENT.items() if k not in given})
        # The URL's (or libpq's variable's) connect timeout, or the store's.
        self._timed = "connect_timeout" in given or "PGCONNECT_TIMEOUT" in os.environ
        problem = password_problem(password_env)
        if problem is not None:
            raise ConfigError(problem, field="store")
        password = os.environ.get(password_env) if password_env is not None else None
        if password is not None:
            self._options["password"] = password
            add_secret(password, "database password", owner=self)
        # The columns of each table, once the schema is current (they change no more).
        self._known: dict[str, frozenset[str]] = {}
        self._current = False
        self.away = False  # the writer gave up on the server (see Database.away)
        pool = functools.partial(
            readers.open_pool,
            self.conninfo,
            size=pool_size,
            options={**self._options, **self._timeout()},
            configure=self._configure,
            name=self.schema,
            where=self.where,
            timeout_s=_CONNECT_TIMEOUT_S,
        )
        self._readers = readers.Readers(pool, self._connection, self)
        self._knocker = silence.Knocker(self._knocked, self.where, silence.hosts(self.conninfo))
        readers.unprinted()  # what psycopg logs of its connections, where nothing takes it

    # --- writing ------------------------------------------------------------------------

    def connect(self) -> PostgresConnection:
        conn = self._knocker.timed(self._connection)  # (knocks are given as long)
        try:
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        self.away = False  # the writer connected: the server is there
        return PostgresConnection(conn, self._known)

    def _connection(self) -> psycopg.Connection[Any]:
        """A new connection, its search path the store's schema alone."""
        conn = self._connected(self._timeout())
        self._configure(conn)
        # A writer that stops in the middle of a transaction (a process stopped, or
        # hung) holds its rows' locks, its lease's among them: the server ends its
        # session once it has waited a lease's time to live, so the run can be taken
        # over as its lease expires. Its transactions take milliseconds.
        timeout_ms = min(max(1000, int(self.lease_ttl_s * 1000)), _MOST_MS)
        conn.execute(f"SET idle_in_transaction_session_timeout = {timeout_ms}")
        return conn

    def _connected(self, timeout: dict[str, Any]) -> psycopg.Connection[Any]:
        """A new connection (``timeout``: its connect timeout, unless the URL's is)."""
        import psycopg

        try:
            return psycopg.connect(
                self.conninfo,
                autocommit=True,
                application_name="honeycomb",
                **self._options,
                **timeout,
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to the run store: {exc}", path=self.where) from exc

    def _timeout(self) -> dict[str, Any]:
        """The connect timeout of a new connection: the store's, unless one is given."""
        return {} if self._timed else {"connect_timeout": _CONNECT_TIMEOUT_S}

    def knock(self) -> silence.Knock:
        return self._knocker.knock()

    def _knocked(self, within: float) -> None:
        """A knock's connection (:class:`~honeycomb.store.silence.Knock`), closed at once
        (it gives up by itself): let in, the server is not away."""
        self._connected({"connect_timeout": math.ceil(within) + 1}).close()
        self.away = False

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        from psycopg import sql

        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        """Make the store, or bring it up to the current schema: in one transaction,
        under the schema's advisory lock.

        Raises:
            StoreError: when the schema holds other tables, or a newer store; or it
                cannot be made.
        """
        import psycopg
        from psycopg import sql

        if self._current:
            return
        version = 0
        try:
            with conn.transaction():
                conn.execute(_SCHEMA_LOCK, (self.schema,))
                version = self._version(conn)
                if version == 0:
                    conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                            sql.Identifier(self.schema)
                        )
                    )
                    conn.execute(
                        f"CREATE TABLE {_VERSIONS} (application TEXT NOT NULL, "
                        "version BIGINT NOT NULL)"
                    )
                    conn.execute(f"INSERT INTO {_VERSIONS} VALUES (%s, 0)", (_APPLICATION,))
                for statement in upgrade_statements(version):
                    if not statement.startswith("PRAGMA"):
                        conn.execute(in_postgres(statement))
                conn.execute(f"UPDATE {_VERSIONS} SET version = %s", (SCHEMA_VERSION,))
        except psycopg.Error as exc:
            if not 0 < version < SCHEMA_VERSION:
                raise StoreError(f"cannot open the run store: {exc}", path=self.where) from exc
            why = exc.diag.message_primary or str(exc)  # not the statement it quotes
            raise StoreError(
                f"cannot bring the run store up to date from schema {version} to "
                f"{SCHEMA_VERSION} ({why}): the first process of this Honeycomb to write to "
                "it changes its tables, as a role that may (their owner); it is read as it "
                "is until then",
                path=self.where,
            ) from exc
        self._current = True

    def _version(self, conn: psycopg.Connection[Any]) -> int:
        """The version of the store in the schema (0: no store, nor any table).

        Raises:
            StoreError: when the schema holds other tables, or a newer store.
        """
        tables = {name for (name,) in conn.execute(_TABLES, (self.schema,))}
        if not tables:
            return 0
        role, usable = conn.execute(_USAGE, (self.schema,)).fetchone() or ("", False)
        if not usable:  # its tables, in a search path it may not use, read as missing
            raise StoreError(
                f"the role {role!r} may not use the schema {self.schema!r} that holds the "
                f'store: have it granted (GRANT USAGE ON SCHEMA "{self.schema}" TO "{role}", '
                "and the rights on its tables), or connect as a role that has it",
                path=self.where,
            )
        row = None
        if _VERSIONS in tables:
            row = conn.execute(f"SELECT application, version FROM {_VERSIONS}").fetchone()
        if row is None or row[0] != _APPLICATION:
            raise StoreError(
                f"the schema {self.schema!r} holds tables that are not a Honeycomb run "
                "store; they were left as they were: give the run store a schema of its "
                "own (?schema=name in the URL)",
                path=self.where,
            )
        version: int = row[1]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the store was written by a newer Honeycomb (schema {version}); upgrade "
                "Honeycomb or use another store",
                path=self.where,
            )
        return version

    # --- reading ------------------------------------------------------------------------

    def kept(self, text: str) -> str:
        return _text(valid_text(text))  # as the writer stores it, then its NUL

    def read(self, read: Callable[[Connection], T], empty: T) -> T:
        import psycopg
        import psycopg_pool

        try:
            with readers.ours(), self._readers.connection() as conn, conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                # A store of an earlier version is read as it is (reading changes
                # nothing): a table or column it lacks reads as none, or its default.
                if not self._current:
                    version = self._version(conn)
                    if version == 0:
                        return empty
                    self._current = version == SCHEMA_VERSION
                return read(PostgresConnection(conn, self._known if self._current else {}))
        except psycopg_pool.PoolTimeout as exc:  # every one busy, or the server gone since
            self._readers.reachable()
            raise StoreError(f"cannot read the run store: {exc}", path=self.where) from exc
        except psycopg.Error as exc:
            raise StoreError(f"cannot read the run store: {exc}", path=self.where) from exc

    def close(self) -> None:
        self._readers.close()
