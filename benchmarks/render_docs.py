"""The figures of docs/performance.md, written from the reference runs.

    python -m benchmarks.render_docs           # rewrite the figures in the docs
    python -m benchmarks.render_docs --check   # exit 1 when the docs are behind

Each benchmark's reference run is a JSON lines file in ``benchmarks/reference/``, and
:data:`REFERENCE` says which run each is. The tables are drawn by the benchmarks' own
table functions from those files, between two marker lines of
``docs/performance.md`` (and the list of reference runs between two of
``benchmarks/README.md``); a test checks both are up to date. To make a new run the
reference: copy its ``.jsonl`` (and its ``.md``, and ``.svg`` for the fan-out) into
``benchmarks/reference/``, change its entry below, and run this.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from benchmarks import context, fanout
from benchmarks.report import markdown_table

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_DIR = ROOT / "benchmarks" / "reference"
DOC = ROOT / "docs" / "performance.md"
README = ROOT / "benchmarks" / "README.md"
BEGIN = "<!-- begin: {} (written by python -m benchmarks.render_docs; do not edit) -->"
END = "<!-- end: {} -->"

EPYC = "Linux x86_64, AMD EPYC x2, Python 3.11.7"
XEON = "Linux x86_64, Intel(R) Xeon(R) Processor x2, Python 3.11.7"


@dataclass(frozen=True)
class Reference:
    """One benchmark's reference run."""

    file: str  # in benchmarks/reference/
    title: str  # the heading of its figures in docs/performance.md
    run: str  # which run it is
    command: str
    date: str
    machine: str
    note: str = ""  # the machine's load, what differs from today's workload

    @property
    def anchor(self) -> str:
        """Its heading's anchor, as GitHub makes them."""
        return re.sub(r"[^\w\- ]", "", self.title.lower()).replace(" ", "-")


REFERENCE = (
    Reference(
        "fanout.jsonl",
        "Fan-out (A-J)",
        "run 18",
        "python -m benchmarks.fanout --repeats 3",
        "2026-12-01",
        EPYC,
        "the machine otherwise idle; H's rows are from context.jsonl",
    ),
    Reference(
        "context.jsonl",
        "Context (H)",
        "H on the current code",
        "python -m benchmarks.fanout --scenario H --repeats 1",
        "2026-12-02",
        EPYC,
        "token counts: the same on any machine",
    ),
    Reference(
        "uvloop.jsonl",
        "On uvloop (A)",
        "A on uvloop",
        "python -m benchmarks.fanout --scenario A --sizes 1,100,1000 --repeats 3",
        "2026-12-01",
        EPYC,
        "load average 3.5",
    ),
    Reference(
        "peers.jsonl",
        "Next to the peers (B, A, E)",
        "peers run",
        "python -m benchmarks.peers",
        "2026-11-30",
        EPYC,
        "Honeycomb's tool time limit and event logging off, as the workload had them then",
    ),
    Reference(
        "goodput.jsonl",
        "Goodput at a quota",
        "goodput run",
        "python -m benchmarks.goodput",
        "2026-12-01",
        EPYC,
    ),
    Reference(
        "real_model.jsonl",
        "A real model",
        "real-model run",
        "python -m benchmarks.real_model --repeats 9",
        "2026-12-02",
        XEON,
        "load average 1.5 as it started",
    ),
)
"""The reference run of each benchmark, in the order the docs show them."""


def records(name: str, folder: Path = REFERENCE_DIR) -> list[dict[str, Any]]:
    """The JSON lines of a reference file."""
    return [json.loads(line) for line in (folder / name).read_text().splitlines() if line]


def _fanout(ref: Reference, folder: Path) -> str:
    scenarios = ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"]
    kept = [r for r in records(ref.file, folder) if r.get("scenario") != "H"]
    found = kept + records("context.jsonl", folder)
    chosen = fanout.points(scenarios, fanout.A_SIZES, uvloop=True)
    rows = fanout.evaluate(fanout.samples_of(found, chosen))
    table = markdown_table(rows, machine=ref.machine, repeats=3)
    plot = "![Scenario A: wall time over the ideal against N](../benchmarks/reference/fanout.svg)"
    return f"{table}\n{plot}\n"


