"""A :class:`~honeycomb.trace.timeline.Timeline` as one self-contained web page.

Inline CSS and a little inline JavaScript (details on hover), nothing fetched: a
Content-Security-Policy forbids any other source. Every text from the run (task,
names, errors) is untrusted and is escaped; the script reads it back only through
``dataset`` and ``textContent``, never as HTML.

Each worker is one ``<div class="row" data-worker="ID">`` (the planner and the
aggregator are ``class="phase"``), bars are positioned in percent of the width along
the run's :class:`~honeycomb.trace.lives.Axis`, calls that ran at once one under
another (a row is a lane taller for each: ``Bar.lane``); a run of several lives has a
band a life (``<div class="life" data-life="N">`` above the rows) and between two
lives a strip, ``<div class="gap">``, in every row, saying how long the run was paused. The
page marks ``<html data-ready="N">`` (N worker rows) once its script ran; the first
script records any script error in ``<html data-errors>``.
"""

from __future__ import annotations

from html import escape

from honeycomb.trace.format import counted, format_cost, format_duration, token_detail
from honeycomb.trace.lives import Axis, Life
from honeycomb.trace.timeline import Bar, Row, Timeline
from runtime.text import valid_text

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
body { font: 13px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330;
       overflow-wrap: break-word; }
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
.bar.waiting { background: #b8bdc9; }
.time { width: 70px; flex: none; text-align: right; font-variant-numeric: tabular-nums; }
.status { width: 90px; flex: none; padding-left: 8px; color: #2a7d3b; }
.status.bad { color: #c02a2a; }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
.gap { position: absolute; top: 0; bottom: 0; background: repeating-linear-gradient(
  135deg, #fff 0 3px, #d5d9e2 3px 5px); }
.lives .track { background: none; height: 18px; }
.life { position: absolute; top: 0; height: 16px; border-bottom: 2px solid #8a93a6;
        box-sizing: border-box; padding: 0 4px;
        overflow: hidden; white-space: nowrap; text-overflow: ellipsis; font-size: 11px; }
.lives .gap { border-left: 1px dashed #8a93a6; border-right: 1px dashed #8a93a6; }
table.lives { margin-top: 12px; border-collapse: collapse; }
table.lives td, table.lives th { padding: 1px 12px 1px 0; text-align: left; }
table.lives tr.pause td { color: #777; font-style: italic; }
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
<h1>run {_e(t.run_id)} · {_e(t.status)}{_lives_said(t)}</h1>
<p class="task">{_e(t.task)}</p>
{timeline_section(t)}
<div id="tip" hidden></div>
<script>{_MAIN}</script>
</body>
</html>
"""


def _lives_said(t: Timeline) -> str:
    return f" · {len(t.lives)} lives" if len(t.lives) > 1 else ""


def timeline_section(timeline: Timeline) -> str:
    """The rows, legend and totals of ``timeline``, as HTML to put in a page whose
    styles include :data:`STYLE` (``honeycomb serve``'s run page is one)."""
    axis = Axis(timeline.lives, timeline.length_s)
    gaps = "".join(
        f'<div class="gap" style="{_at(left, right - left)}"></div>' for left, right, _ in axis.gaps
    )
    rows = "\n".join(_row(r, axis, gaps) for r in timeline.rows)
    return (
        f'<div class="timeline">\n{_lives_row(timeline.lives, axis)}{rows}\n</div>\n'
        f'<p class="legend">{_legend(bool(axis.gaps))}</p>\n{_lives_table(timeline)}'
        f"{_totals(timeline)}"
    )


def _lives_row(lives: tuple[Life, ...], axis: Axis) -> str:
    """Above the rows of a run of several lives: a band a life, and each pause."""
    if len(lives) < 2:
        return ""
    bands = "".join(
        f'<div class="life" data-life="{life.number}" '
        f'style="{_at(*axis.extent(life.start, life.end))}" title="{_e(_life_said(life))}">'
        f"life {life.number} · {format_duration(life.wall_s)}"
        + (f" (after a pause of {format_duration(life.gap_s)})" if life.number > 1 else "")
        + "</div>"
        for life in lives
    )
    pauses = "".join(
        f'<div class="gap" data-gap-s="{took:.3f}" style="{_at(left, right - left)}" '
        f'title="paused {_e(format_duration(took))}"></div>'
        for left, right, took in axis.gaps
    )
    return (
        '<div class="phase lives"><div class="name">lives</div>'
        f'<div class="track">{bands}{pauses}</div><div class="time"></div>'
        '<div class="status"></div></div>\n'
    )


def _life_said(life: Life) -> str:
    return (
        f"life {life.number}: ran {format_duration(life.wall_s)}, {life.status}; "
        f"{counted(life.model_calls, 'model call')}, {counted(life.tool_calls, 'tool call')}, "
        f"{counted(life.total_tokens, 'token')}, {format_cost(life.cost)}"
    )


def _lives_table(t: Timeline) -> str:
    """What each life ran and spent, the pauses between them, and the whole run."""
    lives = t.lives
    if len(lives) < 2:
        return ""
    head = "".join(
        f"<th>{h}</th>"
        for h in ("life", "ran", "ended", "model calls", "tool calls", "tokens", "cost")
    )
    rows: list[str] = []
    for life in lives:
        if life.number > 1:
            rows.append(
                f'<tr class="pause"><td></td><td colspan="6">paused '
                f"{_e(format_duration(life.gap_s))}</td></tr>"
            )
        cells = (
            str(life.number),
            format_duration(life.wall_s),
            life.status,
            str(life.model_calls),
            str(life.tool_calls),
            str(life.total_tokens),
            format_cost(life.cost),
        )
        rows.append(
            f'<tr data-life="{life.number}">'
            + "".join(f"<td>{_e(c)}</td>" for c in cells)
            + "</tr>"
        )
    total = (
        "all",
        format_duration(t.wall_s),
        t.status,
        str(t.model_calls),
        str(t.tool_calls),
        str(t.total_tokens),
        format_cost(t.cost),
    )
    rows.append('<tr class="total">' + "".join(f"<th>{_e(c)}</th>" for c in total) + "</tr>")
    return f'<table class="lives"><tr>{head}</tr>{"".join(rows)}</table>'


def _row(row: Row, axis: Axis, gaps: str) -> str:
    classes = ("row" if row.kind == "worker" else "phase") + (" crit" if row.critical else "")
    key = "data-worker" if row.kind == "worker" else "data-phase"
    title = f"{row.name} ({row.role})" if row.role else row.name
    if row.depends_on:
        title += " after " + ", ".join(row.depends_on)
    if row.parent is not None:
        title += f" called by {row.parent}"
    extent = "".join(
        f'<div class="span" style="{_at(*axis.extent(start, end))}"></div>'
        for start, end in row.periods
    )
    bars = "".join(_bar(b, axis) for b in row.bars)
    bad = "" if row.status == "ok" else " bad"
    error = f' title="{_e(row.error)}"' if row.error else ""
    critical = "true" if row.critical else "false"
    # A lane more for each call that ran beside others: the row grows to hold them.
    more = (row.lanes - 1) * _LANE_PX
    tall, deep = (
        (f' style="height:{22 + more}px"', f' style="height:{14 + more}px"') if more else ("", "")
    )
    return (
        f'<div class="{classes}" {key}="{_e(row.name)}" data-critical="{critical}"{tall}>'
        f'<div class="name" title="{_e(title)}">{_e(row.label)}</div>'
        f'<div class="track"{deep}>{gaps}{extent}{bars}</div>'
        f'<div class="time">{row.duration_s:.2f}s</div>'
        f'<div class="status{bad}"{error}>{_e(row.status)}</div></div>'
    )


def _bar(bar: Bar, axis: Axis) -> str:
    state = _OUTCOMES.get(bar.outcome, "")
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
    # Below the lanes above it, as far down as its class puts it in the first.
    top = f";top:{_TOP[bar.kind] + bar.lane * _LANE_PX}px" if bar.lane else ""
    return (
        f'<div class="bar {bar.kind}{state}" style="{_at(*axis.extent(bar.start, bar.end))}{top}" '
        f'data-tip="{_e(chr(10).join(lines))}"></div>'
    )


_LANE_PX = 13
"""How far below the one above it a lane of calls is drawn (a bar is at most 12
pixels high)."""

_TOP = {"model_call": 1, "compaction": 1, "tool_call": 3}
"""Where STYLE puts a bar of each kind in its track's first lane, in pixels."""


_CALLED = {"model_call": "model", "compaction": "summary by", "tool_call": "tool"}
_OUTCOMES = {"failed": " error", "timeout": " timeout", "waiting": " waiting"}
"""The class that draws a bar by how its call ended, if it did not get done."""


def _at(left: float, width: float) -> str:
    """A piece's place across the track, from its left edge and width (0 to 1)."""
    left = min(max(left, 0.0), 1.0) * 100
    width = min(max(width, 0.0), 1.0) * 100
    return f"left:{left:.3f}%;width:{min(width, 100 - left):.3f}%"


def _legend(paused: bool) -> str:
    items = (
        ("#3d6fd6", "model call"),
        ("#8e44ad", "summary call"),
        ("#e0a526", "tool call"),
        ("#d33b3b", "error"),
        ("#8b1a1a", "timeout"),
        ("#b8bdc9", "waiting"),
    )
    swatches = "".join(f'<span style="background:{c}"></span>{label}' for c, label in items)
    pause = '<span class="gap" style="position:static"></span>run paused' if paused else ""
    return swatches + pause + " &nbsp; ★ critical path"


def _totals(t: Timeline) -> str:
    path = " → ".join(t.path)
    cells = (
        ("wall time", f"{t.wall_s:.2f}s", _wall_detail(t)),
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
    going = f"<p>{_e(t.so_far)}</p>" if t.so_far is not None else ""
    return f'{going}<table class="totals">{body}</table>'


def _wall_detail(t: Timeline) -> str:
    phases = f"plan {t.plan_s:.2f}s, aggregate {t.aggregate_s:.2f}s"
    if len(t.lives) < 2:
        return phases
    paused = sum(life.gap_s for life in t.lives)
    return f"{phases}; {len(t.lives)} lives, paused {format_duration(paused)} between them"


def _e(text: str) -> str:
    """Text from a run, escaped, its lone surrogates U+FFFD (the page is UTF-8)."""
    return escape(valid_text(text), quote=True)
