"""Seeing what a run did: its spans, its timeline drawn in a terminal or as a web
page, OpenTelemetry export, and logging.

Spans load with the package; the timeline's renderers, OpenTelemetry and logging load
on first use (``rich``, ``opentelemetry`` and ``structlog`` take time to import).
"""

from typing import TYPE_CHECKING

from honeycomb.trace.spans import Span, SpanRecorder, from_jsonl, to_jsonl
from runtime._lazy import lazy_attributes

__all__ = [
    "OpenTelemetryExporter",
    "Span",
    "SpanRecorder",
    "Timeline",
    "build_timeline",
    "configure_logging",
    "from_jsonl",
    "render_timeline",
    "to_html",
    "to_jsonl",
]

if TYPE_CHECKING:
    from honeycomb.trace.html import to_html
    from honeycomb.trace.logs import configure_logging
    from honeycomb.trace.otel import OpenTelemetryExporter
    from honeycomb.trace.terminal import render_timeline
    from honeycomb.trace.timeline import Timeline, build_timeline

_LAZY = {
    "OpenTelemetryExporter": "honeycomb.trace.otel",
    "Timeline": "honeycomb.trace.timeline",
    "build_timeline": "honeycomb.trace.timeline",
    "configure_logging": "honeycomb.trace.logs",
    "render_timeline": "honeycomb.trace.terminal",
    "to_html": "honeycomb.trace.html",
}

__getattr__ = lazy_attributes("honeycomb.trace", _LAZY, globals())
