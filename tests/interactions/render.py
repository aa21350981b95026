"""docs/interactions.md, made from the matrix's tables (tests/interactions/matrix.py),
so that the page says what the tests do: ``python -m tests.interactions.render`` writes
it, and tests/interactions/test_render.py fails when it differs."""

from __future__ import annotations

from tests.interactions.invariants import INVARIANTS
from tests.interactions.matrix import FEATURES, KNOWN, NOT_APPLICABLE, Cell, cells
from tests.support import ROOT

__all__ = ["PAGE", "render"]

PAGE = ROOT / "docs" / "interactions.md"
COMMAND = "python -m tests.interactions.render"

INTRO = """\
# Features together: the interaction matrix

Each feature has tests of its own; most defects, though, sit where two features meet:
a limit and a nested worker, streaming and a guard, an approval and a resume. The
interaction matrix (`tests/interactions/`) runs every pair of features together, and
each feature alone: one test a cell, each a small hive on a `FunctionModel` (planned by
a planner role into two subtasks, merged by an aggregator role) with both features on,
under a hard time limit. A cell checks what each of its features promises, and every
invariant below, in each life of its run.

This page is made from the tests' own tables (`tests/interactions/matrix.py`) by
`{command}`; a test fails when it differs from them.
"""

LEGEND = """\
A cell is **✓** (tested: no invariant may break), **✗** (an expected failure: it breaks
exactly what the defects it names break, nothing else, and each of them must show, so a
fix fails the cell until its mark is removed; `?` marks a defect that shows only in some
runs, where a race lands), or **n/a** (the pair cannot meet, and the note says why). The
diagonal is each feature alone. Numbers are items of issue 28; letters are defects the
matrix found, listed below.
"""

RUNNING = """\
## Running it, and when a cell fails

```sh
pytest tests/interactions                      # every cell
pytest tests/interactions -k 'resume+ray'      # one cell (its id: the two features)
```

The Ray cells run in one test process (`xdist_group("ray")`), on one local Ray and one
pool of two actors; the MCP cells share one server per test process; the `sigkill`
cells start one child process each. Every model answers at once: the whole matrix
takes about 50 seconds of processor time.

A failing cell names every invariant it broke, and what it saw. A defect the matrix
finds is fixed, or, until it is, entered in `KNOWN` (`tests/interactions/matrix.py`)
with the invariant it breaks and a pattern of what it says, which makes its cells
expected failures; a fixed defect fails its cells until its entry is removed. A new
feature is a class in `tests/interactions/features/` (what it adds to a cell's hive,
what it checks) and a line in `FEATURES`: it meets every other feature at once. After
any change to these tables, `{command}` writes this page again.
"""


def render() -> str:
    """The page."""
    tags = _tags()
    parts = [
        INTRO.format(command=COMMAND),
        _features(),
        _invariants(),
        "## The matrix\n",
        LEGEND,
        _table(tags),
        _defects(tags),
        _not_applicable(),
        RUNNING.format(command=COMMAND),
    ]
    return "\n".join(parts)


def _features() -> str:
    lines = [
        "## The features\n",
        "| # | feature | what a cell turns on | what it checks |",
        "|---|---|---|---|",
    ]
    for number, feature in enumerate(FEATURES, 1):
        lines.append(
            f"| {number} | {feature.title} (`{feature.name}`) | {feature.about} | "
            f"{feature.promises} |"
        )
    return "\n".join(lines) + "\n"


def _invariants() -> str:
    lines = ["## What every cell checks\n"]
    lines += [f"- **{name}**: {about}." for name, about in INVARIANTS.items()]
    lines.append(
        "- **same on ray**: with the Ray backend, the cell runs on the local backend too, "
        "and the outcomes (statuses, answers, observations, model calls) are the same."
    )
    return "\n".join(lines) + "\n"


def _tags() -> dict[str, str]:
    """Each defect's tag: its item of issue 28, or a letter for a new one."""
    tags: dict[str, str] = {}
    letters = iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for known in KNOWN:
        if known.item not in tags:
            tags[known.item] = next(letters) if known.item.startswith("new") else known.item
    return tags


def _mark(cell: Cell, tags: dict[str, str], notes: dict[frozenset[str], int]) -> str:
    if cell.not_applicable is not None:
        return f"n/a {notes[frozenset((cell.a, cell.b))]}"
    if not cell.known:
        return "✓"
    shown: list[str] = []
    for known in cell.known:
        tag = tags[known.item] + ("?" if known.sometimes else "")
        if tag not in shown:
            shown.append(tag)
    return "✗ " + ",".join(sorted(shown, key=_order))


def _order(tag: str) -> tuple[int, str]:
    digits = tag.rstrip("?")
    return (int(digits), tag) if digits.isdigit() else (1000, tag)


def _table(tags: dict[str, str]) -> str:
    notes = {pair: n for n, pair in enumerate(NOT_APPLICABLE, 1)}
    by_pair = {frozenset((c.a, c.b)): c for c in cells()}
    head = "| | " + " | ".join(str(n) for n in range(1, len(FEATURES) + 1)) + " |"
    lines = [head, "|---" * (len(FEATURES) + 1) + "|"]
    for number, row in enumerate(FEATURES, 1):
        marks = [
            _mark(by_pair[frozenset((row.name, other.name))], tags, notes) for other in FEATURES
        ]
        lines.append(f"| **{number}** {row.name} | " + " | ".join(marks) + " |")
    tested = [c for c in cells() if c.not_applicable is None]
    failing = [c for c in tested if any(not k.sometimes for k in c.known)]
    summary = (
        f"{len(cells())} cells: {len(tested) - len(failing)} tested, {len(failing)} expected "
        f"failures, {len(cells()) - len(tested)} not applicable."
    )
    return "\n".join(lines) + "\n\n" + summary + "\n"


def _defects(tags: dict[str, str]) -> str:
    if not KNOWN:
        return (
            "## The defects the cells show\n\nNone: every cell whose features can meet "
            "passes, on the local backend and on Ray.\n"
        )
    lines = [
        "## The defects the cells show\n",
        "| tag | defect | invariant it breaks | cells |",
        "|---|---|---|---|",
    ]
    for known in sorted(KNOWN, key=lambda k: _order(tags[k.item])):
        where = ", ".join(_pattern(a, b) for a, b in known.cells)
        if known.unless:
            where += " (not with " + ", ".join(f"`{u}`" for u in known.unless) + ")"
        if known.sometimes:
            where += "; in some runs"
        name = known.item.removeprefix("new: ") if known.item.startswith("new") else known.why
        what = f"{name}: {known.why}" if known.item.startswith("new") else name
        lines.append(f"| {tags[known.item]} | {what} | {known.invariant} | {where} |")
    return "\n".join(lines) + "\n"


def _pattern(a: str, b: str) -> str:
    if a == "*" or b == "*":
        named = b if a == "*" else a
        return f"`{named}` with any"
    return f"`{a}` alone" if a == b else f"`{a}` + `{b}`"


def _not_applicable() -> str:
    lines = ["## The pairs that cannot meet\n"]
    for number, (pair, why) in enumerate(NOT_APPLICABLE.items(), 1):
        a, b = sorted(pair)
        lines.append(f"{number}. `{a}` + `{b}`: {why}.")
    return "\n".join(lines) + "\n"


def write() -> None:
    PAGE.write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    write()
