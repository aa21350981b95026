"""A PostgreSQL store whose server goes away: what a process using it prints (nothing),
and how a run that stops meanwhile ends."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.postgres import PostgresServer
from tests.support.stores import ON_POSTGRES, change

pytestmark = ON_POSTGRES

_READS_AS_IT_GOES = """
import logging, sys, threading
import honeycomb.store.postgres
from honeycomb.store import RunStore
from honeycomb.errors import StoreError

honeycomb.store.postgres._CONNECT_TIMEOUT_S = 0.5  # the pool's time
if sys.argv[2] == "configured":
    logging.basicConfig()
tried = threading.Event()


def seen(record):
    if record.getMessage().startswith("error connecting in"):
        tried.set()  # the pool tried to connect again, and logged that it failed
    return True


logging.getLogger("psycopg.pool").addFilter(seen)
store = RunStore(sys.argv[1])
store.runs()
print("read", flush=True)
sys.stdin.readline()  # the server lets the store's role in no more
try:
    store.runs()
except StoreError:
    pass
assert tried.wait(60), "the pool never tried again"
store.close()
"""


def away(url: str, role: str) -> None:
    """The server lets ``role`` in no more, and ends its sessions."""
    change(
        url,
        (f'ALTER ROLE "{role}" NOLOGIN', ()),
        ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ?", (role,)),
    )


@pytest.mark.parametrize("logging", ["unconfigured", "configured"])
def test_what_psycopg_logs_of_a_server_gone_is_printed_only_where_logging_is_configured(
    postgres: PostgresServer, logging: str
) -> None:
    """The pool of readers tries again behind the reads once the server went away, and
    logs each failure as a warning: with no logging configured, Python printed it on
    standard error. It is dropped there, and goes where an application's logging says."""
    url = postgres.url()
    role = f"pool_{url.rsplit('schema=', 1)[1]}_{logging}"
    change(url, (f'CREATE ROLE "{role}" LOGIN SUPERUSER', ()))
    reading = url.replace("postgres@", f"{role}@")
    with subprocess.Popen(
        [sys.executable, "-c", _READS_AS_IT_GOES, reading, logging],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == "read\n"
        away(url, role)
        _, err = child.communicate("\n", timeout=120)
    assert child.returncode == 0, err
    if logging == "configured":
        assert f"error connecting in 'honeycomb-store-{url.rsplit('=', 1)[1]}'" in err
    else:
        assert err == ""
