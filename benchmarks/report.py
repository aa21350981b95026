"""Turning samples into a markdown table (figure, floor, ratio, target) and an SVG plot."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchmarks.fanout import Samples

Metric = Callable[[dict[str, Any]], float]
Target = tuple[str, Callable[[float, float], bool]]


def wall(r: dict[str, Any]) -> float:
    """Wall time of a measured run, in seconds."""
    return float(r["wall_s"])


def per_turn(r: dict[str, Any]) -> float:
    """CPU microseconds per model turn of a measured run."""
    return float(r["cpu_s"]) / int(r["model_calls"]) * 1e6


def per_tool(r: dict[str, Any]) -> float:
    """CPU microseconds per tool call of a measured run."""
    return float(r["cpu_s"]) / max(int(r["tool_calls"]), 1) * 1e6


def peak_rss(r: dict[str, Any]) -> float:
    """Peak resident memory of a measuring process, in MB."""
    return float(r["peak_rss_mb"])


@dataclass(frozen=True)
class Stat:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat | None:
        if not values:
            return None
        return cls(statistics.median(values), min(values), max(values))

    def show(self) -> str:
        return f"{_num(self.median)} [{_num(self.low)}-{_num(self.high)}]"


@dataclass(frozen=True)
class Row:
    scenario: str
    label: str
    metric: str
    honeycomb: Stat | None
    floor: Stat | None
    target: str
    met: bool | None
    valid: bool
    paired_ratio: float | None = None  # median of per-process ratios, when paired
    uvloop: Stat | None = None  # the same figure of Honeycomb on uvloop (A)
    ideal_ratio: float | None = None  # the figure over the ideal, when that is the unit

    @classmethod
    def of(
        cls,
        scenario: str,
        label: str,
        metric: str,
        samples: Samples,
        fn: Metric,
        target: Target | None,
        valid: bool,
        *,
        impl: str = "honeycomb",
        baseline: Samples | None = None,
        baseline_impl: str = "floor",
        paired: float | None = None,
    ) -> Row:
        """``paired``: the paired ratio, when the caller pairs finer than run by run (the
        import pairs its tries). A paired ratio is what its target judges."""
        mine_values = samples.values(impl, fn)
        base_samples = baseline if baseline is not None else samples
        floor_values = base_samples.values(baseline_impl, fn)
        mine, floor = Stat.of(mine_values), Stat.of(floor_values)
        if paired is None and samples.point.paired and _pairs(mine_values, floor_values):
            # Both ran in the same processes, run by run: the ratio of each pair cancels
            # out how busy the machine was at that moment.
            paired = statistics.median(
                m / f for m, f in zip(mine_values, floor_values, strict=True)
            )
        met: bool | None = None
        if target is not None and mine is not None:
            floor_median = floor.median if floor else math.nan
            if paired is not None:  # the ratio, with the floor as unit
                met = valid and target[1](paired, 1.0)
            else:
                met = valid and target[1](mine.median, floor_median)
        label_ = target[0] if target else ""
        return cls(scenario, label, metric, mine, floor, label_, met, valid, paired)

    @property
    def ratio(self) -> str:
        if self.ideal_ratio is not None:
            return f"{self.ideal_ratio:.2f}x ideal"
        if self.paired_ratio is not None:
            return f"{self.paired_ratio:.2f}x (paired)"
        if self.honeycomb is None or self.floor is None or self.floor.median == 0:
            return ""
        return f"{self.honeycomb.median / self.floor.median:.2f}x"


def _pairs(mine: Sequence[float], floor: Sequence[float]) -> bool:
    """Whether the two sides' figures pair up, run by run, into ratios."""
    return len(mine) == len(floor) and all(floor)


def markdown_table(rows: Sequence[Row], *, machine: str, repeats: int) -> str:
    lines = [
        f"Machine: {machine}. Median [min-max] of {repeats} runs, each in a fresh process; "
        "the floor is the hand-written asyncio loop (for F and G: Honeycomb with the feature off; "
        "for the import: the same modules without Honeycomb's own); uvloop: Honeycomb on "
        "uvloop, in the same processes as the other two.",
        "",
        "| scenario | workload | metric | Honeycomb | uvloop | floor | ratio | target | result |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        result = "" if r.met is None else ("met" if r.met else "MISSED")
        if not r.valid:
            result = "INVALID RUN"
        mine = r.honeycomb.show() if r.honeycomb else "-"
        floor = r.floor.show() if r.floor else "-"
        on_uvloop = r.uvloop.show() if r.uvloop else ""
        cells = [r.scenario, r.label, r.metric, mine, on_uvloop, floor, r.ratio, r.target, result]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def svg_plot(samples: Sequence[Samples]) -> str:
    """Wall time over ideal against N (log scale): Honeycomb, the floor, and Honeycomb
    on uvloop when it ran."""
    series: dict[str, list[tuple[int, float]]] = {"honeycomb": [], "floor": [], "uvloop": []}
    for s in samples:
        n = s.point.params["n"]
        for impl in series:
            values = [r["wall_s"] / r["ideal_s"] for r in s.runs.get(impl, [])]
            if values:
                series[impl].append((n, statistics.median(values)))
    width, height, pad = 640, 400, 60
    xs = [math.log10(n) for pts in series.values() for n, _ in pts] or [0.0, 1.0]
    ys = [y for pts in series.values() for _, y in pts] or [1.0]
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)
    top = math.log10(max(max(ys) * 1.2, 2.0))  # y on a log scale: 1 (ideal) to the worst

    def px(n: int) -> float:
        return pad + (math.log10(n) - x0) / (x1 - x0) * (width - 2 * pad)

    def py(y: float) -> float:
        return height - pad - (math.log10(max(y, 1.0)) / top) * (height - 2 * pad)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">'
        "Scenario A: wall time / ideal (K*Lm + (K-1)*Lt) against N workers</text>",
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
    ]
    for n in sorted({n for pts in series.values() for n, _ in pts}):
        out.append(f'<text x="{px(n)}" y="{height - pad + 18}" text-anchor="middle">{n}</text>')
    for tick in _ticks(10**top):
        y = py(tick)
        out.append(f'<line x1="{pad}" y1="{y:.1f}" x2="{width - pad}" y2="{y:.1f}" '
                   'stroke="#ddd"/>')  # fmt: skip
        out.append(f'<text x="{pad - 8}" y="{y + 4:.1f}" text-anchor="end">{tick:g}x</text>')
    colours = {"honeycomb": "#d97706", "floor": "#2563eb", "uvloop": "#059669"}
    for index, (impl, pts) in enumerate(series.items()):
        if not pts:
            continue
        path = " ".join(f"{px(n):.1f},{py(y):.1f}" for n, y in sorted(pts))
        colour = colours[impl]
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for n, y in pts:
            out.append(f'<circle cx="{px(n):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{pad + 10}" y="{pad + 16 * index}" fill="{colour}">{impl}</text>')
    out.append(f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">N (log scale)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _ticks(top: float) -> list[float]:
    """1, 2, 5, 10, 20, 50 ... up to ``top``: gridlines for a log scale."""
    ticks, base = [], 1.0
    while base <= top:
        ticks += [t for t in (base, 2 * base, 5 * base) if t <= top]
        base *= 10
    return ticks


def _num(x: float) -> str:
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.3f}"
