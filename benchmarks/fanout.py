"""Parallel fan-out benchmarks: Honeycomb next to a hand-written asyncio floor.

    python -m benchmarks.fanout                      # every scenario, 3 repeats
    python -m benchmarks.fanout --scenario A,B --repeats 5
    python -m benchmarks.fanout --smoke              # seconds: correctness, not timing
    honeycomb bench --scenario C,D

Every measurement runs in a fresh process (``benchmarks.measure``), alternating
Honeycomb and the floor, so each figure has its floor from the same run. Results go
to ``benchmarks/results/`` as JSON lines, a markdown table and an SVG plot, and the
table is printed with every target marked met or missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

from benchmarks import context
from benchmarks.measure import UVLOOP
from benchmarks.report import (
    Row,
    Stat,
    Target,
    markdown_table,
    peak_rss,
    per_tool,
    per_turn,
    svg_plot,
    wall,
)
from benchmarks.spec import Params
from benchmarks.workload import STORE_ENV
from honeycomb.cli.options import Parser, integer, user_path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
A_SIZES = (1, 10, 100, 1000, 10000)


@dataclass(frozen=True)
class Point:
    """One configuration to measure, with the implementations to compare."""

    scenario: str
    label: str
    params: dict[str, Any]
    impls: tuple[str, ...] = ("honeycomb", "floor")
    inner: int = 1  # runs per process, median kept
    paired: bool = False  # both implementations in one process, run by run
    variants: tuple[dict[str, Any], ...] = ()  # per-implementation params, when paired


@dataclass
class Samples:
    """Every measurement of one point, by implementation."""

    point: Point
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def values(self, impl: str, metric: Callable[[dict[str, Any]], float]) -> list[float]:
        return [metric(r) for r in self.runs.get(impl, [])]

    def valid(self) -> bool:
        return all(r.get("valid", True) for rs in self.runs.values() for r in rs)


def has_uvloop() -> bool:
    """Whether uvloop is installed (the ``fast`` extra): A then has a uvloop column."""
    return importlib.util.find_spec("uvloop") is not None


def points(
    scenarios: Sequence[str], sizes: Sequence[int], smoke: bool = False, *, uvloop: bool = False
) -> list[Point]:
    """The points to measure; ``smoke``: B (and F, G) small, each process running once;
    ``uvloop``: A also runs Honeycomb on uvloop, in the same processes."""
    a = {"k": 3, "t": 3, "lm": 0.05, "lt": 0.02}
    b = {"n": 20 if smoke else 200, "k": 5, "t": 2, "lm": 0.0, "lt": 0.0}
    inner = 1 if smoke else 7
    chosen: list[Point] = []
    if "A" in scenarios:
        # Honeycomb and the floor in the same processes, run by run, as B: at N=1000 a
        # run is CPU-bound, and a ratio of runs minutes apart measured the machine.
        impls = ("honeycomb", "floor", UVLOOP) if uvloop else ("honeycomb", "floor")
        chosen += [Point("A", f"N={n}", {**a, "n": n}, impls, inner=_a_runs(n, smoke), paired=True)
                   for n in sizes]  # fmt: skip
    if "E" in scenarios:
        # Peak memory needs a process to itself: one per implementation.
        big = [n for n in sizes if n >= 1000] or [max(sizes)]
        chosen += [Point("E", f"N={n}", {**a, "n": n}) for n in big]
    if "B" in scenarios:
        chosen.append(Point("B", f"N={b['n']} K=5 T=2", b, inner=inner, paired=True))
    if "C" in scenarios:
        chosen.append(
            Point("C", "N=1 K=2 T=8 Lt=100ms", {"n": 1, "k": 2, "t": 8, "lm": 0.0, "lt": 0.1})
        )
    if "D" in scenarios:
        chosen.append(
            Point("D", "4 side-effecting x 50ms",
                  {"n": 1, "k": 2, "t": 4, "lm": 0.0, "lt": 0.05, "side_effects": True})
        )  # fmt: skip
    if "F" in scenarios:
        chosen.append(_switched("F", "B, tracing on", b, "tracing off", inner, trace=True))
        chosen.append(_switched("F", "B, every event logged", b, "logging off", inner, events=True))
    if "G" in scenarios:
        chosen.append(_switched("G", "B, run store on", b, "store off", inner, store=True))
        chosen.append(
            _switched("G", "B, store and tracing on", b, "both off", inner, store=True, trace=True)
        )
    if "H" in scenarios:
        # Counts, not timings: one run of each, in this process, is the figure.
        chosen.append(Point("H", context.LABEL, {}, context.IMPLS))
    if "J" in scenarios:
        chosen.append(_switched("J", "B, streamed", b, "streaming off", inner, stream=True))
        # The share of the deltas alone: next to B watched the same way, without them.
        watched = {**b, "watched": True}
        chosen.append(
            _switched("J", "B, streamed vs watched", watched, "deltas off", inner, stream=True)
        )
    if "I" in scenarios:
        # Next to the same modules imported without Honeycomb's own, in turns: the
        # machine's speed moves both alike, and their difference is Honeycomb's share.
        tries = 1 if smoke else IMPORT_TRIES
        chosen.append(Point("I", "import honeycomb", {}, IMPORTS, inner=tries, paired=True))
    return chosen


def _a_runs(n: int, smoke: bool) -> int:
    """Runs of A per process, each implementation: three, the median kept, up to
    N=1000 (a second each at most); one at N=10000 (10-20 s each)."""
    return 1 if smoke or n > 1000 else 3


def _switched(
    scenario: str, label: str, base: dict[str, Any], off: str, inner: int, **on: bool
) -> Point:
    """B with a feature on, measured in the same processes as B with it off (``off``)."""
    switched = {**base, **on}
    return Point(scenario, label, switched, ("honeycomb", off), inner=inner, paired=True,
                 variants=(switched, base))  # fmt: skip


IMPORT_TRIES = 5
"""Fresh processes per import-time figure, of which the fastest counts: the time to
import is a fixed cost, and whatever else the machine does only adds to it."""

IMPORTS = ("import", "its dependencies")
"""What scenario I times: ``import honeycomb``, and the modules that import loads from
the standard library and the dependencies, imported alone (see :func:`dependencies`)."""

OWN_PACKAGES = frozenset({"honeycomb", "runtime", "workers"})


def measure(point: Point, impls: Sequence[str], python: str) -> list[dict[str, Any]]:
    """Run ``benchmarks.measure`` in a fresh process; one result per implementation
    (for the import times: the fastest of ``point.inner`` fresh processes each,
    ``IMPORT_TRIES`` but in a smoke run)."""
    if point.scenario == "I":
        modules = {"import": ["honeycomb"], "its dependencies": dependencies(python)}
        tries: dict[str, list[float]] = {impl: [] for impl in impls}
        for _ in range(point.inner):
            for impl in impls:  # in turns, so a slow moment slows both
                tries[impl].append(_import_seconds(modules[impl], python))
        # Every try is kept in the order it ran: a try and the other's next to it pair.
        results = [{"import_s": min(tries[impl]), "tries_s": tries[impl], "valid": True}
                   for impl in impls]  # fmt: skip
    elif point.scenario == "H":
        results = context.measure(impls)
    else:
        results = _spawn(_spec(point, impls), python, point)
    return _named(results, point, impls)


def measure_together(points_: Sequence[Point], python: str) -> list[list[dict[str, Any]]]:
    """What :func:`measure` gives for each of ``points_`` (none of scenario I or H), all
    measured in one fresh process, one after another: for a smoke run, which times
    nothing, so that the frameworks they run are imported once for all of them."""
    specs = [_spec(point, point.impls) for point in points_]
    lines = _spawn(specs, python, points_[0])
    found = []
    for point in points_:
        mine, lines = lines[: len(point.impls)], lines[len(point.impls) :]
        found.append(_named(mine, point, point.impls))
    return found


def _spec(point: Point, impls: Sequence[str]) -> dict[str, Any]:
    """What ``benchmarks.measure`` is asked to measure for ``point``."""
    if point.paired:
        # Each side's own params, whichever goes first (repeats alternate the order).
        own = dict(zip(point.impls, point.variants, strict=True)) if point.variants else {}
        variants = [own.get(impl, point.params) for impl in impls]
        names = ["honeycomb" if i.endswith(" off") else i for i in impls]
        return {"pair": names, "variants": variants, "inner": point.inner}
    (impl,) = impls
    return {"impl": impl, "params": point.params, "inner": point.inner}


def _named(
    results: list[dict[str, Any]], point: Point, impls: Sequence[str]
) -> list[dict[str, Any]]:
    for result, impl in zip(results, impls, strict=True):
        result["impl"] = impl
        result["scenario"] = point.scenario
        result["label"] = point.label
    return results


IMPORT_PROBE = """\
import sys, time
started = time.perf_counter()
for name in sys.argv[1:]:
    __import__(name)
