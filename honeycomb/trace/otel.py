"""OpenTelemetry export: each run as one trace, named by the GenAI semantic conventions.

Install the extra (``pip install 'honeycomb-agents[otel]'``) and add one event handler::

    from honeycomb.trace.otel import OpenTelemetryExporter

    executor = Executor(roles, model, on_event=[OpenTelemetryExporter()])

How it works: Honeycomb's spans (:mod:`honeycomb.trace.spans`) end children first, but an
OpenTelemetry span needs its parent when it starts, and the SDK picks span ids itself.
So the exporter keeps one :class:`~honeycomb.trace.spans.SpanRecorder` per run (every event
names its run) and, when the run ends, creates that run's spans in one go, parents
first, with the start and end times they were recorded with. A run reaches the tracer
provider's processors only when it ends; a process that dies mid-run exports nothing
of it (the run store, if any, still has its spans). The run span is the root of the
run's trace, or the child of the span that was current when the run started (a web
request's span, say). Each life of a resumed run is a trace of its own (the SDK picks
its trace id): its run span links to the run span of the life before, which the
exporter keeps for the run once it exported it as it ran; the lives of spans exported
from a store link each to the one before it among them.

How Honeycomb spans map to the conventions (which are still in development status):

- run: ``invoke_workflow {workflow}`` (``gen_ai.workflow.name``);
- plan: ``plan`` (``gen_ai.operation.name="plan"``);
- worker: ``invoke_agent {role}`` (``gen_ai.agent.name`` is the role, usage summed);
- model call: ``chat {model}``, span kind CLIENT, with ``gen_ai.response.model`` and
  ``gen_ai.usage.input_tokens`` / ``output_tokens``. The events carry the model name
  the response reported, not the one requested, so ``gen_ai.request.model`` and
  ``gen_ai.provider.name`` are left out rather than guessed;
- tool call: ``execute_tool {tool}`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``);
- embedding (a memory's call to its embeddings model): ``embeddings {model}``, span
  kind CLIENT, with ``gen_ai.usage.input_tokens`` (the name is the one the memory
  records, its size after a colon when it asks for one);
- approval (a call's wait for a person's decision): ``approval {tool}``
  (``gen_ai.tool.name``);
- aggregate, turn, recall (a worker's search of its memory) and guard spans keep
  their Honeycomb names.

Every span also has ``honeycomb.*`` attributes: run id, span id (as ``honeycomb
trace`` shows it), kind, status, worker, turn, cost, error. Statuses ``error``,
``failed``, ``timeout``, ``unknown``, ``cancelled``, ``over_budget`` and
``interrupted`` (a cancelled run) set the span status to ERROR, described by the
error, and ``error.type`` to the status; others (``ok``, ``partial``, ``skipped``,
``waiting``, an approval's ``approved`` and ``denied``) leave it unset.
Prompts, answers and the task are never exported.
"""

from __future__ import annotations

from collections.abc import Iterable

from honeycomb.trace.spans import FAILURES, Span, SpanRecorder
from runtime import Event

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.util.types import AttributeValue
except ModuleNotFoundError as exc:  # the extra is not installed
    raise ModuleNotFoundError(
        "honeycomb.trace.otel needs OpenTelemetry: pip install 'honeycomb-agents[otel]'",
        name=exc.name,
    ) from exc

__all__ = ["OpenTelemetryExporter"]

Attributes = dict[str, AttributeValue]


