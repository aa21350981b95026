"""A :class:`~honeycomb.trace.timeline.Timeline` in the terminal: one line per row, its calls
drawn as bars scaled to the width (calls that ran at once one under another, a line
each lane, at most three: the third holds the calls of any lanes below it, and says how
many ran at once), the critical path starred, the totals below. A run
of several lives is drawn life after life, a ``┊`` column between two lives standing
for the pause between them, whatever its length (said below the totals).

The renderable is plain :class:`rich.text.Text`, so a console that is not a terminal
prints it without colour; characters alone tell model calls, tool calls and errors
apart.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.console import Group
from rich.text import Text

from honeycomb.trace.format import (
    counted,
    format_cost,
    format_duration,
    printable,
    token_detail,
)
from honeycomb.trace.lives import Axis
from honeycomb.trace.timeline import Bar, Row, Timeline

__all__ = ["CHARS", "render_timeline"]

CHARS = {
    "model_call": "█",
    "compaction": "▓",
    "tool_call": "▒",
    "error": "x",
    "timeout": "!",
    "idle": "·",
    "paused": "┊",
}
"""What each cell of a bar line shows (in order of precedence, last wins)."""

_STYLES = {
    "model_call": "blue",
    "compaction": "magenta",
    "tool_call": "yellow",
    "error": "bold red",
    "timeout": "bold red",
    "idle": "dim",
    "paused": "dim",
}
_RANK = {
    "paused": 0,
    "idle": 0,
    "model_call": 1,
    "compaction": 1,
    "tool_call": 2,
    "timeout": 3,
    "error": 4,
}
_GAP_COLUMNS = 3
_NAME_MAX = 24
_STATS_W = 9  # " 12.34s  "
_LANES_MAX = 3  # lines a row's calls take at most


def render_timeline(timeline: Timeline, width: int = 100) -> Group:
    """The timeline as rich text ``width`` columns wide (at least 40)."""
    width = max(width, 40)
    # The star (2 columns), the name, and a space before the bars: a bar that starts at
    # once must not run into the name.
    name_w = min(max((cell_len(r.label) for r in timeline.rows), default=4), _NAME_MAX) + 3
    status_w = max((len(r.status) for r in timeline.rows), default=2)
    bar_w = max(width - name_w - _STATS_W - status_w - 1, 10)
    axis = Axis(timeline.lives, timeline.length_s, gap_share=_GAP_COLUMNS / bar_w)
    lines = [_header(timeline, width), _axis(timeline, name_w, bar_w)]
    lines += [line for r in timeline.rows for line in _row_lines(r, axis, name_w, bar_w)]
    lines += [Text(""), *_footer(timeline), _legend(width, paused=len(timeline.lives) > 1)]
    return Group(*lines)


def _header(timeline: Timeline, width: int) -> Text:
    lives = f" · {len(timeline.lives)} lives" if len(timeline.lives) > 1 else ""
    head = f"run {_clean(timeline.run_id)} · {timeline.status}{lives} · "
    text = Text()
    text.append(head, style="bold")
    text.append(_cut(_clean(timeline.task), max(width - cell_len(head), 10)))
    return text


def _axis(timeline: Timeline, name_w: int, bar_w: int) -> Text:
    right = format_duration(timeline.length_s)
    return Text(" " * name_w + "0s".ljust(bar_w - len(right)) + right, style="dim")


def _row_lines(row: Row, axis: Axis, name_w: int, bar_w: int) -> list[Text]:
    """The row's line, and a line under it for each further lane of its calls (those
    that ran beside others)."""
    star = "★ " if row.critical else "  "
    text = Text()
    text.append(star, style="bold yellow")
    name = set_cell_size(_cut(_clean(row.label), name_w - 3), name_w - 2)
    text.append(name, style="bold" if row.critical else "")
    _append_cells(text, _cells(row, axis, bar_w, 0))
    text.append(f" {row.duration_s:7.2f}s ")
    text.append(row.status, style="green" if row.status == "ok" else "red")
    lines = [text]
    for lane in range(1, min(row.lanes, _LANES_MAX)):
        below = Text(" " * name_w)
        _append_cells(below, _cells(row, axis, bar_w, lane))
        below.rstrip()
        lines.append(below)
    if row.lanes > _LANES_MAX:
        lines[-1].append(f"  {row.lanes} at once", style="dim")
    return lines


def _append_cells(text: Text, cells: list[str]) -> None:
    for kind, run in _runs(cells):
        text.append(CHARS[kind] * run if kind else " " * run, style=_STYLES.get(kind, ""))


def _cells(row: Row, axis: Axis, bar_w: int, lane: int) -> list[str]:
    """What each column of the bar line of ``lane`` shows: '' (nothing) or a key of
    CHARS (the row's idle stretches are drawn in its first lane, the calls of lanes
    past the last line in that line)."""
    cells = [""] * bar_w

    def paint(left: float, right: float, kind: str) -> None:
        first = min(int(left * bar_w), bar_w - 1)
        last = max(first + 1, min(round(right * bar_w), bar_w))
        for i in range(first, last):
            if _RANK[kind] >= _RANK.get(cells[i], -1):
                cells[i] = kind

    for left, right, _ in axis.gaps:
        paint(left + (right - left) / 2, left + (right - left) / 2, "paused")
    for start, end in row.periods if lane == 0 else ():
        paint(axis.at(start), axis.at(end), "idle")
    for bar in row.bars:
        if min(bar.lane, _LANES_MAX - 1) == lane:
            paint(axis.at(bar.start), axis.at(bar.end), _kind(bar))
    return cells


def _kind(bar: Bar) -> str:
    """What a bar's cells show: its kind, or how it ended if not done."""
    return _OUTCOMES.get(bar.outcome, bar.kind)