sys.stdout.write(repr(time.perf_counter() - started))
"""
"""Times imports in a process that has imported nothing else (``sys`` and ``time`` are
built in): whatever the modules need, asyncio and pydantic included, is counted."""

LOADED_PROBE = """\
import sys
before = set(sys.modules)
import honeycomb
loaded = [name for name in sys.modules if name not in before]
sys.stdout.write(" ".join(loaded))
"""


@cache
def dependencies(python: str) -> list[str]:
    """The modules ``import honeycomb`` loads that are not Honeycomb's own (asyncio,
    anyio, pydantic and what they import), in the order it loads them."""
    done = subprocess.run([python, "-c", LOADED_PROBE], capture_output=True, text=True,
                          check=True, cwd=ROOT, env=_environment())  # fmt: skip
    loaded = done.stdout.split()
    return [name for name in loaded if name.partition(".")[0] not in OWN_PACKAGES]


def _import_seconds(modules: Sequence[str], python: str) -> float:
    done = subprocess.run(
        [python, "-c", IMPORT_PROBE, *modules],
        capture_output=True, text=True, check=True, cwd=ROOT, env=_environment(),
    )  # fmt: skip
    return float(done.stdout)


def _spawn(
    spec: dict[str, Any] | list[dict[str, Any]], python: str, point: Point
) -> list[dict[str, Any]]:
    done = subprocess.run(
        [python, "-m", "benchmarks.measure", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=_environment(),
    )
    if done.returncode != 0:
        raise RuntimeError(f"measurement failed for {point.label} ({spec}):\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.strip().splitlines()]


def _environment() -> dict[str, str]:
    """The measuring processes' environment: bytecode may be cached, as it is in any
    installed package (some shells forbid writing it, which makes every import compile)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_bytecode(python: str, *modules: str) -> None:
    """Compile and cache the bytecode once, so import times measure importing."""
    imported = ", ".join(("honeycomb", "benchmarks.workload", "benchmarks.floor", *modules))
    subprocess.run([python, "-c", f"import {imported}"], cwd=ROOT, env=_environment(),
                   check=True)  # fmt: skip