class OpenTelemetryExporter:
    """An event handler that exports every run it sees as one OpenTelemetry trace.

    Pass it to ``Executor(on_event=[...])`` (all runs) or ``run(..., on_event=[...])``.

    Args:
        tracer_provider: Where spans go. Default: the global provider, as the
            application set it (even after this exporter was made).
        workflow: The run span's ``gen_ai.workflow.name`` (a hive's name, say).
    """

    def __init__(
        self, tracer_provider: trace.TracerProvider | None = None, *, workflow: str = "honeycomb"
    ) -> None:
        self._tracer = trace.get_tracer("honeycomb", tracer_provider=tracer_provider)
        self._workflow = workflow
        self._runs: dict[str, tuple[SpanRecorder, otel_context.Context]] = {}
        # The run span of each run's life exported last as it ran: its next life links to it.
        self._lives: dict[str, trace.SpanContext] = {}

    def __call__(self, event: Event) -> None:
        run_id = event.run_id
        if run_id is None:
            return
        if event.kind == "run.started":  # the run's own events, by their documented kind
            # Events are emitted in the run's own task, so this is the caller's context.
            self._runs[run_id] = (SpanRecorder(), otel_context.get_current())
        found = self._runs.get(run_id)
        if found is None:
            return
        recorder, parent = found
        recorder(event)
        if event.kind == "run.finished":
            del self._runs[run_id]
            life = self._export(recorder.spans, run_id, parent, self._lives.pop(run_id, None))
            if life is not None:
                self._lived(run_id, life)

    def recorder_for(self, run_id: str) -> SpanRecorder | None:
        """The recorder of the spans of run ``run_id`` while it runs (None once it
        ended, or if this exporter never saw it start): the sub-runs of the run (hives
        called as tools) record their spans there too, and are exported with it, this
        exporter given to their own Executor too or not."""
        found = self._runs.get(run_id)
        return found[0] if found is not None else None

    def export(
        self,
        spans: Iterable[Span],
        *,
        run_id: str = "",
        parent: otel_context.Context | None = None,
    ) -> None:
        """Emit finished spans of one run, such as a run store's, parents first.

        Each span without a parent among ``spans`` starts a tree of its own (each life
        of a resumed run, read back from a store, is one), the run span of each life
        linked to that of the life before it among them.

        Args:
            spans: The run's spans, in any order.
            run_id: Kept as ``honeycomb.run_id``.
            parent: The context the trees start in. Default: the current one.
        """
        self._export(spans, run_id, parent, None)

    def _export(
        self,
        spans: Iterable[Span],
        run_id: str,
        parent: otel_context.Context | None,
        earlier: trace.SpanContext | None,
    ) -> trace.SpanContext | None:
        """:meth:`export`, the first life's run span linked to ``earlier`` (that of the
        run's life exported before, as it ran); the last life's run span, if any."""
        ordered = sorted(spans, key=lambda s: s.start)
        known = {s.span_id for s in ordered}
        children: dict[str | None, list[Span]] = {}
        for span in ordered:
            key = span.parent_id if span.parent_id in known else None
            children.setdefault(key, []).append(span)
        start_in = parent if parent is not None else otel_context.get_current()
        stack = [(span, start_in) for span in reversed(children.get(None, []))]
        opened: list[tuple[trace.Span, Span]] = []
        while stack:  # depth first, so a parent always starts before its children
            span, context = stack.pop()
            if span.kind == "run":  # a life's, in start order (a sub-run has none)
                started = self._start(span, run_id, context, earlier)
                earlier = started.get_span_context()
            else:
                started = self._start(span, run_id, context, None)
            opened.append((started, span))
            inner = trace.set_span_in_context(started, context)
            stack.extend((child, inner) for child in reversed(children.get(span.span_id, [])))
        for started, span in reversed(opened):  # children end before their parents
            started.end(end_time=_ns(span.end))
        return earlier

    def _start(
        self,
        span: Span,
        run_id: str,
        context: otel_context.Context,
        earlier: trace.SpanContext | None,
    ) -> trace.Span:
        """``span`` started in ``context``; linked to ``earlier``, the run span of its
        run's life before, if any."""
        name, kind, attributes = _describe(span, self._workflow)
        attributes.update(_honeycomb_attributes(span, run_id))
        links = [trace.Link(earlier, {"honeycomb.link": "earlier life"})] if earlier else []
        started = self._tracer.start_span(
            name,
            context=context,
            kind=kind,
            attributes=attributes,
            links=links,
            start_time=_ns(span.start),
        )
        if span.status in FAILURES:
            started.set_attribute("error.type", span.status)
            started.set_status(trace.StatusCode.ERROR, span.error or span.status)
        return started

    def _lived(self, run_id: str, run_span: trace.SpanContext) -> None:
        """Keep ``run_span`` as that of run ``run_id``'s last life; the runs exported
        longest ago are forgotten past :data:`LIVES_KEPT`."""
        self._lives[run_id] = run_span
        if len(self._lives) > LIVES_KEPT:
            del self._lives[next(iter(self._lives))]