def _context(ref: Reference, folder: Path) -> str:
    return context.table(records(ref.file, folder))


def _uvloop(ref: Reference, folder: Path) -> str:
    found = records(ref.file, folder)
    sizes = sorted({r["params"]["n"] for r in found})
    chosen = fanout.points(["A"], sizes, uvloop=True)
    rows = fanout.evaluate(fanout.samples_of(found, chosen))
    return markdown_table(rows, machine=ref.machine, repeats=3)


def _peers(ref: Reference, folder: Path) -> str:
    from benchmarks.peers import PEERS
    from benchmarks.peers.__main__ import table

    found = records(ref.file, folder)
    ran = {r["impl"] for r in found}
    impls = ("honeycomb", *(peer for peer in PEERS if peer in ran))
    return table(found, impls, repeats=3, on=ref.machine)


def _goodput(ref: Reference, folder: Path) -> str:
    from benchmarks.goodput import table

    return table(records(ref.file, folder), judge=True, on=ref.machine)


def _real_model(ref: Reference, folder: Path) -> str:
    from benchmarks.real_model import Figures, Setup, table

    *_, last = records(ref.file, folder)  # the runs, then the figures of them all
    found = Figures(**{f.name: last[f.name] for f in fields(Figures)})
    return table(Setup(**last["setup"]), found, last["load"], judge=True, on=ref.machine)


TABLES: dict[str, Callable[[Reference, Path], str]] = {
    "fanout.jsonl": _fanout,
    "context.jsonl": _context,
    "uvloop.jsonl": _uvloop,
    "peers.jsonl": _peers,
    "goodput.jsonl": _goodput,
    "real_model.jsonl": _real_model,
}


def index(link: str = "") -> str:
    """The table of reference runs; ``link`` goes before each anchor (another page's)."""
    lines = [
        "| figures | run | command | date | machine | note |",
        "|---|---|---|---|---|---|",
    ]
    for ref in REFERENCE:
        cells = [
            f"[{ref.title}]({link}#{ref.anchor})",
            ref.run,
            f"`{ref.command}`",
            ref.date,
            ref.machine,
            ref.note,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def figures(folder: Path = REFERENCE_DIR) -> str:
    """The figures section of docs/performance.md, from the reference files."""
    parts = [
        "Each table is the reference run of its benchmark, kept in `benchmarks/reference/`; "
        "how each benchmark measures is in [benchmarks/README.md](../benchmarks/README.md).",
        "",
        index(),
    ]
    for ref in REFERENCE:
        parts += [f"### {ref.title}", "", TABLES[ref.file](ref, folder)]
    return "\n".join(parts)


def between(text: str, name: str, body: str) -> str:
    """``text`` with what lies between the ``name`` markers replaced by ``body``.

    Raises:
        ValueError: when ``text`` lacks either marker.
    """
    begin, end = BEGIN.format(name), END.format(name)
    head, found, rest = text.partition(begin + "\n")
    _, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise ValueError(f"the markers of {name!r} are missing: {begin} ... {end}")
    return f"{head}{begin}\n{body}{end}{tail}"


def rendered(folder: Path = REFERENCE_DIR) -> dict[Path, str]:
    """Each page as it should read, from the reference files."""
    return {
        DOC: between(DOC.read_text(), "figures", figures(folder)),
        README: between(README.read_text(), "reference runs", index("../docs/performance.md")),
    }


def stale(folder: Path = REFERENCE_DIR) -> list[Path]:
    """The pages whose figures are not those of the reference files."""
    return [page for page, text in rendered(folder).items() if page.read_text() != text]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.render_docs", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a page is behind")
    args = parser.parse_args(argv)
    if args.check:
        behind = stale()
        for page in behind:
            print(
                f"{page.relative_to(ROOT)} is behind benchmarks/reference/: "
                "run python -m benchmarks.render_docs",
                file=sys.stderr,
            )
        return 1 if behind else 0
    for page, text in rendered().items():
        if page.read_text() != text:
            page.write_text(text)
            print(f"wrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