def run(
    points_: Sequence[Point],
    repeats: int,
    python: str,
    log: Callable[[str], None],
    *,
    smoke: bool = False,
) -> list[Samples]:
    if not smoke:  # a smoke run times nothing: its first imports may compile
        compile_bytecode(python)
    samples = [Samples(p) for p in points_]
    for repeat in range(repeats):
        for sample in samples:
            # Alternate which implementation goes first, so drift hits both alike.
            impls = sample.point.impls if repeat % 2 == 0 else sample.point.impls[::-1]
            batches = [impls] if sample.point.paired else [(impl,) for impl in impls]
            for batch in batches:
                for result in measure(sample.point, batch, python):
                    sample.runs.setdefault(result["impl"], []).append(result)
                    log(json.dumps(result))
    return samples


def evaluate(samples: Sequence[Samples]) -> list[Row]:
    """Table rows: each figure with its floor, their ratio, and the target."""
    rows: list[Row] = []
    by = {(s.point.scenario, s.point.label): s for s in samples}
    for (scenario, label), s in by.items():
        rows.extend(_rows(scenario, label, s, by))
    return rows


def _rows(scenario: str, label: str, s: Samples, by: dict[tuple[str, str], Samples]) -> list[Row]:
    ok = s.valid()
    params = s.point.params
    if scenario == "A":
        rows = [Row.of("A latency-bound", label, "wall s", s, wall, _a_target(params["n"], ok), ok)]
        if UVLOOP in s.runs:
            rows[0] = dataclasses.replace(rows[0], uvloop=Stat.of(s.values(UVLOOP, wall)))
            if params["n"] == 1000:
                rows.append(_uvloop_row(label, s, ok))
        return rows
    if scenario == "E":
        n = params["n"]
        rss_target: Target | None = None
        if n in (1000, 10000):
            rss_target = ("<= floor + 40 MB", lambda hc, fl: hc <= fl + 40)
        per_worker = partial(_rss_per_worker, n=n)
        return [
            Row.of("E memory", label, "peak RSS MB", s, peak_rss, rss_target, ok),
            Row.of("E memory", label, "RSS KB/worker", s, per_worker, None, ok),
        ]
    if scenario == "B":
        within = ("<= 1.5x floor", lambda hc, fl: hc <= 1.5 * fl)
        return [
            Row.of("B overhead", label, "CPU us/model turn", s, per_turn, within, ok),
            Row.of("B overhead", label, "CPU us/tool call", s, per_tool, None, ok),
        ]
    if scenario == "C":
        limit = 1.15 * params["lt"]
        fast = (f"<= 1.15 x Lt ({limit:.3f}s)", lambda hc, fl: hc <= limit)
        return [Row.of("C tool parallelism", label, "wall s", s, wall, fast, ok)]
    if scenario == "D":
        low, high = 0.95 * 4 * params["lt"], 1.15 * 4 * params["lt"]
        serial = (f"0.95-1.15 x 4 Lt ({low:.3f}-{high:.3f}s)", lambda hc, fl: low <= hc <= high)
        return [Row.of("D side effects", label, "wall s", s, wall, serial, ok)]
    if scenario == "F":
        traced = "tracing" in label
        target: Target | None = ("<= 1.3x tracing off", lambda hc, fl: hc <= 1.3 * fl)
        return [
            Row.of("F observability", label, "CPU us/model turn", s, per_turn,
                   target if traced else None, ok,
                   baseline_impl=s.point.impls[1])
        ]  # fmt: skip
    if scenario == "G":
        cheap: Target | None = ("<= 1.5x store off", lambda hc, fl: hc <= 1.5 * fl)
        return [
            Row.of("G durability", label, "CPU us/model turn", s, per_turn,
                   cheap if "tracing" not in label else None, ok,
                   baseline_impl=s.point.impls[1])
        ]  # fmt: skip
    if scenario == "H":
        return _context_rows(label, s, ok)
    if scenario == "J":
        streamed: Target | None = ("<= 1.3x streaming off", lambda hc, fl: hc <= 1.3 * fl)
        return [
            Row.of("J streaming", label, "CPU us/model turn", s, per_turn,
                   streamed if "watched" not in label else None, ok,
                   baseline_impl=s.point.impls[1])
        ]  # fmt: skip
    if scenario == "I":
        own = ("<= 1.25x its dependencies", lambda hc, fl: hc <= 1.25 * fl)
        return [
            Row.of("import time", label, "ms", s, _import_ms, own, ok, impl=IMPORTS[0],
                   baseline_impl=IMPORTS[1], paired=_import_ratio(s))
        ]  # fmt: skip
    return []


