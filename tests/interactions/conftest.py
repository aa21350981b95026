"""What the matrix's cells share: one MCP server per test process (over streamable
HTTP, so every cell's runs reach the same process), and one pool of Ray actors for
the Ray cells (which all go to one test process, with the Ray of ``ray_session``)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interactions.features.base import Env
from tests.support.mcp_servers import http_test_server


@pytest.fixture(scope="session")
def mcp_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """The MCP SDK test server, as a subprocess, and where it writes its notes."""
    token = secrets.token_hex(16)
    notes: Path = tmp_path_factory.mktemp("mcp") / "notes"
    with http_test_server(token, notes=notes) as url:
        yield Env(mcp_url=url, mcp_token=token, mcp_notes=notes)


@pytest.fixture(scope="session")
def ray_pool(ray_session: None) -> Iterator[object]:
    """Two Ray actors every Ray cell shares (their installs are per model and role)."""
    from honeycomb.backends import RayBackend

    pool = RayBackend(actors=2, actor_cpus=0)
    yield pool
    pool.stop()
