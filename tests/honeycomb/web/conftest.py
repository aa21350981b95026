"""The web tests' fixtures: the headless Chromium the page tests share."""

from tests.support.chromium import _launched, browser

__all__ = ["_launched", "browser"]