def _context_rows(label: str, s: Samples, ok: bool) -> list[Row]:
    """H: compaction next to the whole transcript (in the floor's column), then the
    window only; the targets are the issue's (see :func:`benchmarks.context.targets`)."""
    budget = context.BUDGET_TOKENS
    share: Target = ("<= 35% of whole transcript", lambda hc, fl: hc <= 0.35 * fl)
    ceiling: Target = (f"<= budget ({budget:,})", lambda hc, fl: hc <= budget)
    kept: Target = (">= 90%", lambda hc, fl: hc >= 90)
    whole = "whole transcript"
    rows = [
        Row.of("H context", f"{label}: compaction", "input tokens in all", s,
               _field("total_input_tokens"), share, ok, impl="compaction", baseline_impl=whole),
        Row.of("H context", f"{label}: compaction", "largest request tokens", s,
               _field("largest_request_tokens"), ceiling, ok, impl="compaction",
               baseline_impl=whole),
        Row.of("H context", f"{label}: compaction", "planted facts kept %", s,
               _percent, kept, ok, impl="compaction", baseline_impl=whole),
    ]  # fmt: skip
    for impl in context.IMPLS[1:-1]:
        rows += [
            Row.of("H context", f"{label}: {impl}", "input tokens in all", s,
                   _field("total_input_tokens"), None, ok, impl=impl, baseline_impl=whole),
            Row.of("H context", f"{label}: {impl}", "planted facts kept %", s,
                   _percent, None, ok, impl=impl, baseline_impl=whole),
        ]  # fmt: skip
    return rows


