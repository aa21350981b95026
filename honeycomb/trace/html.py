"""A :class:`~honeycomb.trace.timeline.Timeline` as one self-contained web page.

Inline CSS and a little inline JavaScript (details on hover), nothing fetched: a
Content-Security-Policy forbids any other source. Every text from the run (task,
names, errors) is untrusted and is escaped; the script reads it back only through
``dataset`` and ``textContent``, never as HTML.

Each worker is one ``<div class="row" data-worker="ID">`` (the planner and the
aggregator are ``class="phase"``), bars are positioned in percent of the run's
length, and the page marks ``<html data-ready="N">`` (N worker rows) once its script
ran; the first script records any script error in ``<html data-errors>``.
"""

from __future__ import annotations

from html import escape

from honeycomb.trace.format import counted, format_cost, token_detail
from honeycomb.trace.timeline import Bar, Row, Timeline

__all__ = ["STYLE", "timeline_section", "to_html"]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

_CATCH_ERRORS = """
window.addEventListener('error', function (e) {
  var root = document.documentElement;
  var line = String(e.message || e.type) + ' @' + (e.lineno || 0);
  root.dataset.errors = root.dataset.errors ? root.dataset.errors + '\\n' + line : line;
});
"""

_MAIN = """
(function () {
  var tip = document.getElementById('tip');
  var bars = document.querySelectorAll('.bar');
  function show(e) {
    tip.textContent = e.currentTarget.dataset.tip;
    tip.hidden = false;
    move(e);
  }
  function move(e) {
    var x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = Math.max(x, 4) + 'px';
    tip.style.top = (e.clientY + 16) + 'px';
  }
  function hide() { tip.hidden = true; }
  for (var i = 0; i < bars.length; i++) {
    bars[i].addEventListener('mouseenter', show);
    bars[i].addEventListener('mousemove', move);
    bars[i].addEventListener('mouseleave', hide);
  }
  var rows = document.querySelectorAll('.row');
  document.documentElement.dataset.ready = String(rows.length);
})();
"""

STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330; }
h1 { font-size: 16px; margin: 0 0 4px; }
.task { color: #555; margin: 0 0 16px; white-space: pre-wrap; }
.row, .phase { display: flex; align-items: center; height: 22px; }
.name { width: 220px; flex: none; overflow: hidden; text-overflow: ellipsis;
        white-space: pre; padding-right: 8px; }
.crit .name { font-weight: 600; }
.crit .name::before { content: "\\2605 "; color: #d08a00; }
.track { position: relative; flex: 1; height: 14px; background: #f3f4f7; }
.span { position: absolute; top: 6px; height: 2px; background: #b8bdc9; }
.crit .span { background: #d08a00; }
.bar { position: absolute; top: 1px; height: 12px; min-width: 2px; }
.bar.model_call { background: #3d6fd6; }
.bar.compaction { background: #8e44ad; }
.bar.tool_call { background: #e0a526; top: 3px; height: 8px; }
.bar.error { background: #d33b3b; }
.bar.timeout { background: #8b1a1a; }
.time { width: 70px; flex: none; text-align: right; font-variant-numeric: tabular-nums; }
.status { width: 90px; flex: none; padding-left: 8px; color: #2a7d3b; }
.status.bad { color: #c02a2a; }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
table.totals { margin-top: 16px; border-collapse: collapse; }
table.totals td { padding: 1px 12px 1px 0; }
#tip { position: fixed; background: #1d2330; color: #fff; padding: 6px 8px;
       border-radius: 4px; white-space: pre; pointer-events: none; max-width: 60ch;
       overflow: hidden; }
"""


def to_html(timeline: Timeline) -> str:
    """The page for ``timeline``."""
    t = timeline
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<script>{_CATCH_ERRORS}</script>
<title>honeycomb trace {_e(t.run_id)}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>run {_e(t.run_id)} · {_e(t.status)}{f" · {t.lives} lives" if t.lives > 1 else ""}</h1>
<p class="task">{_e(t.task)}</p>
{timeline_section(t)}
<div id="tip" hidden></div>
<script>{_MAIN}</script>
</body>
</html>
"""


def timeline_section(timeline: Timeline) -> str:
    """The rows, legend and totals of ``timeline``, as HTML to put in a page whose
    styles include :data:`STYLE` (``honeycomb serve``'s run page is one)."""
    rows = "\n".join(_row(r, timeline.length_s) for r in timeline.rows)
    return (
        f'<div class="timeline">\n{rows}\n</div>\n'
        f'<p class="legend">{_legend()}</p>\n{_totals(timeline)}'
    )


def _row(row: Row, length_s: float) -> str:
    classes = ("row" if row.kind == "worker" else "phase") + (" crit" if row.critical else "")
    key = "data-worker" if row.kind == "worker" else "data-phase"
    title = f"{row.name} ({row.role})" if row.role else row.name
    if row.depends_on:
        title += " after " + ", ".join(row.depends_on)
    if row.parent is not None:
        title += f" called by {row.parent}"
    extent = (
        f'<div class="span" style="{_place(row.start, row.end, length_s)}"></div>'
        if row.end > row.start
        else ""
    )
    bars = "".join(_bar(b, length_s) for b in row.bars)
    bad = "" if row.status == "ok" else " bad"
    error = f' title="{_e(row.error)}"' if row.error else ""
    critical = "true" if row.critical else "false"
    return (
        f'<div class="{classes}" {key}="{_e(row.name)}" data-critical="{critical}">'
        f'<div class="name" title="{_e(title)}">{_e(row.label)}</div>'
        f'<div class="track">{extent}{bars}</div>'
        f'<div class="time">{row.duration_s:.2f}s</div>'
        f'<div class="status{bad}"{error}>{_e(row.status)}</div></div>'
    )


def _bar(bar: Bar, length_s: float) -> str:
    state = "" if bar.status == "ok" else (" timeout" if bar.status == "timeout" else " error")
    lines = [
        f"{_CALLED[bar.kind]} {bar.name}" + (f" · turn {bar.turn}" if bar.turn is not None else ""),
        f"{bar.start:.3f}s → {bar.end:.3f}s ({bar.duration_s * 1000:.0f} ms) · {bar.status}",
    ]
    if bar.kind != "tool_call":
        cached = f" ({bar.cached_input_tokens} cached)" if bar.cached_input_tokens else ""
        lines.append(
            f"{bar.input_tokens} tokens in{cached}, {bar.output_tokens} out · "
            f"{format_cost(bar.cost)}"
        )
    if bar.error:
        lines.append(bar.error)
    return (
        f'<div class="bar {bar.kind}{state}" style="{_place(bar.start, bar.end, length_s)}" '
        f'data-tip="{_e(chr(10).join(lines))}"></div>'
    )


_CALLED = {"model_call": "model", "compaction": "summary by", "tool_call": "tool"}


def _place(start: float, end: float, length_s: float) -> str:
    if length_s <= 0:
        return "left:0%;width:0%"
    left = min(max(start / length_s, 0.0), 1.0) * 100
    width = min(max((end - start) / length_s, 0.0), 1.0) * 100
    return f"left:{left:.3f}%;width:{min(width, 100 - left):.3f}%"


def _legend() -> str:
    items = (
        ("#3d6fd6", "model call"),
        ("#8e44ad", "summary call"),
        ("#e0a526", "tool call"),
        ("#d33b3b", "error"),
        ("#8b1a1a", "timeout"),
    )
    swatches = "".join(f'<span style="background:{c}"></span>{label}' for c, label in items)
    return swatches + " &nbsp; ★ critical path"


def _totals(t: Timeline) -> str:
    path = " → ".join(["plan", *t.critical_path, "aggregate"])
    cells = (
        ("wall time", f"{t.wall_s:.2f}s", f"plan {t.plan_s:.2f}s, aggregate {t.aggregate_s:.2f}s"),
        ("critical path", f"{t.critical_path_s:.2f}s", path),
        (
            "workers",
            f"{t.sum_worker_s:.2f}s",
            f"added up, {counted(len(t.subtask_workers), 'worker')}",
        ),
        ("serial would", f"{t.serial_s:.2f}s", f"speedup x{t.speedup:.2f} over serial"),
        ("tokens", str(t.total_tokens), token_detail(t)[1:-1]),
        ("calls", str(t.model_calls), f"model, {t.tool_calls} tool"),
        ("cost", format_cost(t.cost), ""),
    )
    body = "".join(
        f"<tr><td>{_e(a)}</td><td>{_e(b)}</td><td>{_e(c)}</td></tr>" for a, b, c in cells
    )
    return f'<table class="totals">{body}</table>'


def _e(text: str) -> str:
    return escape(text, quote=True)
