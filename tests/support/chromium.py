"""Debian's chromium, for the tests that check a page in a real headless browser.

One browser is launched for a test process, in the process's session event loop
(pytest-asyncio's ``loop_scope="session"``): a test in Chromium is marked
``@IN_CHROMIUM`` and takes the ``browser`` fixture. Each test opens contexts of its
own (``browser.new_context()``: its own cookies, storage, cache and pages), which are
closed as it ends, so the browser it gets is as good as a new one; the browser process
and Playwright's driver are started once rather than once a test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

__all__ = ["CHROMIUM_FLAGS", "IN_CHROMIUM", "browser", "chromium"]

CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

IN_CHROMIUM = pytest.mark.asyncio(loop_scope="session")
"""The mark of a test that takes ``browser``: it runs in the loop the browser lives in."""


def chromium() -> str:
    """The path of the ``chromium`` program; without one, the test is skipped (it fails
    in CI, where .ci/run installs it)."""
    found = shutil.which("chromium")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing; .ci/run installs it")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def _launched() -> AsyncIterator[Any]:
    playwright = pytest.importorskip("playwright.async_api")
    async with playwright.async_playwright() as p:
        launched = await p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest_asyncio.fixture(loop_scope="session")
async def browser(_launched: Any) -> AsyncIterator[Any]:
    """The test process's headless Chromium, with no context open; every context the
    test opened is closed after it."""
    try:
        yield _launched
    finally:
        for context in _launched.contexts:
            await context.close()
