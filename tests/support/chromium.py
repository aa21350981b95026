"""Debian's chromium, for the tests that check a page in a real headless browser."""

from __future__ import annotations

import os
import shutil

import pytest


def chromium() -> str:
    """The path of the ``chromium`` program; without one, the test is skipped (it fails
    in CI, where .ci/run installs it)."""
    found = shutil.which("chromium")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing; .ci/run installs it")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found
