"""Seeing what a run did: the tracer that delivers its events, the spans recorded
from them, its timeline drawn in a terminal or as a web page, JSONL files of spans,
structured logging, and OpenTelemetry export (``docs/tracing.md``).

    from honeycomb.tracing import build_timeline, render_timeline

:class:`OpenTelemetryExporter` loads on first use: it needs the ``otel`` extra.
"""

import typing

from honeycomb.trace.html import to_html
from honeycomb.trace.lives import Life
from honeycomb.trace.logs import configure_logging
from honeycomb.trace.spans import Span, SpanRecorder, SubRunSpans, from_jsonl, to_jsonl
from honeycomb.trace.terminal import render_timeline
from honeycomb.trace.timeline import Bar, PlannedSubtask, Row, Timeline, build_timeline
from runtime import lazy
from runtime.events import Caller, Tracer

if typing.TYPE_CHECKING:
    from honeycomb.trace.otel import OpenTelemetryExporter

__all__ = [
    "Bar",
    "Caller",
    "Life",
    "OpenTelemetryExporter",
    "PlannedSubtask",
    "Row",
    "Span",
    "SpanRecorder",
    "SubRunSpans",
    "Timeline",
    "Tracer",
    "build_timeline",
    "configure_logging",
    "from_jsonl",
    "render_timeline",
    "to_html",
    "to_jsonl",
]

if not typing.TYPE_CHECKING:  # type checkers see the import above, and no other name
    __getattr__ = lazy.lazy_names(__name__, globals(), ("honeycomb.trace.otel",))