LIVES_KEPT = 10_000
"""Runs whose last life an exporter keeps, to link a life resumed later to it (a
service's exporter sees runs without end; one resumed after 10,000 others has no link)."""


def _describe(span: Span, workflow: str) -> tuple[str, trace.SpanKind, Attributes]:
    """The span's name, kind and GenAI attributes."""
    internal = trace.SpanKind.INTERNAL
    match span.kind:
        case "run":
            attributes: Attributes = {
                "gen_ai.operation.name": "invoke_workflow",
                "gen_ai.workflow.name": workflow,
            }
            return f"invoke_workflow {workflow}", internal, attributes
        case "plan":
            return "plan", internal, {"gen_ai.operation.name": "plan"}
        case "worker":
            agent = span.detail or span.name
            attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
            return f"invoke_agent {agent}", internal, attributes | _usage(span)
        case "model_call":
            attributes = {"gen_ai.operation.name": "chat"} | _usage(span)
            if span.name == "model":  # no response, so no model name (SpanRecorder's default)
                return "chat", trace.SpanKind.CLIENT, attributes
            attributes["gen_ai.response.model"] = span.name
            return f"chat {span.name}", trace.SpanKind.CLIENT, attributes
        case "compaction":  # a chat call of its own, which summarizes old turns
            attributes = {"gen_ai.operation.name": "chat"} | _usage(span)
            if span.name != "model":
                attributes["gen_ai.response.model"] = span.name
            return f"chat {span.name} (compaction)", trace.SpanKind.CLIENT, attributes
        case "tool_call":
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": span.name,
                "gen_ai.tool.type": "function",
            }
            if span.detail:
                attributes["gen_ai.tool.call.id"] = span.detail
            return f"execute_tool {span.name}", internal, attributes
        case "embedding":  # a memory's call to its embeddings model
            attributes = {
                "gen_ai.operation.name": "embeddings",
                "gen_ai.usage.input_tokens": span.input_tokens,
            }
            return f"embeddings {span.name}", trace.SpanKind.CLIENT, attributes
        case "approval":  # a call's wait for a person's decision
            return f"approval {span.name}", internal, {"gen_ai.tool.name": span.name}
        case _:  # aggregate, turn, recall, guard: no GenAI operation of their own
            return span.name, internal, {}


def _usage(span: Span) -> Attributes:
    return {
        "gen_ai.usage.input_tokens": span.input_tokens,
        "gen_ai.usage.output_tokens": span.output_tokens,
    }


def _honeycomb_attributes(span: Span, run_id: str) -> Attributes:
    attributes: Attributes = {
        "honeycomb.run_id": run_id,
        "honeycomb.span_id": span.span_id,
        "honeycomb.kind": span.kind,
        "honeycomb.status": span.status,
    }
    if span.worker is not None:
        attributes["honeycomb.worker"] = span.worker
        if run_id:  # the worker's conversation key (workers.AgentLoop names it so)
            attributes["gen_ai.conversation.id"] = f"{run_id}/{span.worker}"
    if span.turn is not None:
        attributes["honeycomb.turn"] = span.turn
    if span.kind in ("run", "plan", "aggregate", "turn") and span.input_tokens:
        attributes["honeycomb.input_tokens"] = span.input_tokens
        attributes["honeycomb.output_tokens"] = span.output_tokens
    if span.cost:
        attributes["honeycomb.cost"] = span.cost
    if span.error is not None:
        attributes["honeycomb.error"] = span.error
    return attributes


def _ns(seconds: float) -> int:
    """Seconds since the epoch as OpenTelemetry's nanoseconds."""
    return round(seconds * 1e9)
