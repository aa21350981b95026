"""Honeycomb and the floor next to the peer frameworks, on the standard workload.

    python -m benchmarks.peers                    # B, A at N=100 and 1000, E (about 10 min)
    python -m benchmarks.peers --scenario B --peers langgraph --repeats 1
    python -m benchmarks.peers --smoke            # tiny runs: correctness only, seconds
    honeycomb bench --peers                       # the same, from the command line
    honeycomb bench --peers=langgraph,pydantic-ai --sizes 1000

Needs the ``peers`` extra (``pip install -e '.[peers]'``). Every figure comes from a
fresh process, as in ``benchmarks.fanout``: B runs each implementation and the floor in
the same process, run by run, and reports their ratio per process; A and E run each
implementation in a process of its own (a smoke run, which times nothing, runs an
implementation's B and A in one process). The table shows every figure with its ratio
to the floor; the exit status is 1 when a run is invalid.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.fanout import (
    RESULTS,
    Point,
    compile_bytecode,
    machine,
    measure,
    measure_together,
    results_log,
    results_stem,
    scenarios_of,
    sizes_argument,
)
from benchmarks.peers import PEERS
from benchmarks.report import Stat, peak_rss, per_turn, wall
from honeycomb.cli.options import Parser, integer, user_path

IMPLS = ("honeycomb", *PEERS)
B = {"n": 200, "k": 5, "t": 2, "lm": 0.0, "lt": 0.0}
A = {"k": 3, "t": 3, "lm": 0.05, "lt": 0.02}
SMOKE_B = {"n": 10, "k": 3, "t": 2, "lm": 0.0, "lt": 0.0}
SMOKE_A = {"n": 10, "k": 2, "t": 2, "lm": 0.01, "lt": 0.005}

Metric = Callable[[dict[str, Any]], float]


def points(scenarios: Sequence[str], impls: Sequence[str], sizes: Sequence[int],
           smoke: bool) -> list[Point]:  # fmt: skip
    """B for each implementation (paired with the floor), then A at each size for the
    floor and each implementation (A's processes give E's memory figures too)."""
    chosen = []
    if "B" in scenarios:
        b = SMOKE_B if smoke else B
        inner = 1 if smoke else 3  # a peer's B run takes seconds: three runs a process
        label = f"N={b['n']} K={b['k']} T={b['t']}"
        chosen += [Point("B", label, b, (impl, "floor"), inner=inner, paired=True)
                   for impl in impls]  # fmt: skip
    if "A" in scenarios:
        for n in sizes:
            a = {**(SMOKE_A if smoke else A), "n": n}
            chosen += [Point("A", f"N={n}", a, (impl,)) for impl in ("floor", *impls)]
    return chosen


def run(
    chosen: Sequence[Point],
    impls: Sequence[str],
    repeats: int,
    log: Callable[[str], None],
    *,
    smoke: bool = False,
) -> list[dict[str, Any]]:
    """Every measurement, ``repeats`` times over, each in a fresh process (the
    bytecode compiled first), but in a smoke run, which times nothing (see
    :func:`_measured`)."""
    if not smoke:
        compile_bytecode(sys.executable, *(PEERS[i].module for i in impls if i in PEERS))
    results = []
    for _ in range(repeats):
        for point, found in _measured(chosen, smoke):
            if point.paired:  # the implementation and the floor, run by run in one process
                mine, floor = found
                mine["floor_ratio"] = per_turn(mine) / per_turn(floor)
                floor["paired_with"] = mine["impl"]
            for result in found:
                log(json.dumps(result))
                results.append(result)
    return results


def _measured(chosen: Sequence[Point], smoke: bool) -> list[tuple[Point, list[dict[str, Any]]]]:
    """Each point and what was measured of it, each in a fresh process; in a smoke run,
    the points of one implementation (its B beside the floor, its A) in one process,
    which imports its framework once, not once a point."""
    if not smoke:
        return [(point, measure(point, point.impls, sys.executable)) for point in chosen]
    shared: dict[str, list[Point]] = {}
    for point in chosen:
        shared.setdefault(point.impls[0], []).append(point)
    return [
        (point, found)
        for same in shared.values()
        for point, found in zip(same, measure_together(same, sys.executable), strict=True)
    ]


def table(
    results: Sequence[dict[str, Any]], impls: Sequence[str], repeats: int, *, on: str | None = None
) -> str:
    """One row per figure; a column per implementation: median [min-max] (x floor).
    ``on``: the machine the results come from (default: this one)."""
    versions = {r["impl"]: r.get("version", "") for r in results}
    heads = ["floor", *(_title(i, versions.get(i, "")) for i in impls)]
    lines = [
        f"Machine: {on or machine()}. Median [min-max] of {repeats} runs, each in a fresh "
        "process; (x) is the ratio to the floor. For B it is the median of each "
        "process's ratio to the floor run by run in that same process, and the floor "
        "column pools the floor of every process, so a B cell is not divided by it.",
        "",
        "| scenario | workload | metric | " + " | ".join(heads) + " |",
        "|---|---|---|" + "---|" * len(heads),
    ]
    rows: list[tuple[str, str, str, Metric]] = []
    labels = sorted({(r["scenario"], r["label"], r["params"]["n"]) for r in results},
                    key=lambda s: (s[0] != "B", s[2]))  # fmt: skip
    for scenario, label, n in labels:
        if scenario == "B":
            rows.append((scenario, label, "CPU us/model turn", per_turn))
        else:
            rows.append((scenario, label, "wall s", wall))
            if n >= 1000:
                rows.append(("E", label, "peak RSS MB", peak_rss))
    for scenario, label, metric, fn in rows:
        group = "B" if scenario == "B" else "A"
        mine = [r for r in results if r["scenario"] == group and r["label"] == label]
        floor = Stat.of([fn(r) for r in mine if r["impl"] == "floor"])
        cells = [floor.show() if floor else "-"]
        for impl in impls:
            found = [r for r in mine if r["impl"] == impl]
            cells.append(_cell(found, fn, floor, paired=group == "B"))
        lines.append(f"| {scenario} | {label} | {metric} | " + " | ".join(cells) + " |")
    invalid = sorted({f"{r['impl']} {r['label']}" for r in results if not r["valid"]})
    if invalid:
        lines += ["", "INVALID RUNS: " + ", ".join(invalid)]
    return "\n".join(lines) + "\n"


def _cell(found: Sequence[dict[str, Any]], fn: Metric, floor: Stat | None, paired: bool) -> str:
    mine = Stat.of([fn(r) for r in found])
    if mine is None:
        return "-"
    if paired:
        ratio: float | None = statistics.median(r["floor_ratio"] for r in found)
    else:
        ratio = mine.median / floor.median if floor and floor.median else None
    shown = mine.show() + (f" ({ratio:.1f}x)" if ratio is not None else "")
    return shown if all(r["valid"] for r in found) else f"{shown} INVALID"


def _title(impl: str, version: str) -> str:
    name = "Honeycomb" if impl == "honeycomb" else PEERS[impl].title
    return f"{name} {version}".strip()


def missing_peers(impls: Sequence[str]) -> list[str]:
    """The peers asked for whose framework is not installed."""
    return [i for i in impls if i in PEERS and importlib.util.find_spec(PEERS[i].package) is None]


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="honeycomb bench --peers", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--scenario", type=scenarios_of("AB"), default=["A", "B"],
        help="A (with E's memory) and/or B",
    )  # fmt: skip
    every = ",".join(PEERS)
    parser.add_argument("--peers", nargs="?", default=every, const=every,
                        help=f"peers to run (default: all, {every})")  # fmt: skip
    parser.add_argument("--sizes", type=sizes_argument, default=[100, 1000], help="N values for A")
    parser.add_argument("--repeats", type=integer(1), default=3, help="fresh processes per figure")
    parser.add_argument("--out", type=user_path, default=RESULTS, help="where results are written")
    parser.add_argument("--smoke", action="store_true", help="tiny runs, correctness only")
    args = parser.parse_args(argv)
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        parser.error(f"unknown peer {unknown[0]!r}; peers: {', '.join(PEERS)}")
    missing = missing_peers(peers)
    if missing:
        parser.error(f"not installed: {', '.join(missing)}; pip install -e '.[peers]'")
    scenarios: list[str] = args.scenario
    sizes: Sequence[int] = (10,) if args.smoke else args.sizes
    repeats = 1 if args.smoke else args.repeats
    impls = ("honeycomb", *peers)

    stem = results_stem(args.out, "peers")
    with results_log(stem) as log:
        chosen = points(scenarios, impls, sizes, args.smoke)
        results = run(chosen, impls, repeats, log, smoke=args.smoke)
    shown = table(results, impls, repeats)
    stem.with_suffix(".md").write_text(shown)
    print(shown)
    print(f"results: {stem}.jsonl (.md beside it)")
    return 0 if all(r["valid"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
