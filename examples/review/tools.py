"""Tools for the review example: list the bundled files, review one file by simple
checks, and save the merged report. The code under ``code/`` is a small sample with
problems planted in it.

``HONEYCOMB_REPORTS`` (default ``./reports``) is where :func:`save_report` writes.
"""

from __future__ import annotations

import ast
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from honeycomb import ToolContext, tool

CODE = Path(__file__).parent / "code"

# Sync tools run in threads, and on CPython 3.11 building an AST keeps a depth count
# in state the threads share: two ast.parse calls at once can fail with
# "SystemError: AST constructor recursion depth mismatch". One at a time.
_PARSING = threading.Lock()


@tool
def list_files() -> list[str]:
    """List the Python files of the bundled code folder, to review each."""
    return sorted(p.name for p in CODE.glob("*.py"))


@tool
def review_file(path: str) -> dict[str, Any]:
    """Review one Python file of the bundled code folder: bare excepts, files opened
    outside a with block, print calls, mutable default arguments and TODO notes.

    Args:
        path: The file's name, as list_files gives it.

    Raises:
        ValueError: for a file that is not in the folder, naming the ones that are.
    """
    file = CODE / Path(path).name
    if not file.is_file():
        known = ", ".join(p.name for p in sorted(CODE.glob("*.py")))
        raise ValueError(f"no file {path!r}; the folder has: {known}")
    source = file.read_text(encoding="utf-8")
    found = [f"line {n}: a TODO note" for n, line in enumerate(source.splitlines(), 1)
             if "TODO" in line]  # fmt: skip
    with _PARSING:
        tree = ast.parse(source)
    managed = {
        id(i.context_expr) for n in ast.walk(tree) if isinstance(n, ast.With) for i in n.items
    }
    for node in ast.walk(tree):
        found += _check(node, managed)
    found.sort(key=lambda f: int(f.split()[1].rstrip(":")))
    return {"file": file.name, "issues": len(found), "findings": "; ".join(found) or "none"}


def _check(node: ast.AST, managed: set[int]) -> list[str]:
    line = getattr(node, "lineno", 0)
    if isinstance(node, ast.ExceptHandler) and node.type is None:
        return [f"line {line}: a bare except hides every error"]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "open" and id(node) not in managed:
            return [f"line {line}: a file opened outside a with block is never closed"]
        if node.func.id == "print":
            return [f"line {line}: print in library code"]
    mutable = ast.List | ast.Dict | ast.Set
    if isinstance(node, ast.FunctionDef) and any(
        isinstance(d, mutable) for d in node.args.defaults
    ):
        return [f"line {line}: {node.name} has a mutable default argument"]
    return []


@tool(side_effects=True)
async def save_report(title: str, body: str, ctx: ToolContext) -> str:
    """Save the merged review as a markdown report and return its path.

    Args:
        title: The report's title.
        body: The findings, in markdown.
    """
    folder = anyio.Path(os.environ.get("HONEYCOMB_REPORTS", "reports"))
    await folder.mkdir(parents=True, exist_ok=True)
    # A file per call, named by when it ran as well as by its id, which repeats from
    # run to run (the offline model's for one task, a local model's call_1 ...).
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
    call = re.sub(r"[^a-z0-9]+", "-", ctx.call_id.lower()).strip("-")[:40] or "call"
    path = folder / f"{stamp}-review-{call}.md"
    await path.write_text(f"# {title.strip() or 'Review'}\n\n{body.strip()}\n", "utf-8")
    return str(await path.resolve())