def _field(name: str) -> Callable[[dict[str, Any]], float]:
    return lambda r: float(r[name])


def _percent(r: dict[str, Any]) -> float:
    return float(r["facts_retained"]) * 100


UVLOOP_IDEAL = 2.5
"""Target of A at N=1000 on uvloop: at most this many times the ideal wall time."""


def _uvloop_row(label: str, s: Samples, ok: bool) -> Row:
    """A at N=1000 on uvloop against the ideal (the physical limit), not the floor."""
    ideal = Params(**s.point.params).ideal_s
    limit = UVLOOP_IDEAL * ideal
    target: Target = (f"wall <= {UVLOOP_IDEAL}x ideal ({limit:.3f}s)", lambda hc, _: hc <= limit)
    row = Row.of("A on uvloop", label, "wall s", s, wall, target, ok, impl=UVLOOP,
                 baseline_impl="ideal")  # fmt: skip
    over = statistics.median(v / ideal for v in s.values(UVLOOP, wall))
    return dataclasses.replace(row, ideal_ratio=over)


def _a_target(n: int, ok: bool) -> Target | None:
    if n == 1000:
        return ("wall <= 1.25x floor", lambda hc, fl: hc <= 1.25 * fl)
    if n == 10000:
        return ("wall <= 1.4x floor, correct", lambda hc, fl: ok and hc <= 1.4 * fl)
    return None


def _rss_per_worker(r: dict[str, Any], *, n: int) -> float:
    return (float(r["peak_rss_mb"]) - float(r["rss_before_mb"])) * 1024 / n


def _import_ms(r: dict[str, Any]) -> float:
    return float(r["import_s"]) * 1000


def _import_ratio(s: Samples) -> float | None:
    """Honeycomb's import over its dependencies', the median over tries that ran next to
    each other. Fastest over fastest is no ratio: the two fastest tries may come from
    different moments, and on this machine a rare try runs a third faster than the rest."""
    mine, theirs = (s.runs.get(impl, []) for impl in IMPORTS)
    pairs = [m / t for a, b in zip(mine, theirs, strict=False)
             for m, t in zip(a["tries_s"], b["tries_s"], strict=True)]  # fmt: skip
    return statistics.median(pairs) if pairs else None


def machine() -> str:
    cpus = _cpu_model()
    return f"{platform.system()} {platform.machine()}, {cpus}, Python {platform.python_version()}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                import os

                return f"{line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


SCENARIOS = "ABCDEFGHIJ"
"""The scenarios :func:`points` measures."""


def scenarios_of(known: str) -> Callable[[str], list[str]]:
    """An argument type: ``--scenario``, letters of ``known``, comma-separated, in any
    case."""

    def parse(given: str) -> list[str]:
        chosen = [s.strip().upper() for s in given.split(",") if s.strip()]
        if not chosen or any(s not in known for s in chosen):
            raise argparse.ArgumentTypeError(
                f"takes scenarios among {','.join(known)}, comma-separated, not {given!r}"
            )
        return chosen

    return parse