_OUTCOMES = {"failed": "error", "timeout": "timeout", "waiting": "idle"}
"""The key of CHARS that draws a call by how it ended, if it did not get done."""


def _runs(cells: list[str]) -> list[tuple[str, int]]:
    runs: list[tuple[str, int]] = []
    for cell in cells:
        if runs and runs[-1][0] == cell:
            runs[-1] = (cell, runs[-1][1] + 1)
        else:
            runs.append((cell, 1))
    return runs


def _footer(t: Timeline) -> list[Text]:
    path = " → ".join(_clean(s) for s in t.path)
    lines = [
        Text(
            f"wall time      {t.wall_s:7.2f}s   (plan {t.plan_s:.2f}s, "
            f"aggregate {t.aggregate_s:.2f}s)"
        ),
        Text(f"critical path  {t.critical_path_s:7.2f}s   {path}"),
        Text(
            f"workers        {t.sum_worker_s:7.2f}s   added up, "
            f"{counted(len(t.subtask_workers), 'worker')}"
        ),
        Text(f"serial would   {t.serial_s:7.2f}s   speedup x{t.speedup:.2f} over serial"),
        Text(f"tokens         {t.total_tokens:7d}    {token_detail(t)}"),
        Text(f"calls          {t.model_calls:7d} model, {t.tool_calls} tool{summaries(t)}"),
        Text(f"cost           {format_cost(t.cost):>7}"),
    ]
    if len(t.lives) > 1:
        lines += [line for n in range(len(t.lives)) for line in _life_lines(t, n)]
    if t.so_far is not None:
        lines.insert(0, Text(t.so_far, style="yellow"))
    return lines


def _life_lines(t: Timeline, index: int) -> list[Text]:
    """``life 2         0.52s   ok · 3 model calls, 1 tool call, 420 tokens, -``,
    after the pause before it."""
    life = t.lives[index]
    pause = [Text(f"  paused       {format_duration(life.gap_s):>8}", style="dim")] if index else []
    return [
        *pause,
        Text(
            f"life {life.number:<9} {format_duration(life.wall_s):>8}   {life.status} · "
            f"{counted(life.model_calls, 'model call')}, "
            f"{counted(life.tool_calls, 'tool call')}, "
            f"{counted(life.total_tokens, 'token')}, {format_cost(life.cost)}"
        ),
    ]


def summaries(t: Timeline) -> str:
    """``(2 of them summary calls)`` when some model calls compacted a context."""
    return f" ({counted(t.compactions, 'summary call')} among them)" if t.compactions else ""


def _legend(width: int, *, paused: bool) -> Text:
    """What each character means, on as many lines of ``width`` as it takes, each
    key beside its meaning (a line too narrow for it broke one off its meaning)."""
    items = [
        (CHARS[kind], _STYLES[kind], label)
        for kind, label in (
            ("model_call", "model call"),
            ("compaction", "summary call"),
            ("tool_call", "tool call"),
            ("error", "error"),
            ("timeout", "timeout"),
            ("idle", "waiting"),
            *((("paused", "paused"),) if paused else ()),
        )
    ]
    items.append(("★", "dim", "critical path"))
    text, used = Text(""), 0
    for key, style, label in items:
        said = f"{key} {label}"
        if used and used + 2 + len(said) > width:
            text.append("\n")
            used = 0
        elif used:
            text.append("  ")
            used += 2
        text.append(key, style=style)
        text.append(f" {label}", style="dim")
        used += len(said)
    return text


def _clean(text: str) -> str:
    return printable(text, lines=False)


def _cut(text: str, width: int) -> str:
    """``text`` in ``width`` columns at most, cut short with "…": by the columns its
    characters take (a Chinese character two), not by how many they are."""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, max(width - 1, 0)).rstrip() + "…"  # (a wide one half in)
