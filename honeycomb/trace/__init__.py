"""Seeing what a run did: its spans, its timeline drawn in a terminal or as a web
page, OpenTelemetry export, and logging.

Everything loads on first use: spans are made only for runs that record them, and the
timeline's renderers, OpenTelemetry and logging need ``rich``, ``opentelemetry`` and
``structlog``, which take time to import.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_attributes

__all__ = [
    "Life",
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
    from honeycomb.trace.lives import Life
    from honeycomb.trace.logs import configure_logging
    from honeycomb.trace.otel import OpenTelemetryExporter
    from honeycomb.trace.spans import Span, SpanRecorder, from_jsonl, to_jsonl
    from honeycomb.trace.terminal import render_timeline
    from honeycomb.trace.timeline import Timeline, build_timeline

_LAZY = {
    "Life": "honeycomb.trace.lives",
    "OpenTelemetryExporter": "honeycomb.trace.otel",
    "Span": "honeycomb.trace.spans",
    "SpanRecorder": "honeycomb.trace.spans",
    "Timeline": "honeycomb.trace.timeline",
    "build_timeline": "honeycomb.trace.timeline",
    "configure_logging": "honeycomb.trace.logs",
    "from_jsonl": "honeycomb.trace.spans",
    "render_timeline": "honeycomb.trace.terminal",
    "to_html": "honeycomb.trace.html",
    "to_jsonl": "honeycomb.trace.spans",
}

__getattr__ = lazy_attributes("honeycomb.trace", _LAZY, globals())