def sizes_argument(given: str) -> list[int]:
    """An argument type: ``--sizes``, whole numbers of at least 1, comma-separated."""
    try:
        sizes = [int(n) for n in given.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(
            f"takes whole numbers of at least 1, comma-separated (1,10,100), not {given!r}"
        )
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(
        prog="honeycomb bench",
        description=__doc__.split("\n")[0],
        epilog="honeycomb bench --peers[=NAMES]: the same workload through openai-agents, "
        "langgraph and pydantic-ai (default: all; the peers extra), next to Honeycomb and "
        "the floor (honeycomb bench --peers --help)",
    )
    parser.add_argument(
        "--scenario",
        type=scenarios_of(SCENARIOS),
        default=list(SCENARIOS),
        help="scenarios to run, e.g. A,B,I",
    )
    parser.add_argument(
        "--sizes", type=sizes_argument, default=list(A_SIZES), help="N values for A/E"
    )
    parser.add_argument("--repeats", type=integer(1), default=3, help="fresh processes per figure")
    parser.add_argument("--out", type=user_path, default=RESULTS, help="where results are written")
    parser.add_argument("--json", action="store_true", help="print JSON lines as they come")
    parser.add_argument(
        "--from", dest="source", type=user_path, help="render the table and plot of a saved .jsonl"
    )
    parser.add_argument(
        "--store", default=None, metavar="URL",
        help="G: keep the runs in this PostgreSQL database (a schema per process, dropped "
        "at its end) instead of an SQLite file",
    )  # fmt: skip
    parser.add_argument(
        "--smoke", action="store_true",
        help="every scenario once, small (A at N=1,10; B at N=20): checks that every run is "
        "valid; timing targets are not judged",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.source is not None and not args.source.is_file():
        parser.error(f"argument --from: no such file: {args.source} (a run's .jsonl)")
    if args.store is not None:
        os.environ[STORE_ENV] = args.store  # the measuring processes' environment
    scenarios: list[str] = args.scenario
    sizes: list[int] = [1, 10] if args.smoke else args.sizes
    if args.smoke:
        args.repeats = 1
    uvloop = has_uvloop() and "A" in scenarios
    if args.source is None:
        print(_loop_note(uvloop, "A" in scenarios), file=sys.stderr)
    chosen = points(scenarios, sizes, args.smoke, uvloop=uvloop or args.source is not None)
    if args.source is not None:
        return _render(_load(args.source, chosen), args.source.with_suffix(""), args.repeats)

    stem = results_stem(args.out, "fanout")
    with results_log(stem, echo=args.json) as log:
        samples = run(chosen, args.repeats, sys.executable, log, smoke=args.smoke)
    code = _render(samples, stem, args.repeats, judge=not args.smoke)
    print(f"results: {stem}.jsonl (.md, .svg beside it)")
    return code


def _loop_note(uvloop: bool, a: bool) -> str:
    """What the run says of its event loops."""
    if uvloop:
        version = importlib.metadata.version("uvloop")
        return f"event loop: asyncio's; A also on uvloop {version} (the uvloop column)"
    if a:
        return (
            "event loop: asyncio's; uvloop is not installed, so A has no uvloop column "
            "(pip install -e '.[fast]')"
        )
    return "event loop: asyncio's"


def results_stem(folder: Path, name: str) -> Path:
    """Where a run's results go: ``folder/name-<time>`` (.jsonl, .md, .svg)."""
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


@contextmanager
def results_log(stem: Path, *, echo: bool = False) -> Iterator[Callable[[str], None]]:
    """A function that writes each result line to ``stem.jsonl`` as it comes, and
    prints it (``echo``) or a progress dot."""
    with stem.with_suffix(".jsonl").open("w") as sink:

        def log(line: str) -> None:
            sink.write(line + "\n")
            sink.flush()
            if echo:
                print(line, flush=True)
            else:
                print(".", end="", file=sys.stderr, flush=True)

        yield log
    if not echo:
        print(file=sys.stderr)


def _render(samples: Sequence[Samples], stem: Path, repeats: int, judge: bool = True) -> int:
    """Print and save the table (and the plot of scenario A); 1 if a target is missed or
    a run is invalid. Without ``judge`` (a smoke run), only validity counts."""
    rows = evaluate(samples)
    if not judge:
        rows = [dataclasses.replace(r, met=None, target="(smoke: not judged)") for r in rows]
    table = markdown_table(rows, machine=machine(), repeats=repeats)
    stem.with_suffix(".md").write_text(table)
    a_points = [s for s in samples if s.point.scenario == "A" and s.runs]
    if a_points:
        stem.with_suffix(".svg").write_text(svg_plot(a_points))
    print(table)
    return 1 if any(r.met is False or not r.valid for r in rows) else 0


def _load(source: Path, chosen: Sequence[Point]) -> list[Samples]:
    """Samples from a saved .jsonl, matched to the scenario points by label."""
    return samples_of(map(json.loads, source.read_text().splitlines()), chosen)


def samples_of(results: Iterable[dict[str, Any]], chosen: Sequence[Point]) -> list[Samples]:
    """Saved results as samples of the scenario points, matched by label."""
    samples = {(p.scenario, p.label): Samples(p) for p in chosen}
    for result in results:
        sample = samples.get((result.get("scenario", ""), result.get("label", "")))
        if sample is not None:
            sample.runs.setdefault(result["impl"], []).append(result)
    return [s for s in samples.values() if s.runs]


if __name__ == "__main__":
    sys.exit(main())
