"""The page's token in the log of the server that serves it: uvicorn's access log
writes the address each request asked for, the first one's ``?token=`` included."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx

from honeycomb.web import create_app
from runtime.secrets import isolated
from tests.support.asgi_server import ThreadedServer

TOKEN = "page-token-3Jk8Qw1Zr5"


class Kept(logging.Handler):
    """Keeps each record a logger's handlers get, as written."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_uvicorns_access_log_shows_no_token_of_the_page(tmp_path: Path) -> None:
    """A service that serves the page with uvicorn, its access log on (uvicorn's
    default), writes the token masked."""
    kept = Kept()
    access = logging.getLogger("uvicorn.access")
    with isolated():
        app = create_app(tmp_path / "runs.db", token=TOKEN)
        with ThreadedServer(app, name="serve", access_log=True) as server:
            access.addHandler(kept)  # uvicorn set its loggers' handlers as it started
            try:
                answer = httpx.get(f"{server.url}/?token={TOKEN}")
            finally:
                access.removeHandler(kept)
    assert answer.status_code == 303  # to the page, the token traded for a cookie
    assert len(kept.lines) == 1
    assert '"GET /?token=[token hidden] HTTP/1.1" 303' in kept.lines[0]
