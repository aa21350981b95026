"""What the tests' own helpers promise, where a test relies on it."""

from __future__ import annotations

import os
import socket
import time
import urllib.error
import urllib.request

import pytest

from tests.support.cpu_time import cpu_seconds
from tests.support.mcp_servers import http_test_server


def test_time_a_measured_thread_spends_not_running_does_not_count() -> None:
    # As when other processes hold the processor: the wall clock runs, the work does not.
    waited = cpu_seconds(lambda: time.sleep(0.05), repeats=2)
    assert waited < 0.01


def test_the_tests_of_an_xdist_group_go_to_one_process(request: pytest.FixtureRequest) -> None:
    # xdist sends a group's tests to one process by the group it adds to their ids
    # ("...@ray"); a pytest that drops the addition (9.2: pytest-dev/pytest-xdist#1386)
    # spreads them, each process starting its own Ray, model and PostgreSQL server.
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not in a test process of pytest-xdist's --dist loadgroup")
    ungrouped = [
        item.nodeid
        for item in request.session.items
        if item.get_closest_marker("xdist_group") is not None
        and item.nodeid.rfind("@") <= item.nodeid.rfind("]")  # no "@group" after a "[...]"
    ]
    assert not ungrouped, (
        f"xdist did not group {len(ungrouped)} tests, {ungrouped[0]} among them: install "
        "the pytest that pyproject.toml's dev extra allows"
    )


def test_a_postgres_port_taken_before_the_server_binds_it_is_replaced_by_another() -> None:
    from tests.support.postgres import PostgresServer, binaries

    found = binaries()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed (apt-get install postgresql)")
        pytest.skip("PostgreSQL is not installed")
    server = PostgresServer(found)
    chosen = server.port
    with socket.socket() as taker:  # another process's server, between choice and start
        taker.bind(("127.0.0.1", chosen))
        taker.listen()
        try:
            server.start()
            assert server.port != chosen
            with socket.create_connection(("127.0.0.1", server.port), timeout=30):
                pass  # the server listens where it says
        finally:
            server.remove()


def test_the_mcp_http_test_server_serves_on_the_socket_bound_before_it_started() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with http_test_server("t0ken", port=free) as url:
        assert url == f"http://127.0.0.1:{free}/mcp"
        with socket.socket() as late, pytest.raises(OSError, match="in use"):
            late.bind(("127.0.0.1", free))  # the server's: no other process gets it
        answer = urllib.request.Request(url, headers={"Authorization": "Bearer wrong"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(answer, timeout=30)
        assert refused.value.code == 401  # the test server itself answers
