"""Fixtures for the runtime tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_server import OpenAIServer


@pytest.fixture(scope="module")
def _running_openai_server() -> Iterator[OpenAIServer]:
    # One server per test module: starting is quick, but uvicorn takes ~0.2s to stop.
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def openai_server(_running_openai_server: OpenAIServer) -> Iterator[OpenAIServer]:
    """A local OpenAI-compatible server with an empty queue and no recorded requests."""
    _running_openai_server.reset()
    yield _running_openai_server
    _running_openai_server.reset()
