"""A client of ``honeycomb serve``'s app, over real HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from honeycomb.web import create_app
from tests.support.asgi_server import ThreadedServer

__all__ = ["served"]


@contextmanager
def served(store: Path, token: str) -> Iterator[httpx.Client]:
    """A client of the app on ``store``, sending ``token`` as its bearer; the server is
    stopped as the block ends."""
    with ThreadedServer(create_app(store, token=token), name="serve") as server:
        headers = {"authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.url, headers=headers) as client:
            yield client
