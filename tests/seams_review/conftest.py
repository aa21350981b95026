"""Fixtures of the seam tests, those of the tests they meet: the two backends a
scenario runs on (``backend``), and the two kinds of run store (``store``)."""

from __future__ import annotations

from tests.honeycomb.backends.conftest import backend
from tests.honeycomb.conftest import store

__all__ = ["backend", "store"]
