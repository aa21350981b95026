"""The ``honeycomb`` command."""

from honeycomb.cli.main import main

__all__ = ["main"]
