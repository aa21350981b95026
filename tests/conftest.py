"""Shared fixtures. The autouse guard makes any attempt to reach a real network host
fail the test: tests run on the models in ``runtime.testing`` and on servers bound to
127.0.0.1 only."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import ipaddress
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
import structlog

from runtime.concurrency import usable_cpus
from runtime.secrets import isolated
from tests.support import ROOT

if TYPE_CHECKING:
    from runtime.models.llama_server import LlamaServer
    from tests.support.llama import SentBodies
    from tests.support.postgres import PostgresServer

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class RealNetworkUsed(RuntimeError):
    """A test tried to reach a host that is not this machine."""


@pytest.fixture(autouse=True)
def no_real_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fail any test that resolves or connects to a non-loopback host."""
    attempts: list[str] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def refuse(host: Any) -> None:
        attempts.append(host.decode() if isinstance(host, bytes) else str(host))
        raise RealNetworkUsed(f"tests must not reach the network, but tried {host!r}")

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            refuse(address[0])
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            refuse(address[0])
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _is_loopback(host):
            refuse(host)
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    yield attempts
    if attempts:
        pytest.fail(f"the test tried to reach the network: {', '.join(attempts)}")


@pytest.fixture(autouse=True)
def unconfigured_structlog() -> Iterator[None]:
    """``capture_logs`` leaves structlog marked configured; start every test clean, as an
    application that has not configured structlog would."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


_TOOLS_LEAVE = frozenset({".hypothesis", ".pytest_cache", "__pycache__"})
"""What the test tools themselves keep at the top of the clone."""


@pytest.fixture(autouse=True)
def nothing_left_in_the_clone() -> Iterator[None]:
    """A test writes under its temporary folder, never into the clone: what appears at
    the clone's top as it runs (the demo's ``outbox``, a run store) fails it."""
    before = set(os.listdir(ROOT))
    yield
    left = set(os.listdir(ROOT)) - before - _TOOLS_LEAVE
    assert not left, (
        f"{sorted(left)} appeared in the clone as the test ran (or a test of another "
        "process did): write it under tmp_path, or run the code there (monkeypatch.chdir)"
    )


@pytest.fixture(autouse=True)
def own_secrets() -> Iterator[None]:
    """Each test knows only the secrets it adds: text held back as the start of a key
    another test registered would make what a test sees depend on the order."""
    with isolated():
        yield


@pytest.fixture
def trip(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The trip demo's tools (examples/trip/trip_tools.py), imported as the demo's hive
    imports them, without their simulated latency."""
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "trip"))
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    return importlib.import_module("trip_tools")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One real local Ray for the session, the private Ray a backend starts (on
    127.0.0.1, no dashboard, no usage statistics), with two CPUs. The tests that use it
    go to one test process (``pytest.mark.xdist_group("ray")``), which then starts one
    Ray."""
    ray = pytest.importorskip("ray")
    from honeycomb.backends.ray import start_ray

    start_ray(None, num_cpus=2)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One private PostgreSQL server for the test process, in a temporary folder, on a
    free port of 127.0.0.1. The tests that use it go to one test process
    (:data:`tests.support.stores.ON_POSTGRES`), which then starts one server. Without
    PostgreSQL or psycopg they are skipped, except in CI (``.ci/run`` installs both)."""
    from tests.support.postgres import PostgresServer, binaries

    found = binaries()
    missing = "PostgreSQL" if found is None else None
    if importlib.util.find_spec("psycopg") is None:
        missing = "psycopg"
    if missing is not None or found is None:
        why = f"{missing} is not installed (apt-get install postgresql; pip install -e '.[dev]')"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    server = PostgresServer(found)
    server.start()
    yield server
    server.remove()


@pytest.fixture(autouse=True)
def postgres_stores_closed(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A test on PostgreSQL closes the run stores it opened as it ends: each holds its
    writer's connection and a pool of readers' until it is closed, and the test
    process's one server takes 200 connections (a few a test left open filled them)."""
    group = request.node.get_closest_marker("xdist_group")
    if group is None or "postgres" not in group.args:
        yield
        return
    from honeycomb.store import RunStore

    opened: list[RunStore] = []
    made = RunStore.__init__

    def init(self: RunStore, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(RunStore, "__init__", init)
    yield
    for store in opened:
        store.close()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """What ``-n auto`` (pyproject.toml's addopts) means: a test process a core and one
    more (``--maxprocesses`` caps it), since a test waiting on a child process, a socket
    or a sleep leaves its core to the others."""
    return usable_cpus() + 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "both_loops: run an async test on asyncio's own event loop and on uvloop"
    )
    config.addinivalue_line(
        "markers",
        "real_model: runs SmolLM2-135M on llama.cpp in the test process (tests/support/llama.py)",
    )
    config.addinivalue_line(
        "markers", "after_real_model: runs after the other real-model tests (it checks them)"
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``after_real_model`` go last: they check what the real-model tests
    before them sent (those of one xdist group run in this order, on one worker)."""
    items.sort(key=lambda item: item.get_closest_marker("after_real_model") is not None)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """The real model's server, one for the test process (4 slots, a fixed seed)."""
    from tests.support.llama import start_server

    server = start_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def sent_to_models() -> SentBodies:
    """Every request body the real-model tests of this process sent, in order."""
    from tests.support.llama import SentBodies

    return SentBodies()


@pytest.fixture(autouse=True)
def _recorded_when_real(request: pytest.FixtureRequest) -> Iterator[None]:
    """A real-model test's requests are recorded (:func:`sent_to_models`)."""
    if request.node.get_closest_marker("real_model") is None:
        yield
        return
    from tests.support.llama import record_bodies

    with record_bodies(request.getfixturevalue("sent_to_models")):
        yield


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Async tests run on asyncio's own loop; those marked ``both_loops`` on uvloop too
    (the ``fast`` extra, which the CLI uses when it is installed). uvloop connects
    through libuv, past the network guard's socket patches: such tests use no sockets."""
    if item.get_closest_marker("both_loops") is None:
        return {"asyncio": asyncio.new_event_loop}
    import uvloop

    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
