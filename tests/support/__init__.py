"""What tests share beyond a folder's fixtures: the tools, models, servers and stored
runs of the modules beside this one, and the clone's root."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The root of the clone: where README.md, docs/ and examples/ are."""
