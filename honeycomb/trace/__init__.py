"""Seeing what a run did: its spans, its timeline drawn in a terminal or as a web
page, OpenTelemetry export, and logging.

The public names are in :mod:`honeycomb.tracing`; this package's modules load one by
one as they are needed (spans only for runs that record them; ``rich``,
``opentelemetry`` and ``structlog`` take time to import).
"""

__all__: list[str] = []
